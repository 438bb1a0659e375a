"""Record and replay: what recording costs a live chat, and what a replayed rerun costs.

Every model request is fingerprinted and recorded (``nbagent/_replay.py``),
whatever the replay mode. Baseline in the same run (interleaved): the same chat
with the provider called directly (the recording wrapper bypassed). A chat of
``ROUNDS`` tool rounds (a call and an answer each) against the in-process
scripted provider, so the numbers are nbagent's own overhead, not a model's.
The replayed rerun (``replay="only"``, a new chat each time) is compared with
the same baseline: it should cost about what a live run with an instant model
costs, i.e. a rerun is as cheap as nbagent itself. The scripted model answers
in microseconds, so the ratios are an upper bound: against any real model the
recording's tens of microseconds per request disappear.
"""

from __future__ import annotations

from typing import Any

from benchmarks._common import Result, interleaved
from nbagent import Chat, tool
from nbagent._loop import LoopMixin
from nbagent._replay import PROCESS
from nbagent.testing import ScriptedProvider, call_tools, reply

ROUNDS = 60


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return f"{city}: 21 C, light wind from the west, " + "details " * 40


def _script() -> list[Any]:
    script: list[Any] = []
    for n in range(ROUNDS):
        script += [call_tools(("lookup", {"city": f"City {n}"})), reply(f"City {n} is mild.")]
    return script


def _run(replay: str = "off") -> Chat:
    chat = Chat(provider=ScriptedProvider(_script()), display=False, replay=replay)
    chat.with_tools(lookup)
    for n in range(ROUNDS):
        chat.ask(f"Weather in City {n}?")
    return chat


def run(quick: bool) -> list[Result]:
    repeat = 3 if quick else 7
    original = LoopMixin._model

    def unrecorded() -> None:
        LoopMixin._model = lambda self, effect: self.provider  # type: ignore[method-assign]
        try:
            _run()
        finally:
            LoopMixin._model = original  # type: ignore[method-assign]

    def recorded() -> None:
        PROCESS.clear()
        _run()

    # round robin: each "replayed" run answers from the "recorded" run just before it
    times = interleaved(
        {"baseline": unrecorded, "recorded": recorded, "replayed": lambda: _run("only")},
        repeat=repeat,
    )
    # CPU time: wall time on a shared machine mostly measures the neighbours
    base, rec, rep = (times[k][1] for k in ("baseline", "recorded", "replayed"))
    return [
        Result(
            f"live chat of {ROUNDS} tool rounds, recording every request",
            rec / base,
            "x",
            "<= 1.6x unrecorded, instant model (cpu)",
            rec / base <= 1.6,
            f"baseline cpu {base * 1000:.0f} ms; "
            f"{(rec - base) / (2 * ROUNDS) * 1e6:.0f} us per request",
        ),
        Result(
            f"replayed rerun of it (replay='only', new chat, {2 * ROUNDS} requests)",
            rep / base,
            "x",
            "<= 1.6x a live run with an instant model (cpu)",
            rep / base <= 1.6,
            f"cpu {rep * 1000:.0f} ms",
        ),
    ]
