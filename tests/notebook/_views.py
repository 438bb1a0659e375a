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
        self.cell_id: str | None = None  # the running cell's id (None: a client sending none)
        self.cell_ids: dict[str, str] = {}  # display id -> the id of the cell that displayed it
        self.removed: set[str] = set()  # display ids of outputs removed by a cell's new run
        self.updates = 0

    def run(self, count: int, cell: str | None = None, deleted: tuple[str, ...] = ()) -> None:
        """Cell ``count`` starts; ``cell``: the id the front end gives it (the same each time
        it runs), sent with the ids of the cells ``deleted`` since the last run: their
        outputs are removed, as JupyterLab does, and IPython's ``pre_run_cell`` runs."""
        from types import SimpleNamespace

        from nbagent._display import clear_cells

        self.count = count
        self.cell_id = cell
        gone = {cell, *deleted}
        for display_id in [d for d, c in self.cell_ids.items() if c in gone]:
            del self.outputs[display_id], self.cell_ids[display_id]
            self.removed.add(display_id)
        if cell is not None:
            clear_cells(SimpleNamespace(cell_id=cell, cell_meta={"deletedCells": list(deleted)}))

    def display(self, obj: Any, raw: bool = False, display_id: Any = None, **_: Any) -> None:
        if not raw and hasattr(obj, "_ipython_display_"):
            obj._ipython_display_()
            return
        assert raw, obj
        if display_id is None:  # a plain output (Out[n], a message)
            display_id = f"plain-{len(self.outputs)}"
        self.outputs[display_id] = obj
        self.cell_of[display_id] = self.count
        if self.cell_id is not None:
            self.cell_ids[display_id] = self.cell_id

    def update_display(self, obj: Any, raw: bool = False, display_id: Any = None, **_: Any) -> None:
        if display_id in self.removed:
            return  # the front end drops an update for an output it removed
        assert display_id in self.outputs, "an update for an output nobody displayed"
        self.outputs[display_id] = obj
        self.updates += 1

    def in_cell(self, count: int) -> list[dict[str, Any]]:
        return [d for i, d in self.outputs.items() if self.cell_of[i] == count]
