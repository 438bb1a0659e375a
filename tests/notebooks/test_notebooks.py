"""Level 2: the example notebooks execute with a real kernel (nbclient).

Nobody clicks here, so the notebooks decide in code; the assertions look at
what a saved notebook keeps: each settled view as static HTML with no widget
reference (updated through its display id), the widget and its static twin
for a view still waiting for a decision, the hand-over between the cell that
parked a turn and the cell that continued it, and the widget state nbclient
stores (``store_widget_state=True``), including the approval cards' states.
"""

from __future__ import annotations

import json
from typing import Any

import _notebooks
import nbformat
import pytest

from nbagent.demo import transcript

pytestmark = pytest.mark.notebook

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
STATE_MIME = "application/vnd.jupyter.widget-state+json"


def execute(name: str) -> nbformat.NotebookNode:
    return _notebooks.execute(name, store_widget_state=True)


def views(nb: nbformat.NotebookNode) -> list[tuple[int, dict[str, Any]]]:
    """(cell index, data) of every displayed chat view, as saved: static, or live and waiting.

    A waiting view is two outputs, its widget and its twin (the static
    transcript); they are merged here, so ``data`` has the widget mime and the
    twin's static forms.
    """
    found: list[tuple[int, dict[str, Any]]] = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            data = dict(out.get("data", {}))
            html = data.get("text/html", "")
            if WIDGET_MIME in data:
                found.append((i, data))
            elif "nba-twin-idle" in html:
                continue  # the twin of a view that needs none
            elif "nba-twin-" in html and found and found[-1][0] == i:
                found[-1][1].update({k: v for k, v in data.items() if k != WIDGET_MIME})
            elif "nba-chat" in data.get("text/html", ""):
                found.append((i, data))
    return found


def cell_index(nb: nbformat.NotebookNode, needle: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and needle in c.source)


def widget_states(nb: nbformat.NotebookNode) -> list[dict[str, Any]]:
    state = nb.metadata["widgets"][STATE_MIME]["state"]
    return [m["state"] for m in state.values()]


def test_quickstart_shows_each_turn_live() -> None:
    nb = execute("01_quickstart.ipynb")
    shown = views(nb)
    # The first code cell: a gated refund, its card waiting for a click (Run All ends so).
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    assert "requires_approval = True" in nb.cells[first].source
    (data,) = [d for i, d in shown if i == first]
    assert WIDGET_MIME in data
    plain = data["text/plain"]
    assert "tool get_weather(" in plain and "tool issue_refund(" in plain
    assert "-- awaiting approval" in plain
    cards = [
        m
        for m in widget_states(nb)
        if m.get("_model_name") == "AnyModel" and m.get("kind") == "approval"
    ]
    assert [(c["tool"], c["state"]) for c in cards] == [("issue_refund", "pending")]
    # The only view left waiting is that one: every other turn settled into static HTML.
    assert [i for i, d in shown if WIDGET_MIME in d] == [first]
    ungated = cell_index(nb, 'reply = weather.ask("What\'s the weather in Paris and in Tokyo?")')
    data = next(d for i, d in shown if i == ungated)
    assert {"text/html", "text/markdown", "text/plain"} <= set(data)
    assert data["text/plain"].count("tool get_weather(") == 2
    assert "-- complete" in data["text/plain"] and "nba-st-ok" in data["text/html"]
    # Step-by-step driving (chat.step()) is flushed after the cell too.
    stepped = cell_index(nb, "weather.ask_later(")
    assert "city Tokyo, temperature 24" in next(d for i, d in shown if i == stepped)["text/plain"]
    # No answer is printed again under its live view, and no result is a repr with a
    # literal "\n" in it.
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        for _, d in (v for v in shown if v[0] == i):
            answers = [ln for ln in d["text/plain"].splitlines() if ln.startswith("Assistant: ")]
            for answer in answers:
                assert answer.removeprefix("Assistant: ") not in printed, (i, answer)
        for out in cell.outputs:
            if out.output_type == "execute_result":
                assert "\\n" not in out.data.get("text/plain", ""), (i, out.data)
    # The last cell shows chat.log: both calls, the refund still awaiting its decision.
    last = nb.cells[-1]
    assert last.source.strip() == "chat.log"
    (table,) = [o for o in last.outputs if o.output_type == "execute_result"]
    assert 'class="dataframe' in table.data["text/html"]
    assert (
        "get_weather" in table.data["text/plain"]
        and "awaiting_approval" in table.data["text/plain"]
    )
    # make demo prints the waiting turn once (not its static twin for a reopened notebook).
    assert transcript(nb).count("You: What's the weather in Paris? Then refund order 42") == 1


def test_approvals_notebook_decides_in_code_and_cards_follow() -> None:
    nb = execute("03_approvals.ipynb")
    shown = dict(views(nb))
    # A turn parked in one cell and continued in another: each cell shows its part.
    parked = cell_index(nb, 'chat.ask("Refund order 42")')
    continued = cell_index(nb, "chat.approve(call)")
    count = nb.cells[continued].execution_count
    plain = shown[parked]["text/plain"]
    assert "You: Refund order 42" in plain and "approved, decided in code" in plain
    assert f"-- continued in cell [{count}]" in plain and "refunded" not in plain
    assert WIDGET_MIME not in shown[parked]
    plain = shown[continued]["text/plain"]
    parked_count = nb.cells[parked].execution_count
    assert plain.startswith(f"continues turn 1 from cell [{parked_count}]")
    assert "You: Refund order 42" not in plain  # not shown twice
    assert "refunded 20.00 EUR on order 42" in plain and "-- complete" in plain
    # Still waiting at the end: the widget stays, with a twin saying how to decide later.
    rules = shown[cell_index(nb, 'rules.ask("quick refund order 6 amount 300")')]
    assert WIDGET_MIME in rules
    assert "quick_refund" in rules["text/plain"] and "-- awaiting approval" in rules["text/plain"]
    assert "kernel session that has ended" in rules["text/plain"]
    assert "had no store" in rules["text/plain"]  # this chat has none: no false promise
    # U9 (issue 25): the button cells are left to the reader, never decided by a later cell;
    # their views stay live (a widget), and so does the one whose card offers "Stop always
    # allowing" while that rule holds (the docs: the offer stands after the turn is over);
    # every other view settled: static.
    desk_cell, waiter_cell = (
        cell_index(nb, "desk = Chat("),
        cell_index(nb, "await waiter.ask_async("),
    )
    allowed_cell = cell_index(nb, "chat.always_allow(IssueRefund")
    assert [i for i, d in views(nb) if WIDGET_MIME in d] == sorted(
        [allowed_cell, cell_index(nb, "rules = Chat("), desk_cell, waiter_cell]
    )
    assert "always allowed" in shown[allowed_cell]["text/plain"]
    plain = shown[desk_cell]["text/plain"]
    assert "tool issue_refund" in plain and "tool delete_file" in plain
    assert "-- awaiting approval" in plain and "decided in code" not in plain
    assert not any(
        "desk.approve" in c.source or "desk.deny" in c.source or "waiter.approve" in c.source
        for c in nb.cells
        if c.cell_type == "code"
    )
    # Run All is never held for minutes by the wait for a click (issue 25 U9: it was 120 s).
    assert "approval_wait=30" in nb.cells[waiter_cell].source
    printed = "".join(o.get("text", "") for o in nb.cells[waiter_cell].outputs)
    # Unattended (no front end draws the card): the wait gives up and parks.
    assert "after the wait: awaiting_approval" in printed
    # A decision made in a cell says so on its card (not "by you": nobody clicked).
    edited = shown[cell_index(nb, "chat.approve(pending, arguments=")]["text/plain"]
    assert "approved, decided in code with edited arguments" in edited
    every = "".join(d["text/plain"] for _, d in views(nb))
    assert "approved by you" not in every and "denied by you" not in every
    # The approval cards were saved with their final state.
    cards = [
        m
        for m in widget_states(nb)
        if m.get("_model_name") == "AnyModel" and m.get("kind") == "approval"
    ]
    by_tool: dict[str, set[str]] = {}
    for card in cards:
        by_tool.setdefault(card["tool"], set()).add(card["state"])
    assert "approved" in by_tool["issue_refund"] and "denied" in by_tool["delete_file"]
    assert "pending" in by_tool["issue_refund"] and "pending" in by_tool["delete_file"]
    for card in cards:
        json.loads(card["arguments"])
        # the notebook leaves quick_refund's and the button section's cards pending on purpose
        assert card["state"] in ("approved", "denied", "pending"), card
    assert by_tool["quick_refund"] == {"approved", "pending"}  # resolver-approved, then parked
