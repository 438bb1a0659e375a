"""The notebook view: live turns, tool-call cards, approval cards with working buttons.

In a Jupyter kernel, ``chat.ask(...)`` shows its turn live in the cell (turn
it off with ``nbagent.configure(display=False)`` or ``Chat(display=False)``),
and ``display(chat)`` shows the whole conversation. Approval cards have
**Approve**, **Deny** (with a reason), **Edit arguments** and **Always allow
this tool**; a click records the decision and the rest of the turn appears in
the same output. Outside a widget front end, every display also carries
``text/html``, ``text/markdown`` and ``text/plain``; in a terminal,
:func:`review` asks at an ``input()`` prompt.

Importing this package is cheap: its names are looked up on first use, and
ipywidgets and anywidget are imported only when a view is built (``ChatView``,
``show``), never by ``import nbagent``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .._exports import publish_one as _publish_one

if TYPE_CHECKING:
    from ._auto import display_chat as display_chat
    from ._auto import install_auto_display as install_auto_display
    from ._continuation import continuation_for as continuation_for
    from ._fallback import chat_mimebundle as chat_mimebundle
    from ._review import review
    from ._view import ChatView, show

__all__ = ["ChatView", "review", "show"]

_HOMES = {
    "ChatView": "._view",
    "review": "._review",
    "show": "._view",
    # for the rest of nbagent, outside __all__: Chat shows itself with these, the inbox
    # continues a chat after a decision as a click does
    "chat_mimebundle": "._fallback",
    "continuation_for": "._continuation",
    "display_chat": "._auto",
    "install_auto_display": "._auto",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    if name in __all__:
        value = _publish_one(__name__, value)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
