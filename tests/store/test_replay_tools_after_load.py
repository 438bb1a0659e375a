"""``replay_tools=True`` holds for a chat loaded from a store, as for the chat object.

A replayed step's call gets the result its recording's run gave (the tool does not
run again). The key of each step's request lived only in the chat object: once the
chat was loaded again (a kernel restart while it waited for an approval), its calls
found no recorded result and the side-effecting tool ran again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from nbagent import Chat, tool
from nbagent._replay import PROCESS
from nbagent.testing import ScriptedProvider, call_tools, reply


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    PROCESS.clear()
    yield
    PROCESS.clear()


RUNS: Counter[int] = Counter()


@tool(requires_approval=True)
def refund(order_id: int) -> str:
    """Issue a refund."""
    RUNS[order_id] += 1
    return f"refunded {order_id} (run {RUNS[order_id]})"


def _provider() -> ScriptedProvider:
    def answer(request: Any) -> Any:
        if len(request.messages) == 1:
            return call_tools(("refund", {"order_id": 1}, "c1"))
        return reply("done")

    return ScriptedProvider([answer], repeat_last=True)


def _kw(db: str) -> dict[str, Any]:
    return {"store": db, "replay": "auto", "replay_tools": True, "display": False}


def _recorded(db: str) -> Chat:
    RUNS.clear()
    first = Chat(provider=_provider(), **_kw(db)).with_tools(refund)
    first.ask("go")
    first.approve("c1")
    first.complete()
    assert RUNS[1] == 1
    return first


def _load(chat_id: str, db: str) -> Chat:
    PROCESS.clear()  # a new kernel: only the store remembers
    return Chat.load(chat_id, provider=_provider(), tools=[refund], **_kw(db))


def test_a_loaded_chat_replays_its_calls_results(backend: Any) -> None:
    db = backend.url
    _recorded(db)
    PROCESS.clear()
    rerun = Chat(provider=_provider(), **_kw(db)).with_tools(refund)
    rerun.ask("go")  # replayed: the refund waits for its approval
    assert rerun.replayed_steps == {1}
    loaded = _load(rerun.id, db)
    assert loaded.replayed_steps == {1}
    loaded.approve("c1")
    loaded.complete()
    assert RUNS[1] == 1  # it ran again once the chat was loaded
    assert loaded.get_call("c1").result.content == "refunded 1 (run 1)"  # type: ignore[union-attr]


def test_a_loaded_fork_replays_the_results_of_its_shared_steps(backend: Any) -> None:
    db = backend.url
    _recorded(db)
    PROCESS.clear()
    rerun = Chat(provider=_provider(), **_kw(db)).with_tools(refund)
    rerun.ask("go")
    fork = rerun.fork(step=1)  # shares the replayed step; no request of its own for it
    loaded = _load(fork.id, db)
    loaded.approve("c1")
    loaded.complete()
    assert RUNS[1] == 1
    assert loaded.get_call("c1").result.content == "refunded 1 (run 1)"  # type: ignore[union-attr]
