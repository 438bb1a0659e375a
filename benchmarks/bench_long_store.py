"""A long chat with a store: does a round cost the same at round 1,000 as at round 10?

One chat driven to round 990 of 1,000 tool rounds against an in-process model (so the
CPU measured is nbagent's and SQLite's alone), with a SQLite store; then its last 10
rounds, each followed by a round of a young chat (rounds 5-15, a store of its own), in
the same process: the client CPU of a round (a model request and its tool round, two
``chat.step()``) at round 1,000 against round 10, three times. The same without a store
for comparison. Target (issue 28): <= 1.5x.

The two are measured in turns, not one after the other: on this machine the CPU a round
costs drifts by up to 1.8x over the seconds a 1,000-round chat takes (windows of the
same run measured 0.70 and 1.29 ms a round at rounds 300 and 500, with nothing growing),
so a late window against an early one was mostly the drift.
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import nbagent
from benchmarks._common import Result
from benchmarks.bench_store import add
from nbagent import Chat, LLMToolResponse, ModelRequest, ToolCall
from nbagent.store import SQLiteStore


class _Counting:
    """In-process model: ``rounds`` tool rounds, then an answer; O(1) a request (it counts
    its own requests instead of reading the history, so only nbagent's cost can grow)."""

    name = "loop"
    model = "loop"

    def __init__(self, rounds: int):
        self.rounds = rounds
        self.n = 0

    def complete(self, request: ModelRequest) -> LLMToolResponse:
        n, self.n = self.n, self.n + 1
        if n >= self.rounds:
            return LLMToolResponse(text=f"done after {n} calls", model="loop", provider="loop")
        return LLMToolResponse(
            text="",
            tool_calls=(ToolCall(f"call_{n}", "add", {"a": n, "b": 1}),),
            stop_reason="tool_use",
            model="loop",
            provider="loop",
            input_tokens=10,
            output_tokens=5,
        )

    async def complete_async(self, request: ModelRequest) -> LLMToolResponse:
        return self.complete(request)


def _chat(rounds: int, store: Any, steps: int) -> Chat:
    """A chat of ``rounds`` tool rounds, driven ``steps`` steps in."""
    chat = Chat(provider=_Counting(rounds), store=store, max_steps=3 * rounds).with_tools(add)
    chat.ask_later("add a lot")
    for _ in range(steps):
        chat.step()
    return chat


def _round(chat: Chat) -> float:
    """The CPU of one round: the model asks for a call, the call runs."""
    t0 = time.process_time()
    kinds = (chat.step().kind, chat.step().kind)
    spent = time.process_time() - t0
    assert kinds == ("generated", "ran_tools"), kinds
    return spent


def _late_and_early(rounds: int, make: Any) -> tuple[list[float], list[float]]:
    """CPU a round of an old chat's last 10 rounds and of a young chat's rounds 5-15,
    measured in turns."""
    old_store, young_store = make("old"), make("young")
    old = _chat(rounds, old_store, 2 * (rounds - 10))
    young = _chat(rounds, young_store, 2 * 5)
    late, early = [], []
    for _ in range(10):
        late.append(_round(old))
        early.append(_round(young))
    for chat in (old, young):
        chat.close()
    for store in (old_store, young_store):
        if store is not None:
            store.close()
    return late, early


def run(quick: bool = False) -> list[Result]:
    nbagent.configure(quiet=True, display=False)
    rounds = 300 if quick else 1000
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        made = itertools.count()
        for label, make in (
            ("SQLite", lambda name: SQLiteStore(Path(tmp) / f"{name}{next(made)}.db")),
            ("no store", lambda name: None),
        ):
            pairs = [_late_and_early(rounds, make) for _ in range(1 if quick else 3)]
            late = statistics.median(statistics.mean(p[0]) for p in pairs)
            early = statistics.median(statistics.mean(p[1]) for p in pairs)
            ratio = late / early
            out.append(
                Result(
                    f"{rounds}-round chat, {label}: CPU per round at {rounds} / at 10",
                    ratio,
                    "x",
                    "<= 1.5x" if label == "SQLite" else "",
                    ratio <= 1.5 if label == "SQLite" else None,
                    f"{early * 1e3:.2f} ms -> {late * 1e3:.2f} ms a round (measured in turns)",
                )
            )
    return out
