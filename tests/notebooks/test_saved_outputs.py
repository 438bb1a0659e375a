"""Notebooks 01, 03 and 11 are committed with their outputs (GitHub shows the cards before any
install), and those outputs are current: each is run again here and its outputs compared,
scrubbed of what changes every run (times, durations, made-up ids). `make notebooks`
refreshes them; the other notebooks are committed without outputs."""

from __future__ import annotations

import os
import re
from pathlib import Path

import _notebooks
import nbformat
import pytest

from nbagent.demo import _renumber, main

pytestmark = pytest.mark.notebook

SAVED = ["01_quickstart.ipynb", "03_approvals.ipynb", "11_people_in_the_loop.ipynb"]
WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.mark.parametrize("name", SAVED)
def test_the_committed_outputs_are_current(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)  # the demo model, as `make notebooks` runs it
    committed = nbformat.read(_notebooks.NOTEBOOKS / name, as_version=4)
    assert any(c.get("outputs") for c in committed.cells), (
        f"{name} is committed without its outputs: run `make notebooks`"
    )
    assert "widgets" not in committed.metadata  # no widget state: it changes every run
    assert all("execution" not in c.metadata for c in committed.cells)  # nor timings
    fresh = _notebooks.execute(name)
    _renumber(fresh)
    then, now = _notebooks.saved_outputs(committed), _notebooks.saved_outputs(fresh)
    assert len(then) == len(now), f"{name}: cells added or removed: run `make notebooks`"
    for n, (old, new) in enumerate(zip(then, now, strict=True)):
        assert old == new, f"{name}, code cell {n + 1}: the outputs are stale: run `make notebooks`"


def test_the_other_notebooks_are_committed_without_outputs() -> None:
    for path in sorted(_notebooks.NOTEBOOKS.glob("*.ipynb")):
        if path.name in SAVED:
            continue
        nb = nbformat.read(path, as_version=4)
        with_outputs = [i for i, c in enumerate(nb.cells) if c.get("outputs")]
        assert not with_outputs, (path.name, with_outputs)


def test_scrubbing_keeps_what_a_reader_sees() -> None:
    """Only what changes by itself is scrubbed: an answer's words and numbers are not."""
    line = "[step 1 · demo · 18 in / 25 out tokens · 26 ms · $0] refunded order 42 at "
    line += "2026-12-01 19:54:31.082010+00:00"
    assert _notebooks.scrub(line) == (
        "[step 1 · demo · 18 in / 25 out tokens · <dur> · $0] refunded order 42 at <time>"
    )
    assert _notebooks.scrub("refunded order 42") != _notebooks.scrub("refunded order 43")
    assert _notebooks.scrub("01a2332c47c97ac7b2b1db723ff36675 [<1 ms]") == "<id> [<dur>]"


GATED = """\
from nbagent import Chat, tool

@tool(requires_approval=True)
def issue_refund(order_id: int) -> str:
    '''Issue a refund for an order.'''
    return f"refunded order {order_id}"

chat = Chat().with_tools(issue_refund)
reply = chat.ask("Refund order 42")
"""


def test_make_notebooks_saves_a_demo_run_with_ids_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m nbagent.demo --save` runs on the demo model even where a key is set, and
    writes what a rerun reproduces: no timings, no widget state, made-up ids in order; a
    view is saved once, as its static form (GitHub showed the twin as a second copy)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-the-saved-notebooks")
    path = tmp_path / "gated.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(GATED)]), path)
    assert main(["--save", str(path)]) == 0
    assert os.environ["OPENAI_API_KEY"] == "sk-not-for-the-saved-notebooks"  # given back
    saved = nbformat.read(path, as_version=4)
    (cell,) = saved.cells
    assert "execution" not in cell.metadata and "widgets" not in saved.metadata
    text = "".join(str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs)
    assert "[step 1 · demo ·" in text and "-- awaiting approval" in text
    assert not [o for o in cell.outputs if WIDGET in o.get("data", {})]  # no state to draw it
    html = "".join(str(o.get("data", {}).get("text/html", "")) for o in cell.outputs)
    assert "nba-twin-" not in html and set(re.findall(r"nba-live-(\w+)", html)) <= {"1"}
    assert text.count("-- awaiting approval") == 1  # the view once, not twice
