"""A row's chat that raises what is not an ``Exception`` (a tool raising
``KeyboardInterrupt``), and the batch's own lines about it.

A ``KeyboardInterrupt`` escaping a row's task ended the event loop running it: in a
notebook (``batch()`` runs on nbagent's background loop) the batch never returned, nor did
any later call on that loop; in a script the batch raised it, left the row's task's
exception unretrieved ("Task exception was never retrieved" at exit), and the next batch
said "0 row(s) await approval". Off the main thread no Ctrl-C can raise it, so there it is
the row's failure; on the main thread it is the stop button (Python cannot tell one a tool
raised from Ctrl-C), raised by the batch once its rows stopped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat
from nbagent.testing import ScriptedProvider, reply

WORKER = Path(__file__).with_name("_batch_fault_worker.py")


def _worker(tmp: Path, mode: str) -> tuple[list[dict[str, Any]], str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(WORKER), str(tmp), mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()], done.stderr


@pytest.mark.parametrize("mode", ["background", "thread"])
def test_a_tool_raising_keyboard_interrupt_off_the_main_thread_fails_only_its_row(
    tmp_path: Path, mode: str
) -> None:
    """``batch()`` in a notebook (its loop on nbagent's background thread) or from a thread:
    the row whose tool raised fails with ``error_type`` ``KeyboardInterrupt``, the others
    finish, and the next batch on the same loop runs (it hung for ever: the loop was dead)."""
    (first, second), stderr = _worker(tmp_path, mode)
    assert first["statuses"] == ["failed", "done", "done"], first
    assert first["error_types"] == ["KeyboardInterrupt", None, None], first
    assert "not the stop button" in first["errors"][0]
    assert second["statuses"] == ["done"] * 3, second  # the rerun continues the row's chat
    assert "never retrieved" not in stderr and "Exception in thread" not in stderr, stderr
    assert "await approval" not in stderr, stderr


def test_a_keyboard_interrupt_on_the_main_thread_stops_the_batch_cleanly(tmp_path: Path) -> None:
    """In a script the batch's loop runs on the main thread, where Ctrl-C lands: it is the
    stop button, raised by the batch. Nothing is left behind: no "Task exception was never
    retrieved" at exit, and the next batch finishes every row without saying "0 row(s)
    await approval"."""
    (first, second), stderr = _worker(tmp_path, "main")
    assert first == {"batch": 1, "raised": "KeyboardInterrupt"}
    assert second["statuses"] == ["done"] * 3, second
    assert "never retrieved" not in stderr, stderr
    assert "await approval" not in stderr, stderr


def test_no_awaiting_approval_notice_without_a_parked_row(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = nbagent.batch(
        ["a"], lambda: Chat(provider=ScriptedProvider([reply("ok")])), progress=False
    )
    assert list(result["status"]) == ["done"]
    assert "await approval" not in capsys.readouterr().err
