"""A stream's fragments (``TextDelta``, ``ToolCallDelta``) are made only for someone who hears
them, and recorded when made (a replay plays them; made-up ones when none were), through the
real ``anthropic`` SDK and the strict fake server."""

from __future__ import annotations

import json
from typing import Any

import anthropic
from _provider_harness import KEY

import nbagent
from nbagent import Extension, TextDelta, ToolCallDelta
from nbagent.providers import AnthropicProvider
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn


@nbagent.tool
def get_weather(city: str) -> dict[str, Any]:
    """Get the weather.

    Args:
        city: City name.
    """
    return {"city": city, "temp": 21}


def _turns(answer: str) -> list[Turn]:
    return [Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})]), Turn(text=answer)]


def _chat(server: FakeLLMServer, **kwargs: Any) -> nbagent.Chat:
    client = anthropic.Anthropic(api_key=KEY, base_url=server.anthropic_base_url, max_retries=0)
    provider = AnthropicProvider("claude-sonnet-4-5", client=client)
    return nbagent.Chat(provider=provider, stream=True, **kwargs).with_tools(get_weather)


def test_a_stream_nobody_hears_makes_no_fragments_and_records_none(
    server: FakeLLMServer,
) -> None:
    chat = _chat(server)
    server.script(_turns("It is sunny in Paris today, 21 degrees."))
    reply = chat.ask("Weather in Paris? (unheard)")
    assert reply is not None and reply.content == "It is sunny in Paris today, 21 degrees."
    assert len(server.requests) == 2 and all(r.body["stream"] for r in server.requests)
    # no fragment was made, so none took a number: the kept events are numbered 0, 1, 2...
    assert [e.seq for e in chat.events] == list(range(len(chat.events)))
    # nor kept: the provider was handed no sink, so its recordings hold none
    assert [r.deltas for r in chat.recordings().values()] == [None, None]

    # a replay plays made-up ones (one per piece) to who listens now
    heard: list[Any] = []
    again = _chat(server, replay="only")
    again.on(TextDelta, heard.append).on(ToolCallDelta, heard.append)
    assert again.ask("Weather in Paris? (unheard)") == reply
    assert len(server.requests) == 2  # the model was not asked again
    assert [e.text for e in heard if isinstance(e, TextDelta)] == [reply.content]
    (arguments,) = [e.arguments_delta for e in heard if isinstance(e, ToolCallDelta)]
    assert json.loads(arguments) == {"city": "Paris"}


def test_a_heard_stream_is_recorded_in_the_fragments_it_came_in(server: FakeLLMServer) -> None:
    first: list[Any] = []
    chat = _chat(server).on(TextDelta, first.append).on(ToolCallDelta, first.append)
    server.script(_turns("It is sunny in Paris today, 21 degrees."))
    reply = chat.ask("Weather in Paris? (heard)")
    assert reply is not None
    assert all(r.deltas for r in chat.recordings().values())

    heard: list[Any] = []
    again = _chat(server, replay="only")
    again.on(TextDelta, heard.append).on(ToolCallDelta, heard.append)
    assert again.ask("Weather in Paris? (heard)") == reply
    assert len(server.requests) == 2  # the model was not asked again
    text = [e.text for e in heard if isinstance(e, TextDelta)]
    assert len(text) > 1 and text == [e.text for e in first if isinstance(e, TextDelta)]
    assert "".join(e.arguments_delta for e in heard if isinstance(e, ToolCallDelta)) == (
        '{"city":"Paris"}'
    )


def test_a_listener_added_later_hears_the_next_stream(server: FakeLLMServer) -> None:
    chat = _chat(server)
    server.script([*_turns("first"), *_turns("second answer")])
    chat.ask("one")
    heard: list[str] = []
    chat.on("text_delta", lambda e: heard.append(e.text))
    chat.ask("two")
    assert "".join(heard) == "second answer"
    chat.off(heard.append)


def test_extensions_hear_fragments_unless_they_say_not(server: FakeLLMServer) -> None:
    class Hears(Extension):
        def __init__(self) -> None:
            self.seen: list[str] = []

        def on_event(self, event: nbagent.Event) -> None:
            self.seen.append(event.type)

    class Deaf(Hears):
        fragments = False

    hears, deaf = Hears(), Deaf()
    chat = _chat(server)
    chat.extend(deaf)
    server.script(_turns("nobody but the deaf"))
    chat.ask("one")
    assert "text_delta" not in deaf.seen and "message_added" in deaf.seen
    assert [e.seq for e in chat.events] == list(range(len(chat.events)))

    chat.extend(hears)
    server.script(_turns("now heard"))
    chat.ask("two")
    assert "text_delta" in hears.seen and "tool_call_delta" in hears.seen
    assert "text_delta" not in deaf.seen  # an extension that ignores them is never handed one
