"""``import nbagent`` cold, against ``import openai`` cold, in the same run.

Target (issue 28, item 6): at most 0.3x. Each import runs in a fresh interpreter
(``python -c``, bytecode already cached, as on a user's second start), the two
interleaved; the time is measured inside the child around the import alone, so the
interpreter's own start-up is left out. Also reported: how many modules each import
loads.

The warm-up writes the bytecode even where ``PYTHONDONTWRITEBYTECODE`` is set (as on
the machines this runs on): without it, nbagent from a source checkout was compiled
on every import (about half its import time) while ``openai``, installed with its
bytecode, was not. A package installed with pip has its bytecode, as after this warm-up.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from benchmarks._common import Result

PROBE = (
    "import sys, time, json; m0 = len(sys.modules); t = time.perf_counter(); import {name}; "
    "print(json.dumps([time.perf_counter() - t, len(sys.modules) - m0]))"
)


CACHED = (
    "import importlib.util, os, {name}; "
    "print(os.path.exists(importlib.util.cache_from_source({name}.__file__)))"
)


def cold(name: str, env: dict[str, str] | None = None) -> tuple[float, int]:
    """Seconds and new modules of ``import name`` in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(name=name)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    seconds, modules = json.loads(out.strip().splitlines()[-1])
    return float(seconds), int(modules)


def run(quick: bool) -> list[Result]:
    repeat = 5 if quick else 11
    writing = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for name in ("nbagent", "openai"):  # warm the bytecode caches, not timed
        cold(name, writing)
    cached = subprocess.run(
        [sys.executable, "-c", CACHED.format(name="nbagent")], capture_output=True, text=True
    ).stdout.strip()
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
            f"{theirs * 1000:.0f} ms ({modules['openai']} modules), median of {repeat}"
            + ("" if cached == "True" else "; nbagent's bytecode could not be cached"),
        )
    ]
