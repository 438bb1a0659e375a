"""The replay-and-fork notebook executes with a real kernel, offline on the demo model: a call
denied, a fork approving it (the refund runs once, in the fork only), a fork with another tool
result, the runs compared side by side (HTML) with their differences as a DataFrame, a fork
from a step, and a stored fork loaded back with its parent.

The record/replay and to_pytest cells are wt-replay's (marked in the notebook)."""

from __future__ import annotations

import _notebooks
import pytest
from nbformat import NotebookNode

pytestmark = pytest.mark.notebook


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


def test_replay_and_fork_notebook_runs_offline() -> None:
    nb = _notebooks.execute("10_replay_and_fork.ipynb", timeout=180)

    denied = _text(_cell(nb, "chat.deny(refund"))
    assert "complete | refunds issued: []" in denied

    fork_cell = _cell(nb, 'what_if = chat.fork(refund, decision="approved")')
    assert "refunded order 42" in _html(fork_cell)  # the fork's first drive shows its turn
    forked = _text(fork_cell)
    assert "change='decision', value='approved')" in forked
    assert "complete | refunds issued: [42]" in forked  # ran once, in the fork
    assert "original: complete ['auto', 'denied'] | fork: ['auto', 'approved']" in forked

    transit = _text(_cell(nb, "in_transit = chat.fork(lookup"))
    assert "status in transit" in transit and "was denied" in transit

    compared = _cell(nb, "diff = nbagent.compare(")
    html = _html(compared)
    assert 'class="nba-chat nba-cmp"' in html and "nba-cmp-diff" in html
    assert "approved by user" in html and "denied by user: the customer" in html
    (table,) = [o for o in compared.outputs if o.output_type == "execute_result"]
    frame = table.data["text/plain"]
    assert "call 2 decision" in frame and "call 1 result" in frame and "text" in frame

    again = _text(_cell(nb, 'again = chat.fork(step=1, system="Be brief.")'))
    assert "step=1, call_id=None, change='system', value='Be brief.')" in again
    assert "[('find_order', 'requested'), ('issue_refund', 'awaiting_approval')]" in again

    loaded = _text(_cell(nb, "loaded = Chat.load(fork_id"))
    assert "True decision ready" in loaded
    assert "complete | refunds issued: [42, 7]" in loaded
