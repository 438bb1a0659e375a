"""The batch bench's rule for runs the host disturbed (``benchmarks/bench_batch._quietly``):
a run that lost more than ``STEAL_LIMIT`` of a CPU to other guests is run again, three runs
at most, and the one that lost least is kept; its line says how many were redone."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import bench_batch


def _runs(monkeypatch: pytest.MonkeyPatch, stolen: list[float]) -> list[dict[str, float]]:
    """Client runs of one second each, the host stealing ``stolen[i]`` during run ``i``."""
    clock = [0.0]
    readings = iter(range(2 * len(stolen)))

    def steal_seconds() -> float:
        i = next(readings)
        if i % 2:  # after run i // 2
            clock[0] += stolen[i // 2]
        return clock[0]

    monkeypatch.setattr(bench_batch, "steal_seconds", steal_seconds)
    return [{"wall": 1.0, "run": float(i)} for i in range(len(stolen))]


@pytest.mark.parametrize(
    ("stolen", "kept", "redone"),
    [
        ([0.01], 0, 0),  # quiet: the first run is kept
        ([0.30, 0.02], 1, 1),  # disturbed, then quiet
        ([0.30, 0.10, 0.20], 1, 2),  # disturbed three times: the least disturbed is kept
        ([0.20, 0.30, 0.10], 2, 2),
    ],
)
def test_a_disturbed_run_is_redone_and_the_least_disturbed_kept(
    monkeypatch: pytest.MonkeyPatch, stolen: list[float], kept: int, redone: int
) -> None:
    runs = iter(_runs(monkeypatch, stolen))
    calls: list[Any] = []

    def run() -> dict[str, float]:
        calls.append(1)
        return next(runs)

    got = bench_batch._quietly(run)
    assert len(calls) == len(stolen)  # never a fourth run, never one after a quiet one
    assert got["run"] == kept and got["reruns"] == redone
    assert got["steal"] == pytest.approx(stolen[kept])
