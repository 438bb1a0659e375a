"""``chat.answer(call, ...)`` (or the call's id) answers the one input the call waits for,
as ``chat.answer``'s docs promise ("the PendingInput, the call it belongs to, or an id").
An MCP server's form has an ``in_...`` id of its own, so answering by the call failed
with an error that contradicted itself ("is awaiting_input; it waits for no input"). A
call waiting for several inputs is refused with their ids; one waiting for none says so.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, InputError, MCPServer, ModelRequest, current_input_asker, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

SERVER = str(Path(__file__).resolve().parent / "inputs_server.py")


def model(*calls: tuple[str, dict[str, Any], str]) -> ScriptedProvider:
    def answer(request: ModelRequest) -> Any:
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if not results:
            return call_tools(*calls)
        return reply(" | ".join(f"{m.status}:{m.content}" for m in results))

    return ScriptedProvider([answer], repeat_last=True)


@pytest.mark.parametrize("by", ["call", "call id"])
def test_a_parked_servers_form_is_answered_by_its_call(tmp_path: Path, by: str) -> None:
    server = MCPServer.stdio(sys.executable, [SERVER], prefix="inp", timeout=60)
    chat = Chat(
        provider=model(("inp_book_table", {"day": "Friday"}, "c1")),
        display=False,
        store=str(tmp_path / "s.db"),
    ).with_tools(server)
    try:
        chat.ask("book")
        (pending,) = chat.pending_inputs
        assert pending.id != "c1" and pending.call_id == "c1"
        ref = chat.get_call("c1") if by == "call" else "c1"
        assert chat.answer(ref, {"name": "Ada", "guests": 2}).id == pending.id
        final = chat.complete()
        assert final is not None and "booked Friday for Ada, 2 guests" in final.content
        with pytest.raises(InputError, match="waits for no input"):
            chat.answer("c1", {"name": "Ada", "guests": 2})
    finally:
        chat.close()
        server.close()


@tool
def confirm_twice(what: str) -> str:
    """Ask a person two things mid-call.

    Args:
        what: What.
    """
    asker = current_input_asker()
    assert asker is not None
    futures = [
        asker.ask("ask_user", f"{what} {n}?", {"question": "?"}, {"type": "string"}, None)[1]
        for n in (1, 2)
    ]
    return " ".join(str(f.result()[1]) for f in futures)


def test_a_call_waiting_for_several_inputs_names_them() -> None:
    chat = Chat(provider=model(("confirm_twice", {"what": "deploy"}, "c1")), display=False)
    chat.with_tools(confirm_twice)
    errors: list[str] = []

    def answerer() -> None:
        deadline = time.monotonic() + 30
        while len(chat.pending_inputs) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            chat.answer("c1", "yes")
        except InputError as exc:
            errors.append(str(exc))
        for p in chat.pending_inputs:
            chat.answer(p, p.message)

    th = threading.Thread(target=answerer)
    th.start()
    final = chat.ask("go")
    th.join()
    assert final is not None and final.content == "ok:deploy 1? deploy 2?"
    (error,) = errors
    ids = [r.input_id for r in chat.record.inputs]
    assert "several inputs" in error and all(repr(i) in error for i in ids)
