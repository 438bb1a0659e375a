"""The evaluation notebook (issue 27) executes with a real kernel, offline on the demo model:
50 cases scored with built-in and custom checks, a false claim caught (check and view), a
decision sweep, two configurations compared, a rule suggested from a store's decisions
and accepted, and the evaluation exported as OpenTelemetry spans."""

from __future__ import annotations

import _notebooks
import pytest

pytestmark = pytest.mark.notebook


def _cell_text(nb: object, needle: str) -> str:
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and needle in c.source]  # type: ignore[attr-defined]
    return "\n".join(
        o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell.outputs
    )


def test_the_evaluation_notebook_runs_offline() -> None:
    nb = _notebooks.execute("12_evaluate.ipynb", timeout=600)
    card = _cell_text(nb, "card = nbagent.evaluate(")
    assert "50 case(s) × 6 check(s)" in card
    assert "right_tool" in card and "claims hold" in card and "judged:" in card
    lies = _cell_text(nb, "lies = nbagent.evaluate(")
    assert "says 'refunded' but issue_refund was denied" in lies
    view = _cell_text(nb, "chat  # the view")
    assert "This answer claims what did not happen" in view
    branches = _cell_text(nb, "branches = sweep(")
    for branch in ("approve issue_refund", "deny issue_refund", "edit issue_refund 1"):
        assert branch in branches
    changed = _cell_text(nb, 'versus[versus.changed].groupby("check")')
    assert "called issue_refund" in changed
    rules = _cell_text(nb, "rules = nbagent.suggest_policies(store)")
    assert "[0] <always allow issue_refund when amount <= 55: support 6" in rules
    accepted = _cell_text(nb, "rules[0].accept(")
    assert "Allowed by rule: tool issue_refund, amount <= 55" in accepted
    assert _notebooks.mime(nb, "image/png"), "the scorecard's plot is shown"
    traces = _cell_text(nb, "nbagent.instrument(tracer_provider)")
    for operation in ("invoke_agent", "chat", "execute_tool"):  # GenAI spans, counted
        assert operation in traces, traces
