"""Rows that hit a gated tool park as "awaiting approval" while the rest go on, and the
running batch continues them by itself once decided: on the live chat (the inbox's way),
or through the store from another process."""

from __future__ import annotations

import asyncio
import importlib
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import nbagent
from nbagent import Chat, tool
from nbagent.batch._run import get_run
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

RAN: list[str] = []


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: The order id.
    """
    RAN.append(order)
    return f"refunded {order}"


def make(row: dict[str, Any]) -> Chat:
    """Orders marked gated ask for a refund (a gated call), the others just answer."""
    if row["gated"]:
        script = [call_tools(("refund", {"order": row["order"]})), reply(f"done {row['order']}")]
    else:
        script = [reply(f"nothing to do for {row['order']}")]
    return Chat(provider=ScriptedProvider(script)).with_tools(refund)


FRAME = pd.DataFrame(
    {"order": ["o1", "o2", "o3", "o4", "o5"], "gated": [False, True, False, True, True]}
)


async def _parked(name: str, n: int) -> Any:
    """The run of batch ``name`` once ``n`` of its rows are parked."""
    for _ in range(500):
        run = get_run(name)
        if run is not None:
            parked = [r for r in run.rows.values() if r.status == "awaiting_approval"]
            if len(parked) == n:
                return run
        await asyncio.sleep(0.01)
    raise AssertionError(f"{n} rows of {name} never parked")


def test_parked_rows_wait_while_the_rest_finish_and_continue_when_decided_on_the_chat() -> None:
    RAN.clear()

    async def main() -> pd.DataFrame:
        task = asyncio.ensure_future(
            nbagent.batch_async(
                FRAME,
                make,
                prompt="Handle {order}",
                name="approvals-live",
                wait_for_decisions=30,
                progress=False,
            )
        )
        run = await _parked("approvals-live", 3)
        snap = run.progress.snapshot()
        assert snap.counts["done"] == 2 and snap.counts["awaiting_approval"] == 3
        assert RAN == []  # nothing gated ran
        by_order = {run.rows[k].chat_id: k for k in run.rows}
        for chat in run.chats.values():
            for call in chat.pending_approvals:  # what the inbox does for live chats
                if call.arguments["order"] == "o4":
                    chat.deny(call, reason="not eligible", by="inbox")
                else:
                    chat.approve(call, by="inbox")
        assert by_order  # the chats are the run's own objects
        return await task

    result = asyncio.run(main())
    assert list(result["status"]) == ["done"] * 5
    assert sorted(RAN) == ["o2", "o5"]  # each approved call ran once; the denied one never
    assert result.loc[3, "reply"] == "done o4"  # the model was told of the denial and answered
    assert list(result["pending"]) == [0] * 5
    log = nbagent.read_log(result)
    assert sorted(log["status"]) == ["denied", "ok", "ok"]


def test_without_waiting_a_script_gets_the_parked_rows_back_and_a_notice(
    capsys: pytest.CaptureFixture[str],
) -> None:
    RAN.clear()
    result = nbagent.batch(FRAME, make, prompt="Handle {order}", progress=False)
    assert list(result["status"]) == [
        "done",
        "awaiting_approval",
        "done",
        "awaiting_approval",
        "awaiting_approval",
    ]
    assert list(result["pending"]) == [0, 1, 0, 1, 1]
    assert result.loc[1, "reply"] is pd.NA or pd.isna(result.loc[1, "reply"])
    assert "3 row(s) await approval" in capsys.readouterr().err
    assert RAN == []
    # wait_for_decisions=False: the caller chose not to hear of them (a decision sweep forks
    # them; it printed this notice about rows it never meant anyone to decide)
    again = nbagent.batch(
        FRAME, make, prompt="Handle {order}", progress=False, wait_for_decisions=False
    )
    assert list(again["status"]) == list(result["status"])
    assert "await approval" not in capsys.readouterr().err


def test_in_a_kernel_batch_returns_and_keeps_continuing_parked_rows_in_the_background(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The notebook's way: batch() returns once every row settled; a decision made
    afterwards (a click in the inbox) continues the row on nbagent's loop by itself."""
    # (nbagent.batch is the function; its package's modules are imported by name)
    batch_module = importlib.import_module("nbagent.batch._batch")
    monkeypatch.setattr(batch_module, "in_kernel", lambda: True)
    RAN.clear()

    async def cell() -> pd.DataFrame:  # a kernel runs cells inside a running loop
        return nbagent.batch(FRAME, make, prompt="Handle {order}", name="kept", progress=False)

    result = asyncio.run(cell())
    assert (result["status"] == "awaiting_approval").sum() == 3
    run = get_run("kept")
    assert run is not None and run.running  # still watching the parked rows
    undecided = nbagent.batch_results(result, wait=0.2)  # nothing decided: the wait times out
    assert (undecided["status"] == "awaiting_approval").sum() == 3 and run.running
    for chat in run.chats.values():
        for call in chat.pending_approvals:
            chat.approve(call, by="inbox")
    fresh = nbagent.batch_results(result, wait=10)  # blocks only until the rows are final
    assert list(fresh["status"]) == ["done"] * 5
    assert sorted(RAN) == ["o2", "o4", "o5"]
    deadline = time.monotonic() + 10
    while run.running and time.monotonic() < deadline:  # the run ends after its last row
        time.sleep(0.01)
    assert not run.running
    assert list(nbagent.batch_results(result, wait=True)["status"]) == ["done"] * 5  # no wait


APPROVER = """
import sys, time
from nbagent.store import SQLiteStore
store = SQLiteStore(sys.argv[1])
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    pending = store.pending_approvals()
    if len(pending) == 3:
        for call in pending:
            if call.arguments["order"] == "o5":
                store.deny(call, reason="no", by="other-process")
            else:
                store.approve(call, by="other-process")
        break
    time.sleep(0.05)
store.close()
"""


def test_decisions_from_another_process_through_the_store_continue_the_running_batch(
    tmp_path: Path,
) -> None:
    RAN.clear()
    path = tmp_path / "batch.db"
    SQLiteStore(path).close()  # created (and migrated) before the other process opens it
    other = subprocess.Popen([sys.executable, "-c", APPROVER, str(path)])
    try:
        result = nbagent.batch(
            FRAME,
            make,
            prompt="Handle {order}",
            store=path,
            wait_for_decisions=30,
            poll_interval=0.1,
            progress=False,
        )
    finally:
        assert other.wait(timeout=30) == 0
    assert list(result["status"]) == ["done"] * 5
    assert sorted(RAN) == ["o2", "o4"]
    with SQLiteStore(path) as store:
        assert store.pending_approvals() == []
        calls = {c.arguments["order"]: c for cid in result["chat_id"] for c in store.calls(cid)}
    assert calls["o5"].status == "denied" and calls["o5"].decision.by == "other-process"
    assert calls["o2"].status == "ok"


class WatchingStore:
    """A SQLite store with the decision-watch seam (``store.watch()``, as PostgreSQL's
    LISTEN/NOTIFY gives it): ``approve``/``deny`` through it notify its watches."""

    def __init__(self, path: Path) -> None:
        self.inner = SQLiteStore(path)
        self.watches: list[Watch] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def watch(self, chat_ids: Any = None) -> Watch:
        w = Watch()
        self.watches.append(w)
        return w

    def approve(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        stored = self.inner.approve(call, *args, **kwargs)
        for w in self.watches:
            w.decided(stored.chat_id)
        return stored


class Watch:
    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.ids: set[str] = set()
        self.closed = False
        self.waits = 0

    def decided(self, chat_id: str) -> None:
        with self.lock:
            self.ids.add(chat_id)
        self.ready.set()

    def wait(self, timeout: float | None) -> set[str]:
        self.waits += 1
        self.ready.wait(timeout)
        with self.lock:
            ids, self.ids = self.ids, set()
            self.ready.clear()
        return ids

    def close(self) -> None:
        self.closed = True


def test_a_store_with_a_decision_watch_wakes_parked_rows_without_polling(tmp_path: Path) -> None:
    RAN.clear()
    store = WatchingStore(tmp_path / "w.db")

    async def main() -> pd.DataFrame:
        task = asyncio.ensure_future(
            nbagent.batch_async(
                FRAME,
                make,
                prompt="Handle {order}",
                store=store,
                name="watched",
                wait_for_decisions=30,
                poll_interval=60,  # a poll would come far too late: only the watch can wake them
                progress=False,
            )
        )
        await _parked("watched", 3)
        await asyncio.sleep(0.1)  # the parked chats' own first look has found nothing
        for call in store.inner.pending_approvals():
            await asyncio.to_thread(store.approve, call, by="elsewhere")
        return await asyncio.wait_for(task, 20)

    result = asyncio.run(main())
    assert list(result["status"]) == ["done"] * 5
    assert sorted(RAN) == ["o2", "o4", "o5"]
    assert len(store.watches) == 1 and store.watches[0].waits >= 1  # one follower per store
    store.inner.close()


def test_rows_a_stopped_run_left_parked_are_read_again_off_their_chats() -> None:
    """A script's batch stopped watching; the inbox (or code) continued the chats:
    batch_results reads the rows again off the live chats."""
    RAN.clear()
    result = nbagent.batch(FRAME, make, prompt="Handle {order}", name="later", progress=False)
    run = result.attrs["nbagent_batch"]
    assert not run.running and (result["status"] == "awaiting_approval").sum() == 3
    for chat in run.chats.values():
        for call in chat.pending_approvals:
            chat.approve(call)
            chat.complete()  # what the inbox's continuation does once the batch stopped
    fresh = nbagent.batch_results(result)
    assert list(fresh["status"]) == ["done"] * 5
    assert fresh.loc[1, "reply"] == "done o2" and fresh.loc[1, "pending"] == 0
    assert sorted(RAN) == ["o2", "o4", "o5"]
