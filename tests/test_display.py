"""The one display mechanism (nbagent/_display.py): whatever an owner does with its
LiveOutput, what the cell keeps names a widget only while it is live, and the twin
holds the static form exactly then."""

from __future__ import annotations

from typing import Any

import ipywidgets
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent import _display
from nbagent._display import IDLE_TWIN, WIDGET_MIME, LiveOutput


class Cell:
    """The outputs a front end keeps, by display id (what IPython's display functions reach)."""

    def __init__(self) -> None:
        self.outputs: dict[str, dict[str, Any]] = {}

    def display(self, obj: Any, raw: bool = False, display_id: Any = None, **_: Any) -> None:
        assert raw and display_id
        self.outputs[display_id] = obj

    def update_display(self, obj: Any, raw: bool = False, display_id: Any = None, **_: Any) -> None:
        assert display_id in self.outputs, "an update for an output nobody displayed"
        self.outputs[display_id] = obj


@pytest.fixture
def cell(monkeypatch: pytest.MonkeyPatch) -> Cell:
    import IPython.display

    c = Cell()
    monkeypatch.setattr(IPython.display, "display", c.display)
    monkeypatch.setattr(IPython.display, "update_display", c.update_display)
    monkeypatch.setattr(_display, "hook_post_run_cell", lambda: None)
    return c


OPS = st.lists(
    st.sampled_from(["change", "refresh", "twin", "static", "pin", "live", "after_cell", "show"]),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(ops=OPS)
def test_the_cell_names_a_widget_only_while_it_is_live(ops: list[str]) -> None:
    import IPython.display

    cell = Cell()
    saved = IPython.display.display, IPython.display.update_display
    IPython.display.display, IPython.display.update_display = cell.display, cell.update_display
    try:
        count = [0]
        pinned = False  # the owner's own static words ("continued in cell [n]") stand
        widgets: list[ipywidgets.HTML] = []

        def static() -> dict[str, Any]:
            return {"text/html": f"<b>{count[0]}</b>", "text/plain": str(count[0])}

        out = LiveOutput("nbagent-test", static)
        widgets.append(ipywidgets.HTML())
        out.attach(widgets[-1])
        out.show()
        for op in ops:
            if op == "change":
                count[0] += 1
            elif op == "refresh":
                out.refresh()
            elif op == "twin":
                out.refresh_twin()
            elif op == "static":
                out.go_static()
                pinned = False
            elif op == "pin":
                out.go_static({"text/html": "<i>pinned</i>", "text/plain": "pinned"})
                pinned = True
            elif op == "live" and not out.live:
                widgets.append(ipywidgets.HTML())
                out.attach(widgets[-1])
                out.refresh()
                pinned = False
            elif op == "after_cell":
                out._update_fallback()
            elif op == "show":
                out.show()
        out.refresh()
        main, twin = cell.outputs[out.display_id], cell.outputs[f"{out.display_id}-twin"]
        assert (WIDGET_MIME in main) == out.live
        if out.live:
            assert main[WIDGET_MIME]["model_id"] == widgets[-1].model_id
            assert f'class="nba-twin-{out.uid}"' in twin["text/html"]
            assert f"<b>{count[0]}</b>" in twin["text/html"] and WIDGET_MIME not in twin
            assert f"nba-live-{out.uid}" in widgets[-1]._dom_classes
        else:
            assert twin == IDLE_TWIN
        # the static form is always current, unless the owner said what to show
        assert main["text/plain"] == ("pinned" if pinned else str(count[0]))
    finally:
        IPython.display.display, IPython.display.update_display = saved
        for w in widgets:
            w.close()


def test_a_twin_the_owner_withholds_stays_idle(cell: Cell) -> None:
    """A chat view with nothing to decide has no stand-in: its twin is idle while live."""
    waiting = [False]
    out = LiveOutput(
        "nbagent-test",
        lambda: {"text/html": "<i>t</i>", "text/plain": "t"},
        lambda: {"text/html": "<i>how to decide</i>", "text/plain": "x"} if waiting[0] else None,
    )
    w = ipywidgets.HTML()
    out.attach(w)
    out.show()
    twin_id = f"{out.display_id}-twin"
    assert cell.outputs[twin_id] == IDLE_TWIN
    waiting[0] = True
    out.refresh_twin()
    assert "how to decide" in cell.outputs[twin_id]["text/html"]
    out.go_static()
    assert cell.outputs[twin_id] == IDLE_TWIN
    assert WIDGET_MIME not in cell.outputs[out.display_id]
    w.close()


def test_no_twin_output_when_the_owner_wants_none(cell: Cell) -> None:
    out = LiveOutput("nbagent-test", lambda: {"text/html": "s", "text/plain": "s"}, twin=False)
    out.show()
    assert list(cell.outputs) == [out.display_id]
    assert WIDGET_MIME not in cell.outputs[out.display_id]
