"""A cost budget counts what replayed requests cost when they were recorded (so a replayed
run stops where the recorded one did), and so does a fork of a replayed run and the same
chat loaded from a store: that recorded cost was the chat object's private counter, so a
fork of the replayed run, or ``Chat.load`` of it, paid for three more requests under the
budget that had stopped it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, tool
from nbagent._replay import PROCESS
from nbagent.testing import ScriptedProvider, call_tools, reply

BUDGET = 0.0015  # gpt-4.1-mini: each request below costs $0.00056


@tool
def lookup(order_id: int) -> str:
    """Look an order up.

    Args:
        order_id: The order.
    """
    return f"order {order_id}: shoes"


def _script() -> list[Any]:
    rounds = [call_tools(("lookup", {"order_id": n})) for n in range(6)]
    return [
        dataclasses.replace(r, model="gpt-4.1-mini", input_tokens=1000, output_tokens=100)
        for r in [*rounds, reply("done")]
    ]


class Counting(ScriptedProvider):
    """The scripted model, priced, counting the requests it is paid for."""

    def __init__(self) -> None:
        super().__init__(_script(), model="gpt-4.1-mini")


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    PROCESS.clear()
    yield
    PROCESS.clear()


def test_forks_and_loads_of_a_replayed_run_count_its_recorded_cost(tmp_path: Path) -> None:
    recordings = str(tmp_path / "recordings")
    live = Chat(
        provider=Counting(), replay="auto", recordings=recordings, max_cost_usd=BUDGET
    ).with_tools(lookup)
    live.ask("go")
    assert live.status == "budget_exhausted"
    steps = len(live.steps)
    PROCESS.clear()

    db = str(tmp_path / "chats.db")
    replayer = Counting()
    rerun = Chat(
        provider=replayer,
        replay="auto",
        recordings=recordings,
        store=db,
        max_cost_usd=BUDGET,
    ).with_tools(lookup)
    rerun.ask("go")
    assert rerun.status == "budget_exhausted" and len(rerun.steps) == steps
    assert rerun.steps["replayed"].tolist() == [True] * steps and replayer.requests == []
    assert rerun.record.replayed_cost_usd == pytest.approx(live.cost_usd)

    paid_by_forks = []
    for parent in (live, rerun):  # a fork from the last step asks it again, live or replayed
        fork = parent.fork(step=steps)
        fork.replay = "off"
        paid = Counting()
        fork.provider = paid
        fork.complete()
        assert fork.status == "budget_exhausted"
        paid_by_forks.append(len(paid.requests))
    assert paid_by_forks == [1, 1]  # the replayed run's fork paid for 3: it forgot the rest

    paid = Counting()
    back = Chat.load(rerun.id, store=db, provider=paid, tools=[lookup], replay="off")
    assert back.record.replayed_cost_usd == pytest.approx(live.cost_usd)
    back.complete()
    assert back.status == "budget_exhausted" and paid.requests == []
