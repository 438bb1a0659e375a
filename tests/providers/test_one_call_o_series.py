"""``calls="one"`` on an o-series model through Chat Completions.

OpenAI's Chat Completions answers ``parallel_tool_calls`` (true or false) with a 400
``unsupported_parameter`` for o1, o3, o3-mini and o4-mini (langchain#29704, fast-agent#279,
tensorzero#2805, dotnet/extensions#6630, llama_index#20865), so a chat limited to one call
per response failed on its first request. There the switch is left out and the chat keeps
to one call itself (a second call is answered ``skipped``, never run); Responses requests,
which take it, and every other model still send it. Through the real SDK against the strict
fake server, which refuses the switch for those models as the API does.
"""

from __future__ import annotations

import pytest
from _provider_harness import make_provider

from nbagent import Chat, ToolResultMessage, tool
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

TWO_CALLS = Turn(
    tool_calls=[
        FakeToolCall("get_weather", {"city": "Paris"}),
        FakeToolCall("get_weather", {"city": "Tokyo"}),
    ]
)


def _chat(server: FakeLLMServer, kind: str, model: str, ran: list[str]) -> Chat:
    @tool
    def get_weather(city: str) -> str:
        """Get the weather."""
        ran.append(city)
        return "sunny"

    provider = make_provider(kind, server, model=model)
    return Chat(provider=provider).with_tools(get_weather).with_tool_options(calls="one")


@pytest.mark.parametrize(
    ("kind", "model"),
    [
        ("openai-chat", "o3-mini"),
        ("openai-chat", "o4-mini-2025-04-16"),
        ("openai-chat", "o3"),
        ("openai-chat", "o1"),
        ("openai-compatible", "openai/o4-mini"),  # a gateway's name for it
    ],
)
def test_one_call_on_an_o_series_chat_model_leaves_the_switch_out(
    server: FakeLLMServer, kind: str, model: str
) -> None:
    ran: list[str] = []
    server.script([TWO_CALLS, "Paris is sunny."])
    chat = _chat(server, kind, model, ran)
    assert chat.ask("Weather in Paris and Tokyo?").content == "Paris is sunny."
    assert all("parallel_tool_calls" not in r.body for r in server.requests)
    assert ran == ["Paris"]  # the chat still keeps to one call
    skipped = [m for m in chat.transcript if isinstance(m, ToolResultMessage)][1]
    assert skipped.status == "skipped"


@pytest.mark.parametrize(
    ("kind", "model"),
    [("openai-responses", "o4-mini"), ("openai-responses", "o3"), ("openai-chat", "gpt-4.1-mini")],
)
def test_others_still_send_it(server: FakeLLMServer, kind: str, model: str) -> None:
    ran: list[str] = []
    server.script([TWO_CALLS, "Paris is sunny."])
    chat = _chat(server, kind, model, ran)
    chat.ask("Weather in Paris and Tokyo?")
    assert server.requests[0].body["parallel_tool_calls"] is False
    assert ran == ["Paris"]


def test_the_strict_server_refuses_the_switch_as_the_api_does(server: FakeLLMServer) -> None:
    from nbagent import BadRequestError

    server.script(["never"])
    provider = make_provider("openai-chat", server, model="o3-mini")
    provider.extra_body = {"parallel_tool_calls": False}  # forced by hand
    chat = Chat(provider=provider).with_tools(tool(lambda city: city, name="get_weather"))
    with pytest.raises(BadRequestError, match="not supported with this model"):
        chat.ask("Weather?")
