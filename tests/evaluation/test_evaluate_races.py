"""Two processes resuming one stored evaluation at once: each approved refund runs once,
and a case the other process drives is reported as driven elsewhere, not as a failure.

Real processes (a store's claim is per process), repeated: the race is the subject.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

WORKER = Path(__file__).with_name("resume_worker.py")


ROOT = Path(__file__).resolve().parents[2]  # this checkout's nbagent, not an installed one


def _run(*args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env,
    )  # fmt: skip


def _rows(proc: subprocess.Popen[str]) -> list[dict[str, Any]]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_two_processes_resuming_one_evaluation_report_no_false_failures(tmp_path: Path) -> None:
    seen: Counter[str] = Counter()
    for round_ in range(3):
        db, runs = str(tmp_path / f"e{round_}.db"), tmp_path / f"runs{round_}"
        runs.touch()
        _rows(_run(db, "none", str(runs)))  # every case parks, its refund waiting
        a, b = _run(db, "approve", str(runs)), _run(db, "approve", str(runs))
        for rows in (_rows(a), _rows(b)):
            for row in rows:
                seen[row["status"]] += 1
                assert row["status"] in ("done", "driven_elsewhere"), row
                if row["status"] == "done":
                    assert row["passed"] is True, row
                else:  # not judged here: the other process scores it
                    assert row["passed"] is None and row["error"] is None, row
                    assert row["detail"].startswith("not judged here: another process"), row
        orders = [line.split()[1] for line in runs.read_text().splitlines()]
        assert sorted(orders) == [str(i) for i in range(6)]  # each refund ran once
        final = _rows(_run(db, "none", str(runs)))
        assert [r["passed"] for r in final] == [True] * 6
    assert seen["done"] >= 6 * 3
    assert seen["driven_elsewhere"] > 0  # the two did overlap (else this proved nothing)
