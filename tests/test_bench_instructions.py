"""``python -m benchmarks.instructions``: the count it reads from callgrind, and the one line
it says when valgrind is not there (the project does not install it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import instructions

ROOT = Path(__file__).resolve().parents[1]


def test_it_reads_the_count_callgrind_reports() -> None:
    report = (
        "==15552== Events    : Ir\n"
        "==15552== Collected : 6,119,257,799\n"
        "==15552==\n"
        "==15552== I   refs:      6,119,257,799\n"
    )
    assert instructions.collected(report) == 6_119_257_799
    assert instructions.collected("==1== Collected : 42\n") == 42
    with pytest.raises(RuntimeError, match="no count"):
        instructions.collected("==1== valgrind: failed to start tool 'callgrind'\n")


def test_without_valgrind_it_says_so_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # nothing to run there
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.instructions", "anthropic"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        "valgrind is not installed (apt-get install valgrind)"
    ]
    assert out.stdout == ""
