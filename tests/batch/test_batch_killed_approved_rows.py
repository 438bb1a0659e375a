"""Approved calls of a batch continued four rows at once, the process killed with SIGKILL
while the first calls run (a sync tool taking 1.5 s), then the batch rerun: every approved
call ran exactly once. A call the store says is in doubt is one whose tool had begun; one
that had not begun is run by the rerun.

Before, a row's sync tool ran on the batch's event loop: the rows' claims committed
together (PostgreSQL groups them), then the first row's tool held the loop while the
others' calls, recorded running, could not start; killed then, they were in doubt and never
ran (1 to 3 rows of 6 in a probe's runs). A blocking tool also held up every other row.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from _batch_setup import first_user_text

import nbagent
from nbagent import Chat, tool
from nbagent._aio import run_sync
from nbagent.providers import OpenAIProvider
from nbagent.store import open_store
from nbagent.testing import FakeLLMServer, FakeToolCall, RecordedRequest, Turn

WORKER = Path(__file__).with_name("_batch_approved_worker.py")
ITEMS = [f"g{i}" for i in range(6)]


def _env(dsn: str | None, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **extra}
    if dsn:
        env["NBAGENT_ROWS_DSN"] = dsn
    return env


def _run(tmp: Path, dsn: str | None) -> pd.DataFrame:
    done = subprocess.run(
        [sys.executable, str(WORKER), str(tmp)],
        env=_env(dsn),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return pd.read_json(tmp / "result.json", dtype={"key": str})


def _lines(tmp: Path) -> list[str]:
    path = tmp / "ran.txt"
    return path.read_text().splitlines() if path.exists() else []


def _started(tmp: Path) -> Counter[str]:
    return Counter(line.split()[1] for line in _lines(tmp) if line.startswith("start "))


@tool(requires_approval=True)
def refund(item: str) -> str:
    """Refund an item (the worker's, run here only to park its rows: never called).

    Args:
        item: The item.
    """
    raise AssertionError("parking runs no call")


def _park(location: str) -> None:
    """The batch's first run, here: every row parks on its refund (the worker's chats)."""

    def handler(request: RecordedRequest) -> Turn:
        item = first_user_text(request).rsplit(" ", 1)[-1]
        return Turn(tool_calls=[FakeToolCall("refund", {"item": item})])

    with FakeLLMServer(handler=handler, strict=True) as server:
        provider = OpenAIProvider(
            "gpt-4.1-mini", base_url=server.openai_base_url, api_key="sk-test-0000000000"
        )
        try:
            parked = nbagent.batch(
                [{"key": item} for item in ITEMS],
                lambda: Chat(provider=provider).with_tools(refund),
                prompt="Refund {key}",
                key="key",
                store=location,
                name="approved",
                progress=False,
                wait_for_decisions=False,
            )
        finally:
            run_sync(provider.aclose())
    assert list(parked["status"]) == ["awaiting_approval"] * 6, parked[["status", "error"]]


@pytest.mark.parametrize(
    ("kind", "attempt"),
    [("sqlite", 0), ("sqlite", 1), ("postgres", 0), ("postgres", 1), ("postgres", 2)],
)
def test_a_batch_killed_while_approved_calls_run_runs_each_once_on_rerun(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str, attempt: int
) -> None:
    dsn = request.getfixturevalue("postgres_dsn") if kind == "postgres" else None
    location = dsn or str(tmp_path / "b.db")
    _park(location)
    with open_store(location) as store:  # another process decides (an inbox elsewhere)
        pending = store.pending_approvals()
        assert len(pending) == 6
        for call in pending:
            store.approve(call, by="test")

    child = subprocess.Popen(
        [sys.executable, str(WORKER), str(tmp_path)],
        env=_env(dsn, NBAGENT_REFUND_SECONDS="1.5"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not _started(tmp_path):
            assert child.poll() is None, child.stderr.read() if child.stderr else ""
            assert time.monotonic() < deadline, "no approved call started"
            time.sleep(0.01)
        time.sleep(0.5)  # the first call is a third of the way through
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        if child.stderr:
            child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    at_kill = _started(tmp_path)
    assert not any(line.startswith("end ") for line in _lines(tmp_path))

    result = _run(tmp_path, dsn)
    assert list(result["status"]) == ["done"] * 6, result[["status", "error"]]
    started = _started(tmp_path)
    # every approved call ran exactly once: those the kill caught (in doubt, not run again)
    # and those it came before (run by the rerun)
    assert started == Counter(ITEMS), _lines(tmp_path)
    with open_store(location) as store:
        statuses: dict[str, str] = {}
        for key, chat_id in store.batch_chats("approved").items():
            calls = store.calls(chat_id)
            assert len(calls) == 1, (key, calls)
            statuses[calls[0].arguments["item"]] = calls[0].status
    in_doubt = {item for item, status in statuses.items() if status == "in_doubt"}
    assert in_doubt == set(at_kill), (statuses, _lines(tmp_path))
    assert {statuses[item] for item in set(ITEMS) - in_doubt} == {"ok"}
    # the four rows at once ran their calls at once: a blocking tool held up no other row
    assert len(at_kill) == 4, _lines(tmp_path)
