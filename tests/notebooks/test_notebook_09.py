"""The batch notebook executes with a real kernel, offline on the demo model: 50 tickets run
as a batch whose refund rows park on a gated tool, one inbox decides them (five approved, five
denied), the batch continues them by itself, the results join the input, every call is in the
log and a plot, a rerun with the store reruns nothing, and the same batch runs on a local Ray."""

from __future__ import annotations

import _notebooks
import pytest
from nbformat import NotebookNode

pytestmark = pytest.mark.notebook

WIDGET = "application/vnd.jupyter.widget-view+json"


def _cell(nb: NotebookNode, needle: str) -> NotebookNode:
    """The code cell whose source contains ``needle`` (exactly one)."""
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and needle in c.source]
    return cell


def _text(cell: NotebookNode) -> str:
    return "".join(
        o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell.outputs
    )


def test_batch_notebook_runs_offline_and_on_ray() -> None:
    nb = _notebooks.execute("09_batch.ipynb", timeout=300)

    # the batch: 40 status checks done, 10 refunds parked; the bar says how they go on (no
    # separate notice, which would still say "10 await" once they are decided)
    ran = _text(_cell(nb, "result = nbagent.batch("))
    assert "done                 40" in ran and "awaiting_approval    10" in ran
    assert "row(s) await approval" not in ran

    # the inbox: a widget in JupyterLab, a table of the 10 refunds elsewhere
    shown = _cell(nb, "inbox = nbagent.inbox(result)")
    assert any(WIDGET in o.get("data", {}) for o in shown.outputs)
    assert "Approvals inbox: 10 pending" in _text(shown)

    # the preview covers exactly the five refunds below 1030; then 5 approved, 5 denied
    preview = _text(_cell(nb, "inbox.preview(small)"))
    for order in (1005, 1010, 1015, 1020, 1025):
        assert f"{{'order_id': {order}}}" in preview
    assert "1030" not in preview
    assert "{'approved': 5} {'denied': 5}" in _text(_cell(nb, "approved = inbox.approve("))

    # the batch continued them by itself: every row done, each approved refund ran once
    final = _text(_cell(nb, "final = nbagent.batch_results(result, wait=60)"))
    assert "{'done': 50}" in final
    assert "refunded: [1005, 1010, 1015, 1020, 1025]" in final

    # every call of every chat, and a plot of them
    calls = _text(_cell(nb, "calls = nbagent.read_log(final)"))
    lines = [line.split() for line in calls.splitlines()]
    assert ["issue_refund", "5", "5"] in lines and ["order_status", "0", "40"] in lines
    plot = _cell(nb, "plot.barh(")
    assert any("image/png" in o.get("data", {}) for o in plot.outputs)

    # resumable: the same chats come back from the store, no refund issued twice
    again = _text(_cell(nb, "again = nbagent.batch("))
    assert "True {'done': 50}" in again and "refunds issued: 5" in again

    # on Ray: the refunds park, are approved through the inbox, and every row finishes
    on_ray = _text(_cell(nb, 'backend="ray"'))
    assert "{'done': 40, 'awaiting_approval': 10}" in on_ray
    assert "{'done': 50}" in on_ray
    assert "status checks answered as in the local run: True" in on_ray
