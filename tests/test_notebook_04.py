"""The concurrency notebook executes with a real kernel and shows the speed-up."""

from __future__ import annotations

import re
from pathlib import Path

import nbclient
import nbformat
import pytest

pytestmark = pytest.mark.notebook
NOTEBOOK = Path(__file__).parent.parent / "notebooks" / "04_concurrency.ipynb"


def _text(nb: nbformat.NotebookNode) -> str:
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            out.append(o.get("text", "") or o.get("data", {}).get("text/plain", ""))
    return "\n".join(out)


def test_concurrency_notebook_runs_and_concurrent_modes_are_faster() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    ).execute()
    text = _text(nb)
    timings = {
        (m.group(1), m.group(2)): float(m.group(4))
        for m in re.finditer(r"(\S+) (fetch_page\S*)\s+(\d+) calls in ([\d.]+) s", text)
    }
    assert len(timings) == 6, text
    for fn in ("fetch_page", "fetch_page_async"):
        assert timings[("False", fn)] > 1.2  # 8 x 200 ms, one at a time
        assert timings[("threads", fn)] < timings[("False", fn)] / 3
        assert timings[("async", fn)] < timings[("False", fn)] / 3
    assert "timed_out" in text and "answer to fast one" in text
