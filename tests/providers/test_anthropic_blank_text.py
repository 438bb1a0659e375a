"""Anthropic refuses a text block that is empty or only whitespace ("text content blocks must
contain non-whitespace text"): a model's ``"\\n\\n"`` before its ``tool_use`` is never sent back
(every later request of the chat failed), and an empty or whitespace-only question fails before
sending with a clear error, the chat going on. Through the real SDK client against the strict
fake server, which answers the API's own 400s."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from _provider_harness import KEY, make_provider, png

import nbagent
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

# -- Anthropic: whitespace-only text -------------------------------------------------------


@nbagent.tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"value of {key}"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("said", ["\n\n", " ", "\t\n "])
def test_a_whitespace_only_text_before_a_call_is_not_sent_back(
    server: FakeLLMServer, said: str, stream: bool
) -> None:
    server.script(
        [
            Turn(text=said, tool_calls=[FakeToolCall("lookup", {"key": "a"})]),
            Turn(text="a is 1"),
            Turn(text="b is 2"),
        ]
    )
    provider = make_provider("anthropic", server)
    chat = nbagent.Chat(provider=provider, stream=stream, display=False).with_tools(lookup)
    assert chat.ask("What is a?").content == "a is 1"
    assert chat.ask("And b?").content == "b is 2"  # the chat goes on
    assert len(server.requests) == 3
    for request in server.requests[1:]:
        texts = [
            b["text"]
            for m in request.body["messages"]
            for b in m["content"]
            if b.get("type") == "text"
        ]
        assert all(t.strip() for t in texts)
    provider.close()


def test_the_strict_fake_refuses_whitespace_only_and_empty_text_as_the_api_does(
    server: FakeLLMServer,
) -> None:
    client = anthropic.Anthropic(api_key=KEY, base_url=server.anthropic_base_url, max_retries=0)
    server.script(["ok"] * 4)

    def send(messages: list[dict[str, Any]]) -> Any:
        return client.messages.create(model="claude-sonnet-4-5", max_tokens=100, messages=messages)

    blank = [{"type": "text", "text": "\n\n"}, {"type": "text", "text": "hi"}]
    with pytest.raises(anthropic.BadRequestError, match="must contain non-whitespace text"):
        send([{"role": "user", "content": blank}])
    with pytest.raises(anthropic.BadRequestError, match="must be non-empty"):
        send([{"role": "user", "content": [{"type": "text", "text": ""}]}])
    with pytest.raises(anthropic.BadRequestError, match="at least one message"):
        send([])
    assert send([{"role": "user", "content": "hi"}]).content[0].text == "ok"
    client.close()


@pytest.mark.parametrize("kind", ["anthropic", "chat", "responses"])
@pytest.mark.parametrize("question", ["", "   ", " \n\t"])
def test_an_empty_question_fails_before_anything_is_added_and_the_chat_goes_on(
    server: FakeLLMServer, question: str, kind: str
) -> None:
    """Anthropic refuses a blank user turn (and a blank one after an answer would end the
    request on the model's own turn); a blank question means nothing on any API: refused
    by the chat before it is added or sent, the chat going on."""
    server.script(["first", "second"])
    provider = make_provider(kind, server)
    chat = nbagent.Chat(provider=provider, display=False)
    with pytest.raises(ValueError, match=r"ask\(\) needs a question"):
        chat.ask(question)
    assert server.requests == [] and chat.transcript == ()
    assert chat.ask("Hello?").content == "first"
    with pytest.raises(ValueError, match=r"ask\(\) needs a question"):
        chat.ask_later(question or " ")
    assert len(server.requests) == 1 and len(chat.transcript) == 2
    assert chat.ask("Again?").content == "second"
    assert [m.role for m in chat.transcript] == ["user", "assistant", "user", "assistant"]
    provider.close()


def test_a_blank_text_beside_an_image_is_dropped_not_refused(server: FakeLLMServer) -> None:
    server.script(["a red square"])
    provider = make_provider("anthropic", server)
    chat = nbagent.Chat(provider=provider, display=False)
    assert chat.ask("  ", images=[png()]).content == "a red square"
    (message,) = server.requests[0].body["messages"]
    assert [b["type"] for b in message["content"]] == ["image"]
    provider.close()


def test_the_anthropic_provider_itself_refuses_a_blank_request_before_sending(
    server: FakeLLMServer,
) -> None:
    """Called directly (``complete_with_tools``, no chat to refuse the question first)."""
    from nbagent import ChatMessage

    server.script(["first"])
    provider = make_provider("anthropic", server)
    with pytest.raises(ValueError, match="anthropic: nothing to send"):
        provider.complete_with_tools(messages=[ChatMessage("user", "  ")])
    answered = [ChatMessage("user", "hi"), ChatMessage("assistant", "hello")]
    with pytest.raises(ValueError, match="last user message is empty or whitespace"):
        provider.complete_with_tools(messages=[*answered, ChatMessage("user", "\n")])
    assert server.requests == []
    provider.close()
