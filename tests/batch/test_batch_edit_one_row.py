"""Editing one row of a stored batch: what reruns.

The default batch id follows every key and prompt, so an edited prompt with ``name=`` left out
is a new batch whose every row runs again, tools included (a refund approved and run is asked
for again). The ``PromptChanged`` error used to recommend exactly that ("leave name= out");
it now says so, and says how to rerun one row alone: keep ``name=`` and give the edited row a
new key, which this test follows.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import nbagent
from nbagent import Chat, tool
from nbagent.store import SQLiteStore

RUNS: list[int] = []
PROMPT = "{ask} order {order_id}"


@tool(requires_approval=True)
def issue_refund(order_id: int) -> str:
    """Refund an order.

    Args:
        order_id: The order number.
    """
    RUNS.append(order_id)
    return f"refunded order {order_id}"


@tool
def order_status(order_id: int) -> str:
    """Look up an order's status.

    Args:
        order_id: The order number.
    """
    return "delivered"


def _make() -> Chat:
    return Chat("demo").with_tools(order_status, issue_refund)


def _refunded(db: Path, **named: str) -> tuple[pd.DataFrame, SQLiteStore]:
    """A batch whose row 1's refund was approved and ran."""
    RUNS.clear()
    tickets = pd.DataFrame({"order_id": [41, 42], "ask": ["Check the status of", "Refund"]})
    nbagent.batch(tickets, _make, prompt=PROMPT, store=db, progress=False, **named)
    store = SQLiteStore(db)
    for call in store.pending_approvals():
        store.approve(call)
    nbagent.batch(tickets, _make, prompt=PROMPT, store=db, progress=False, **named)
    assert RUNS == [42]
    return tickets, store


def test_the_prompt_changed_error_says_what_reruns(tmp_path: Path) -> None:
    tickets, store = _refunded(tmp_path / "b.db", name="tickets")
    edited = tickets.copy()
    edited.loc[0, "ask"] = "Please check the status of"
    again = nbagent.batch(
        edited, _make, prompt=PROMPT, store=tmp_path / "b.db", name="tickets", progress=False
    )
    assert again.loc[0, "error_type"] == "PromptChanged"
    error = again.loc[0, "error"]
    assert "give it a new key" in error and "under the same name=" in error
    assert "is a new batch, whose every row runs again, tools included" in error
    assert "leave name= out" not in error  # the old advice: it reruns every row
    store.close()


def test_a_new_key_under_the_same_name_runs_only_the_edited_row(tmp_path: Path) -> None:
    tickets, store = _refunded(tmp_path / "b.db", name="tickets")
    before = nbagent.batch(
        tickets, _make, prompt=PROMPT, store=tmp_path / "b.db", name="tickets", progress=False
    )
    edited = tickets.copy()
    edited.loc[0, "ask"] = "Please check the status of"
    edited = edited.rename(index={0: "0-v2"})
    again = nbagent.batch(
        edited, _make, prompt=PROMPT, store=tmp_path / "b.db", name="tickets", progress=False
    )
    assert again["status"].tolist() == ["done", "done"]
    assert again.loc["0-v2", "chat_id"] != before.loc[0, "chat_id"]  # the edited row ran
    assert again.loc[1, "chat_id"] == before.loc[1, "chat_id"]  # the other came from the store
    assert RUNS == [42] and store.pending_approvals() == []  # no refund asked for again
    store.close()


def test_an_edit_with_name_left_out_is_a_new_batch_that_reruns_every_row(tmp_path: Path) -> None:
    tickets, store = _refunded(tmp_path / "b.db")
    edited = tickets.copy()
    edited.loc[0, "ask"] = "Please check the status of"
    again = nbagent.batch(edited, _make, prompt=PROMPT, store=tmp_path / "b.db", progress=False)
    assert again["status"].tolist() == ["done", "awaiting_approval"]  # the refund is asked again
    assert [c.name for c in store.pending_approvals()] == ["issue_refund"]
    store.close()
