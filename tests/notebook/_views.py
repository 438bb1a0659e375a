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
