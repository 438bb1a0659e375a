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


def test_a_bench_that_fails_is_reported_and_the_rest_still_run(tmp_path: Path) -> None:
    # bench_ray once failed to start its fake server (an argument the server had come to
    # need) and the traceback ended `make bench` there: the five modules after it never ran
    import subprocess
    import sys

    package = tmp_path / "benchmarks"
    package.mkdir()
    for name in ("__init__.py", "__main__.py", "_common.py"):
        (package / name).write_text((BENCHMARKS / name).read_text())
    (package / "bench_a.py").write_text("def run(quick=False):\n    raise ValueError('no port')\n")
    (package / "bench_b.py").write_text(
        "from benchmarks._common import Result\n\n"
        "def run(quick=False):\n    return [Result('b ran', 1.0, 'x')]\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "ValueError: no port" in proc.stderr
    assert "b ran" in proc.stdout  # the module after the broken one ran
    assert "1 bench module(s) failed to run: bench_a" in proc.stdout
