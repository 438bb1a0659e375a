"""``make bench`` imports every ``benchmarks/bench_*.py`` module and calls its
``run(quick=...)``: each must have one, or its lines vanish from the report with an error
at the end of a long run (a rewrite of ``bench_saved`` once dropped its ``run``, and with
it the saved-notebook line)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
MODULES = sorted(
    m.name for m in pkgutil.iter_modules([str(BENCHMARKS)]) if m.name.startswith("bench_")
)


def test_the_benchmarks_are_found() -> None:
    assert len(MODULES) >= 10 and "bench_saved" in MODULES and "bench_view" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_each_bench_module_has_the_run_the_report_calls(name: str) -> None:
    module = importlib.import_module(f"benchmarks.{name}")
    run = getattr(module, "run", None)
    assert callable(run), f"benchmarks/{name}.py has no run(quick)"
    assert "quick" in inspect.signature(run).parameters
