"""Forks and comparisons: what branching a long chat costs, against running it again.

A chat of ``ROUNDS`` tool rounds (two calls each, a scripted model that answers at
once) is built once. Measured, interleaved in the same run:

- baseline: running the same conversation again from the prompt (what a user
  would do without forks), with the same scripted model and tools;
- ``fork(step=N)`` at the middle and at the end of the history (the history cut,
  folded, restored and re-emitted into the fork's log), and a fork at the last call;
- ``nbagent.compare`` of the chat and a fork (records, alignment, differences
  DataFrame) and its HTML rendering.

Targets: a fork of the whole history costs at most as much as running it again
(it replays events, it never runs a tool or asks the model); comparing two such
runs at most 2x running one.
"""

from __future__ import annotations

from typing import Any

from benchmarks._common import Result, interleaved
from nbagent import Chat, ModelRequest, configure, tool
from nbagent.comparison import Comparison
from nbagent.comparison._runs import differences, run_of
from nbagent.testing import ScriptedProvider, call_tools, reply

ROUNDS = 100


@tool
def lookup(n: int) -> str:
    """Look something up."""
    return f"value {n}"


def _provider(rounds: int) -> ScriptedProvider:
    def answer(request: ModelRequest) -> Any:
        k = sum(1 for m in request.messages if getattr(m, "role", "") == "assistant")
        if k < rounds:
            return call_tools(("lookup", {"n": 2 * k}), ("lookup", {"n": 2 * k + 1}))
        return reply("done")

    return ScriptedProvider([answer], repeat_last=True)


def _run(rounds: int) -> Chat:
    chat = Chat(provider=_provider(rounds), stream=False, max_steps=4 * rounds + 4)
    chat.with_tools(lookup).ask("go")
    return chat


def run(quick: bool) -> list[Result]:
    configure(quiet=True, display=False)
    rounds = 40 if quick else ROUNDS
    repeat = 3 if quick else 7
    chat = _run(rounds)
    assert chat.status == "complete"
    middle = int(chat.steps["step"].iloc[rounds // 2])
    last_call = chat.tool_calls[-1]
    fork = chat.fork(last_call, result="changed")
    fork.complete()
    runs = [run_of(chat, "a"), run_of(fork, "b")]
    times = interleaved(
        {
            "rerun": lambda: _run(rounds),
            "fork_middle": lambda: chat.fork(step=middle),
            "fork_end": lambda: chat.fork(),
            "fork_call": lambda: chat.fork(last_call, result="changed"),
            "compare": lambda: differences([run_of(chat, "a"), run_of(fork, "b")]),
            "html": lambda: Comparison(runs)._repr_mimebundle_(),
        },
        repeat,
    )
    base = times["rerun"][0]
    n_events = len(chat.events)
    detail = f"rerun {base * 1000:.1f} ms, {rounds} rounds, {n_events} events"

    def ratio(name: str, label: str, target: float | None) -> Result:
        value = times[name][0] / base
        return Result(
            label,
            value,
            "x",
            f"<= {target:.1f}x rerun" if target is not None else "",
            None if target is None else value <= target,
            detail,
        )

    return [
        ratio("fork_middle", "fork(step=middle) vs running the chat again", 1.0),
        ratio("fork_end", "fork() of the whole history vs running it again", 1.0),
        ratio("fork_call", "fork(last call, result=...) vs running it again", 1.0),
        ratio("compare", "compare(chat, fork) differences vs running one", 2.0),
        ratio("html", "compare's HTML of the two runs vs running one", 2.0),
    ]
