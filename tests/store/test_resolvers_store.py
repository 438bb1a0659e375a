"""A ``requires_approval`` resolver across a restart (issue 23, A.2), on SQLite and PostgreSQL.

RubyLLM: "The resolver can run repeatedly while a call waits, including after a job
resumes." A chat with a store parks on a call its resolver leaves pending (``None``); the
chat object goes away (a kernel restart); ``Chat.load`` with the same tools asks the
resolver again, which now says ``True`` (the call runs once) or ``False`` (it is denied,
never run). The store holds the outcome.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import pytest

from nbagent import Chat, Tool, ToolCall, ToolResultMessage
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

runs: Counter[str] = Counter()
asked: list[str] = []
status: dict[str, bool | None] = {}
_lock = threading.Lock()


class DeleteRecord(Tool):
    """Delete a record."""

    def requires_approval(self, tool_call: ToolCall) -> bool | None:
        with _lock:
            asked.append(tool_call.id)
        return status.get(tool_call.id)

    def execute(self, record_id: int) -> str:
        with _lock:
            runs["delete_record"] += 1
        return f"deleted {record_id}"


@pytest.fixture(autouse=True)
def _clean() -> None:
    runs.clear()
    asked.clear()
    status.clear()


@pytest.mark.parametrize("verdict", [True, False])
def test_a_pending_resolver_call_is_asked_again_after_load(backend: Any, verdict: bool) -> None:
    chat = Chat(
        provider=ScriptedProvider([call_tools(("delete_record", {"record_id": 3}, "d1"))]),
        store=backend.url,
    ).with_tools(DeleteRecord)
    chat.ask("delete 3")
    assert chat.awaiting_approval and runs["delete_record"] == 0
    chat_id = chat.id
    chat.close()  # the kernel restarts
    del chat

    asked.clear()
    status["d1"] = verdict  # the application decided meanwhile
    loaded = Chat.load(
        chat_id,
        store=backend.url,
        tools=[DeleteRecord],
        provider=ScriptedProvider([reply("done")]),
    )
    assert loaded.pending_approvals[0].id == "d1"  # loading alone decides nothing
    loaded.complete()
    assert asked and set(asked) == {"d1"}
    assert loaded.is_complete
    assert runs["delete_record"] == (1 if verdict else 0)
    result = next(
        m for m in loaded.transcript if isinstance(m, ToolResultMessage) and m.tool_call_id == "d1"
    )
    if verdict:
        assert result.content == "deleted 3"
    else:
        assert json.loads(result.content)["status"] == "denied"
    loaded.complete()
    assert runs["delete_record"] == (1 if verdict else 0)  # never twice
    loaded.close()
    with backend.open() as store:
        stored = store.call("d1")
        assert stored.status == ("ok" if verdict else "denied")
        assert stored.decision.by == "resolver"
