"""A key in what a person is asked (``ask_user``'s question or choices, a server's form
or sampling messages) is shown as ``***`` on the input's card and in
``repr(PendingInput)``, as the call's arguments already were. Before, the question
``"Is sk-proj-... your key?"`` was drawn in clear in the card's HTML and its repr.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent import Chat, ModelRequest, PendingInput, ask_user
from nbagent.notebook import chat_mimebundle
from nbagent.notebook._cards import input_html
from nbagent.testing import ScriptedProvider, call_tools, reply

SK = "sk-proj-Abc123Def456Ghi789Jkl012"


def test_a_question_with_a_key_is_drawn_without_it() -> None:
    def answer(request: ModelRequest) -> Any:
        if any(getattr(m, "role", "") == "tool" for m in request.messages):
            return reply("done")
        question = {"question": f"Is {SK} your key?", "choices": [f"yes, {SK}", "no"]}
        return call_tools(("ask_user", question, "q"))

    chat = Chat(provider=ScriptedProvider([answer], repeat_last=True), display=False)
    chat.with_tools(ask_user).ask("go")
    (pending,) = chat.pending_inputs
    bundle = chat_mimebundle(chat)
    for shown in (bundle["text/html"], bundle["text/plain"], repr(pending)):
        assert SK not in shown
    assert "sk-***" in bundle["text/html"] and "sk-***" in repr(pending)
    assert SK in pending.message  # the value itself is the model's: only the screen hides it


def test_a_servers_form_and_sampling_messages_are_drawn_without_keys() -> None:
    form = PendingInput(
        "in_1",
        "elicitation",
        message=f"Confirm {SK}",
        schema={
            "type": "object",
            "properties": {"t": {"type": "string", "title": f"token {SK}", "enum": [SK]}},
        },
    )
    sampling = PendingInput(
        "in_2",
        "sampling",
        content={
            "systemPrompt": f"use {SK}",
            "messages": [{"role": "user", "content": {"type": "text", "text": SK}}],
        },
    )
    for p in (form, sampling):
        for live in (False, True):
            assert SK not in input_html(p, live=live)


@settings(max_examples=50, deadline=None)
@given(
    before=st.text(max_size=30),
    after=st.text(alphabet=st.characters(categories=["Zs", "P"]), max_size=5),
)
def test_no_question_around_a_key_shows_it(before: str, after: str) -> None:
    p = PendingInput("q", "ask_user", message=f"{before} {SK}{after}", schema={"type": "string"})
    assert SK not in input_html(p) and SK not in repr(p)
