"""The agent of test_ray_continue_as_made.py: importable by name on the workers (see
conftest). ``make_chat(row)`` sets its chat up in code as a user's factory would (an audit
subscriber, callbacks, an extension vetoing g1's refund through ``claim()``, a conditional
``always_allow``); each of them writes a line to the row's ``log`` file, so the test reads
what ran where, whichever worker it ran on."""

from __future__ import annotations

from typing import Any

from nbagent import Chat, Extension, tool
from nbagent._events import ToolCallStarted
from nbagent.testing import ScriptedProvider, call_tools, reply


def note(log: str, *what: str) -> None:
    with open(log, "a", encoding="utf-8") as f:
        f.write(" ".join(what) + "\n")


@tool(requires_approval=True)
def refund(item: str) -> str:
    """Refund an item.

    Args:
        item: The item.
    """
    return f"refunded {item}"


def _script(request: Any) -> Any:
    """Asks to refund the prompt's item; for g2 then a second refund its ``always_allow``
    predicate approves; then answers (read off the transcript: a loaded chat goes on)."""
    prompt = next(m.content for m in request.messages if getattr(m, "role", None) == "user")
    item = prompt.rsplit(" ", 1)[-1]
    results = sum(1 for m in request.messages if getattr(m, "role", None) == "tool")
    if results == 0:
        return call_tools(("refund", {"item": item}))
    if results == 1 and item == "g2":
        return call_tools(("refund", {"item": "g2-auto"}))
    return reply(f"finished {item}")


class Veto(Extension):
    """Refuses to run g1's refund (an extension's claim says no)."""

    def __init__(self, log: str) -> None:
        self.log = log

    def claim(self, call: Any) -> bool:
        ok = call.arguments["item"] != "g1"
        note(self.log, "claim", "ok" if ok else "VETO", call.arguments["item"])
        return ok


def make_chat(row: dict[str, Any]) -> Chat:
    log = row["log"]
    chat = Chat(provider=ScriptedProvider([_script], repeat_last=True)).with_tools(refund)
    chat.on(ToolCallStarted, lambda e: note(log, "audit", e.call.arguments["item"]))
    chat.before_tool_call(lambda c: note(log, "before", c.arguments["item"]))
    chat.after_tool_result(lambda r: note(log, "after", r.call.arguments["item"]))
    chat.extend(Veto(log))
    chat.always_allow(refund, when=lambda c: c.arguments["item"].endswith("-auto"))
    return chat
