"""Shared helpers for benchmarks: results, interleaved timing, CPU time."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass


@dataclass
class Result:
    """One measurement.

    Attributes:
        name: What was measured.
        value: The number.
        unit: Its unit (``ms``, ``s``, ``x`` for ratios, ``us``, ``KiB``...).
        target: Human-readable target (e.g. ``"<= 1.0x raw SDK"``).
        target_met: Whether the target was met (``None`` when there is none).
        detail: Anything else worth printing (baseline values, CPU time...).
    """

    name: str
    value: float
    unit: str
    target: str = ""
    target_met: bool | None = None
    detail: str = ""

    def line(self) -> str:
        mark = {True: "ok  ", False: "MISS", None: "    "}[self.target_met]
        tgt = f"  target {self.target}" if self.target else ""
        det = f"  ({self.detail})" if self.detail else ""
        return f" {mark} {self.name:<58} {self.value:>10.3f} {self.unit:<4}{tgt}{det}"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def timeit(fn: Callable[[], object], repeat: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of ``repeat`` calls of ``fn``."""
    wall, cpu = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return wall, cpu


def interleaved(
    fns: dict[str, Callable[[], object]], repeat: int, warmup: int = 2
) -> dict[str, tuple[float, float]]:
    """Run the functions round-robin; return ``{name: (median wall s, median cpu s)}``."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    walls: dict[str, list[float]] = {k: [] for k in fns}
    cpus: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            w, c = timeit(fn, 1)
            walls[name] += w
            cpus[name] += c
    return {k: (statistics.median(walls[k]), statistics.median(cpus[k])) for k in fns}


def steal_seconds() -> float:
    """CPU seconds the hypervisor has given other guests so far, all CPUs together (the
    ``steal`` column of ``/proc/stat``; 0 where there is none to read). A virtual machine's
    run during which it is high measures its neighbours, not the code."""
    import os

    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0
