"""Notebook 11 (people in the loop) executes with a real kernel, offline: a server of our own
on the official SDK asks for a form (elicitation) and a sampling request in the middle of its
calls and reports progress; an external tool's call parks until its result is given. Each is
answered in code (a notebook in CI cannot click), and what the cell showed while each waited
is kept: the form's fields, the exact sampling messages, the progress bar."""

from __future__ import annotations

import re

import _notebooks
import pytest

pytestmark = pytest.mark.notebook


def test_people_in_the_loop_notebook_runs_offline() -> None:
    nb = _notebooks.execute("11_people_in_the_loop.ipynb", timeout=300)
    text = _notebooks.text(nb)
    assert "deliver_flowers    external: True" in text
    # the form, answered in code: the tool ran once with the answer
    assert "booked Friday for Ada: 4 guests, terrace, vegetarian menu" in text
    assert "PendingInput(elicitation on bistro: 'Who is the table on Friday for?'" in text
    # the external call parked, then its result was given
    assert "awaiting_approval" in text
    assert "deliver_flowers is done outside nbagent: give its result" in text
    assert "delivered at 14:05, signed by J. Doe" in text
    assert re.search(r"elicitation\s+accept\s+by user", text)
    assert re.search(r"sampling\s+accept\s+by user", text)
    assert re.search(r"external\s+accept\s+by user", text)
    html = "\n".join(_notebooks.mime(nb, "text/html"))
    # what the cells showed while each input waited
    assert "bistro asks you to fill in" in html
    assert "<code>guests</code> Guests (integer, required)" in html
    assert "one of inside, terrace" in html
    assert "system: One short sentence.\nuser: Summarize: " in html
    assert "(at most 60 tokens)" in html
    assert '<progress class="nba-progress" max="1" value="0.5000">' in html
    assert "2 of 4 (50%) · indexed mains.md" in html
    # and once answered, each call's card says how
    assert "form</span> Answered in code after" in html
    assert "sampling</span> Approved in code after" in html
