"""Stored forks: a fork of a stored chat is a chat of its own with a parent link (m010).

``Chat.load`` brings it back in another process (a real ``python``
subprocess), parent included, with its shared history, and it runs on there:
the call approved in the fork runs exactly once (counted in a file), the
original stays as it was in the store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nbagent import Chat, ForkParent, Tool
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

WORKER = """
import json, sys
from nbagent import Chat, Tool
from nbagent.testing import ScriptedProvider, reply

class Refund(Tool):
    '''Refund an order.'''
    name = "refund"
    requires_approval = True

    def execute(self, order_id: int) -> str:
        '''Refund.

        Args:
            order_id: The order.
        '''
        with open(sys.argv[3], "a") as f:
            f.write(f"{order_id}\\n")
        return f"refunded {order_id}"

db, chat_id = sys.argv[1], sys.argv[2]
chat = Chat.load(chat_id, store=db, tools=[Refund], provider=ScriptedProvider([reply("refunded.")]))
before = {
    "parent": chat.parent.as_dict() if chat.parent else None,
    "status": chat.status,
    "calls": [[c.id, c.status, c.decision and c.decision.verdict] for c in chat.tool_calls],
    "n_messages": len(chat.transcript),
    "n_events": len(chat.events),
}
from nbagent.notebook._fallback import bundle_for
from nbagent.notebook._state import state_for
state = state_for(chat)  # what a cell's view of the loaded fork follows, made before it runs
chat.complete()
after = {"status": chat.status, "last": chat.transcript[-1].content,
         "calls": [[c.id, c.status] for c in chat.tool_calls],
         "log": chat.log[["tool", "status", "decision"]].values.tolist(),
         "view": bundle_for(state, chat.turn)["text/plain"].splitlines()[-1],
         "whole": bundle_for(state)["text/plain"].splitlines()[-1]}
chat.close()
print(json.dumps({"before": before, "after": after}))
"""


class Refund(Tool):
    """Refund an order."""

    name = "refund"
    requires_approval = True

    def __init__(self, counter: Path):
        self.counter = counter

    def execute(self, order_id: int) -> str:
        """Refund.

        Args:
            order_id: The order.
        """
        with open(self.counter, "a") as f:
            f.write(f"{order_id}\n")
        return f"refunded {order_id}"


def _rows(store: SQLiteStore, chat_id: str) -> tuple[object, ...]:
    """A stored chat as rows: its record (less the time it was last written) and its events."""
    record = store.load(chat_id)
    events = [(e.seq, e.type, e.ts) for e in store.iter_events(chat_id)]
    info = record.info
    return (info.id, info.created_at, info.parent_id, record.messages, record.calls, events)


def _runs(counter: Path) -> list[str]:
    return counter.read_text().split() if counter.exists() else []


def _denied_chat(db: Path, counter: Path) -> Chat:
    provider = ScriptedProvider(
        [call_tools(("refund", {"order_id": 42}, "call_r")), reply("Not refunded.")]
    )
    chat = Chat(provider=provider, store=db).with_tools(Refund(counter))
    chat.ask("Refund order 42")
    chat.deny(chat.pending_approvals[0], reason="check first")
    chat.complete()
    assert chat.status == "complete"
    return chat


def test_a_stored_fork_loads_in_another_process_with_its_parent(tmp_path: Path) -> None:
    db, counter = tmp_path / "chats.db", tmp_path / "runs.txt"
    chat = _denied_chat(db, counter)
    chat.refresh()  # everything the original has is on disk
    with SQLiteStore(db) as reader:
        rows_before = _rows(reader, chat.id)
    fork = chat.fork("call_r", decision="approved", reason="checked")
    fork_id, chat_id = fork.id, chat.id
    expected_parent = ForkParent(chat_id, 1, "call_r", "decision", "approved")
    assert fork.parent == expected_parent
    n_events = len(fork.events)
    fork.close()
    chat.close()

    env = {k: v for k, v in os.environ.items() if not k.startswith("NBAGENT_TEST_")}
    proc = subprocess.run(
        [sys.executable, "-c", WORKER, str(db), fork_id, str(counter)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    before, after = out["before"], out["after"]
    assert before["parent"] == expected_parent.as_dict()
    assert before["status"] == "ready"
    assert before["calls"] == [["call_r", "approved", "approved"]]
    assert before["n_messages"] == 2  # the prompt and the response that asked for the call
    assert before["n_events"] == n_events  # the shared history and the change, all stored
    assert after["status"] == "complete" and after["last"] == "refunded."
    assert after["calls"] == [["call_r", "ok"]]
    # issue 25 U7: what the loaded fork ran shows, in its log and in its view's status line
    assert after["log"] == [["refund", "ok", "approved"]]
    assert "· 1 tool call ·" in after["view"] and "complete" in after["view"], after["view"]
    assert "· 1 tool call ·" in after["whole"], after["whole"]
    assert _runs(counter) == ["42"]  # approved in the fork: ran exactly once, there

    with SQLiteStore(db) as store:
        assert _rows(store, chat_id) == rows_before  # the original's rows are untouched
        listed = {info.id: info.parent_id for info in store.chats()}
        assert listed == {chat_id: None, fork_id: chat_id}
        original = Chat.load(
            chat_id, store=store, tools=[Refund(counter)], provider=ScriptedProvider()
        )
        assert original.parent is None and original.status == "complete"
        assert [(c.status, c.decision and c.decision.reason) for c in original.tool_calls] == [
            ("denied", "check first")
        ]
        assert original.transcript[-1].content == "Not refunded."
        again = Chat.load(
            fork_id, store=store, tools=[Refund(counter)], provider=ScriptedProvider()
        )
        assert again.parent == expected_parent and again.status == "complete"
        assert again.steps["step"].tolist() == [1, 3]  # the shared step, then the fork's own
        assert again.steps["shared"].tolist() == [True, False]
        original.close()
        again.close()
    assert _runs(counter) == ["42"]


def test_a_loaded_chat_forks_from_its_stored_history(tmp_path: Path) -> None:
    db, counter = tmp_path / "chats.db", tmp_path / "runs.txt"
    chat_id = _denied_chat(db, counter).id
    loaded = Chat.load(
        chat_id,
        store=db,
        tools=[Refund(counter)],
        provider=ScriptedProvider([reply("Refunded after all.")]),
    )
    assert [e.type for e in loaded.events][:2] == ["message_added", "model_request_started"]
    fork = loaded.fork(loaded.tool_calls[0], decision="approved")
    fork.complete()
    assert fork.status == "complete" and _runs(counter) == ["42"]
    assert fork.parent is not None and fork.parent.chat_id == chat_id
    fork.close()
    loaded.close()


def test_where_a_fork_is_stored(tmp_path: Path) -> None:
    counter = tmp_path / "runs.txt"
    chat = _denied_chat(tmp_path / "a.db", counter)
    unstored = chat.fork(step=1, store=None)
    elsewhere = chat.fork(step=0, system="Be brief.", store=tmp_path / "b.db")
    assert not any(type(e).__name__ == "StoreExtension" for e in unstored.extensions)
    elsewhere.close()
    with SQLiteStore(tmp_path / "b.db") as store:
        (info,) = store.chats()
        assert info.id == elsewhere.id and info.parent_id == chat.id
        record = store.load(elsewhere.id)
        assert record.system == "Be brief."
        assert record.parent == {
            "chat_id": chat.id,
            "step": 0,
            "call_id": None,
            "change": "system",
            "value": "Be brief.",
        }
    chat.close()


def test_a_copy_that_missed_a_decision_made_elsewhere_forks_from_it(tmp_path: Path) -> None:
    """This chat object still shows the refund waiting; another process approved it and ran
    it. Forking here applies the decisions made elsewhere first: approving it again in a fork
    is refused (it may have run elsewhere), and a fork of the whole history asks for it again,
    so the refund ran once, where it was approved. Before, the fork approved it anew and the
    refund ran twice."""
    db, counter = tmp_path / "chats.db", tmp_path / "runs.txt"
    provider = ScriptedProvider([call_tools(("refund", {"order_id": 7}, "call_r")), reply("ok")])
    here = Chat(provider=provider, store=db).with_tools(Refund(counter))
    here.ask("Refund order 7")
    with SQLiteStore(db) as other_process:
        other_process.approve("call_r", chat_id=here.id)
    elsewhere = Chat.load(
        here.id, store=db, tools=[Refund(counter)], provider=ScriptedProvider([reply("done")])
    )
    elsewhere.complete()
    elsewhere.close()
    assert _runs(counter) == ["7"]
    with pytest.raises(ValueError, match="approved in the original and has not run there"):
        here.fork("call_r", decision="approved")  # it would run the refund again
    whole = here.fork()
    (call,) = whole.tool_calls
    assert call.status == "awaiting_approval" and _runs(counter) == ["7"]
    whole.close()
    here.close()
