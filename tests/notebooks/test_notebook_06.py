"""The durable-approvals notebook executes with a real kernel: park, restart, decide elsewhere."""

from __future__ import annotations

import _notebooks
import pytest

pytestmark = pytest.mark.notebook


def test_durable_approvals_notebook_runs() -> None:
    nb = _notebooks.execute("06_durable_approvals.ipynb", timeout=180)
    text = _notebooks.text(nb)
    assert "awaiting_approval" in text
    assert "pending approvals: 1" in text
    assert "decided in another process: approved by ops-script" in text
    assert "refunds issued: [42]" in text
    assert "ops-script" in text.split("refunds issued")[1]  # the log shows who decided
    statuses = [line for line in text.splitlines() if line in ("complete", "awaiting_approval")]
    assert statuses[-1] == "complete"
