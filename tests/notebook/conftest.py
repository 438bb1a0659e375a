"""Fixtures the notebook tests share: the notebook's outputs as a front end keeps them
(``cells``) and every widget model made during a test (``constructed``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ipywidgets
import pytest
from _views import Cells

from nbagent import _display
from nbagent.notebook import _auto


@pytest.fixture
def cells(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cells]:
    import IPython.display

    c = Cells()
    monkeypatch.setattr(IPython.display, "display", c.display)
    monkeypatch.setattr(IPython.display, "update_display", c.update_display)
    monkeypatch.setattr(_auto, "execution_count", lambda: c.count)
    monkeypatch.setattr(_display, "widgets_available", lambda: True)
    monkeypatch.setattr(_display, "hook_post_run_cell", lambda: None)
    monkeypatch.setattr(_display, "running_cell_id", lambda: c.cell_id)
    yield c
    _display._by_cell.clear()


@pytest.fixture
def constructed() -> Iterator[list[Any]]:
    """Every widget model made while the test runs."""
    made: list[Any] = []
    before = ipywidgets.Widget._widget_construction_callback
    ipywidgets.Widget.on_widget_constructed(made.append)
    try:
        yield made
    finally:
        ipywidgets.Widget._widget_construction_callback = before
