"""A long chat with a store: does a round cost the same at round 1,000 as at round 10?

One chat, 1,000 tool rounds against an in-process model (so the CPU measured is
nbagent's and SQLite's alone), with a SQLite store: the client CPU of each round
(from one model request to the next), rounds 5-15 against rounds 990-1,000, and
the same chat without a store for comparison. Target (issue 28): <= 1.5x.
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
from nbagent import Chat, LLMToolResponse, ModelRequest, ModelRequestStarted, ToolCall
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


def _per_round(rounds: int, store: Any) -> list[float]:
    marks: list[float] = []
    chat = Chat(provider=_Counting(rounds), store=store, max_steps=3 * rounds)
    chat.with_tools(add).on(ModelRequestStarted, lambda e: marks.append(time.process_time()))
    chat.ask("add a lot")
    assert chat.status == "complete" and len(chat.tool_calls) == rounds
    chat.close()
    return [b - a for a, b in itertools.pairwise(marks)]


def run(quick: bool = False) -> list[Result]:
    nbagent.configure(quiet=True, display=False)
    rounds = 300 if quick else 1000
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, make in (
            ("SQLite", lambda i: SQLiteStore(Path(tmp) / f"long{i}.db")),
            ("no store", lambda i: None),
        ):
            samples = []
            for i in range(1 if quick else 3):
                store = make(i)
                samples.append(_per_round(rounds, store))
                if store is not None:
                    store.close()
            early = statistics.median(statistics.mean(s[5:15]) for s in samples)
            late = statistics.median(statistics.mean(s[-10:]) for s in samples)
            ratio = late / early
            out.append(
                Result(
                    f"{rounds}-round chat, {label}: CPU per round at {rounds} / at 10",
                    ratio,
                    "x",
                    "<= 1.5x" if label == "SQLite" else "",
                    ratio <= 1.5 if label == "SQLite" else None,
                    f"{early * 1e3:.2f} ms -> {late * 1e3:.2f} ms a round",
                )
            )
    return out
