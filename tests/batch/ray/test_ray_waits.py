"""Ray rows that wait, on the shared local Ray: for an input answered elsewhere, across a
kept worker that died while idle, and what their frame says after (latency, the inbox).

On the demo model (no network): ``_ray_wait_agents`` has an external tool, a gated refund
and a lookup that takes a second for orders from 1000 on.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _ray_wait_agents import make_chat, parks_and_closes_slowly, slow_then_gated

import nbagent
from nbagent.batch._ray import RayBackend
from nbagent.store import SQLiteStore


def _when(store_path: Path, ready: Callable[[Any], list[Any]], act: Callable[[Any, Any], None]):
    """A thread that, once ``ready(store)`` lists something, calls ``act(store, each)``."""

    def go() -> None:
        store = SQLiteStore(store_path)  # its own connection, as another process has
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                found = ready(store)
                if found:
                    for item in found:
                        act(store, item)
                    return
                time.sleep(0.1)
        finally:
            store.close()

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread


def test_a_row_waiting_for_an_input_continues_once_answered_elsewhere(
    ray_cluster: Any, tmp_path: Path
) -> None:
    """Only decisions continued a parked Ray row: a row waiting for an external tool's
    result (or ask_user's answer) stayed parked for ever once answered, as its count of
    undecided calls (0) never went down."""
    db = tmp_path / "b.db"
    answering = _when(
        db,
        lambda s: s.pending_inputs(),
        lambda s, i: s.answer(i.id, {"signed": True}, by="legal", chat_id=i.chat_id),
    )
    started = time.monotonic()
    result = nbagent.batch(
        ["Sign the contract with ACME", "Check the status of order 3"],
        make_chat,
        store=str(db),
        backend="ray",
        progress=False,
        wait_for_decisions=30,
    )
    answering.join(5)
    assert list(result["status"]) == ["done", "done"], result[["status", "pending"]]
    assert "signed" in result.loc[0, "reply"]
    assert time.monotonic() - started < 30


def test_latency_counts_every_segment_of_a_continued_row(ray_cluster: Any, tmp_path: Path) -> None:
    """A row that worked a second, parked, then was approved said latency_s 0.005: the
    last continuation only (the local backend says the whole, as documented)."""
    db = tmp_path / "b.db"
    approving = _when(db, lambda s: s.pending_approvals(), lambda s, c: s.approve(c, by="ops"))
    result = nbagent.batch(
        ["Refund order 1 once you have looked order 1001 up"],
        slow_then_gated,
        store=str(db),
        backend="ray",
        progress=False,
        wait_for_decisions=30,
    )
    approving.join(5)
    assert list(result["status"]) == ["done"], result[["status", "error"]]
    assert result.loc[0, "calls"] == 2
    assert result.loc[0, "latency_s"] >= 1.0, result.loc[0, "latency_s"]


def _parked_then(
    db: Path, make_chat: Callable[[], Any], options: dict[str, Any], act: Callable[[Any, Any], None]
) -> Any:
    """The frame of a Ray batch of "Refund order 11" on ``db`` that waits for decisions,
    ``act(store, call)`` done from another thread (as another process would) once the
    refund's approval is asked."""
    deciding = _when(db, lambda s: s.pending_approvals(), act)
    parked = nbagent.batch(
        ["Refund order 11"],
        make_chat,
        store=str(db),
        backend="ray",
        progress=False,
        backend_options=options,
        wait_for_decisions=60,
    )
    deciding.join(5)
    return parked


def _pid(ray: Any, worker: Any) -> int:
    return int(ray.get(worker.__ray_call__.remote(lambda self: os.getpid()), timeout=30))


def _kill_and_wait(ray: Any, worker: Any, pid: int) -> None:
    """SIGKILL the worker's process (the OOM killer) and wait until Ray knows it dead."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            ray.get(worker.__ray_ready__.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return
        except ray.exceptions.GetTimeoutError:
            pass
        time.sleep(0.2)
    pytest.fail("the killed worker is still alive to Ray")


def test_a_kept_worker_that_died_idle_is_replaced_before_it_gets_chats(
    ray_cluster: Any, tmp_path: Path
) -> None:
    """The next batch's rows (and a parked row's continuation) were sent to the dead
    actor and failed WorkerDied, "a call that was running is in doubt", though nothing
    had run there."""
    import ray

    from nbagent.batch._ray import _POOLS

    options = {"workers": 1, "keep_workers": True}
    warm = nbagent.batch(
        ["Check the status of order 3"],
        make_chat,
        backend="ray",
        progress=False,
        backend_options=options,
    )
    assert list(warm["status"]) == ["done"]
    (pool,) = [p for k, p in _POOLS.items() if k[2] == 1]
    _kill_and_wait(ray, pool[0], _pid(ray, pool[0]))

    after = nbagent.batch(
        ["Check the status of order 5", "Check the status of order 7"],
        make_chat,
        store=str(tmp_path / "a.db"),
        backend="ray",
        progress=False,
        backend_options=options,
    )
    assert list(after["status"]) == ["done", "done"], after[["status", "error"]]

    # a parked row's worker dies while it waits; then it is approved
    db = tmp_path / "p.db"
    worker = pool[0]
    pid = _pid(ray, worker)

    def kill_then_approve(store: Any, call: Any) -> None:
        _kill_and_wait(ray, worker, pid)
        store.approve(call, by="ops")

    parked = _parked_then(db, make_chat, options, kill_then_approve)
    assert list(parked["status"]) == ["done"], parked[["status", "error"]]
    assert "refunded order 11" in parked.loc[0, "reply"]


def test_a_factory_whose_module_the_workers_cannot_import_fails_in_one_line(
    ray_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each row's error was a 300-character squashed Ray traceback."""
    (tmp_path / "only_on_the_driver.py").write_text(
        "from nbagent import Chat\n\ndef make():\n    return Chat('demo')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import only_on_the_driver

    try:
        result = nbagent.batch(["a", "b"], only_on_the_driver.make, backend="ray", progress=False)
    finally:
        sys.modules.pop("only_on_the_driver", None)
    assert list(result["status"]) == ["failed", "failed"]
    assert (
        list(result["error"])
        == [
            "make_chat could not be loaded on the Ray worker: No module named "
            "'only_on_the_driver' (put its module on the workers' PYTHONPATH or runtime_env)"
        ]
        * 2
    )
    assert list(result["error_type"]) == ["ModuleNotFoundError"] * 2


def test_the_inbox_says_a_ray_row_continues_on_a_rerun(ray_cluster: Any, tmp_path: Path) -> None:
    """In a script the batch stops watching as it returns: approving its Ray rows through
    nbagent.inbox(result) said "approved" and nothing continued them, nor said so."""
    db = str(tmp_path / "b.db")
    result = nbagent.batch(["Refund order 1"], make_chat, store=db, backend="ray", progress=False)
    assert list(result["status"]) == ["awaiting_approval"]
    with nbagent.inbox(result) as inbox:
        outcomes = inbox.approve("all")
    assert list(outcomes["outcome"]) == ["approved"]
    assert "rerun the batch" in outcomes.loc[0, "detail"], outcomes.loc[0, "detail"]
    again = nbagent.batch(["Refund order 1"], make_chat, store=db, backend="ray", progress=False)
    assert list(again["status"]) == ["done"], again[["status", "error"]]


def test_the_backend_replaces_dead_workers_only(ray_cluster: Any) -> None:
    """A live kept worker is kept (the check does not churn the pool)."""
    backend = RayBackend(workers=1)
    first = nbagent.batch(
        ["Check the status of order 9"], make_chat, backend=backend, progress=False
    )
    from nbagent.batch._ray import _POOLS

    (pool,) = [p for k, p in _POOLS.items() if k[2] == 1]
    before = pool[0]
    again = nbagent.batch(
        ["Check the status of order 9"], make_chat, backend=backend, progress=False
    )
    assert list(first["status"]) == list(again["status"]) == ["done"]
    assert pool[0] is before


def test_a_worker_that_dies_after_its_chat_parked_and_before_its_result_is_continued(
    ray_cluster: Any, tmp_path: Path
) -> None:
    """The row's chat parked (its call awaiting approval, in the store) and its worker died
    while it still closed the chat (three seconds: a tool source stopping), before the
    parked result reached the driver: the row failed "the Ray worker running this chat
    died ... a call that was running is in doubt", though nothing of it was running (the
    clean clone's test above failed so, its kill landing in that window). The store shows
    the chat waiting with no call running: the replacement worker continues it, and the
    approved refund runs once."""
    import ray

    from nbagent.batch._ray import _POOLS

    db = tmp_path / "p.db"
    options = {"workers": 1, "keep_workers": True}
    warm = nbagent.batch(
        ["Refund order 1"],
        parks_and_closes_slowly,
        backend="ray",
        progress=False,
        backend_options=options,
        store=str(tmp_path / "warm.db"),
    )
    assert list(warm["status"]) == ["awaiting_approval"]  # (no decision: parked)
    (pool,) = [p for k, p in _POOLS.items() if k[2] == 1]
    worker = pool[0]
    pid = _pid(ray, worker)
    killed: list[bool] = []

    def kill_then_approve(store: Any, call: Any) -> None:
        if not killed:  # parked and stored: the worker is still closing the chat
            os.kill(pid, signal.SIGKILL)
            killed.append(True)
        time.sleep(0.5)
        store.approve(call, by="ops")

    parked = _parked_then(db, parks_and_closes_slowly, options, kill_then_approve)
    assert killed == [True]
    assert list(parked["status"]) == ["done"], parked[["status", "error"]]
    with SQLiteStore(db) as store:
        calls = store.load(parked.loc[0, "chat_id"]).calls
    assert [(c.name, c.status) for c in calls] == [("issue_refund", "ok")]
    assert calls[0].result is not None and "refunded order 11" in calls[0].result.content
