"""The Ray backend under faults: a tool raising ``KeyboardInterrupt`` on a worker, a store
file replaced between batches, the store's options on the workers, and what the progress
and the frame say a row used when its worker died or its chat continued after a decision.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from _ray_agents import FakeServerChat

import nbagent
from nbagent.batch import _ray
from nbagent.batch._backend import Job, RowResult, RowUpdate, RunSpec
from nbagent.batch._ray import ChatWorker, RayBackend, locate_store
from nbagent.store import SQLiteStore
from nbagent.testing import FakeLLMServer


def _in_time(fn: Any, seconds: float = 90) -> Any:
    """``fn()`` on a thread: its result, or a failure (not a hung test) past ``seconds``."""
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert out, f"no result after {seconds:g} s: the batch hung"
    return out[0]


def test_a_tool_raising_keyboard_interrupt_fails_its_row_and_the_worker_goes_on(
    ray_cluster: Any, server: FakeLLMServer
) -> None:
    """The interrupt ended the worker's event loop: the batch never returned, and the kept
    worker (alive to Ray) hung every later batch of the process. It is the row's failure:
    no Ctrl-C reaches a worker (the driver's stop button cancels the rows)."""
    make = FakeServerChat(server.openai_base_url)
    options = {"workers": 1}  # one worker: the later batch runs where the interrupt was

    def first() -> Any:
        return nbagent.batch(
            ["interrupt now", "bb", "ccc"], make, progress=False, backend="ray",
            backend_options=options,
        )  # fmt: skip

    result = _in_time(first)
    assert list(result["status"]) == ["failed", "done", "done"], result[["status", "error"]]
    assert result.loc[0, "error_type"] == "KeyboardInterrupt"
    assert "not the stop button" in result.loc[0, "error"]
    later = _in_time(
        lambda: nbagent.batch(
            ["dddd"], make, progress=False, backend="ray", backend_options=options
        )
    )
    assert list(later["status"]) == ["done"] and later.loc[0, "reply"] == "dddd: 8"


def test_a_store_file_made_again_at_the_same_path_is_opened_again(
    ray_cluster: Any, server: FakeLLMServer, tmp_path: Path
) -> None:
    """The kept workers kept the first file open by its path: every row of the batch on the
    new file failed "the file was replaced" until the process restarted."""
    make = FakeServerChat(server.openai_base_url)
    db = tmp_path / "batch.db"
    for attempt in range(2):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        result = _in_time(
            lambda n=attempt: nbagent.batch(
                [f"row {n}"], make, store=str(db), progress=False, backend="ray",
                backend_options={"workers": 1},
            )
        )  # fmt: skip
        assert list(result["status"]) == ["done"], (attempt, result.loc[0, "error"])


def test_a_worker_keeps_one_store_per_file_and_closes_one_whose_file_is_gone(
    tmp_path: Path,
) -> None:
    db = tmp_path / "batch.db"
    driver = SQLiteStore(db)
    locator = locate_store(driver)
    assert locator is not None
    worker = ChatWorker()
    first = worker._store_of(locator)
    assert worker._store_of(locator) is first  # opened once per file
    driver.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    SQLiteStore(db).close()  # the driver makes the file again
    second = worker._store_of(locator)
    assert second is not first and first.closed
    assert second.add_batch_chat("b", "k", "c1") == "c1"  # it writes to the file there now


def test_the_workers_open_the_sqlite_store_as_the_driver_did(tmp_path: Path) -> None:
    """``SQLiteStore(path, synchronous="FULL", claim_timeout=5, timeout=2)``: the workers
    opened ``SQLiteStore(path)`` (``NORMAL``, claims never abandoned, 30 s), silently."""
    driver = SQLiteStore(tmp_path / "b.db", synchronous="FULL", claim_timeout=5, timeout=2)
    locator = pickle.loads(pickle.dumps(locate_store(driver)))  # as it reaches a worker
    opened = locator.open()
    try:
        wanted = {"timeout": 2.0, "synchronous": "FULL", "claim_timeout": 5}
        assert opened.options == driver.options == wanted
    finally:
        opened.close()
        driver.close()


def test_a_row_cancelled_on_its_worker_leaves_no_task_pending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The driver cancels a row's call (its stop button; ``on_error="raise"`` once another
    row failed) while the worker waits for the row's chat to change: the chat was cancelled,
    its wait for progress (``changed.wait()``) left pending, and the worker's loop logged
    "Task was destroyed but it is pending!" when it was collected."""
    started: list[asyncio.Event] = []

    async def chat_running(job: Job, spec: Any, progress: Any, limit: Any) -> RowResult:
        started[0].set()
        await asyncio.Event().wait()  # a chat's approved async call, running
        raise AssertionError("never ends")

    async def spec_of(boxed: list[Any]) -> tuple[Any, Any]:
        return RunSpec("b1", lambda: None), None

    monkeypatch.setattr(_ray, "settle_job", chat_running)
    worker = ChatWorker()
    monkeypatch.setattr(worker, "_run_of", spec_of)

    async def cancelled_while_waiting() -> list[asyncio.Task[Any]]:
        started.append(asyncio.Event())
        rows = worker.run([None], Job("0", 0, "aa", "aa"))
        step = asyncio.ensure_future(rows.__anext__())
        await started[0].wait()  # the worker waits for the chat or its progress
        step.cancel()  # ray.cancel
        with pytest.raises(asyncio.CancelledError):
            await step
        await rows.aclose()
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    assert asyncio.run(cancelled_while_waiting()) == []


# ------------------------------------------------------------ what a row used
def _run(backend: Any, todo: Sequence[Job], spec: RunSpec, hook: Any = None) -> dict[str, Any]:
    updates: list[RowUpdate] = []
    results: list[RowResult] = []

    async def go() -> None:
        async for result in backend.run(todo, spec, updates.append):
            results.append(result)
            if hook is not None:
                await asyncio.to_thread(hook, result)

    asyncio.run(asyncio.wait_for(go(), 90))
    return {"updates": updates, "final": {r.key: r for r in results}}


def _never_down(updates: Sequence[RowUpdate]) -> None:
    """Every row's tokens and the batch's total only grow, update after update."""
    rows: dict[str, int] = {}
    total = 0
    for update in updates:
        used = update.input_tokens + update.output_tokens
        assert used >= rows.get(update.key, 0), (update, rows)
        rows[update.key] = used
        assert sum(rows.values()) >= total
        total = sum(rows.values())


def test_a_dead_workers_row_reports_what_its_chat_paid_for(
    ray_cluster: Any, server: FakeLLMServer, tmp_path: Path
) -> None:
    """It said 0 calls, 0 tokens, cost 0 (and the bar's total dropped by its share) though
    the chat paid a request, which the store has."""
    store = SQLiteStore(tmp_path / "batch.db")
    todo = [Job("0", 0, "die now", "die now"), Job("1", 1, "bb", "bb")]
    spec = RunSpec("b1", FakeServerChat(server.openai_base_url), store=store, concurrency=2)
    out = _run(RayBackend(workers=2), todo, spec)
    died = out["final"]["0"]
    assert died.error_type == "WorkerDied", died
    record = store.load(died.chat_id)
    usage = record.state["usage"]
    assert died.input_tokens == usage["input_tokens"] > 0
    assert died.output_tokens == usage["output_tokens"] > 0
    assert died.calls == record.info.n_calls == 1
    assert died.cost_usd == pytest.approx(record.state["cost_usd"])
    last = [u for u in out["updates"] if u.key == "0"][-1]
    assert (last.status, last.input_tokens) == ("failed", died.input_tokens)
    _never_down(out["updates"])


def test_a_continued_rows_tokens_never_go_down(
    ray_cluster: Any, server: FakeLLMServer, tmp_path: Path
) -> None:
    """A parked row continued after a decision was reported running with zero tokens (by
    the driver, then by the worker before it loaded the chat): the bar's totals went down."""
    store = SQLiteStore(tmp_path / "batch.db")

    def approve(result: RowResult) -> None:
        if result.status == "awaiting_approval" and result.chat_id is not None:
            for call in store.pending_approvals(result.chat_id):
                store.approve(call.id, chat_id=result.chat_id)

    todo = [Job("0", 0, "gate order 7", "gate order 7"), Job("1", 1, "bb", "bb")]
    spec = RunSpec("b1", FakeServerChat(server.openai_base_url), store=store, concurrency=2)
    out = _run(RayBackend(workers=2), todo, spec, hook=approve)
    done = out["final"]["0"]
    assert done.status == "done" and done.reply == "gate order 7: refunded gate order 7"
    statuses = [u.status for u in out["updates"] if u.key == "0"]
    assert "awaiting_approval" in statuses and statuses[-1] == "done", statuses
    _never_down(out["updates"])
    parked = next(u for u in out["updates"] if u.key == "0" and u.status == "awaiting_approval")
    assert parked.input_tokens > 0


# ------------------------------------------------------------ a worker that never started
def faulty_worker(marker: Path, times: int | None) -> type[ChatWorker]:
    """A worker class whose ``__init__`` raises for the first ``times`` workers to start (a
    marker file each: shared by the workers' processes), or always (``None``). Defined here,
    it is pickled by value: its marker goes with it to the workers."""

    class FaultyWorker(ChatWorker):
        def __init__(self) -> None:
            if times is None:
                raise RuntimeError("worker start failed (simulated, always)")
            for n in range(times):
                try:
                    fd = os.open(f"{marker}.{n}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    continue
                os.close(fd)
                raise RuntimeError("worker start failed (simulated)")
            super().__init__()

    return FaultyWorker


# a pool of its own (pools are kept by their options): never a kept pool of ChatWorkers
FAULTY_POOL = {"max_concurrency": 999}


def test_rows_sent_to_a_worker_that_never_started_run_on_its_replacement(
    ray_cluster: Any, server: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker whose ``__init__`` raised (a transient failure) failed every row already
    sent to it, "the Ray worker running this chat died ... a call that was running is in
    doubt", though nothing had run for them (8 of 20). Ray runs no method of an actor
    whose ``__init__`` failed, so the rows are sent again, to its replacement: every row
    done, and each row's tool ran once."""
    monkeypatch.setattr(_ray, "ChatWorker", faulty_worker(tmp_path / "started", 1))
    marks = tmp_path / "marks"
    store = SQLiteStore(tmp_path / "batch.db")
    rows = [f"note {marks} {n}" for n in range(20)]
    result = _in_time(
        lambda: nbagent.batch(
            rows, FakeServerChat(server.openai_base_url), store=store, progress=False,
            concurrency=20, backend="ray",
            backend_options={"workers": 2, "keep_workers": False, "worker_options": FAULTY_POOL},
        )
    )  # fmt: skip
    assert Path(f"{tmp_path / 'started'}.0").exists()  # a worker failed to start
    assert list(result["status"]) == ["done"] * 20, result[["status", "error"]]
    ran = marks.read_text().split()
    assert sorted(ran, key=int) == [str(n) for n in range(20)]  # each row's call, once
    assert len(store.chats()) == 20


def test_a_worker_that_cannot_start_fails_its_rows_saying_so(
    ray_cluster: Any, server: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A permanent cause (a missing import, a bad runtime_env): the replacement fails to start
    too, and the row fails saying the worker could not start, never "in doubt"."""
    monkeypatch.setattr(_ray, "ChatWorker", faulty_worker(tmp_path / "started", None))
    marks = tmp_path / "marks"
    result = _in_time(
        lambda: nbagent.batch(
            [f"note {marks} {n}" for n in range(3)], FakeServerChat(server.openai_base_url),
            store=str(tmp_path / "batch.db"), progress=False, backend="ray",
            backend_options={"workers": 1, "keep_workers": False, "worker_options": FAULTY_POOL},
        )
    )  # fmt: skip
    assert list(result["status"]) == ["failed"] * 3
    assert set(result["error_type"]) == {"WorkerStartFailed"}
    assert set(result["error"]) == {
        "the Ray worker could not start: RuntimeError: worker start failed (simulated, always)"
    }
    assert not marks.exists() and result["chat_id"].isna().all()
