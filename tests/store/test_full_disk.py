"""The promise on a disk that fills up, for real (not a store made to raise).

A worker process (``_full_disk.py``) caps the size of the files it writes
(``RLIMIT_FSIZE``): past the cap the kernel refuses the write and SQLite fails the
statement, rolling back the transaction itself, as on a full disk. For any room left
and any mix of approvals and denials: while writes fail, a denied call never runs, an
approved call runs at most once, a decision that could not be written decides nothing
and says so; once there is room again, every turn finishes, every approved call has run
exactly once, and a fresh connection loads the same chat.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

HERE = Path(__file__).parent


class Worker:
    """One ``_full_disk.py`` process, fed one scenario at a time."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("NBAGENT_")}
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "_full_disk.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def run(self, directory: Path, room: int, verdicts: list[bool]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        scenario = {"dir": str(directory), "room": room, "verdicts": verdicts}
        self.proc.stdin.write(json.dumps(scenario) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the worker died (exit {self.proc.wait()})"
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    w = Worker()
    yield w
    w.close()


def check(out: dict[str, Any], verdicts: list[bool]) -> None:
    assert "crash" not in out, out.get("crash")
    runs = Counter((tool, str(arg)) for tool, arg in out["ran"])
    for order, approved in enumerate(verdicts):
        assert runs[("refund", str(order))] == (1 if approved else 0), (order, out["ran"])
        assert runs[("lookup", f"city {order}")] == 1, (order, out["ran"])
    assert sum(runs.values()) == len(verdicts) + sum(verdicts)  # nothing else ran
    assert out["status"] == "complete" and out["turns"] == len(verdicts)
    for call_id, name, args, status, verdict, _result in out["calls"]:
        if name == "refund":
            approved = verdicts[args["order_id"]]
            assert (status, verdict) == (("ok", "approved") if approved else ("denied", "denied"))
        else:
            assert status == "ok", call_id
    assert out["broken"] == []  # a decision that raised decided nothing
    assert out["same_when_loaded"]  # nothing lost: the file holds what the chat shows
    for text in out["errors"]:
        assert "no transaction is active" not in text  # the real cause, not the rollback's
        assert "disk I/O error" in text or "database or disk is full" in text, text


def test_a_decision_on_a_full_disk_says_nothing_was_decided(worker: Worker, tmp_path: Path) -> None:
    """No room at all: the decision fails and says which call, why, and that it still
    waits; everything goes through once there is room."""
    out = worker.run(tmp_path, 0, [True, False])
    check(out, [True, False])
    assert out["errors"], "the cap did not make any write fail"
    decisions = [
        e for e in out["errors"] if "could not be written" in e and "Nothing is decided" in e
    ]
    claims = [e for e in out["errors"] if "the claim of" in e and "was not run" in e]
    # or the question, written before the model is asked it, failed first: the step after
    # stops there, before any tool runs or the model is asked again
    stops = [e for e in out["errors"] if "could not be written" in e and "stops here" in e]
    assert decisions or claims or stops, out["errors"]
    for text in decisions:
        assert "still awaits approval, here and in the store" in text
        assert "refund(call_" in text


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    room=st.integers(min_value=0, max_value=800_000),
    verdicts=st.lists(st.booleans(), min_size=1, max_size=4),
)
def test_a_disk_that_fills_up_loses_nothing_and_runs_nothing_twice(
    worker: Worker, tmp_path_factory: pytest.TempPathFactory, room: int, verdicts: list[bool]
) -> None:
    out = worker.run(tmp_path_factory.mktemp("full"), room, verdicts)
    check(out, verdicts)
