"""What the front end draws: tests look at a view's widget tree, as the browser does."""

from __future__ import annotations

from typing import Any

from nbagent.notebook import ChatView


def widgets_in(view: ChatView) -> list[Any]:
    """Every widget of the view, depth first, in display order."""
    out: list[Any] = []
    stack = [view.widget] if view.widget is not None else []  # a light view may have none
    while stack:
        widget = stack.pop()
        out.append(widget)
        stack.extend(reversed(getattr(widget, "children", ())))
    return out


class Cells:
    """The notebook's outputs as the front end would keep them, and the running cell."""

    def __init__(self) -> None:
        self.count = 1  # IPython's execution_count while a cell runs (its In [n] is n - 1)
        self.outputs: dict[str, dict[str, Any]] = {}  # display id -> data
        self.cell_of: dict[str, int] = {}  # display id -> the cell that displayed it
        self.updates = 0

    def run(self, count: int) -> None:
        self.count = count

    def display(self, obj: Any, raw: bool = False, display_id: Any = None, **_: Any) -> None:
        if not raw and hasattr(obj, "_ipython_display_"):
            obj._ipython_display_()
            return
        assert raw, obj
        if display_id is None:  # a plain output (Out[n], a message)
            display_id = f"plain-{len(self.outputs)}"
        self.outputs[display_id] = obj
        self.cell_of[display_id] = self.count

    def update_display(self, obj: Any, raw: bool = False, display_id: Any = None, **_: Any) -> None:
        assert display_id in self.outputs, "an update for an output nobody displayed"
        self.outputs[display_id] = obj
        self.updates += 1

    def in_cell(self, count: int) -> list[dict[str, Any]]:
        return [d for i, d in self.outputs.items() if self.cell_of[i] == count]
