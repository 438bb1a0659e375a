"""A chat whose calls came with long ids goes on on OpenAI.

Chat Completions refuses a tool call id over 40 characters (``Invalid
'messages[2].tool_calls[0].id': string too long``) and the Responses API a ``call_id``
over 64; vLLM's ids are 46 characters (``chatcmpl-tool-`` and 32 hex digits) and
gateways join longer ones, so such a chat forked or moved to OpenAI failed on every later
request. The OpenAI wires now send a longer id in a stable short form (its result agrees,
two ids sharing a beginning stay apart); the record keeps the original.
"""

from __future__ import annotations

import pytest
from _provider_harness import make_provider
from hypothesis import given
from hypothesis import strategies as st

from nbagent import Chat, tool
from nbagent.providers._openai_wire import CHAT_ID_MAX, RESPONSES_ID_MAX, wire_id
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

VLLM = "chatcmpl-tool-" + "3f" * 16  # 46 characters
LONG = [VLLM, VLLM[:-1] + "0", "call|fc_" + "a" * 70, "short_1"]


@pytest.mark.parametrize(("kind", "limit"), [("openai-chat", 40), ("openai-responses", 64)])
def test_a_chat_with_long_call_ids_goes_on_on_openai(
    server: FakeLLMServer, kind: str, limit: int
) -> None:
    @tool
    def get_weather(city: str) -> str:
        """Get the weather."""
        return f"sunny in {city}"

    calls = [FakeToolCall("get_weather", {"city": f"C{n}"}, id=i) for n, i in enumerate(LONG)]
    server.script([Turn(tool_calls=calls), Turn(text="All sunny.")])
    chat = Chat(provider=make_provider("openai-compatible", server)).with_tools(get_weather)
    assert chat.ask("Weather?").content == "All sunny."
    assert list(chat.log["call_id"]) == LONG

    server.script([Turn(text="Still sunny.")])
    fork = chat.fork(model=make_provider(kind, server), step=2)
    assert fork.ask("And now?").content == "Still sunny."
    body = server.last_request.body
    if kind == "openai-chat":
        sent = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or ()]
        answered = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    else:
        sent = [i["call_id"] for i in body["input"] if i.get("type") == "function_call"]
        answered = [i["call_id"] for i in body["input"] if i.get("type") == "function_call_output"]
    assert sent == answered and len(set(sent)) == len(LONG)
    assert all(len(i) <= limit for i in sent)
    assert sent[-1] == "short_1"  # an id it takes goes as it is
    assert list(fork.log["call_id"]) == LONG  # the record keeps the ids the calls came with


ids = st.text(min_size=1, max_size=120)


@given(ids, ids, st.sampled_from([CHAT_ID_MAX, RESPONSES_ID_MAX]))
def test_the_wire_id_is_short_stable_and_apart(a: str, b: str, limit: int) -> None:
    short = wire_id(a, limit)
    assert len(short) <= limit
    assert short == wire_id(a, limit)
    assert (short == a) == (len(a) <= limit)
    if a != b:
        assert short != wire_id(b, limit)


def test_a_compatible_server_gets_its_own_long_ids_back(server: FakeLLMServer) -> None:
    """A gateway may carry data in a call's id (LiteLLM keeps Gemini 3's thought signature
    in it): shortened for OpenAI's own limit, it came back broken. Only OpenAI's own wires
    shorten; a compatible server gets the ids it sent."""

    @tool
    def get_weather(city: str) -> str:
        """Get the weather."""
        return f"sunny in {city}"

    long_id = "call_3c5f2a1b__thought__" + "S1g" * 100
    server.script(
        [
            Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Oslo"}, id=long_id)]),
            Turn(text="Sunny."),
        ]
    )
    chat = Chat(provider=make_provider("openai-compatible", server)).with_tools(get_weather)
    assert chat.ask("Weather?").content == "Sunny."
    body = server.last_request.body
    sent = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or ()]
    answered = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    assert sent == answered == [long_id]
