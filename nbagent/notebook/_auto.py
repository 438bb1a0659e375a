"""The notebook view as a chat extension: each turn shows itself live in its cell.

``Chat.__init__`` calls :func:`install_auto_display`; outside an IPython kernel
it returns at once and imports nothing. Inside one, the chat gets a
:class:`NotebookExtension`, which

- shows each new turn's live view in the running cell (``turn_started``);
- when a later cell continues that turn (``chat.complete()``, ``chat.step()``
  after a decision made in code), hands the turn over: the earlier view goes
  static and says "continued in cell [n]", and the running cell shows the
  continuation live (``before_step``), so each cell shows what it did and no
  earlier status line contradicts ``chat.status``;
- lets ``await chat.ask_async()`` wait for a click on an approval card
  (``wait_for_decision``);
- remembers which replies a live view has just shown, so ``chat.ask(...)`` on a
  cell's last line does not echo its reply as ``Out[n]`` under the view that
  already shows it (in a later cell, ``reply`` displays as usual). Messages
  display through a formatter registered with IPython for their types, so the
  message values know nothing of notebooks.
"""

from __future__ import annotations

import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any

from .._events import Event, MessageAdded
from .._extension import ChatHost, Extension
from .._notice import shell
from .._types import AssistantToolCallMessage, ChatMessage
from ._kernel import execution_count, in_kernel, prompt_number
from ._per_chat import PerChat

if TYPE_CHECKING:
    from .._base_chat import BaseChat as Chat


def install_auto_display(chat: Chat) -> None:
    """In a kernel, follow ``chat`` and show each turn live (``Chat.__init__`` calls this)."""
    if "ipykernel" not in sys.modules or not in_kernel():
        return
    from ._state import follow_quietly

    _register_message_formatter()
    follow_quietly(chat)  # what a later view shows that the record does not hold
    chat.extend(NotebookExtension())


class NotebookExtension(Extension):
    """Shows each turn live, waits for clicks in ``ask_async``, suppresses echoed replies."""

    fragments = False  # it follows whole messages; the view subscribes to what it shows

    def __init__(self) -> None:
        self._host: ChatHost | None = None

    def attach(self, host: ChatHost) -> None:
        self._host = host

    def turn_started(self) -> None:
        if self._host is not None:
            _show_turn(self._host.chat)

    def before_step(self) -> None:
        if self._host is not None:
            _continue_here(self._host.chat)
        return None

    async def wait_for_decision(self, wait: bool | None) -> bool:
        from ._continuation import wait_for_decisions

        if self._host is None:
            return False
        return await wait_for_decisions(self._host.chat, wait)

    def on_event(self, event: Event) -> None:
        if isinstance(event, MessageAdded) and self._host is not None and self._host.alive:
            _remember_live_message(self._host.chat, event)


class Shown:
    """What the notebook shows of one chat's current turn (kept by the chat: ``PerChat``)."""

    __slots__ = ("cell", "live", "view")

    def __init__(self, _chat: Any) -> None:
        self.view: weakref.ref[Any] | None = None  # the view showing the turn
        self.cell: int | None = None  # the execution count of the cell that shows it
        self.live: tuple[int, int] | None = None  # (turn, execution count): its replies shown


_shown: PerChat[Shown] = PerChat(Shown, "shown turn")


def turn_view(chat: Chat) -> Any:
    """The view showing ``chat``'s current turn (``None``: none, or it is gone)."""
    shown = _shown.peek(chat)
    ref = shown.view if shown is not None else None
    return ref() if ref is not None else None


# Messages a live view has just shown, with the cell (execution count) that showed them.
_live_messages: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_live_cells: dict[int, int] = {}  # id(message) -> execution count
_registered = False


def _remember_live_message(chat: Chat, event: MessageAdded) -> None:
    shown = _shown.peek(chat)
    live = shown.live if shown is not None else None
    if live is None or live[0] != event.turn or getattr(event.message, "role", "") != "assistant":
        return
    _live_messages[id(event.message)] = event.message
    _live_cells[id(event.message)] = live[1]
    if len(_live_cells) > 4 * max(len(_live_messages), 64):  # drop ids of collected messages
        for key in [k for k in _live_cells if k not in _live_messages]:
            del _live_cells[key]


def _register_message_formatter() -> None:
    """Display messages through :func:`display_message` (``Out[n]``, ``display(msg)``)."""
    global _registered
    if _registered:
        return
    formatter = getattr(
        getattr(shell(), "display_formatter", None), "ipython_display_formatter", None
    )
    if formatter is None:
        return
    for cls in (ChatMessage, AssistantToolCallMessage):
        formatter.for_type(cls, display_message)
    _registered = True


def display_message(message: Any) -> None:
    """How a message displays in a kernel: as markdown and text.

    Nothing is shown when a live view showed this very message in this very
    cell: the view already has it.
    """
    if (
        _live_messages.get(id(message)) is message
        and _live_cells.get(id(message)) == execution_count()
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
    """Display the new turn's live view in the running cell."""
    from .._config import get_config

    enabled = chat.display if chat.display is not None else get_config().display
    if not enabled or threading.current_thread() is not threading.main_thread():
        return
    from .._display import widgets_available
    from ._fallback import static_view

    turn = chat.turn
    count = execution_count()
    shown = _shown.get(chat)
    if count is not None:
        shown.live = (turn, count)
    if widgets_available():
        from ._view import show

        view = show(chat, turn=turn)
        shown.view, shown.cell = weakref.ref(view), count
    else:
        shown.view = shown.cell = None
        static_view(chat, turn)


def _continue_here(chat: Chat) -> None:
    """A step starts: if a later cell drives the turn an earlier cell shows, hand it over.

    Only a driver called in a cell counts (``chat.complete()``, ``chat.step()``
    on the kernel's main thread), not the continuation after a click, which
    stays in the view that was clicked, and not a step with nothing to do. A
    fork (``chat.fork``) driven for the first time shows its turn in the cell
    that drives it: no ``ask`` showed it.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    from ._continuation import continuing

    shown = _shown.get(chat)
    if shown.view is None:
        # A fork never asked: its first drive in a cell shows its turn there (shared history too).
        if chat.parent is not None and not continuing() and chat.status == "ready":
            _show_turn(chat)
        return

    view, cell = shown.view(), shown.cell
    count = execution_count()
    if (
        view is None
        or continuing()
        or count is None
        or count == cell
        or view.frozen
        or not view.displayed
        or view.turn != chat.turn
        or chat.status in ("awaiting_approval", "complete", "idle")  # nothing will happen
    ):
        return
    from ._view import ChatView

    skip = view.hand_over(prompt_number(count))
    here = ChatView(chat, turn=view.turn, skip=skip, origin=prompt_number(cell), light=True)
    from IPython.display import display

    display(here)
    shown.view, shown.cell = weakref.ref(here), count
    shown.live = (view.turn, count)


def display_chat(chat: Chat) -> Any:
    """``display(chat)``: a live view of the whole conversation, or the static bundle."""
    from IPython.display import display

    from .._display import widgets_available
    from ._fallback import chat_mimebundle, static_view

    if widgets_available():
        from ._view import show

        return show(chat)
    if not in_kernel():  # terminal IPython: print once, never re-print on updates
        display(chat_mimebundle(chat), raw=True)
        return None
    return static_view(chat)
