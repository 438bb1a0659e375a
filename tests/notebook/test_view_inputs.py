"""Pending inputs in the notebook view: the call's card shows what a person is asked.

The question and its choices (``ask_user``), the form's fields (an elicitation), the URL
(only an http(s) one as a link), the exact sampling messages, and how to answer in code;
everything escaped; gone once answered. The status line says the turn waits for a person.
"""

from __future__ import annotations

from typing import Any

from nbagent import Chat, ModelRequest, PendingInput, ask_user
from nbagent.notebook import chat_mimebundle
from nbagent.notebook._cards import input_html
from nbagent.testing import ScriptedProvider, call_tools, reply


def asking(arguments: dict[str, Any]) -> ScriptedProvider:
    def answer(request: ModelRequest) -> Any:
        if any(getattr(m, "role", "") == "tool" for m in request.messages):
            return reply("thanks")
        return call_tools(("ask_user", arguments, "q1"))

    return ScriptedProvider([answer], repeat_last=True)


def test_an_ask_user_card_shows_the_question_choices_and_how_to_answer() -> None:
    question = "Ship <b>today</b>?"
    chat = Chat(provider=asking({"question": question, "choices": ["yes", "no <i>"]}))
    chat.display = False
    chat.with_tools(ask_user)
    chat.ask("go")
    html = chat_mimebundle(chat)["text/html"]
    assert 'data-input-id="q1"' in html
    assert "Ship &lt;b&gt;today&lt;/b&gt;?" in html and "<b>today" not in html
    assert "<code>yes</code>" in html and "no &lt;i&gt;" in html
    assert "chat.answer(&#x27;q1&#x27;, ...)" in html
    text = chat_mimebundle(chat)["text/plain"]
    assert "needs an answer" in text and "awaiting approval" in text
    chat.answer("q1", "yes")
    chat.complete()
    assert 'data-input-id="q1"' not in chat_mimebundle(chat)["text/html"]


def test_a_form_a_url_and_sampling_messages_as_a_person_reads_them() -> None:
    form = PendingInput(
        "in_1",
        "elicitation",
        "c1",
        "book",
        "Who is it for?",
        {},
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Name"},
                "size": {"type": "string", "enum": ["S", "M"]},
            },
            "required": ["name"],
        },
        server="shop",
    )
    html = input_html(form)
    assert "shop asks you to fill in" in html
    assert "<code>name</code> Name (string, required)" in html
    assert "<code>size</code> size (string) one of S, M" in html

    link = input_html(
        PendingInput("in_2", "elicitation_url", content={"url": "https://example.com/a?b=1&c"})
    )
    assert '<a href="https://example.com/a?b=1&amp;c" target="_blank"' in link
    script = input_html(
        PendingInput("in_3", "elicitation_url", content={"url": "javascript:alert(1)"})
    )
    assert "<a " not in script and "<code>javascript:alert(1)</code>" in script

    sampling = input_html(
        PendingInput(
            "in_4",
            "sampling",
            content={
                "systemPrompt": "Be brief.",
                "messages": [{"role": "user", "content": {"type": "text", "text": "Sum <up>"}}],
                "maxTokens": 50,
            },
        )
    )
    assert "system: Be brief.\nuser: Sum &lt;up&gt;\n(at most 50 tokens)" in sampling
