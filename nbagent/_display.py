"""How every widget nbagent draws is shown, so that a saved notebook still shows it.

A :class:`LiveOutput` is two outputs with display ids: the widget's mime beside
its static forms (``text/html``, ``text/plain``...), which becomes the static
forms alone once the widget has nothing more to do (:meth:`LiveOutput.go_static`),
and a *twin* that holds the static form while the widget is live, hidden by
CSS (:func:`twin_css`) except where JupyterLab draws the widget dead. Nothing
here knows about chats: the owner gives the static forms.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from ._notice import in_kernel, notice, shell

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

Bundle = dict[str, Any]


# ------------------------------------------------------------------ after the cell
# Displayed objects whose static forms are behind; flushed after every cell.
_dirty: weakref.WeakSet[Any] = weakref.WeakSet()
_hook_lock = threading.Lock()
_hooked = False


def mark_dirty(obj: Any) -> None:
    """Call ``obj._update_fallback()`` after the running cell (held weakly)."""
    _dirty.add(obj)
    hook_post_run_cell()


def flush_dirty(*_args: Any) -> None:
    """Refresh every displayed object whose static forms are stale (the post_run_cell hook)."""
    for obj in list(_dirty):
        _dirty.discard(obj)
        with contextlib.suppress(Exception):  # a display hook must never break a cell
            obj._update_fallback()


def hook_post_run_cell() -> None:
    """Register :func:`flush_dirty` (after each cell) and :func:`clear_cells` (before each
    cell) with IPython once (no-op outside IPython)."""
    global _hooked
    with _hook_lock:
        if _hooked:
            return
        ip = shell()
        if ip is None:
            return
        ip.events.register("post_run_cell", flush_dirty)
        ip.events.register("pre_run_cell", clear_cells)
        _hooked = True


# ------------------------------------------------------------ a cell run again
# The outputs each cell showed, by the cell's id (JupyterLab and Notebook 7 send it with
# each run, and the ids of the cells deleted since the last run). When a cell runs again,
# or was deleted, the front end has removed what it showed: the owners of those outputs
# let go of what only the outputs needed (:class:`LiveOutput`'s ``cleared``).
_by_cell: dict[str, list[weakref.ref[LiveOutput]]] = {}
_cells_lock = threading.Lock()


def running_cell_id() -> str | None:
    """The id the front end gave the cell running now (``None``: no kernel, or a client
    that sends none, as nbclient and papermill)."""
    get_parent = getattr(getattr(shell(), "kernel", None), "get_parent", None)
    if get_parent is None:
        return None
    try:
        meta = (get_parent() or {}).get("metadata")
    except Exception:  # an older kernel, or none running
        return None
    cell = meta.get("cellId") if isinstance(meta, dict) else None
    return cell if isinstance(cell, str) and cell else None


def clear_cells(info: Any = None) -> None:
    """Before a cell runs (IPython's ``pre_run_cell``): the outputs the cell showed in its
    last run, and those of the cells deleted since, are gone from the page; tell them."""
    ids: list[str] = []
    cell = getattr(info, "cell_id", None)
    if isinstance(cell, str) and cell:
        ids.append(cell)
    meta = getattr(info, "cell_meta", None)
    deleted = meta.get("deletedCells") if isinstance(meta, dict) else None
    if isinstance(deleted, list):
        ids += [d for d in deleted if isinstance(d, str)]
    for cell in ids:
        with _cells_lock:
            refs = _by_cell.pop(cell, [])
        for ref in refs:
            output = ref()
            if output is not None:
                with contextlib.suppress(Exception):  # a display hook must never break a cell
                    output.cleared_from(cell)


def _note_cell(output: LiveOutput) -> None:
    """``output`` is being shown in the running cell: note it under the cell's id."""
    cell = running_cell_id()
    if cell is None:
        return
    with _cells_lock:
        if cell in output.cells:
            return
        output.cells.add(cell)
        refs = [r for r in _by_cell.get(cell, ()) if r() is not None]
        refs.append(weakref.ref(output))
        _by_cell[cell] = refs
    hook_post_run_cell()


_hinted = False


def widgets_available() -> bool:
    """Inside an IPython kernel with ipywidgets and anywidget importable (else, once, why not)."""
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


def close_models(widgets: Any, keep: Any = ()) -> None:
    """Close ``widgets`` with their own ``layout`` and ``style`` models (``Widget.close()``
    leaves those open: each closed widget would leave two models in the kernel and the
    page), except the models in ``keep`` (shared by several widgets)."""
    kept = {id(k) for k in keep}
    models: dict[int, Any] = {}
    for w in widgets:
        if w is None:
            continue
        models[id(w)] = w
        for part in (getattr(w, "layout", None), getattr(w, "style", None)):
            if part is not None and callable(getattr(part, "close", None)):
                models[id(part)] = part
    for key, model in models.items():
        if key not in kept:
            with contextlib.suppress(Exception):  # closing twice, or a comm already gone
                model.close()


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
        self._last: str | None = None  # what was sent last (an unchanged bundle is not resent)
        self._reserved = False  # _parent is the cell to show in (reserve)

    def reserve(self) -> None:
        """Take the running cell as the one a later :meth:`show` displays in (from any thread)."""
        pub = _display_pub()
        parent = getattr(pub, "parent_header", None)
        self._parent = dict(parent) if isinstance(parent, dict) and parent else None
        self._reserved = True

    def show(self, data: Bundle, *, flush: bool = True) -> None:
        """Display ``data`` in the running cell (or the one :meth:`reserve` took).

        ``flush``: send what was printed first (``False``: this output takes the place it
        was reserved in, before text printed since and not sent yet).
        """
        pub = _display_pub()
        if not self._reserved:
            self.reserve()
        self._reserved = False
        # Straight on the kernel's session: IPython's display flushes stdout and stderr
        # first, each a wait for the I/O thread, also when nothing was printed; here only
        # a stream with text waiting is flushed (the output comes after what was printed).
        parent = self._parent
        if parent is None or getattr(pub, "session", None) is None:
            from IPython.display import display

            display(data, raw=True, display_id=self.display_id)
        else:
            if flush:
                _flush_streams()
            _send(pub, data, self.display_id, parent, "display_data")
        self.shown = True
        self._last = _key(data)

    def update(self, data: Bundle, *, force: bool = False) -> None:
        """Send ``data`` to the output, unless it is what the output shows (``force``: anyway)."""
        key = _key(data)
        if not self.shown or (key == self._last and not force):
            return
        self._last = key
        from IPython.display import update_display

        with contextlib.suppress(Exception):  # an update must never break the caller
            pub = _display_pub()
            current = getattr(pub, "parent_header", None) or {}
            original = self._parent
            elsewhere = original is not None and current.get("msg_id") != original.get("msg_id")
            sent = elsewhere and _send(pub, data, self.display_id, original or {})
            if sent and not current:
                return  # no cell is running: nobody else to tell
            # Under the running cell's header: straight on the kernel's session too. What
            # IPython's update_display adds is a flush of stdout and stderr first (two waits
            # for the I/O thread, most of what an update costs), which an update does not
            # need: it changes an output in place, its order among prints does not matter.
            if current and _send(pub, data, self.display_id, current):
                return
            update_display(data, raw=True, display_id=self.display_id)


def _send(
    pub: Any,
    data: Bundle,
    display_id: str,
    parent: dict[str, Any],
    kind: str = "update_display_data",
) -> bool:
    """Send ``update_display_data`` (or ``display_data``) under ``parent`` (ipykernel's
    publisher, no shared state); ``False`` where there is no kernel session to send on."""
    session = getattr(pub, "session", None)
    socket = getattr(pub, "pub_socket", None)
    if session is None or socket is None:
        return False
    content = {"data": data, "metadata": {}, "transient": {"display_id": display_id}}
    msg = session.msg(kind, content, parent=parent)
    for hook in getattr(pub, "_hooks", ()):  # what ipykernel's publisher does with a message
        msg = hook(msg)
        if msg is None:
            return True  # taken by a hook (an output capture)
    session.send(socket, msg, ident=getattr(pub, "topic", b"display_data"))
    return True


def _flush_streams() -> None:
    """Flush stdout and stderr where they may hold text not yet sent (ipykernel's streams
    say when they have a flush scheduled; any other stream is flushed)."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "_flush_pending", True) or getattr(
            stream, "_subprocess_flush_pending", False
        ):
            with contextlib.suppress(Exception):
                stream.flush()


def _display_pub() -> Any:
    return getattr(shell(), "display_pub", None)


# --------------------------------------------------------------------- the twin
def twin_css(uid: str) -> str:
    """Rules that show the twin only where the live widget ``uid`` is dead.

    Hidden by default (a live JupyterLab, VS Code, Colab, nbconvert show the
    widget or its own fallback); shown, and the dead widget hidden, where
    JupyterLab draws "model not found" (no widget state saved), a view restored
    from saved state with no kernel (``jupyter-widgets-disconnected``), or the
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


IDLE_TWIN: Bundle = {
    "text/html": '<div class="nba-twin-idle"></div>'
    "<style>.jp-OutputArea-child:has(.nba-twin-idle) { display: none; }</style>",
    "text/plain": "",
}
"""The twin while the widget needs no stand-in (not displayed live, or static itself)."""


def ended_note(data: Bundle, html_note: str, text_note: str) -> Bundle:
    """``data`` with a note for whoever reopens the notebook (``html_note`` is trusted HTML)."""
    out = dict(data)
    out["text/html"] = f'{data.get("text/html", "")}<div class="nba-orphan">{html_note}</div>'
    out["text/plain"] = f"{data.get('text/plain', '')}\n{text_note}"
    if "text/markdown" in data:
        out["text/markdown"] = f"{data['text/markdown']}\n\n> {text_note}"
    return out


# -------------------------------------------------------------------- the output
class LiveOutput:
    """A widget in a cell, with its static forms and its twin (see the module docstring).

    Args:
        name: The start of the display ids (``nbagent-batch``...).
        static: The current static forms (``text/html``, ``text/plain``...).
        twin: What the twin shows while the widget is live, or ``None`` for
            nothing now; by default the static forms. ``False``: no twin output.
        lock: Held while the bundles are made and sent: the owner's own lock when
            ``static`` or ``twin`` take it (one lock, one order), else a new one.
        twin_needed: Display the twin only once it may be needed: when the output goes
            live, or at the end of the cell that showed it if this says the owner may
            still go live (a chat view: its chat still runs). ``None``: with the output.
        cleared: Called (on the kernel's main thread, before the next cell) once every
            cell the output was shown in has run again or was deleted: the front end
            removed it, so its widgets can go (see :func:`clear_cells`). The output is
            then no longer live and sends nothing more, until shown again.
    """

    def __init__(
        self,
        name: str,
        static: Callable[[], Bundle],
        twin: Callable[[], Bundle | None] | bool = True,
        lock: Any = None,
        twin_needed: Callable[[], bool] | None = None,
        cleared: Callable[[], Any] | None = None,
    ) -> None:
        self.uid = uuid.uuid4().hex[:8]
        self.display_id = f"{name}-{self.uid}"
        self.widget: Any = None
        self.live = False
        self._static = static
        self._twin: Callable[[], Bundle | None] | None = (
            (static if twin else None) if isinstance(twin, bool) else twin
        )
        self._slot = DisplaySlot(self.display_id)
        self._twin_slot = DisplaySlot(f"{self.display_id}-twin")
        self._pinned: Bundle | None = None  # what go_static(data) was told to show
        self._later = False  # show at the first refresh (show_later)
        self._twin_needed = twin_needed
        self._lock = lock if lock is not None else threading.RLock()
        self._cleared = cleared
        self.cells: set[str] = set()  # the ids of the cells it was shown in (running_cell_id)

    @property
    def shown(self) -> bool:
        return self._slot.shown

    def attach(self, widget: Any) -> None:
        """Make ``widget`` what the output shows live (again, after :meth:`go_static`)."""
        widget.add_class(f"nba-live-{self.uid}")  # the twin's CSS finds the widget by it
        self.widget = widget
        self.live = True
        self._pinned = None

    def bundle(self) -> Bundle:
        """The output's bundle now: the static forms, and the widget's mime while live."""
        if not self.live and self._pinned is not None:
            return dict(self._pinned)
        data = dict(self._static())
        if self.live and self.widget is not None:
            data[WIDGET_MIME] = {
                "version_major": 2,
                "version_minor": 0,
                "model_id": self.widget.model_id,
            }
        return data

    def twin_bundle(self) -> Bundle:
        """The twin's bundle now (idle unless the widget is live and has a stand-in)."""
        data = self._twin() if self.live and self._twin is not None else None
        if data is None:
            return IDLE_TWIN
        uid = self.uid
        out = dict(data)
        out["text/html"] = (
            f'<style>{twin_css(uid)}</style><div class="nba-twin-{uid}">{data["text/html"]}</div>'
        )
        return out

    def show_later(self) -> None:
        """Display the output and its twin at the first :meth:`refresh` (from any thread),
        in the cell running now: an owner about to change at once sends one output, not an
        output and then its update. The owner must refresh before the cell ends (its
        ``_update_fallback`` after the cell does)."""
        with self._lock:
            if self._slot.shown:
                return
            _flush_streams()  # what was printed so far comes first; what is printed next, after
            _note_cell(self)
            self._slot.reserve()
            self._twin_slot.reserve()
            self._later = True
            mark_dirty(self)

    def show(self) -> None:
        """Display the output and its twin in the running cell (again: the output only)."""
        with self._lock:
            later, self._later = self._later, False
            if not later:  # else noted when reserved (this may be another thread)
                _note_cell(self)
            data = self.bundle()
            shown = self._slot.shown
            self._slot.show(data, flush=not later)  # later: before what was printed since
            if shown:
                return
            self._twin_slot.reserve()  # the twin goes in this cell, now or later
            if self.live or self._twin_needed is None:
                self._show_twin()
            mark_dirty(self)  # after the cell: the twin as the cell left it

    def _show_twin(self) -> None:
        if self._twin is not None and self._slot.shown and not self._twin_slot.shown:
            self._twin_slot.show(self.twin_bundle(), flush=False)

    def refresh(self, *, force: bool = False) -> None:
        """Update the output and the twin where they changed (``force``: send both anyway)."""
        with self._lock:
            if self._later:
                self.show()
                return
            self._slot.update(self.bundle(), force=force)
            if self.live:
                self._show_twin()
            self.refresh_twin(force=force)

    def refresh_twin(self, *, force: bool = False) -> None:
        """Update the twin only (cheap: the widget is not drawn again)."""
        if self._twin is None:
            return
        with self._lock:
            self._twin_slot.update(self.twin_bundle(), force=force)

    def go_static(self, data: Bundle | None = None) -> None:
        """Show the static forms alone in the output; the twin goes idle.

        ``data``: show this instead, until the output is live again (a view's
        "continued in cell [n]"). The owner closes its widgets after this.
        """
        with self._lock:
            self.live = False
            self._pinned = data
            if self._later:
                self.show()
                return
            data = dict(self._static()) if data is None else data
            self._slot.update(data, force=True)
            self.refresh_twin()

    def cleared_from(self, cell: str) -> None:
        """The front end removed what ``cell`` showed (it ran again, or was deleted)."""
        with _cells_lock:
            self.cells.discard(cell)
            if self.cells:
                return
        with self._lock:  # off the page: nothing more is sent to it (show() shows it anew)
            self.live = False
            self._later = False
            self._slot.shown = self._twin_slot.shown = False
        if self._cleared is not None:
            self._cleared()

    def _update_fallback(self) -> None:
        if self.live or (self._twin_needed is not None and self._twin_needed()):
            with self._lock:
                self._show_twin()
        if self.live:
            self.refresh_twin()  # not the widget's output: that would draw the widget again
        else:
            self.refresh()


def _key(data: Bundle) -> str:
    return str(data.get("text/html", "")) + str(data.get(WIDGET_MIME, ""))


def enable_inline_png() -> None:
    """Make a bare matplotlib ``Figure`` display as a PNG in IPython, even before pyplot is
    imported (the log's and the scorecard's plots return one)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is None:
        return
    from IPython.core.pylabtools import print_figure
    from matplotlib.figure import Figure

    formatter = ip.display_formatter.formatters["image/png"]
    if Figure not in formatter.type_printers:
        formatter.for_type(Figure, lambda fig: print_figure(fig, "png", bbox_inches="tight"))


__all__ = [
    "IDLE_TWIN",
    "WIDGET_MIME",
    "DisplaySlot",
    "LiveOutput",
    "clear_cells",
    "close_models",
    "enable_inline_png",
    "ended_note",
    "flush_dirty",
    "hook_post_run_cell",
    "mark_dirty",
    "running_cell_id",
    "twin_css",
    "widgets_available",
]
