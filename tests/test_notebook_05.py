"""The log-analysis notebook executes with a real kernel and shows its tables and plots."""

from __future__ import annotations

import re
from pathlib import Path

import nbclient
import nbformat
import pytest

pytestmark = pytest.mark.notebook
NOTEBOOK = Path(__file__).parent.parent / "notebooks" / "05_log_analysis.ipynb"


def _outputs(nb: nbformat.NotebookNode) -> tuple[str, list[str]]:
    text, images = [], []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            text.append(o.get("text", "") or data.get("text/plain", ""))
            if "image/png" in data:
                images.append(data["image/png"])
    return "\n".join(text), images


def test_log_analysis_notebook_runs_and_shows_the_analysis() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(
        nb,
        timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    ).execute()
    text, images = _outputs(nb)
    m = re.search(r"(\d+) chats, (\d+) tool calls", text)
    assert m, text
    assert int(m.group(1)) >= 30 and int(m.group(2)) > int(m.group(1))
    for tool in ("get_weather", "convert_currency", "search_docs", "issue_refund"):
        assert tool in text
    # the summary, the approval analysis, the to-do list and the errors
    for expected in ("error_rate", "denial_rate", "p95_ms", "pending",
                     "over the 500 EUR refund limit", "partial refund: capped at 100 EUR",
                     "issue_refund requires approval before it runs",
                     "no weather station in Atlantis", "unknown currency 'XYZ'",
                     "datetime64[ns, UTC]", "mean_latency_ms"):
        assert expected in text, expected
    assert re.search(r"denial rate: \d+% of \d+ gated calls", text)
    # timeline and durations render as PNGs (also in a saved notebook)
    assert len(images) == 2
    assert "parquet round-trip: True" in text and "csv round-trip: True" in text
