"""A turn's entries come from the state's per-turn index (a turn's view costs that turn, not
the chat): the same entries, in the same order, as filtering the whole chat, live or rebuilt,
with a retried request replacing its step's entry."""

from __future__ import annotations

from typing import Any

import pytest

from nbagent import Chat, ProviderError, tool
from nbagent.notebook._state import ChatState, state_for
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


class Flaky(ScriptedProvider):
    """Fails its second request once (the chat asks it again: the same step)."""

    failed = False

    def complete(self, request: Any) -> Any:
        if len(self.requests) == 1 and not self.failed:
            self.failed = True
            raise ProviderError("server hiccup", provider="scripted")
        return super().complete(request)


def _same(state: ChatState) -> None:
    turns = {e.turn for e in state.entries}
    assert len(turns) >= 3
    for turn in turns:
        expected = [e for e in state.entries if e.turn == turn]
        assert [id(e) for e in state.entries_for(turn)] == [id(e) for e in expected]
    assert state.entries_for(max(turns) + 1) == []


def test_each_turns_entries_are_the_chats_entries_of_that_turn() -> None:
    script = [call_tools(("lookup", {"key": "a"})), reply("first")]
    script += [call_tools(("lookup", {"key": "b"}), ("lookup", {"key": "c"})), reply("second")]
    script += [reply("third")]
    chat = Chat(provider=Flaky(script), display=False).with_tools(lookup)
    live = state_for(chat)
    with pytest.raises(ProviderError):
        chat.ask("one")
    chat.complete()  # the failed request asked again: its entry is replaced in place
    chat.ask("two")
    chat.ask("three")
    _same(live)
    _same(ChatState.from_chat(chat))
