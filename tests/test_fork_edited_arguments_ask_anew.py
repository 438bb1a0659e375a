"""``chat.fork(call, arguments={...})`` of an ungated external tool's call or an
``ask_user`` question still waiting for its answer kept the original's request: the
fork's card showed the model's arguments (the old question), and the answer given
became the result of the edited call. The fork now asks anew, with the edited
arguments: one request, in the live fork, its record and its store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nbagent import Chat, InputRequested, ModelRequest, ask_user, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool(external=True)
def sign_contract(party: str) -> str:
    """Have the contract signed by a person.

    Args:
        party: Who signs.
    """


def provider() -> ScriptedProvider:
    def answer(request: ModelRequest) -> Any:
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if results:
            return reply(" | ".join(f"{m.status}:{m.content}" for m in results))
        return call_tools(
            ("sign_contract", {"party": "ACME"}, "a"),
            ("ask_user", {"question": "Colour?", "choices": ["red", "blue"]}, "q"),
        )

    return ScriptedProvider([answer], repeat_last=True)


def parked(store: str | None = None) -> Chat:
    chat = Chat(provider=provider(), display=False, store=store)
    chat.with_tools(sign_contract, ask_user).ask("go")
    assert {p.id for p in chat.pending_inputs} == {"a", "q"}
    return chat


def requests_of(chat: Chat, call_id: str) -> list[InputRequested]:
    return [e for e in chat.events if isinstance(e, InputRequested) and e.input_id == call_id]


def test_an_edited_question_is_the_one_asked() -> None:
    chat = parked()
    fork = chat.fork("q", arguments={"question": "Size?", "choices": ["S", "M"]})
    (question,) = [p for p in fork.pending_inputs if p.id == "q"]
    assert question.message == "Size?" and question.choices == ("S", "M")
    assert [e.prompt for e in requests_of(fork, "q")] == ["Size?"]
    assert [r.message for r in fork.record.inputs if r.input_id == "q"] == ["Size?"]
    fork.answer("q", "M")  # one of the edited choices (the old ones are not)
    # the original still asks its own question
    assert [p.message for p in chat.pending_inputs if p.id == "q"] == ["Colour?"]


def test_an_edited_external_call_asks_for_the_edited_calls_result(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    chat = parked(path)
    fork = chat.fork("a", arguments={"party": "Initech"})
    (request,) = [p for p in fork.pending_inputs if p.id == "a"]
    assert request.content == {"arguments": {"party": "Initech"}}
    assert "Initech" in request.message and "ACME" not in request.message
    assert len(requests_of(fork, "a")) == 1
    fork_id = fork.id
    fork.close()
    loaded = Chat.load(
        fork_id, store=path, provider=provider(), tools=[sign_contract, ask_user], display=False
    )
    try:
        (request,) = [p for p in loaded.pending_inputs if p.id == "a"]
        assert request.content == {"arguments": {"party": "Initech"}}
        loaded.answer("a", "signed")
        loaded.answer("q", "red")
        loaded.complete()
        assert loaded.get_call("a").effective_arguments == {"party": "Initech"}
        assert loaded.get_call("a").status == "ok"
    finally:
        loaded.close()
        chat.close()
