"""The replay-and-fork notebook (issue 18, item 5) executes with a real kernel, offline on the
demo model: run, rerun for free, fork at the denied call and approve it instead (the refund runs
once, in the fork only), a fork with another tool result, the runs compared side by side with
their differences as a DataFrame, a fork from a step, a stored fork loaded back with its parent,
and the fork exported as a pytest file that passes.

The notebook runs twice in a folder of its own, each time in a fresh kernel: the second run
answers every model request from the recordings the first one left there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import _notebooks
import nbclient
import nbformat
import pytest
from nbformat import NotebookNode

pytestmark = pytest.mark.notebook

NAME = "10_replay_and_fork.ipynb"


def _execute(where: Path) -> NotebookNode:
    nb = nbformat.read(where / NAME, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(where)}}
    ).execute()
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error", "\n".join(out.get("traceback", []))
    return nb


def _cell(nb: NotebookNode, needle: str) -> NotebookNode:
    """The code cell whose source contains ``needle`` (exactly one)."""
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and needle in c.source]
    return cell


def _text(cell: NotebookNode) -> str:
    return "".join(
        o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell.outputs
    )


def _html(cell: NotebookNode) -> str:
    return "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)


def test_replay_and_fork_notebook_runs_offline_and_reruns_for_free(tmp_path: Path) -> None:
    shutil.copy(_notebooks.NOTEBOOKS / NAME, tmp_path / NAME)
    nb = _execute(tmp_path)

    denied = _text(_cell(nb, "chat.deny(refund"))
    assert "complete | refunds issued: []" in denied
    assert "replayed" not in _html(_cell(nb, 'chat = Chat(model="demo")'))  # asked the model

    rerun = _text(_cell(nb, "rerun = Chat("))
    assert "replayed: [True, True] | cost now: 0.0" in rerun
    assert "same answer: True" in rerun

    fork_cell = _cell(nb, 'what_if = chat.fork(refund, decision="approved")')
    assert "refunded order 42" in _html(fork_cell)  # the fork's first drive shows its turn
    forked = _text(fork_cell)
    assert "change='decision', value='approved')" in forked
    assert "complete | refunds issued: [42]" in forked  # ran once, in the fork
    assert "original: complete ['auto', 'denied'] | fork: ['auto', 'approved']" in forked

    transit = _text(_cell(nb, "in_transit = chat.fork(lookup"))
    assert "status in transit" in transit and "was denied" in transit

    compared = _cell(nb, 'diff = nbagent.compare(chat, what_if, names=["denied", "approved"])')
    html = _html(compared)
    assert 'class="nba-chat nba-cmp"' in html and "nba-cmp-diff" in html
    assert "approved by user" in html and "denied by user: the customer" in html
    (table,) = [o for o in compared.outputs if o.output_type == "execute_result"]
    frame = table.data["text/plain"]
    assert "call 2 decision" in frame and "call 2 result" in frame and "text" in frame
    three = _text(_cell(nb, "three = nbagent.compare("))
    assert "in transit" in three and "call 1 result" in three and "call 2 decision" in three

    again = _text(_cell(nb, 'again = chat.fork(step=1, system="Be brief.")'))
    assert "step=1, call_id=None, change='system', value='Be brief.')" in again
    assert "[('find_order', 'requested'), ('issue_refund', 'awaiting_approval')]" in again

    loaded = _text(_cell(nb, "loaded = Chat.load(fork_id"))
    assert "True decision ready" in loaded
    assert "complete | refunds issued: [42, 7]" in loaded

    exported = _text(_cell(nb, "test_file = to_pytest(what_if"))
    assert "exported/test_refund_approved.py" in exported
    assert "replay_turns(chat, TURNS, DECISIONS)" in exported
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBAGENT_")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "exported"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the exported test passes
    assert "1 passed" in proc.stdout

    # the whole notebook again, in a fresh kernel: every model request answered from recordings
    second = _execute(tmp_path)
    assert "replayed" in _html(_cell(second, 'chat = Chat(model="demo")'))
    assert "replayed: [True, True] | cost now: 0.0" in _text(_cell(second, "rerun = Chat("))
    assert "complete | refunds issued: []" in _text(_cell(second, "chat.deny(refund"))
    assert "1 of 2 tool call(s) succeeded" in _text(_cell(second, "chat.deny(refund"))
