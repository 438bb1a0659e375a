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

import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._chat import Chat
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


def _in_kernel() -> bool:
    """Inside an IPython kernel (not terminal IPython, not plain Python).

    Reads ``sys.modules`` rather than importing IPython: in a kernel it is
    always imported already, and ``Chat()`` asks this on every construction.
    """
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    ip = ipython.get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def _install_auto_display(chat: Chat) -> None:
    """Called by ``Chat.__init__``: in a kernel, follow the chat and show each turn live.

    Outside an IPython kernel this returns at once and imports nothing.
    """
    if "ipykernel" not in sys.modules or not _in_kernel():
        return
    from ._continuation import capture_main_loop, wait_for_decisions
    from ._state import state_for

    capture_main_loop()
    state_for(chat)  # pure values, no widgets: step timings for a later display(chat)
    chat._turn_hooks.append(_show_turn)
    chat._approval_waiter = wait_for_decisions
    from .._events import MessageAdded

    chat.on(MessageAdded, _remember_live_message)


# Messages a live view has just shown, with the cell (execution count) that showed
# them: ``chat.ask(...)`` on a cell's last line then does not echo its reply as
# ``Out[n]`` under the view that already shows it. In a later cell, ``reply``
# displays as usual.
_live_turns: dict[str, tuple[int, int]] = {}  # chat id -> (turn, execution count)
_live_messages: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_live_cells: dict[int, int] = {}  # id(message) -> execution count


def _execution_count() -> int | None:
    ipython = sys.modules.get("IPython")
    ip = ipython.get_ipython() if ipython is not None else None
    count = getattr(ip, "execution_count", None)
    return count if isinstance(count, int) else None


def _remember_live_message(event: Any) -> None:
    live = _live_turns.get(event.chat_id)
    if live is None or live[0] != event.turn or getattr(event.message, "role", "") != "assistant":
        return
    _live_messages[id(event.message)] = event.message
    _live_cells[id(event.message)] = live[1]
    if len(_live_cells) > 4 * max(len(_live_messages), 64):  # drop ids of collected messages
        for key in [k for k in _live_cells if k not in _live_messages]:
            del _live_cells[key]


def display_message(message: Any) -> None:
    """How a message displays (``Out[n]``, ``display(msg)``): as markdown and text.

    Nothing is shown when a live view showed this very message in this very
    cell: the view already has it.
    """
    if (
        _live_messages.get(id(message)) is message
        and _live_cells.get(id(message)) == _execution_count()
    ):
        return
    from IPython.display import display

    content = getattr(message, "content", None) or ""
    calls = getattr(message, "tool_calls", ())
    lines = [content] if content else []
    lines += [f"- tool call `{c.name}` ({c.status})" for c in calls]
    bundle = {"text/plain": repr(message), "text/markdown": "\n".join(lines) or repr(message)}
    display(bundle, raw=True)


def _show_turn(chat: Chat) -> None:
    """The turn hook: display the new turn's live view in the running cell."""
    from .._config import get_config

    enabled = chat.display if chat.display is not None else get_config().display
    if not enabled or threading.current_thread() is not threading.main_thread():
        return
    from ._continuation import capture_main_loop
    from ._fallback import StaticView, widgets_available

    capture_main_loop()
    turn = chat._turn
    count = _execution_count()
    if count is not None:
        _live_turns[chat.id] = (turn, count)
    if widgets_available():
        show(chat, turn=turn)
    else:
        StaticView(chat, turn).display()
