"""The multimodal notebook executes with a real kernel, offline on the demo model: a figure
sent with a question, a tool returning a plot (a thumbnail in its card), a structured answer
used as data, a Thinking section, the cost per turn, and a token budget that parks the chat
until ``complete(max_total_tokens=...)`` resumes it."""

from __future__ import annotations

import re

import _notebooks
import pytest
from nbformat import NotebookNode

pytestmark = pytest.mark.notebook


def _cell(nb: NotebookNode, needle: str) -> NotebookNode:
    """The code cell whose source contains ``needle`` (exactly one)."""
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and needle in c.source]
    return cell


def _html(cell: NotebookNode) -> str:
    return "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)


def _text(cell: NotebookNode) -> str:
    return "".join(
        o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell.outputs
    )


def test_multimodal_notebook_runs_offline() -> None:
    nb = _notebooks.execute("08_multimodal.ipynb", timeout=180)

    # a figure with the question: shown in the cell, sent as a PNG, described by the demo model
    asked = _cell(nb, "images=[fig])\nprint(reply.content)")
    assert any("image/png" in o.get("data", {}) for o in asked.outputs)
    assert re.search(r"I see a \d+x\d+ PNG image, mostly white", _text(asked))
    assert '<img class="nba-thumb"' in _html(asked)  # the question's image in the view

    # a tool returning a plot: the model got it as an image; the card shows its thumbnail
    tool = _cell(nb, 'chat.ask("Plot the sales for region North")')
    card = re.search(r'<details class="[^"]*nba-call[^"]*".*?</details>', _html(tool), re.S)
    assert card is not None and "plot_region" in card.group(0)
    assert '<img class="nba-thumb" src="data:image/png;base64,' in card.group(0)
    assert "I see a 444x257 PNG image" in _text(tool)
    result = _cell(nb, "call.result.parts[0].data")
    assert "plot_region {'region': 'North'} ok" in _text(result)
    assert "North: 12 months, total 1800\n[image 1: image/png" in _text(result)
    assert any("image/png" in o.get("data", {}) for o in result.outputs)

    # a structured answer, validated, used as data
    review = _cell(nb, "output=SalesReview")
    text = _text(review)
    assert re.search(r"SalesReview outlier suspected: (True|False)", text)
    (table,) = [o for o in review.outputs if o.output_type == "execute_result"]
    frame = table.data["text/plain"].splitlines()
    assert frame[0].split() == ["region", "trend", "peak_month"]
    rows = [line.split() for line in frame[1:]]
    assert rows and all(r[-2] in {"up", "down", "flat"} and 1 <= int(r[-1]) <= 12 for r in rows)
    assert "SalesReview" in _html(review)  # the view's table of the object

    # thinking: a folded Thinking section saying what the demo decided, escaped
    thinking = _html(_cell(nb, 'thinking.ask("Plot the sales for region West")'))
    assert '<details class="nba-entry nba-thinking"><summary>Thinking</summary>' in thinking
    assert "I will call plot_region(region=&#x27;West&#x27;)" in thinking
    said = _text(_cell(nb, "for r in getattr(message"))
    assert "AssistantToolCallMessage: Reading the request:" in said
    assert "ChatMessage: 1 tool result(s) came back (plot_region ok)" in said

    # the cost and the tokens per turn, thinking tokens apart
    cost = _text(_cell(nb, 'groupby("turn")'))
    assert "cost so far: $ 0.0" in cost
    turn = re.search(r"^1\s+(\d+)\s+(\d+)\s+(\d+)\s+0\.0$", cost, re.M)
    assert turn is not None and 0 < int(turn.group(3)) < int(turn.group(2))

    # a token budget parks the chat after the request that asked for the plot; complete resumes
    parked = _cell(nb, "max_total_tokens=20")
    assert "status: budget_exhausted | exhausted: tokens\ntokens spent: 26" in _text(parked)
    assert "nba-budget" in _html(parked)
    resumed = _text(_cell(nb, "budget.complete(max_total_tokens=5_000)"))
    assert "status: complete | tokens spent: 97" in resumed
    assert "plot_region(region=South): South: 12 months, total 1242 I see a" in resumed
