"""Outside a widget front end: static MIME bundles and display updates.

Every object nbagent displays carries ``text/html``, ``text/markdown`` and
``text/plain`` beside the widget view, so nbconvert, GitHub and a front end
without ipywidgets still show the conversation. Views are displayed with a
``display_id`` and their bundle is refreshed whenever the chat settles
(answered, waiting for a decision, out of budget, failed), so a notebook
executed headless (nbclient, papermill) is saved with the final state.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import uuid
import weakref
from typing import TYPE_CHECKING, Any

from .._notice import notice
from ._kernel import in_kernel
from ._render import conversation_html, conversation_markdown, conversation_text, printable
from ._state import ChatState, Entry, state_for

if TYPE_CHECKING:
    from .._base_chat import BaseChat as Chat


# Displayed views whose static fallback is behind their widgets. Flushed when the
# chat settles and, for step-by-step driving, after every cell (IPython's
# ``post_run_cell``), so the saved notebook always shows the final state.
_dirty: weakref.WeakSet[Any] = weakref.WeakSet()
_hook_lock = threading.Lock()
_hooked = False


def mark_dirty(view: Any) -> None:
    _dirty.add(view)


def flush_dirty(*_args: Any) -> None:
    """Refresh every displayed view whose fallback is stale (the post_run_cell hook)."""
    for view in list(_dirty):
        _dirty.discard(view)
        with contextlib.suppress(Exception):  # a display hook must never break a cell
            view._update_fallback()


def hook_post_run_cell() -> None:
    """Register :func:`flush_dirty` with IPython once (no-op outside IPython)."""
    global _hooked
    with _hook_lock:
        if _hooked:
            return
        try:
            from IPython import get_ipython
        except ImportError:
            return
        ip = get_ipython()
        if ip is None:
            return
        ip.events.register("post_run_cell", flush_dirty)
        _hooked = True


def bundle_for(state: ChatState, turn: int | None = None) -> dict[str, str]:
    """The three static representations of a chat (or one turn of it)."""
    with state.lock:
        entries: list[Entry] = state.entries_for(turn)
        totals = state.totals_for(turn)
        return {
            "text/html": conversation_html(entries, totals),
            "text/markdown": conversation_markdown(entries, totals),
            "text/plain": conversation_text(entries, totals),
        }


def chat_mimebundle(chat: Chat) -> dict[str, str]:
    """``Chat._repr_mimebundle_``: the whole conversation as HTML, markdown and text."""
    data = bundle_for(_state(chat))
    data["text/plain"] = f"{printable(repr(chat))}\n{data['text/plain']}"
    return data


def _state(chat: Chat) -> ChatState:
    """The shared display state if the chat has one, else a snapshot (no subscription)."""
    from ._state import has_state

    if has_state(chat):
        return state_for(chat)
    return ChatState.from_chat(chat)


_hinted = False


def widgets_available() -> bool:
    """Inside an IPython kernel with ipywidgets and anywidget importable.

    In a kernel where they are not (an environment that installed nbagent
    without its dependencies), the views show their static form, and the user
    is told once why there are no buttons and what to do.
    """
    global _hinted
    if "ipykernel" not in sys.modules or not in_kernel():
        return False
    try:
        import anywidget  # noqa: F401
        import ipywidgets  # noqa: F401
    except ImportError as exc:
        if not _hinted:
            _hinted = True
            notice(
                f"the live view has no buttons here ({exc}): pip install ipywidgets anywidget "
                "and restart the kernel; meanwhile decide with chat.approve(call) / chat.deny(call)"
            )
        return False
    return True


class StaticView:
    """A display of the static bundle that refreshes itself (by display id) as the chat settles.

    Used in a kernel without ipywidgets; also what a headless run saves.
    """

    def __init__(self, chat: Chat, turn: int | None = None):
        self.chat = chat
        self.turn = turn
        self.state = state_for(chat)
        self.display_id = f"nbagent-{chat.id[:8]}-{uuid.uuid4().hex[:8]}"
        self._last: str | None = None
        self.state.add_listener(self._on_change)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return bundle_for(self.state, self.turn)

    def display(self) -> None:
        from IPython.display import display

        data = self._repr_mimebundle_()
        self._last = data["text/html"]
        display(data, raw=True, display_id=self.display_id)
        hook_post_run_cell()

    def _on_change(self, changed: list[Entry], settled: bool) -> None:
        if self.turn is not None and any(e.turn > self.turn for e in changed):
            self.state.remove_listener(self._on_change)
            return
        if not settled:
            mark_dirty(self)
            return
        self._update_fallback()

    def _update_fallback(self) -> None:
        data = self._repr_mimebundle_()
        if data["text/html"] == self._last:
            return
        self._last = data["text/html"]
        try:
            from IPython.display import update_display

            update_display(data, raw=True, display_id=self.display_id)
        except Exception:
            pass
