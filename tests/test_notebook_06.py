"""The durable-approvals notebook executes with a real kernel: park, restart, decide elsewhere."""

from __future__ import annotations

from pathlib import Path

import nbclient
import nbformat
import pytest

pytestmark = pytest.mark.notebook
NOTEBOOK = Path(__file__).parent.parent / "notebooks" / "06_durable_approvals.ipynb"


def _text(nb: nbformat.NotebookNode) -> str:
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            out.append(o.get("text", "") or o.get("data", {}).get("text/plain", ""))
    return "\n".join(out)


def test_durable_approvals_notebook_runs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(
        nb,
        timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    ).execute()
    text = _text(nb)
    assert "awaiting_approval" in text
    assert "pending approvals: 1" in text
    assert "decided in another process: approved by ops-script" in text
    assert "refunds issued: [42]" in text
    assert "ops-script" in text.split("refunds issued")[1]  # the log shows who decided
    statuses = [line for line in text.splitlines() if line in ("complete", "awaiting_approval")]
    assert statuses[-1] == "complete"
