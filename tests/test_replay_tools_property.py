"""``chat.replay_tools`` is a property, as ``chat.replay`` is.

``chat.replay_tools = True`` made an attribute nothing read: the chat's replay of tool
results stayed as constructed, and a side-effecting tool of a replayed step ran again.
Assigned now, it is checked as ``Chat(replay_tools=...)`` is and holds from the next
round the chat runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import nbagent
from nbagent import Chat, tool
from nbagent._replay import PROCESS
from nbagent.testing import ScriptedProvider, call_tools, reply

RUNS: Counter[int] = Counter()


@tool
def refund(order_id: int) -> str:
    """Issue a refund (a side effect).

    Args:
        order_id: The order.
    """
    RUNS[order_id] += 1
    return f"refunded {order_id}"


def _answer(request: Any) -> Any:
    if len(request.messages) == 1:
        return call_tools(("refund", {"order_id": 1}, "c1"))
    return reply("done: " + str(request.messages[-1].content)[-20:])


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    PROCESS.clear()
    RUNS.clear()
    yield
    PROCESS.clear()


def _chat(**kw: Any) -> Chat:
    provider = ScriptedProvider([_answer], repeat_last=True)
    return Chat(provider=provider, display=False, replay="auto", **kw).with_tools(refund)


@pytest.mark.parametrize("value", [True, ["refund"], "refund"])
def test_assigned_replay_tools_replays_the_recorded_result(value: Any) -> None:
    _chat().ask("refund order 1")
    assert RUNS[1] == 1
    again = _chat()
    again.replay = "only"
    again.replay_tools = value
    again.ask("refund order 1")
    assert RUNS[1] == 1  # the recorded result, not a second refund
    assert again.log["replayed"].tolist() == [True]
    assert again.last_assistant_message.content == "done: refunded 1"  # type: ignore[union-attr]


def test_assigned_false_runs_the_tool_again() -> None:
    _chat().ask("refund order 1")
    again = _chat(replay_tools=True)
    again.replay_tools = False
    again.ask("refund order 1")
    assert RUNS[1] == 2
    assert again.log["replayed"].tolist() == [False]


def test_it_holds_from_the_next_round() -> None:
    """Set between two turns, the first turn's run stays and the second is replayed."""
    _chat().ask("refund order 1")
    chat = _chat()
    chat.ask("refund order 1")
    assert RUNS[1] == 2
    chat.replay_tools = True
    fork = chat.fork(step=1)  # the model step again: its call answered from the recording
    fork.complete()
    assert RUNS[1] == 2
    assert fork.replay_tools is True
    assert fork.log["replayed"].tolist() == [True]


def test_reads_what_holds_and_checks_what_is_assigned() -> None:
    chat = _chat()
    assert chat.replay_tools is False  # nbagent.configure's default
    nbagent.configure(replay_tools=["refund"])
    assert chat.replay_tools == frozenset({"refund"})
    chat.replay_tools = ("refund", "lookup")
    assert chat.replay_tools == frozenset({"refund", "lookup"})
    chat.replay_tools = False
    assert chat.replay_tools is False  # its own, over the configuration's
    for bad in (1, None, [3], object()):
        with pytest.raises(ValueError, match="replay_tools must be"):
            chat.replay_tools = bad
    assert chat.replay_tools is False
    assert "replay_tools" not in vars(chat)
