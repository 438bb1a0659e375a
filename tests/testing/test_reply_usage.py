"""``reply(**usage)`` sets every usage count a response has, and refuses a name it does not
know: ``reply("hi", cache_write_tokens=4)`` used to drop the count silently (and a typo such as
``output_token=5`` read as the default), so a test of cache-write pricing tested nothing."""

from __future__ import annotations

import pytest

from nbagent import Chat
from nbagent.testing import ScriptedProvider, reply


def test_reply_sets_every_usage_count() -> None:
    r = reply(
        "hi",
        input_tokens=100,
        output_tokens=7,
        cached_tokens=40,
        reasoning_tokens=3,
        cache_write_tokens=20,
    )
    assert (r.input_tokens, r.output_tokens, r.cached_tokens) == (100, 7, 40)
    assert (r.reasoning_tokens, r.cache_write_tokens) == (3, 20)
    plain = reply("hi")
    assert (plain.input_tokens, plain.output_tokens) == (10, 5)
    assert (plain.cached_tokens, plain.reasoning_tokens, plain.cache_write_tokens) == (0, 0, 0)


def test_the_counts_reach_the_chat() -> None:
    chat = Chat(provider=ScriptedProvider([reply("hi", cache_write_tokens=20, reasoning_tokens=3)]))
    chat.ask("go")
    assert chat.usage.cache_write_tokens == 20
    assert chat.steps["cache_write_tokens"].tolist() == [20]
    assert chat.steps["reasoning_tokens"].tolist() == [3]


@pytest.mark.parametrize("name", ["output_token", "cache_creation_input_tokens", "tokens"])
def test_an_unknown_usage_name_is_a_type_error(name: str) -> None:
    with pytest.raises(TypeError, match=rf"unexpected usage keyword\(s\) {name}; known: "):
        reply("hi", **{name: 4})
