"""``import nbagent`` cold, against ``import openai`` cold, in the same run.

Target (issue 28, item 6): at most 0.3x. Each import runs in a fresh interpreter
(``python -c``, bytecode already cached, as on a user's second start), the two
interleaved; the time is measured inside the child around the import alone, so the
interpreter's own start-up is left out. Also reported: how many modules each import
loads.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

from benchmarks._common import Result

PROBE = (
    "import sys, time, json; m0 = len(sys.modules); t = time.perf_counter(); import {name}; "
    "print(json.dumps([time.perf_counter() - t, len(sys.modules) - m0]))"
)


def cold(name: str) -> tuple[float, int]:
    """Seconds and new modules of ``import name`` in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(name=name)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    seconds, modules = json.loads(out.strip().splitlines()[-1])
    return float(seconds), int(modules)


def run(quick: bool) -> list[Result]:
    repeat = 5 if quick else 11
    for name in ("nbagent", "openai"):  # warm the bytecode caches, not timed
        cold(name)
    times: dict[str, list[float]] = {"nbagent": [], "openai": []}
    modules: dict[str, int] = {}
    for _ in range(repeat):
        for name in times:
            seconds, modules[name] = cold(name)
            times[name].append(seconds)
    ours, theirs = statistics.median(times["nbagent"]), statistics.median(times["openai"])
    ratio = ours / theirs
    return [
        Result(
            "import nbagent cold / import openai cold",
            ratio,
            "x",
            "<= 0.3x",
            ratio <= 0.3,
            f"{ours * 1000:.0f} ms ({modules['nbagent']} modules) vs "
            f"{theirs * 1000:.0f} ms ({modules['openai']} modules), median of {repeat}",
        )
    ]
