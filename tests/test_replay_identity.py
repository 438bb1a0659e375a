"""What counts as the same request, as docs/replay-and-fork.md says it.

A fork with no change asks its parent's request (so ``replay="auto"`` replays the
parent's answer; ``fork.replay = "off"`` samples again, and that answer is then the
one recorded); the endpoint is not part of a request's identity (two servers of one
model name answer for each other; a folder each and ``replay="off"`` keep them apart).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat
from nbagent._replay import PROCESS
from nbagent.testing import FakeLLMServer, ScriptedProvider, Turn, reply


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    PROCESS.clear()
    yield
    PROCESS.clear()


def test_a_fork_with_no_change_replays_unless_its_replay_is_off() -> None:
    n = itertools.count()
    provider = ScriptedProvider([lambda request: reply(f"sample {next(n)}")], repeat_last=True)
    chat = Chat(provider=provider, display=False, replay="auto")
    chat.ask("tell me a joke")
    same = chat.fork(step=0)
    same.complete()
    assert same.last_assistant_message.content == "sample 0"  # type: ignore[union-attr]
    assert list(same.steps["replayed"]) == [True]
    again = chat.fork(step=0)
    again.replay = "off"
    again.complete()
    assert again.last_assistant_message.content == "sample 1"  # type: ignore[union-attr]
    rerun = Chat(provider=provider, display=False, replay="auto")
    rerun.ask("tell me a joke")  # the last answer to the request is the one replayed
    assert rerun.last_assistant_message.content == "sample 1"  # type: ignore[union-attr]
    assert len(provider.requests) == 2


def _ask(server: FakeLLMServer, **kw: Any) -> Chat:
    chat = Chat(model="llama3.1", base_url=server.openai_base_url, api_key="x", display=False, **kw)
    chat.ask("hello")
    chat.provider.close()  # type: ignore[attr-defined]
    return chat


def test_two_servers_of_one_model_name_answer_for_each_other(tmp_path: Path) -> None:
    with (
        FakeLLMServer(turns=[Turn(text="from A"), Turn(text="from A")]) as a,
        FakeLLMServer(turns=[Turn(text="from B")]) as b,
    ):
        _ask(a, replay="auto")
        mixed = _ask(b, replay="auto")
        assert mixed.last_assistant_message.content == "from A"  # type: ignore[union-attr]
        assert b.requests == []
        PROCESS.clear()
        # kept apart: a folder each, the second asked with replay="off"
        _ask(a, replay="auto", recordings=tmp_path / "a")
        own = _ask(b, replay="off", recordings=tmp_path / "b")
        assert own.last_assistant_message.content == "from B"  # type: ignore[union-attr]
        first = _ask(a, replay="auto", recordings=tmp_path / "a")
        assert first.last_assistant_message.content == "from A"  # type: ignore[union-attr]
        assert list(first.steps["replayed"]) == [True]
        PROCESS.clear()  # a fresh kernel: each folder replays its own server's answer
        second = _ask(b, replay="auto", recordings=tmp_path / "b")
        assert second.last_assistant_message.content == "from B"  # type: ignore[union-attr]
        assert list(second.steps["replayed"]) == [True]
