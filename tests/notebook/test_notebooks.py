"""Level 2: the example notebooks execute with a real kernel (nbclient).

Nobody clicks here, so the notebooks decide in code; the assertions look at
what a saved notebook keeps: each live view's static fallbacks (updated
through its display id to the final state) and the widget state nbclient
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
    """(cell index, data) of every displayed chat view."""
    found = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_MIME in data and "nba-chat" in data.get("text/html", ""):
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
    first = cell_index(nb, 'reply = chat.ask("What\'s the weather in Paris and in Tokyo?")')
    data = next(d for i, d in shown if i == first)
    # Every view carries the three static forms, updated to the turn's final state.
    assert {"text/html", "text/markdown", "text/plain"} <= set(data)
    plain = data["text/plain"]
    assert "You: What's the weather in Paris and in Tokyo?" in plain
    assert plain.count("tool get_weather(") == 2
    assert "Here is what I found" in plain and "-- complete" in plain
    assert "nba-st-ok" in data["text/html"] and "get_weather" in data["text/markdown"]
    # Step-by-step driving (chat.step()) is flushed after the cell too.
    stepped = cell_index(nb, "chat.ask_later(")
    data = next(d for i, d in shown if i == stepped)
    assert "order 1234 shipped yesterday" in data["text/plain"]
    # display(chat): the whole conversation, every turn.
    whole = next(d for i, d in shown if i == cell_index(nb, "display(chat)"))
    assert whole["text/plain"].count("You: ") >= 5
    # The widgets themselves were saved with the notebook.
    models = widget_states(nb)
    assert any("Here is what I found" in m.get("value", "") for m in models)
    assert "Here is what I found" in transcript(nb)


def test_approvals_notebook_decides_in_code_and_cards_follow() -> None:
    nb = execute("03_approvals.ipynb")
    shown = dict(views(nb))
    desk = shown[cell_index(nb, "desk = Chat(")]
    plain = desk["text/plain"]
    assert "tool issue_refund" in plain and "approved by you" in plain
    assert "tool delete_file" in plain and "denied by you: keep the logs" in plain
    assert "was not run" in plain and "-- complete" in plain
    waiter_cell = cell_index(nb, "await waiter.ask_async(")
    printed = "".join(o.get("text", "") for o in nb.cells[waiter_cell].outputs)
    # Unattended (no front end draws the card): the wait gives up and parks...
    assert "after the wait: awaiting_approval" in printed
    # ...and the decision made in a later cell reaches the earlier cell's view.
    assert "approved by you with edited arguments" in shown[waiter_cell]["text/plain"]
    last = nb.cells[cell_index(nb, "for call in desk.pending_approvals:")]
    text = "".join(o.get("text", "") for o in last.outputs)
    assert "complete complete" in text and "100" in text and "101" in text
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
    for card in cards:
        json.loads(card["arguments"])
        if card["tool"] != "quick_refund":  # the notebook leaves that one pending on purpose
            assert card["state"] in ("approved", "denied"), card
    assert by_tool["quick_refund"] == {"approved", "pending"}  # resolver-approved, then parked
