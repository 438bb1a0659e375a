"""The concurrency notebook executes with a real kernel and shows the speed-up."""

from __future__ import annotations

import re

import _notebooks
import pytest

pytestmark = pytest.mark.notebook


def test_concurrency_notebook_runs_and_concurrent_modes_are_faster() -> None:
    nb = _notebooks.execute("04_concurrency.ipynb")
    text = _notebooks.text(nb)
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
