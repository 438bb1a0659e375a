"""Pending inputs: what a round trip through a person costs, against an approval's.

One scripted response asks for ``CALLS`` calls; each parks, is settled from code and the
chat completes. Measured, interleaved in the same run:

- baseline: a gated tool's calls approved (``chat.approve``) and run;
- an external tool's calls answered (``chat.answer(call, result)``): the result given
  instead of run;
- ``ask_user`` questions with choices answered (the answer checked against its schema);
- the same external round trip with a SQLite store (events written, the call rows
  settled), against the approval round trip with the same store.

Target: answering an input costs at most 1.5x approving a call, in memory and with a
store (both park, record one event per settlement and finish the call once).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from benchmarks._common import Result, interleaved
from nbagent import Chat, ModelRequest, SQLiteStore, ask_user, configure, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

CALLS = 20


@tool(requires_approval=True)
def gated(n: int) -> str:
    """A gated tool (the baseline)."""
    return f"ran {n}"


@tool(external=True)
def outside(n: int) -> str:
    """Done by a person."""


def _provider(name: str, calls: int) -> ScriptedProvider:
    def answer(request: ModelRequest) -> Any:
        if any(getattr(m, "role", "") == "tool" for m in request.messages):
            return reply("done")
        if name == "ask_user":
            return call_tools(
                *[("ask_user", {"question": f"q{n}?", "choices": ["a", "b"]}) for n in range(calls)]
            )
        return call_tools(*[(name, {"n": n}) for n in range(calls)])

    return ScriptedProvider([answer], repeat_last=True)


def _round(name: str, calls: int, store: Path | None = None) -> None:
    chat = Chat(provider=_provider(name, calls), stream=False, store=store and SQLiteStore(store))
    chat.with_tools(gated, outside, ask_user).with_tool_options(calls="many")
    chat.ask("go")
    if name == "gated":
        for c in chat.pending_approvals:
            chat.approve(c)
    else:
        for p in chat.pending_inputs:
            chat.answer(p, "a")
    chat.complete()
    assert chat.status == "complete", chat.status
    chat.close()


def run(quick: bool) -> list[Result]:
    configure(quiet=True, display=False)
    calls = 10 if quick else CALLS
    repeat = 3 if quick else 7
    with tempfile.TemporaryDirectory() as tmp:
        counter = iter(range(10**6))

        def stored(name: str) -> None:
            _round(name, calls, Path(tmp) / f"{name}-{next(counter)}.db")

        times = interleaved(
            {
                "approve": lambda: _round("gated", calls),
                "answer": lambda: _round("outside", calls),
                "ask_user": lambda: _round("ask_user", calls),
                "approve_store": lambda: stored("gated"),
                "answer_store": lambda: stored("outside"),
            },
            repeat,
        )

    def ratio(name: str, base: str, label: str) -> Result:
        value = times[name][0] / times[base][0]
        detail = f"{base} {times[base][0] * 1000:.1f} ms for {calls} calls"
        return Result(label, value, "x", "<= 1.5x approving", value <= 1.5, detail)

    return [
        ratio("answer", "approve", "external results answered vs calls approved"),
        ratio("ask_user", "approve", "ask_user answered vs calls approved"),
        ratio("answer_store", "approve_store", "answered vs approved, with a SQLite store"),
    ]
