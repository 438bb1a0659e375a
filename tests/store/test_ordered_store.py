"""Ordered rounds and the "ran before" mark across a restart (issue 23, A.4), on SQLite and
PostgreSQL.

* ``order="listed"``: a call held behind an undecided gated call survives ``Chat.load``
  (the option is part of the stored chat) and runs after the gated call is decided, also
  when the decision is made through the store by another process.
* The default order: the mark on a result that ran before an earlier gated call was
  decided is stored with its event and comes back with ``Chat.load`` (events, log, view),
  and ``read_log(store)`` has it.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import nbagent
from nbagent import Chat, ToolCallFinished, ToolResultMessage, tool
from nbagent.notebook._fallback import chat_mimebundle
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

table: list[str] = []
runs: Counter[str] = Counter()
_lock = threading.Lock()


@tool(requires_approval=True)
def insert(row: str) -> str:
    """Insert a row."""
    with _lock:
        table.append(row)
        runs["insert"] += 1
    return f"inserted {row}"


@tool
def count() -> int:
    """Count the rows."""
    with _lock:
        runs["count"] += 1
        return len(table)


def parked(url: str, order: str | None) -> str:
    table.clear()
    runs.clear()
    provider = ScriptedProvider([call_tools(("insert", {"row": "a"}, "c1"), ("count", {}, "c2"))])
    chat = Chat(provider=provider, store=url).with_tools(insert, count)
    if order:
        chat.with_tool_options(order=order)
    chat.ask("insert a row, then count")
    assert chat.awaiting_approval
    chat_id = chat.id
    chat.close()  # the kernel restarts
    return chat_id


def load(url: str, chat_id: str) -> Chat:
    return Chat.load(
        chat_id, store=url, tools=[insert, count], provider=ScriptedProvider([reply("done")])
    )


def results(chat: Chat) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in chat.transcript if isinstance(m, ToolResultMessage)}


def test_a_listed_call_held_behind_a_gate_survives_a_restart(backend: Any) -> None:
    chat_id = parked(backend.url, "listed")
    assert runs["count"] == 0
    chat = load(backend.url, chat_id)
    assert chat.tool_options.order == "listed"
    assert chat.awaiting_approval and chat.get_call("c2").status == "requested"
    chat.complete()
    assert runs["count"] == 0  # still held
    chat.approve("c1")
    chat.complete()
    assert results(chat) == {"c1": "inserted a", "c2": "1"}
    assert runs == Counter({"insert": 1, "count": 1})
    chat.close()


def test_a_listed_call_runs_after_a_denial_made_through_the_store(backend: Any) -> None:
    chat_id = parked(backend.url, "listed")
    with backend.open() as store:
        store.deny("c1", chat_id=chat_id, reason="no", by="manager")
    chat = load(backend.url, chat_id)
    chat.complete()
    assert chat.is_complete and runs == Counter({"count": 1})
    assert json.loads(results(chat)["c1"])["status"] == "denied"
    assert results(chat)["c2"] == "0"
    chat.close()


def test_the_ran_before_mark_is_stored_and_restored(backend: Any) -> None:
    chat_id = parked(backend.url, None)
    assert runs["count"] == 1  # the default: it ran while insert waited
    chat = load(backend.url, chat_id)
    marks = {e.call.id: e.ran_before for e in chat.events if isinstance(e, ToolCallFinished)}
    assert marks == {"c2": ("c1",)}
    assert chat.log.set_index("call_id").loc["c2", "ran_before"] == "insert (c1)"
    assert "ran before <code>insert</code> was decided" in chat_mimebundle(chat)["text/html"]
    chat.approve("c1")
    chat.complete()
    chat.close()
    with backend.open() as store:
        log = nbagent.read_log(store, chat_id=chat_id).set_index("call_id")
    assert log.loc["c2", "ran_before"] == "insert (c1)"
    assert log["ran_before"].isna()["c1"]


def test_a_chat_that_keeps_the_default_order_stores_no_order(backend: Any) -> None:
    """So the nbagent before ``order`` existed (which refuses unknown options) still loads it."""
    chat_id = parked(backend.url, None)
    with backend.open() as store:
        options = store.load(chat_id).state["options"]
    assert "order" not in options and options["choice"] == "auto"
    chat_id = parked(backend.url, "listed")
    with backend.open() as store:
        assert store.load(chat_id).state["options"]["order"] == "listed"
