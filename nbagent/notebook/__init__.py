"""The notebook view: live turns, tool-call cards, approval cards with working buttons.

In a Jupyter kernel, ``chat.ask(...)`` shows its turn live in the cell (turn
it off with ``nbagent.configure(display=False)`` or ``Chat(display=False)``),
and ``display(chat)`` shows the whole conversation. Approval cards have
**Approve**, **Deny** (with a reason), **Edit arguments** and **Always allow
this tool**; a click records the decision and the rest of the turn appears in
the same output. Outside a widget front end, every display also carries
``text/html``, ``text/markdown`` and ``text/plain``; in a terminal,
:func:`review` asks at an ``input()`` prompt.

Importing this package is cheap: ipywidgets and anywidget are imported only
when a view is built (``ChatView``, ``show``), never by ``import nbagent``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._base_chat import BaseChat as Chat
    from .._types import Message
    from ._view import ChatView

__all__ = ["ChatView", "review", "show"]


def __getattr__(name: str) -> Any:
    if name == "ChatView":
        from ._view import ChatView

        return ChatView
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def review(chat: Chat, **kwargs: Any) -> Message | None:
    """Decide pending approvals at an ``input()`` prompt, then continue.

    Keyword arguments ``input`` and ``print`` replace the builtins (tests, other UIs).
    """
    from ._fallback import review as _review

    return _review(chat, **kwargs)


def show(chat: Chat, *, turn: int | None = None) -> ChatView:
    """Display a live view of ``chat`` (or of one ``turn``) in the current cell and return it."""
    from IPython.display import display

    from ._view import ChatView

    view = ChatView(chat, turn=turn)
    display(view)
    return view
