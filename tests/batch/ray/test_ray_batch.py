"""``nbagent.batch(..., backend="ray")`` end to end, on the shared local Ray (2 CPUs).

Against the fake server (through the real OpenAI SDK) and the demo model: the
result frame equals the local backend's; a gated call parks, a decision made
through the store by another process continues it on a worker (SQLite and
PostgreSQL); a worker that dies is recorded on its row, and rerunning the
batch with its store continues that chat without rerunning anything finished.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _ray_agents import FakeServerChat, demo_chat

import nbagent
from nbagent.batch._run import run_of
from nbagent.store import PostgresStore, SQLiteStore
from nbagent.testing import FakeLLMServer

SAME = ["key", "status", "reply", "error", "calls", "tokens", "pending", "error_type"]


@pytest.fixture(params=["sqlite", "postgres"])
def stored(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, str]]:
    """A store, and where another process opens it."""
    if request.param == "sqlite":
        location = str(tmp_path / "batch.db")
        opened: Any = SQLiteStore(location)
    else:
        location = request.getfixturevalue("postgres_dsn")
        opened = PostgresStore(location)
    yield opened, location
    opened.close()


def test_the_frame_equals_the_local_backends_on_the_fake_server(
    ray_cluster: Any, server: FakeLLMServer
) -> None:
    prompts = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff", "g" * 7, "h" * 8]
    make = FakeServerChat(server.openai_base_url)
    local = nbagent.batch(prompts, make, progress=False, concurrency=4)
    on_ray = nbagent.batch(prompts, make, progress=False, concurrency=4, backend="ray")
    assert on_ray["error"].isna().all(), on_ray[["status", "error"]].to_dict("records")
    pd.testing.assert_frame_equal(on_ray[SAME], local[SAME])
    assert (on_ray["status"] == "done").all() and on_ray["chat_id"].is_unique
    assert on_ray.loc[2, "reply"] == "ccc: 6"
    assert len(server.requests) == 2 * 2 * len(prompts)
    # the progress display's totals are folded from the updates the workers streamed back
    snap = run_of(on_ray).progress.snapshot()
    assert snap.counts["done"] == len(prompts) and snap.counts["running"] == 0
    assert snap.input_tokens == on_ray["input_tokens"].sum() > 0
    assert snap.output_tokens == on_ray["output_tokens"].sum()


def test_the_frame_equals_the_local_backends_on_the_demo_model(ray_cluster: Any) -> None:
    df = pd.DataFrame({"order_id": [41, 42, 43]}, index=["x", "y", "z"])
    template = "Check the status of order {order_id}"
    local = nbagent.batch(df, demo_chat, prompt=template, progress=False)
    on_ray = nbagent.batch(df, demo_chat, prompt=template, progress=False, backend="ray")
    pd.testing.assert_frame_equal(on_ray[SAME], local[SAME])
    assert list(on_ray.index) == ["x", "y", "z"] and (on_ray["calls"] == 1).all()


def _approve_from_another_process(store: Any, location: str, stop: threading.Event) -> None:
    """What an inbox in another notebook does: approve what is pending, by the store."""
    code = (
        "import sys; from nbagent.store import open_store; s = open_store(sys.argv[1]); "
        "[s.approve(c, by='inbox') for c in s.pending_approvals()]; s.close()"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    while not stop.is_set():
        if store.pending_approvals():
            subprocess.run([sys.executable, "-c", code, location], check=True, env=env)
            return
        time.sleep(0.1)


def test_a_gated_call_parks_and_a_decision_from_another_process_continues_it_on_a_worker(
    ray_cluster: Any, server: FakeLLMServer, stored: tuple[Any, str]
) -> None:
    store, location = stored
    stop = threading.Event()
    decider = threading.Thread(target=_approve_from_another_process, args=(store, location, stop))
    decider.start()
    try:
        result = nbagent.batch(
            ["gate order 7", "plain", "also plain"],
            FakeServerChat(server.openai_base_url),
            store=store,
            backend="ray",
            progress=False,
            poll_interval=0.2,
            wait_for_decisions=60,
        )
    finally:
        stop.set()
        decider.join()
    assert list(result["status"]) == ["done"] * 3, result[["status", "error"]]
    assert result.loc[0, "reply"] == "gate order 7: refunded gate order 7"
    (call,) = [c for c in store.calls(result.loc[0, "chat_id"]) if c.name == "refund"]
    assert call.status == "ok" and call.decision is not None and call.decision.by == "inbox"
    # it ran once, on a worker (another process than this one and the decider)
    assert call.claimed_by is not None and f":{os.getpid()}:" not in call.claimed_by
    log = nbagent.read_log(result)  # from the store: the chats ran elsewhere
    assert sorted(log["tool"]) == ["double", "double", "refund"]
    if isinstance(store, PostgresStore):  # the DSN's password reached the workers...
        from _postgres import PASSWORD

        assert PASSWORD in location
        for path in Path(ray_cluster.temp_dir).rglob("*"):  # ...and no log of Ray's
            if path.is_file() and not path.is_socket():
                assert PASSWORD.encode() not in path.read_bytes(), path


def test_a_dying_worker_is_recorded_on_its_row_and_a_rerun_continues_its_chat(
    ray_cluster: Any, server: FakeLLMServer, postgres_dsn: str
) -> None:
    prompts = ["die now", "bb", "ccc", "dddd"]
    make = FakeServerChat(server.openai_base_url)
    options = {"workers": 2}  # one chat per worker at a time: the dying one is alone on its own
    with PostgresStore(postgres_dsn) as store:
        first = nbagent.batch(
            prompts,
            make,
            store=store,
            backend="ray",
            concurrency=2,
            progress=False,
            backend_options=options,
        )
        assert list(first["status"]) == ["failed", "done", "done", "done"], first
        assert first.loc[0, "error_type"] == "WorkerDied"
        assert first.loc[0, "error"].startswith("the Ray worker running this chat died")
        assert "rerun the batch" in first.loc[0, "error"]
        requests = len(server.requests)

        again = nbagent.batch(
            prompts,
            make,
            store=store,
            backend="ray",
            concurrency=2,
            progress=False,
            backend_options=options,
        )
        assert list(again["status"]) == ["done"] * 4, again[["status", "error"]]
        assert again.loc[0, "chat_id"] == first.loc[0, "chat_id"]  # continued, not restarted
        # finished rows came back from the store: only the continued chat asked the model
        assert len(server.requests) == requests + 1
        (crash,) = [c for c in store.calls(first.loc[0, "chat_id"]) if c.name == "crash"]
        assert crash.status == "in_doubt"  # never rerun: it may have had effects
        assert list(nbagent.read_log(again)["tool"]).count("double") == 3


def test_a_factory_that_raises_on_a_worker_is_recorded_or_raised_as_locally(
    ray_cluster: Any,
) -> None:
    from _ray_agents import broken_chat

    local = nbagent.batch(["a", "b"], broken_chat, progress=False)
    on_ray = nbagent.batch(["a", "b"], broken_chat, progress=False, backend="ray")
    pd.testing.assert_frame_equal(on_ray[SAME], local[SAME])
    assert on_ray.loc[0, "error"] == "make_chat raised ValueError: no chat for this row"
    with pytest.raises(ValueError, match="no chat for this row"):
        nbagent.batch(["a"], broken_chat, progress=False, backend="ray", on_error="raise")


def test_a_row_that_cannot_be_formatted_fails_alone_as_locally(
    ray_cluster: Any, server: FakeLLMServer
) -> None:
    from nbagent.batch import InputError

    rows = [{"word": "abc"}, {"other": 1}, {"word": "de"}]
    make = FakeServerChat(server.openai_base_url)
    local = nbagent.batch(rows, make, prompt="{word}", progress=False)
    on_ray = nbagent.batch(rows, make, prompt="{word}", progress=False, backend="ray")
    pd.testing.assert_frame_equal(on_ray[SAME], local[SAME])
    assert list(on_ray["status"]) == ["done", "failed", "done"]
    assert on_ray.loc[1, "error_type"] == "BatchInputError" and "word" in on_ray.loc[1, "error"]
    with pytest.raises(InputError, match="input '1'"):
        nbagent.batch(rows, make, prompt="{word}", progress=False, backend="ray", on_error="raise")


def test_the_drivers_configuration_applies_on_the_workers(
    ray_cluster: Any, server: FakeLLMServer
) -> None:
    nbagent.configure(max_steps=1)  # a chat needs 2 steps: each row stops on its budget
    make = FakeServerChat(server.openai_base_url)
    local = nbagent.batch(["a", "bb"], make, progress=False)
    on_ray = nbagent.batch(["a", "bb"], make, progress=False, backend="ray")
    pd.testing.assert_frame_equal(on_ray[SAME], local[SAME])
    assert list(on_ray["error_type"]) == ["budget_exhausted"] * 2


def test_a_parked_chat_holds_no_worker_slot(
    ray_cluster: Any, server: FakeLLMServer, tmp_path: Path
) -> None:
    """One worker, one chat at a time: the rows after a parked one still run."""
    with SQLiteStore(tmp_path / "b.db") as store:
        result = nbagent.batch(
            ["gate order 1", "gate order 2", "plain", "also plain"],
            FakeServerChat(server.openai_base_url),
            store=store,
            backend="ray",
            backend_options={"workers": 1},
            concurrency=1,
            progress=False,
        )
        assert list(result["status"]) == ["awaiting_approval"] * 2 + ["done"] * 2
        assert list(result["pending"]) == [1, 1, 0, 0]
        assert len(store.pending_approvals()) == 2  # parked in the store, not on a worker


def test_the_stop_button_stops_the_rows_on_the_workers(
    ray_cluster: Any, server: FakeLLMServer, tmp_path: Path
) -> None:
    """Ctrl-C (the notebook's stop button) in the driver while rows run on workers: their
    chats stop as a local row's do (the running call cancelled, never retried). Before,
    ``ray.cancel`` ended only the stream back to the driver: the tools ran to their end for
    nobody, and the batch run again at once failed every row "driven elsewhere"."""
    import _thread
    import signal

    marks = tmp_path / "marks.txt"
    marks.touch()
    prompts = [f"linger {marks}", f"linger {marks}"]
    make = FakeServerChat(server.openai_base_url)
    options = {"workers": 2}

    def press_stop_once_both_run() -> None:
        deadline = time.monotonic() + 120
        while marks.read_text().count("start") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        _thread.interrupt_main()

    db = tmp_path / "batch.db"
    presser = threading.Thread(target=press_stop_once_both_run, daemon=True)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    presser.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            nbagent.batch(
                prompts, make, store=str(db), backend="ray", concurrency=2, progress=False,
                backend_options=options,
            )  # fmt: skip
    finally:
        signal.signal(signal.SIGINT, previous)
        presser.join()
    again = nbagent.batch(
        prompts, make, store=str(db), backend="ray", concurrency=2, progress=False,
        backend_options=options,
    )  # fmt: skip
    assert list(again["status"]) == ["done", "done"], again[["status", "error"]]
    assert "end" not in marks.read_text()  # no tool ran on after the stop
    with SQLiteStore(db) as store:
        for chat_id in again["chat_id"]:
            (call,) = store.calls(chat_id)
            assert call.status == "cancelled", call
    assert marks.read_text().count("start") == 2  # and none ran again
