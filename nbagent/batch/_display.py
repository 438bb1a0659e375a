"""Where a batch shows its progress: a live widget in a notebook, a bar on stderr elsewhere.

- In a Jupyter kernel with ipywidgets: an ``ipywidgets.HTML`` whose value is
  :func:`~nbagent.batch._progress.progress_html`, shown as a
  :class:`~nbagent._display.LiveOutput` (beside its static ``text/html`` and
  ``text/plain``; its twin holds the bar for a notebook reopened while rows
  were parked). It is redrawn at most every ``interval`` seconds while
  something changes, and stays live while parked rows are continued in the
  background; when every row is final its output becomes the static final bar
  and the widget is closed.
- In a terminal: one line on stderr, redrawn in place (``\\r``) at most every
  ``interval`` seconds when stderr is a TTY; otherwise (a log file, CI) one
  line every 10 % of the rows or 30 s, whichever comes first, and the last.
- ``progress=False``: nothing.

Updates come from a ticker task on the batch's event loop, never from the
progress sink itself (which may be called from any thread, thousands of times).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from typing import Any, TextIO

from .._display import LiveOutput, close_models, ended_note, widgets_available
from .._notice import in_kernel
from ._progress import Progress, Snapshot, progress_html, progress_text, summary_line


class ProgressDisplay:
    """Shows nothing (``progress=False``); the base of the two real ones."""

    interval = 0.25

    def __init__(self, progress: Progress, title: str = "batch") -> None:
        self.progress = progress
        self.title = title
        self._seen = -1
        self._ticker: asyncio.Task[None] | None = None
        self.ended = False
        self._lock = threading.RLock()  # ticks come from the batch's loop, republish from a cell

    def show(self) -> None:
        """Put the display in place (on the thread of the cell that runs the batch)."""

    def draw(self, snap: Snapshot, final: bool) -> None:
        """Show ``snap`` (``final``: nothing will change any more)."""

    def republish(self) -> None:
        """Send the display's current form again, from the thread of a running cell (what
        a saved notebook keeps: nbclient reads only the running cell's messages)."""

    def tick(self, final: bool = False) -> None:
        with self._lock:
            if self.ended or (not final and self.progress.version == self._seen):
                return
            self.ended = final
            self._seen = self.progress.version
            with contextlib.suppress(Exception):  # a display must never break the batch
                self.draw(self.progress.snapshot(), final)

    @property
    def closed(self) -> bool:
        """Nothing more is drawn (a widget closed, or off the page)."""
        return False

    def start(self) -> None:
        """Start redrawing from the running loop (idempotent)."""
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.get_running_loop().create_task(self._tick_loop())

    async def _tick_loop(self) -> None:
        while not self.closed:
            self.tick()
            await asyncio.sleep(self.interval)

    def stop(self, final: bool) -> None:
        """Stop redrawing; draw once more (``final``: the last state)."""
        if self._ticker is not None:
            self._ticker.cancel()
        self.tick(final=True) if final else self.tick()

    async def stopped(self) -> None:
        """Wait until the ticker task has ended (after :meth:`stop`, on its loop)."""
        ticker, self._ticker = self._ticker, None
        if ticker is not None and ticker.get_loop() is asyncio.get_running_loop():
            with contextlib.suppress(asyncio.CancelledError):
                await ticker


class WidgetDisplay(ProgressDisplay):
    """The notebook's live progress widget (see the module docstring)."""

    def __init__(self, progress: Progress, title: str = "batch") -> None:
        super().__init__(progress, title)
        import ipywidgets

        self.widget = ipywidgets.HTML(value=progress_html(progress.snapshot(), title))
        self.output = LiveOutput(
            "nbagent-batch", self.static, self._ended, self._lock, cleared=self._off_page
        )
        self.output.attach(self.widget)

    def _off_page(self) -> None:
        """The cell that showed the bar ran again or was deleted: the widget closes and the
        ticker stops at its next tick; the batch goes on (its parked rows too)."""
        with self._lock:
            close_models([self.widget])

    @property
    def closed(self) -> bool:
        """The output is the static final bar; the widget is closed."""
        return not self.output.live

    def static(self) -> dict[str, Any]:
        """The bar now, as HTML and text."""
        snap = self.progress.snapshot()
        return {"text/plain": progress_text(snap), "text/html": progress_html(snap, self.title)}

    def _ended(self) -> dict[str, Any]:
        return ended_note(
            self.static(),
            "This batch ran in a kernel session that has ended: these are its counts when the "
            "notebook was saved. Run the cell again to go on (with a store, finished rows are "
            "read back, not rerun).",
            "This batch ran in a kernel session that has ended (counts as saved); run the cell "
            "again to go on.",
        )

    def show(self) -> None:
        self.output.show()

    def republish(self) -> None:
        with self._lock:
            snap = self.progress.snapshot()
            if snap.counts["done"] + snap.counts["failed"] == snap.total and not self.ended:
                self.tick(final=True)  # every row is final: the static bar, whoever ends the run
            self.output.refresh(force=True)

    def draw(self, snap: Snapshot, final: bool) -> None:
        if self.closed:
            return
        self.widget.value = progress_html(snap, self.title)
        if final:
            self.output.go_static()
            close_models([self.widget])
        else:
            self.output.refresh_twin()  # the counts a reopened notebook shows


class TerminalDisplay(ProgressDisplay):
    """A text bar on stderr (see the module docstring)."""

    def __init__(
        self, progress: Progress, title: str = "batch", stream: TextIO | None = None
    ) -> None:
        super().__init__(progress, title)
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(callable(isatty) and isatty())
        self.interval = 0.5 if self.tty else 1.0
        self._last_line = time.monotonic()
        self._last_share = 0.0
        self._width = 0

    def draw(self, snap: Snapshot, final: bool) -> None:
        if self.tty:
            line = progress_text(snap)
            pad = max(0, self._width - len(line))
            self.stream.write("\r" + line + " " * pad + ("\n" if final else ""))
            self._width = len(line)
            self.stream.flush()
            return
        share = snap.settled / snap.total if snap.total else 1.0
        now = time.monotonic()
        if final or share - self._last_share >= 0.1 or now - self._last_line >= 30:
            self.stream.write(f"nbagent: batch {summary_line(snap)}\n")
            self.stream.flush()
            self._last_share, self._last_line = share, now


def make_display(
    progress: Progress, mode: bool | str | None, title: str = "batch"
) -> ProgressDisplay:
    """The display for ``nbagent.batch(progress=mode)``: ``None`` (auto), ``True``,
    ``False``, ``"widget"`` or ``"text"``."""
    if mode is False:
        return ProgressDisplay(progress, title)
    if mode == "text":
        return TerminalDisplay(progress, title)
    if mode in (None, True, "widget") and in_kernel() and widgets_available():
        return WidgetDisplay(progress, title)
    if mode == "widget":
        raise ValueError("progress='widget' needs a Jupyter kernel with ipywidgets")
    if mode not in (None, True):
        raise ValueError(f"progress must be True, False, 'widget' or 'text', got {mode!r}")
    return TerminalDisplay(progress, title)


__all__ = ["ProgressDisplay", "TerminalDisplay", "WidgetDisplay", "make_display"]
