"""Across processes: a decision made in another process reaches a shown inbox, and a click on
the row it made stale records nothing (the store's first decision wins)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbagent
from nbagent import Chat, Tool
from nbagent.inbox._sources import StoreSource
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

REPO = Path(__file__).resolve().parents[2]


class Deploy(Tool):
    """Deploy a service."""

    requires_approval = True

    def execute(self, service: str) -> str:
        raise AssertionError("never run in these tests")


def _stored_chats(path: Path, n: int) -> list[str]:
    ids = []
    for i in range(n):
        script = [call_tools(("deploy", {"service": f"svc-{i}"})), reply("done")]
        with Chat(provider=ScriptedProvider(script), store=path, display=False) as chat:
            chat.with_tools(Deploy).ask("deploy")
            ids.append(chat.id)
    return ids


def _in_another_process(code: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


def _until(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_decision_from_another_process_reaches_the_shown_inbox(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    ids = _stored_chats(path, 2)
    box = nbagent.inbox(path)
    w = box.widget  # shown: it polls the store
    try:
        assert len(w.rows) == 2
        stale = next(r for r in w.rows if r["chat_id"] == ids[0])
        call_id = box.pending.set_index("chat_id").loc[ids[0], "call_id"]
        _in_another_process(
            "from nbagent.store import SQLiteStore\n"
            f"s = SQLiteStore({str(path)!r})\n"
            f"s.deny({call_id!r}, chat_id={ids[0]!r}, reason='freeze', by='ops')\n"
            "s.close()\n"
        )
        _until(lambda: len(w.rows) == 1)  # no refresh asked: the poll saw it
        words = next(d["words"] for d in w.decided if d["key"] == stale["key"])
        assert words.startswith("denied elsewhere by ops at ") and words.endswith(": freeze")
        w.click("approve", keys=[stale["key"]])  # the row a browser may still show
        assert w.summary.startswith("Approved 0 calls; 1 had been decided elsewhere")
        store = SQLiteStore(path)
        decision = store.call(call_id, chat_id=ids[0]).decision
        assert decision is not None and (decision.verdict, decision.by) == ("denied", "ops")
        store.close()
    finally:
        box.close()


def test_the_store_refuses_a_decision_on_a_row_read_before_another_process_decided(
    tmp_path: Path,
) -> None:
    """The backstop under the inbox's fresh read: deciding a stale row through the store
    records nothing and reports the decision that stands."""
    path = tmp_path / "chats.db"
    ids = _stored_chats(path, 1)
    store = SQLiteStore(path)
    source = StoreSource(store)
    (row,) = source.pending()
    _in_another_process(
        "from nbagent.store import SQLiteStore\n"
        f"s = SQLiteStore({str(path)!r})\n"
        f"s.approve({row.call_id!r}, chat_id={ids[0]!r}, by='ops')\n"
        "s.close()\n"
    )
    for verdict in ("approved", "denied"):  # the same verdict, and a contradicting one
        outcome = source.decide(row, verdict, None, "inbox")  # type: ignore[arg-type]
        assert (outcome.outcome, outcome.verdict, outcome.by) == (
            "decided elsewhere",
            "approved",
            "ops",
        )
    decision = store.call(row.call_id, chat_id=ids[0]).decision
    assert decision is not None and decision.by == "ops"
    store.close()
