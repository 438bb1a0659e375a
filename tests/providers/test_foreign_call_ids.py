"""A chat whose calls came from another API goes on on Anthropic, whatever their ids.

Kimi and vLLM (through an OpenAI-compatible server) name their calls
``functions.get_weather:0``; Anthropic refuses a ``tool_use.id`` outside
``^[a-zA-Z0-9_-]+$`` with a 400, so such a chat forked (or moved) to Claude failed on every
later request. The Anthropic wire now sends such an id in a stable cleaned form (its
``tool_result`` agrees, two ids cleaned alike stay apart); the record keeps the original.
Through the real SDK clients against the strict loopback fake server, which refuses ids as
Anthropic does.
"""

from __future__ import annotations

import re

import pytest
from _provider_harness import make_provider
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent import Chat, tool
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
# Kimi/vLLM's ids, and two that clean to the same text ("a_b")
FOREIGN = ["functions.get_weather:0", "functions.get_weather:1", "a.b", "a:b"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_chat_with_foreign_call_ids_goes_on_on_anthropic(
    server: FakeLLMServer, stream: bool
) -> None:
    ran: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Get the weather."""
        ran.append(city)
        return f"sunny in {city}"

    calls = [FakeToolCall("get_weather", {"city": f"C{n}"}, id=i) for n, i in enumerate(FOREIGN)]
    server.script([Turn(tool_calls=calls), Turn(text="All sunny.")])
    compatible = make_provider("openai-compatible", server)
    chat = Chat(provider=compatible, stream=stream).with_tools(get_weather)
    assert chat.ask("Weather?").content == "All sunny."
    assert list(chat.log["call_id"]) == FOREIGN

    claude = make_provider("anthropic", server)
    server.script([Turn(text="Still sunny.")])
    fork = chat.fork(model=claude, step=2)
    assert fork.ask("And now?").content == "Still sunny."  # the strict server took it
    blocks = [b for m in server.last_request.body["messages"] for b in m["content"]]
    uses = [b["id"] for b in blocks if isinstance(b, dict) and b["type"] == "tool_use"]
    results = [
        b["tool_use_id"] for b in blocks if isinstance(b, dict) and b["type"] == "tool_result"
    ]
    assert uses == results and len(uses) == len(FOREIGN)
    assert all(ANTHROPIC_ID.fullmatch(i) for i in uses)
    assert len(set(uses)) == len(FOREIGN)  # "a.b" and "a:b" stay apart
    # the record keeps the ids the calls came with
    assert list(fork.log["call_id"]) == FOREIGN
    assert ran == ["C0", "C1", "C2", "C3"]  # nothing ran again on the fork
    compatible.close()
    claude.close()


def test_anthropic_s_own_ids_go_back_as_they_came(server: FakeLLMServer) -> None:
    server.script([Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Oslo"})]), "ok"])

    @tool
    def get_weather(city: str) -> str:
        """Get the weather."""
        return "sunny"

    claude = make_provider("anthropic", server)
    chat = Chat(provider=claude).with_tools(get_weather)
    chat.ask("Weather?")
    (call_id,) = chat.log["call_id"]
    sent = [b for m in server.last_request.body["messages"] for b in m["content"]]
    assert [b.get("id") or b.get("tool_use_id") for b in sent if isinstance(b, dict)][-2:] == [
        call_id,
        call_id,
    ]
    claude.close()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=120), min_size=1, max_size=6, unique=True))
def test_the_wire_id_is_valid_stable_and_keeps_ids_apart(ids: list[str]) -> None:
    from nbagent.providers._anthropic_wire import wire_id

    sent = [wire_id(i) for i in ids]
    assert all(
        ANTHROPIC_ID.fullmatch(s) and len(s) <= max(64, len(i))
        for s, i in zip(sent, ids, strict=True)
    )
    assert [wire_id(i) for i in ids] == sent  # the same id maps the same way every request
    assert len(set(sent)) == len(ids)
    for i, s in zip(ids, sent, strict=True):
        if ANTHROPIC_ID.fullmatch(i):
            assert s == i  # a valid id is sent as it is
        else:
            assert len(s) <= 64
