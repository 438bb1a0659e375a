"""A call answered without its input (a fork's ``result=``) leaves no input waiting.

``fork(call, result=...)`` of an ``ask_user`` or external call answered the call but
kept its question as pending: ``fork.pending_inputs`` listed it, ``awaiting_input``
was true, and answering it was accepted and recorded an answer the call never read
(the record said "answered by user", the result said the fork's value).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat, InputError, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool(external=True)
def sign(party: str) -> str:
    """Have the contract signed."""
    raise AssertionError("an external tool never runs here")


def _chat(name: str, arguments: dict[str, Any], **kw: Any) -> Chat:
    def answer(request: Any) -> Any:
        if len(request.messages) == 1:
            return call_tools((name, arguments, "c1"))
        return reply(f"done: {request.messages[-1].content}")

    provider = ScriptedProvider([answer], repeat_last=True)
    return Chat(provider=provider, display=False, **kw).with_tools(sign, nbagent.ask_user)


CASES = [
    ("ask_user", {"question": "colour?"}, True),
    ("ask_user", {"question": "colour?"}, False),
    ("sign", {"party": "acme"}, True),
    ("sign", {"party": "acme"}, False),
]


def _check(fork: Chat) -> None:
    assert fork.pending_inputs == []
    assert not fork.awaiting_input
    with pytest.raises(InputError, match="closed"):
        fork.answer("c1", "green")
    fork.complete()
    assert fork.status == "complete"
    c = fork.get_call("c1")
    assert (c.status, c.result.content) == ("ok", "yellow")  # type: ignore[union-attr]
    assert fork.last_assistant_message.content == "done: yellow"  # type: ignore[union-attr]
    assert [i.answered_by for i in fork.record.inputs] == [None]  # nobody answered it


@pytest.mark.parametrize(("name", "arguments", "answered"), CASES)
def test_a_fork_given_the_result_asks_nothing(
    name: str, arguments: dict[str, Any], answered: bool
) -> None:
    chat = _chat(name, arguments)
    chat.ask("go")
    if answered:
        chat.answer("c1", "red" if name == "ask_user" else "signed")
        chat.complete()
    _check(chat.fork("c1", result="yellow"))
    if not answered:  # the original still waits for its answer
        assert [p.id for p in chat.pending_inputs] == ["c1"]


@pytest.mark.parametrize(("name", "arguments", "answered"), CASES[:2])
def test_a_loaded_fork_given_the_result_asks_nothing(
    tmp_path: Path, name: str, arguments: dict[str, Any], answered: bool
) -> None:
    db = str(tmp_path / "chats.db")
    chat = _chat(name, arguments, store=db)
    chat.ask("go")
    if answered:
        chat.answer("c1", "red")
        chat.complete()
    fork_id = chat.fork("c1", result="yellow").id
    loaded = Chat.load(fork_id, store=db, provider=chat.provider, display=False)
    loaded = loaded.with_tools(sign, nbagent.ask_user)
    _check(loaded)
