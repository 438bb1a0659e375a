"""The log-analysis notebook executes with a real kernel and shows its tables and plots."""

from __future__ import annotations

import re

import _notebooks
import pytest

pytestmark = pytest.mark.notebook


def test_log_analysis_notebook_runs_and_shows_the_analysis() -> None:
    nb = _notebooks.execute("05_log_analysis.ipynb", timeout=180)
    text = _notebooks.text(nb)
    images = _notebooks.mime(nb, "image/png")
    m = re.search(r"(\d+) chats, (\d+) tool calls", text)
    assert m, text
    assert int(m.group(1)) >= 30 and int(m.group(2)) > int(m.group(1))
    for tool in ("get_weather", "convert_currency", "search_docs", "issue_refund"):
        assert tool in text
    # the summary, the approval analysis, the to-do list and the errors
    for expected in (
        "error_rate",
        "denial_rate",
        "p95_ms",
        "pending",
        "over the 500 EUR refund limit",
        "partial refund: capped at 100 EUR",
        "issue_refund requires approval before it runs",
        "no weather station in Atlantis",
        "unknown currency 'XYZ'",
        "datetime64[ns, UTC]",
        "mean_latency_ms",
    ):
        assert expected in text, expected
    # the denial rate: numerator and denominator over the same decided gated calls, and
    # the same number as the summary's denial_rate
    gated, decided, pending = map(
        int, _one(r"(\d+) gated calls: (\d+) decided, (\d+) pending", text)
    )
    pct, denied, decided_again = map(
        int, _one(r"denial rate: (\d+)% \((\d+) denied of (\d+) decided calls\)", text)
    )
    (summary_pct,) = map(int, _one(r"summary's denial_rate \(issue_refund\): (\d+)%", text))
    assert decided_again == decided and gated == decided + pending and pending == 1
    assert 0 < denied < decided and pct == round(100 * denied / decided) == summary_pct
    # timeline and durations render as PNGs (also in a saved notebook)
    assert len(images) == 2
    assert "parquet round-trip: True" in text and "csv round-trip: True" in text


def _one(pattern: str, text: str) -> tuple[str, ...]:
    """The groups of the only match of ``pattern`` in ``text``."""
    found = re.findall(pattern, text)
    assert len(found) == 1, (pattern, found)
    return found[0] if isinstance(found[0], tuple) else (found[0],)
