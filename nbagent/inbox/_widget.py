"""The inbox's widget: one anywidget model over an :class:`~nbagent.inbox.Inbox`.

The kernel sends plain values (``rows``, ``decided``, the filter's controls,
a ``preview``); the front end (``inbox.js``) draws them with ``textContent``
only, keeps the selection, and answers with two traits:

- ``query`` ``{"tool", "server", "text"}``: the filter controls changed;
- ``action`` ``{"kind", "keys", "reason", "verb", "token", "nonce"}``: a button.
  ``approve`` / ``deny`` decide the selected ``keys``; ``preview`` asks what
  "approve (or deny) all matching" covers, and the kernel answers with
  ``preview`` ``{"token", "verb", "count", "calls", "filter"}``; ``confirm``
  (with that ``token``) decides exactly the previewed calls; ``cancel`` drops the
  preview; ``refresh`` reads the sources again.

One action at a time; a repeated nonce is ignored; the front end disables
its buttons on the first click and the kernel answers with ``state`` (``idle``
after ``working``), ``summary`` and ``error``. ``stale`` says the rows are as last read
(their sources cannot be read now) until a read works again. Every text the kernel
builds from a reason, an error, a filter or a source goes through ``shown`` (no secrets,
no control characters). Tests drive it as the browser
does with :meth:`InboxWidget.click` and by setting ``query``.
"""

from __future__ import annotations

import itertools
import secrets
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anywidget
import traitlets

from ._present import chat_name, one_line, shown

if TYPE_CHECKING:
    from ._filter import Filter
    from ._sources import Outcome, Row, Verdict


class InboxSide(Protocol):
    """What the widget asks of its :class:`~nbagent.Inbox` (the inbox makes the widget, so
    the widget names no ``_inbox`` import: the package stays free of cycles)."""

    @property
    def sources(self) -> str: ...
    @property
    def current_filter(self) -> Filter: ...

    def snapshot(self) -> dict[str, Any]: ...
    def set_controls(self, tool: str, server: str, text: str) -> None: ...
    def matching_rows(self) -> list[Row]: ...
    def rows_for_keys(self, keys: list[str]) -> list[Row]: ...
    def decide_rows(
        self, rows: list[Row], verdict: Verdict, reason: str | None
    ) -> list[Outcome]: ...
    def refresh(self) -> Any: ...


_HERE = Path(__file__).parent
_nonces = itertools.count(1)


class InboxWidget(anywidget.AnyWidget):
    """The inbox in a notebook (see the module docstring)."""

    # As text, not paths: anywidget connects every instance made with a path to the file's
    # change signal (for hot reloading), which keeps each widget, and what its handlers
    # hold (a view, its chat), for the life of the process.
    _esm = (_HERE / "inbox.js").read_text(encoding="utf-8")
    _css = (_HERE / "inbox.css").read_text(encoding="utf-8")

    rows = traitlets.List(traitlets.Dict()).tag(sync=True)
    decided = traitlets.List(traitlets.Dict()).tag(sync=True)
    tools = traitlets.List(traitlets.Unicode()).tag(sync=True)
    servers = traitlets.List(traitlets.Unicode()).tag(sync=True)
    query = traitlets.Dict({"tool": "", "server": "", "text": ""}).tag(sync=True)
    python_filter = traitlets.Unicode("").tag(sync=True)
    filter_problem = traitlets.Unicode("").tag(sync=True)
    sources = traitlets.Unicode("").tag(sync=True)
    clock = traitlets.Unicode("").tag(sync=True)
    preview = traitlets.Dict({}).tag(sync=True)
    state = traitlets.Unicode("idle").tag(sync=True)
    summary = traitlets.Unicode("").tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)
    stale = traitlets.Unicode("").tag(sync=True)
    """Why the rows are as last read (their sources cannot be read now); ``""`` when fresh."""
    action = traitlets.Dict({}).tag(sync=True)

    def __init__(self, inbox: InboxSide, **kwargs: Any):
        super().__init__(**kwargs)
        self._inbox = inbox
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        self._preview_rows: list[Row] = []
        self._preview_reason: str | None = None
        self.observe(self._on_action, names="action")
        self.observe(self._on_query, names="query")
        self.on_msg(self._on_custom_msg)
        self.update_from_inbox()

    def __repr__(self) -> str:
        return f"InboxWidget({len(self.rows)} pending, state={self.state!r})"

    # --------------------------------------------------------------- kernel
    def update_from_inbox(self) -> None:
        snap = self._inbox.snapshot()
        f = snap["filter"]
        plain = {
            "tool": f.tool if isinstance(f.tool, str) else "",
            "server": f.server if isinstance(f.server, str) else "",
            "text": f.text,
        }
        beyond = (  # the Python filter asks what the controls cannot show
            not isinstance(f.tool, str | None) or not isinstance(f.server, str | None) or f.where
        )
        with self.hold_sync():
            self.rows = snap["rows"]
            self.decided = snap["decided"]
            self.tools = snap["tools"]
            self.servers = snap["servers"]
            if self.query != plain:
                self.query = plain
            self.python_filter = (
                f"{shown(f.describe())} (set from Python: inbox.filter() clears it)"
                if beyond
                else ""
            )
            self.filter_problem = (
                "The filter " + shown("; ".join(f.problems)) + ": it matches nothing until fixed."
                if f.problems
                else ""
            )
            self.sources = shown(self._inbox.sources)
            self.clock = snap["clock"]
            stale = snap.get("stale") or ""
            self.stale = f"The inbox {stale}." if stale else ""

    def _on_custom_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("event") == "rendered":
            self.clock = datetime.now(UTC).isoformat()  # the front end counts ages from it

    def _on_query(self, change: dict[str, Any]) -> None:
        new = change.get("new") or {}
        if not isinstance(new, dict):
            return
        tool, server, text = (str(new.get(k) or "") for k in ("tool", "server", "text"))
        if self.preview:  # it covered what the old filter matched: preview again
            self._preview_rows = []
            self.preview = {}
            self.summary = "The filter changed: the preview was dropped."
        self._inbox.set_controls(tool, server, text)

    def _on_action(self, change: dict[str, Any]) -> None:
        action = change.get("new") or {}
        if not isinstance(action, dict) or not action.get("kind"):
            return
        nonce = str(action.get("nonce", ""))
        with self._lock:
            if nonce in self._seen or self.state == "working":
                return  # the same click twice, or a click while one is applied
            self._seen.add(nonce)
            self.state = "working"
            self.error = ""
        try:
            self._apply(action)
        except Exception as exc:  # never lose an error in a comm handler
            self.error = shown(f"{type(exc).__name__}: {exc}")
        finally:
            if action.get("reason"):  # used: not kept in the state a notebook saves
                self.action = {}
            self.state = "idle"

    def _apply(self, action: dict[str, Any]) -> None:
        kind = action.get("kind")
        reason = str(action.get("reason") or "").strip() or None
        inbox = self._inbox
        if kind in ("approve", "deny"):
            keys = [str(k) for k in action.get("keys") or [] if isinstance(k, str)]
            if not keys:
                self.error = "Select calls first."
                return
            verdict: Verdict = "approved" if kind == "approve" else "denied"
            rows = inbox.rows_for_keys(keys)
            self._report(inbox.decide_rows(rows, verdict, reason), verdict, reason)
        elif kind == "preview":
            verb = "deny" if action.get("verb") == "deny" else "approve"
            rows = inbox.matching_rows()
            self._preview_rows = rows
            # the reason stays in the kernel: a synced trait is saved with the notebook
            self._preview_reason = reason
            self.preview = {
                "token": secrets.token_hex(8),
                "verb": verb,
                "count": len(rows),
                "filter": shown(inbox.current_filter.describe()),
                "calls": [{"key": r.key, "chat": chat_name(r), "line": one_line(r)} for r in rows],
            }
        elif kind == "confirm":
            preview = self.preview
            if not preview or action.get("token") != preview.get("token"):
                self.error = "That preview is gone; preview again."
                return
            rows, self._preview_rows = self._preview_rows, []
            self.preview = {}
            verdict = "denied" if preview.get("verb") == "deny" else "approved"
            reason, self._preview_reason = self._preview_reason or reason, None
            self._report(inbox.decide_rows(rows, verdict, reason), verdict, reason)
        elif kind == "cancel":
            self._preview_rows = []
            self.preview = {}
        elif kind == "refresh":
            inbox.refresh()
        else:
            self.error = f"unknown action {kind!r}"

    def _report(self, outcomes: list[Outcome], verdict: str, reason: str | None) -> None:
        done = sum(1 for o in outcomes if o.outcome == verdict)
        elsewhere = sum(1 for o in outcomes if o.outcome == "decided elsewhere")
        failed = [o for o in outcomes if o.outcome == "error"]
        verb = "Approved" if verdict == "approved" else "Denied"
        words = f"{verb} {done} call{'s' if done != 1 else ''}"
        if reason and verdict == "denied":
            words += f" ({shown(reason)})"
        if elsewhere:
            words += f"; {elsewhere} had been decided elsewhere (nothing recorded for them)"
        self.summary = words + "."
        if failed:
            self.error = "; ".join(shown(f"{o.tool} ({o.call_id}): {o.detail}") for o in failed)

    # ---------------------------------------------------------------- tests
    def click(
        self,
        kind: str,
        *,
        keys: list[str] | None = None,
        reason: str = "",
        verb: str = "approve",
        token: str | None = None,
    ) -> None:
        """Do what a click in the browser does: set ``action`` with a fresh nonce."""
        self.action = {
            "kind": kind,
            "keys": list(keys or []),
            "reason": reason,
            "verb": verb,
            "token": token if token is not None else self.preview.get("token", ""),
            "nonce": f"py-{next(_nonces)}",
        }
