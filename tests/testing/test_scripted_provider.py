"""ScriptedProvider records every request without keeping a copy of the transcript per request."""

from __future__ import annotations

import gc
import tracemalloc

from nbagent import Chat, ChatMessage, ModelRequest, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool
def ping() -> str:
    """Ping."""
    return "pong"


def _memory_held(rounds: int) -> int:
    """Bytes still allocated after ``rounds`` tool rounds of one chat (chat and provider alive)."""
    script = []
    for _ in range(rounds):
        script += [call_tools(("ping", {})), reply("ok")]
    provider = ScriptedProvider(script)
    chat = Chat(provider=provider, display=False).with_tools(ping)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(rounds):
            chat.ask(f"round {n}")
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(provider.requests) == 2 * rounds
    return held


def test_memory_grows_linearly_with_the_conversation() -> None:
    # every request repeats the whole transcript: kept one copy each, 2x the rounds
    # would hold ~4x the memory (it measured 3.2x); shared, ~2x
    ratio = _memory_held(400) / _memory_held(200)
    assert ratio < 2.5, ratio


def test_recorded_requests_read_like_the_requests_sent() -> None:
    provider = ScriptedProvider([reply("a"), reply("b"), reply("c"), reply("d")])
    hi, there = ChatMessage("user", "hi"), ChatMessage("user", "there")
    other = ChatMessage("user", "another chat")
    sent = [
        ModelRequest((hi,), tool_choice="none"),
        ModelRequest((hi, there), system="s"),
        ModelRequest((other,)),  # not an extension: a list of its own
        ModelRequest((hi,)),  # a prefix of the first conversation
    ]
    for request in sent:
        provider.complete(request)
    assert provider.requests == sent
    assert list(provider.requests) == sent
    assert provider.requests[1].messages == (hi, there)
    assert provider.requests[1].system == "s"
    assert provider.requests[-1].messages == (hi,)
    assert provider.requests[:2] == sent[:2]
    assert len(provider.requests) == 4
    assert repr(provider.requests) == repr(sent)
