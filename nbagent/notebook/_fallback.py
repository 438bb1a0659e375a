"""Outside a widget front end: static MIME bundles and display updates.

Every object nbagent displays carries ``text/html``, ``text/markdown`` and
``text/plain`` beside the widget view, so nbconvert, GitHub and a front end
without ipywidgets still show the conversation. Views are displayed with a
``display_id`` and their bundle is refreshed whenever the chat settles
(answered, waiting for a decision, out of budget, failed), so a notebook
executed headless (nbclient, papermill) is saved with the final state.

A live view's output becomes static (this bundle, no widget) as soon as its
turn settles with nothing left to decide, so a saved notebook reopens with its
transcripts and no "model not found". A view still waiting for a decision
keeps its widget and has a *twin* output (:func:`twin_bundle`): hidden unless
JupyterLab shows the view dead, it then shows the transcript and how to decide
the call once the kernel that owned the buttons is gone. Updates go through
:class:`DisplaySlot`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import json
import sys
import threading
import uuid
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._notice import notice
from ._kernel import in_kernel
from ._render import conversation_html, conversation_markdown, conversation_text, printable
from ._state import BudgetEntry, CallEntry, ChatState, Entry, state_for

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


def bundle_for(
    state: ChatState,
    turn: int | None = None,
    *,
    skip: frozenset[str] = frozenset(),
    phase: str | None = None,
    title: str = "",
) -> dict[str, str]:
    """The three static representations of a chat (or one turn of it).

    Args:
        skip: Keys of entries not to show (a continuation view shows only what
            happened from where it took over).
        phase: Say this on the status line instead of the state's phase
            ("continued in cell [7]").
        title: A first line (where a continuation view comes from).
    """
    with state.lock:
        entries: list[Entry] = [e for e in state.entries_for(turn) if e.key not in skip]
        totals = state.totals_for(turn)
        if phase is not None:
            totals = dataclasses.replace(totals, phase=phase)
        text = conversation_text(entries, totals)
        markdown = conversation_markdown(entries, totals)
        if title:
            text = f"{printable(title)}\n{text}"
            markdown = f"*{html.escape(title)}*\n\n{markdown}"
        return {
            "text/html": conversation_html(entries, totals, title=title),
            "text/markdown": markdown,
            "text/plain": text,
        }


# ------------------------------------------------------------------ display slots
class DisplaySlot:
    """One output of a cell that nbagent displayed and keeps updating by display id.

    JupyterLab applies an ``update_display_data`` message only to the outputs of
    the cell whose execution the message's parent header names (each cell's
    output area listens to its own request). An update sent from a click
    handler, a continuation or a later cell would carry another parent and be
    dropped, leaving the saved notebook with an old output. So the slot keeps
    the parent header of the cell that displayed it and sends updates under
    that header (a message built and sent on the kernel's session: no parent is
    swapped, so nothing another thread prints can be misrouted); when the
    current parent differs it sends the update under the current one too
    (nbclient and papermill read only the running cell's messages and update
    every output with the display id).
    """

    def __init__(self, display_id: str):
        self.display_id = display_id
        self.shown = False
        self._parent: dict[str, Any] | None = None

    def show(self, data: dict[str, Any]) -> None:
        from IPython.display import display

        display(data, raw=True, display_id=self.display_id)
        self.shown = True
        pub = _display_pub()
        parent = getattr(pub, "parent_header", None)
        self._parent = dict(parent) if isinstance(parent, dict) and parent else None

    def update(self, data: dict[str, Any]) -> None:
        if not self.shown:
            return
        from IPython.display import update_display

        with contextlib.suppress(Exception):  # an update must never break the chat
            pub = _display_pub()
            current = getattr(pub, "parent_header", None) or {}
            original = self._parent
            elsewhere = original is not None and current.get("msg_id") != original.get("msg_id")
            sent = elsewhere and _send_update(pub, data, self.display_id, original or {})
            if sent and not current:
                return  # no cell is running: nobody else to tell
            update_display(data, raw=True, display_id=self.display_id)


def _send_update(pub: Any, data: dict[str, Any], display_id: str, parent: dict[str, Any]) -> bool:
    """Send ``update_display_data`` under ``parent`` (ipykernel's publisher, no shared state)."""
    session = getattr(pub, "session", None)
    socket = getattr(pub, "pub_socket", None)
    if session is None or socket is None:
        return False
    content = {"data": data, "metadata": {}, "transient": {"display_id": display_id}}
    msg = session.msg("update_display_data", content, parent=parent)
    session.send(socket, msg, ident=getattr(pub, "topic", b"display_data"))
    return True


def _display_pub() -> Any:
    ipython = sys.modules.get("IPython")
    ip = ipython.get_ipython() if ipython is not None else None
    return getattr(ip, "display_pub", None)


# --------------------------------------------------------------------- the twin
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def twin_css(uid: str) -> str:
    """Rules that show the twin only where the live view ``uid`` is dead.

    The twin is hidden by default: in a live JupyterLab, VS Code, Colab or
    nbconvert the view itself (or its own static fallback) is what shows. In
    JupyterLab, once the kernel that owned the view is gone, the twin shows and
    the dead view goes: JupyterLab's "model not found" placeholder (no widget
    state saved with the file, the default), a view restored from saved widget
    state with no kernel behind it (``jupyter-widgets-disconnected``), or the
    empty output a kernel restart leaves.
    """
    live = f".nba-live-{uid}"
    twin = f".nba-twin-{uid}"
    area = ".jp-OutputArea"
    # The widget renderer marks its output node jupyter-widgets only for an error
    # ("model not found"; a drawn view carries that class on its own element), and
    # hides it (lm-mod-hidden) when the kernel restarts and the model is closed.
    placeholder = (
        "> .jp-OutputArea-child > .jp-OutputArea-output.jupyter-widgets, "
        "> .jp-OutputArea-child > .jp-OutputArea-output.lm-mod-hidden"
    )
    dead = f".jp-OutputArea-child:has({live}.jupyter-widgets-disconnected)"
    return (
        f"{twin} {{ display: none; }}\n"
        f"{area}:has({live}:not(.jupyter-widgets-disconnected)) "
        f".jp-OutputArea-child:has({twin}) {{ display: none; }}\n"
        f"{area}:has({twin}):not(:has({live})):has({placeholder}) {twin},\n"
        f"{area}:has({live}.jupyter-widgets-disconnected) {twin} {{ display: block; }}\n"
        f"{area}:has({twin}):not(:has({live})) "
        ".jp-OutputArea-child:has(> .jp-OutputArea-output.jupyter-widgets),\n"
        f"{area}:has({twin}) {dead} {{ display: none; }}\n"
        ".nba-orphan { border: 1px solid var(--jp-warn-color0, #f57c00); border-left-width: 3px;"
        " border-radius: 4px; padding: 4px 8px; margin: 4px 0;"
        " font-size: var(--jp-ui-font-size1, 13px); }\n"
    )


IDLE_TWIN = {
    "text/html": '<div class="nba-twin-idle"></div>'
    "<style>.jp-OutputArea-child:has(.nba-twin-idle) { display: none; }</style>",
    "text/plain": "",
}
"""The twin while the live view needs no stand-in (running, or static itself)."""


def orphan_words(chat: Chat, pending: Sequence[Entry]) -> tuple[str, list[str], str]:
    """What to tell someone who reopens the notebook with a new kernel.

    Returns a sentence, the code that decides the call, and a last sentence.
    """
    calls = [e for e in pending if isinstance(e, CallEntry)]
    names = ", ".join(f"{e.name} ({e.call_id})" for e in calls) or "a step budget"
    lead = (
        f"{names[:1].upper()}{names[1:]} was waiting for a decision in a kernel session that "
        "has ended (the notebook was reopened, or its kernel restarted): its buttons can no "
        "longer reach the chat."
    )
    location = _store_location(chat)
    first = calls[0].call_id if calls else "<call id>"
    if location is None:
        return (
            lead,
            [],
            "This chat had no store, so its state ended with that kernel: run the cells "
            'again to ask anew. With Chat(store="chats.db"), pending decisions outlive the '
            "kernel and Chat.load(...) then chat.approve(...) decide them.",
        )
    q = json.dumps  # double-quoted Python strings, like the rest
    code = [
        f"chat = Chat.load({q(chat.id)}, store={q(location)}, tools=[...])",
        f'chat.approve("{first}")  # or chat.deny("{first}", reason="...")',
        "chat.complete()",
    ]
    tail = f'Or from any process: open_store({q(location)}).approve("{first}").'
    return lead, code, tail


def _store_location(chat: Chat) -> str | None:
    for ext in chat.extensions:
        location = getattr(getattr(ext, "store", None), "location", None)
        if isinstance(location, str):
            return location
    return None


def twin_bundle(
    chat: Chat,
    state: ChatState,
    turn: int | None,
    uid: str,
    *,
    skip: frozenset[str] = frozenset(),
    title: str = "",
) -> dict[str, str]:
    """The static stand-in of a view that waits for a decision (see :func:`twin_css`)."""
    data = bundle_for(state, turn, skip=skip, title=title)
    with state.lock:
        pending = [
            e
            for e in state.entries_for(turn)
            if isinstance(e, (CallEntry, BudgetEntry)) and e.pending and e.key not in skip
        ]
    lead, code, tail = orphan_words(chat, pending)
    block = "\n".join(code)
    notice = f"<div><b>{html.escape(lead)}</b></div>"
    if code:
        notice += f'<div>To decide it now:</div><pre class="nba-json">{html.escape(block)}</pre>'
    notice += f"<div>{html.escape(tail)}</div>"
    data["text/html"] = (
        f"<style>{twin_css(uid)}</style>"
        f'<div class="nba-twin-{uid}">{data["text/html"]}'
        f'<div class="nba-chat nba-orphan">{notice}</div></div>'
    )
    data["text/plain"] += "\n".join(["", lead, *(f"    {line}" for line in code), tail])
    fence = f"\n\n```python\n{block}\n```" if code else ""
    data["text/markdown"] += f"\n\n> **{html.escape(lead)}**{fence}\n\n{html.escape(tail)}"
    return data


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
        self._slot = DisplaySlot(self.display_id)
        self._last: str | None = None
        self.state.add_listener(self._on_change)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return bundle_for(self.state, self.turn)

    def display(self) -> None:
        data = self._repr_mimebundle_()
        self._last = data["text/html"]
        self._slot.show(data)
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
