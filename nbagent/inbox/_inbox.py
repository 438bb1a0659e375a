"""The approvals inbox: every pending approval across chats, decided from one place.

:class:`Inbox` keeps the pending rows of its sources (``_sources``), a filter
(``_filter``), and what it decided or saw decided elsewhere. Its Python API
(``pending``, ``filter``, ``preview``, ``approve``, ``deny``, ``refresh``)
and its widget (``_widget``: the same methods behind buttons) share one
implementation: :meth:`Inbox.decide_rows`.

**Never decided twice.** A decision goes through the chat (``chat.approve``,
whose store hook keeps the first decision across processes) or the store
(``store.approve``, first decision wins). Before deciding, the inbox reads
its sources again; a row decided meanwhile (another inbox, a card, another
process) records nothing and is reported as ``decided elsewhere`` with the
decision that stands. "Approve all matching" in the widget first shows a
preview of exactly the calls it covers and decides only those, after a
confirm.

**Who continues.** A live chat given to the inbox directly continues after
a decision as after a card click (the notebook's ``Continuation``: a task on
nbagent's background loop, which a cell driving the chat waits for); a chat from a batch
result is continued by its batch while the batch run still watches its
parked rows (``run.running``), and like a direct one once it stopped
watching; a stored chat by whichever process drives it (its view's refresh
poll, a batch's watch, or the next ``Chat.load``).

**Following.** While the widget is shown, the rows are refreshed through the
stores' followers (``nbagent.store.follow``, shared with everything else
following them): at once when a store reports a decision or a live chat emits
an approval event, and every :data:`POLL_SECONDS` for new pending calls.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .._approvals import HUMAN
from .._display import LiveOutput, close_models, ended_note, widgets_available
from .._errors import InputError, safe_display
from .._events import ApprovalDecided, ApprovalRequested, Event, StepFinished
from .._html import preview as clip_text
from .._types import PendingInput, ToolCall, by_machine
from ..store import follow
from ._filter import Filter, as_filter
from ._present import (
    chat_label,
    count_words,
    decided_words,
    html_table,
    one_line,
    row_view,
    shown,
    text_table,
)
from ._sources import (
    LiveSource,
    Outcome,
    Row,
    Source,
    Sources,
    StoreSource,
    Verdict,
    decided_elsewhere,
    sources_of,
)

if TYPE_CHECKING:
    import pandas as pd

    from ._widget import InboxWidget

POLL_SECONDS = 1.5
"""How often a shown inbox reads its stores (live chats refresh it by their events)."""

KEEP_DECIDED = 200
"""Decided rows the widget keeps showing (most recent first)."""

ALL = "all"
"""What ``approve``/``deny``/``preview`` take for every call the current filter covers."""

BY = "inbox"
"""Who decisions made in the inbox are recorded as (``decided_by``), unless ``by=`` says."""

_PENDING_TYPES = {
    "chat_id": "string",
    "call_id": "string",
    "tool": "string",
    "server": "string",
    "arguments": "object",
    "reason": "string",
    "requested_at": "utc",
    "age_s": "Float64",
    "hosted": "boolean",
    "source": "string",
    "title": "string",
}
_INPUT_TYPES = {
    **dict.fromkeys(("chat_id", "input_id", "kind", "call_id", "tool", "server"), "string"),
    "message": "string",
    "choices": "object",
    "requested_at": "utc",
    "age_s": "Float64",
    "title": "string",
    "source": "string",
}
_OUTCOME_TYPES = {
    **dict.fromkeys(("chat_id", "call_id", "tool", "outcome", "verdict", "by"), "string"),
    "at": "utc",
    "detail": "string",
}


class Inbox:
    """Pending approvals across chats (see the module docstring; make one with :func:`inbox`)."""

    def __init__(self, sources: Sources, *, by: str = BY, continue_chats: bool = True):
        if not isinstance(by, str) or not by or by == HUMAN:
            raise ValueError(
                f"by= names the inbox as the decider (default {BY!r}); got {by!r}"
                + (" ('user' is a card click's)" if by == HUMAN else "")
            )
        if by_machine(by):
            # machinery's names: a person's decision named so could be overruled, or ignored
            # as teaching nothing (suggest_policies)
            raise ValueError(
                f"by={by!r} names nbagent's own decider (a chat's resolver, rules or policy, "
                "the notebook's fallback, evaluate); name the inbox (by='inbox-ana')"
            )
        self._sources = sources
        self.by = by
        self.continue_chats = continue_chats
        self._lock = threading.RLock()  # the inbox's state
        self._op = threading.RLock()  # one refresh or decision round at a time
        self._filter = Filter()
        self._rows: dict[str, Row] = {}
        self._where: dict[str, Source] = {}
        self._decided: dict[str, tuple[Row, Outcome]] = {}
        self._listeners: list[Callable[[], Any]] = []
        self._continued: list[Any] = []  # Continuations started by decisions here
        self._widget: InboxWidget | None = None
        self._outputs: list[LiveOutput] = []  # where the widget is displayed
        self._follower: _Follower | None = None
        self._by_hand = False  # follow() was called: it follows even when shown nowhere
        self._trouble: tuple[datetime, str] | None = None  # since when reads fail, and why
        self._closed = False
        self._subscribe()
        self.refresh()

    # ----------------------------------------------------------------- reads
    def __repr__(self) -> str:
        with self._lock:
            rows, f = list(self._rows.values()), self._filter
        matching = sum(1 for r in rows if f.matches(r.tool, r.server, r.arguments))
        counted = count_words(matching, len(rows), _filter_words(f))
        return f"Inbox({counted}; {shown(self._sources.describe())})"

    @property
    def sources(self) -> str:
        """What the inbox reads, in words."""
        return self._sources.describe()

    def refresh(self) -> Inbox:
        """Read every source again: new pending calls appear, decided ones move to "decided".

        A live chat with a store applies decisions made elsewhere first
        (``chat.refresh()``) and, if it is the inbox's to continue, continues.
        """
        try:
            with self._op:
                self._refresh()
        except Exception as exc:  # a store that cannot be read: the widget says so
            self._read_failed(exc)
            raise
        with self._lock:
            self._trouble = None
        self._changed()
        return self

    @property
    def read_problem(self) -> str:
        """``""``, or why the last read of the sources failed and since when: the rows
        shown are as last read (calls there may have been decided elsewhere since). It is
        cleared by the next read that works."""
        with self._lock:
            trouble = self._trouble
        if trouble is None:
            return ""
        since, what = trouble
        return (
            f"cannot read its sources since {since:%H:%M:%S} UTC ({what}); "
            "the rows are as last read"
        )

    def _read_failed(self, exc: Exception) -> None:
        what = clip_text(shown(f"{type(exc).__name__}: {exc}"), 300)
        with self._lock:
            since = self._trouble[0] if self._trouble is not None else datetime.now(UTC)
            self._trouble = (since, what)
        self._changed()

    def _refresh(self) -> None:
        for joined in self._sources.adopt():  # chats a running batch started since
            self._subscribe_to(joined)
        for source in self._sources.live:
            chat = source.chat
            if chat.is_running:
                continue
            try:
                applied = chat.refresh()
            except Exception:  # a store that cannot be read now: the rows stay as they were
                applied = []
            if applied and source.continues and self.continue_chats:
                self._continue(chat)
        rows: dict[str, Row] = {}
        where: dict[str, Source] = {}
        live_ids: set[str] = set()
        for live in self._sources.live:
            live_ids.add(live.chat.id)
            for row in live.pending():
                rows.setdefault(row.key, row)
                where.setdefault(row.key, live)
        for stored in self._sources.stores:
            for row in stored.pending():
                if row.chat_id in live_ids:  # the live chat is the one to decide through
                    continue
                if row.key not in rows:
                    rows[row.key], where[row.key] = row, stored
        with self._lock:
            gone = [(k, r, self._where[k]) for k, r in self._rows.items() if k not in rows]
        for key, row, was in gone:  # decided (or ended) without this inbox
            with self._lock:
                if key in self._decided:
                    continue
            decision = was.decision(row)
            if decision is None:
                outcome = Outcome(
                    row.chat_id,
                    row.call_id,
                    row.tool,
                    "no longer pending",
                    detail="it left its chat with no decision recorded",
                )
            else:
                outcome = decided_elsewhere(row, decision)
            self._remember(row, outcome)
        if self._sources.batches:  # a batch's row is known by its input's key
            for key, row in rows.items():
                label = self._sources.batch_key(row.chat_id)
                if label is not None:
                    rows[key] = replace(row, batch_key=label)
        with self._lock:
            self._rows = dict(sorted(rows.items(), key=lambda kv: _order(kv[1])))
            self._where = where
            for key in rows:
                self._decided.pop(key, None)  # pending again (cannot happen; be safe)

    def _rows_now(self, refresh: bool) -> list[Row]:
        if refresh:
            self.refresh()
        with self._lock:
            return list(self._rows.values())

    def matching_rows(self, spec: Filter | None = None, refresh: bool = True) -> list[Row]:
        """The pending rows ``spec`` (default: the current filter) covers (read fresh)."""
        f = self._filter if spec is None else spec
        return [r for r in self._rows_now(refresh) if f.matches(r.tool, r.server, r.arguments)]

    @property
    def pending(self) -> pd.DataFrame:
        """The pending calls the current filter covers, one row each (read fresh).

        Columns: ``chat_id``, ``call_id``, ``tool``, ``server``, ``arguments`` (a
        dict), ``reason`` (why it is gated), ``requested_at`` (UTC), ``age_s``,
        ``hosted``, ``source`` (``chat``: a live chat here; ``store``), ``title``
        (the chat's first message). Pass it (or some of its rows) to
        :meth:`approve` / :meth:`deny`.
        """
        return _frame(self.matching_rows())

    def __len__(self) -> int:
        return len(self.matching_rows())

    @property
    def decided(self) -> pd.DataFrame:
        """What left the inbox: decided here (``approved``/``denied``), ``decided elsewhere``,
        or ``no longer pending`` (gone from its chat or store with no decision recorded)."""
        with self._lock:
            outcomes = [o for _, o in self._decided.values()]
        return _outcomes(outcomes)

    # --------------------------------------------------------------- inputs
    @property
    def inputs(self) -> pd.DataFrame:
        """The pending inputs (an external tool's result, ``ask_user``'s question, an MCP
        server's elicitation or sampling request), one row each, beside the approvals of
        :attr:`pending` (read fresh): the live chats' and those waiting in its stores
        (``store.pending_inputs()``; a chat that is also live here is listed once).

        Columns: ``chat_id``, ``input_id``, ``kind``, ``call_id``, ``tool``, ``server``,
        ``message``, ``choices`` (a tuple), ``requested_at`` (UTC), ``age_s``, ``title``,
        ``source`` (``live`` or ``store``). Answer one with :meth:`answer` or :meth:`decline`.
        """
        now = datetime.now(UTC)
        rows: list[dict[str, Any]] = []
        self._sources.adopt()
        live_ids = set()
        for source in self._sources.live:
            chat = source.chat
            live_ids.add(chat.id)
            for p in chat.pending_inputs:
                at = p.requested_at
                known = chat.record.input(p.id)
                if known is not None:
                    at = known.requested_at
                rows.append(_input_row(chat.id, p, at, chat.record.title, "live", now))
        for store in self._sources.stores:
            for si in store.inputs():
                if si.chat_id in live_ids:  # its live chat lists it (and answers it)
                    continue
                row = _input_row(
                    si.chat_id, si.request, si.requested_at, store.title(si.chat_id), "store", now
                )
                rows.append(row)
        rows.sort(key=lambda r: (r["requested_at"] or now, r["input_id"]))
        return _table(
            rows,
            _INPUT_TYPES,
            **{name: [r[name] for r in rows] for name in _INPUT_TYPES},
        )

    def answer(
        self, input_id: Any, data: Any = None, *, chat_id: str | None = None
    ) -> PendingInput:
        """Answer a pending input of :attr:`inputs` (``by`` the inbox). A live chat's carries
        on as after a decision here; a stored chat's is answered through its store
        (``store.answer``: first answer wins), applied by whichever process drives it.

        Args:
            input_id: A row of :attr:`inputs` (it names its chat), an input id or its call's
                id, a ``"chat_id/input_id"`` key, or a ``PendingInput``/``StoredInput``.
            data: The answer (see ``chat.answer``).
            chat_id: The chat it belongs to: needed when several chats wait for an input
                of this id (the demo model's ids repeat in every chat; a fork keeps its
                parent's call ids).

        Raises:
            InputError: Nothing here waits for it (or it was answered elsewhere first),
                several chats wait for an input of this id and ``chat_id`` names none of
                them, or ``data`` does not match what was asked (nothing changed).
        """
        chat, stored, key = self._input_owner(input_id, chat_id)
        if chat is None:
            source, si = stored
            return source.settle(si, "accept", data, None, self.by).request
        answered: PendingInput = chat.answer(key, data, by=self.by)
        self._continue_after_input(chat)
        return answered

    def decline(
        self, input_id: Any, reason: str | None = None, *, chat_id: str | None = None
    ) -> PendingInput:
        """Decline a pending input of :attr:`inputs` (``by`` the inbox), live or stored;
        ``input_id`` and ``chat_id`` as for :meth:`answer`.

        Raises:
            InputError: Nothing here waits for it, or several chats do (pass ``chat_id``).
        """
        chat, stored, key = self._input_owner(input_id, chat_id)
        if chat is None:
            source, si = stored
            return source.settle(si, "decline", None, reason, self.by).request
        declined: PendingInput = chat.decline(key, reason, by=self.by)
        self._continue_after_input(chat)
        return declined

    def _input_owner(self, ref: Any, chat_id: str | None) -> tuple[Any, Any, str]:
        """Who waits for the input ``ref`` names: ``(live chat, None, key)`` or
        ``(None, (store source, StoredInput), key)``. An id several chats wait for is
        refused unless ``chat_id`` (or ``ref``: a row, a key, a ``StoredInput``) says which.
        """
        key, named = _input_ref(ref)
        if named is not None:
            if chat_id is not None and chat_id != named:
                raise InputError(
                    f"input {key!r} is named in chat {named!r} but chat_id={chat_id!r}"
                )
            chat_id = named
        if chat_id is not None and not isinstance(chat_id, str):
            raise TypeError(f"chat_id must be a chat's id (a string), got {chat_id!r}")
        self._sources.adopt()
        live: dict[str, Any] = {}
        stored: dict[str, list[tuple[Any, Any]]] = {}
        for source in self._sources.live:
            chat = source.chat
            if chat.id in live:
                continue
            if any(key in (p.id, p.call_id) for p in chat.pending_inputs):
                live[chat.id] = chat
        live_ids = {s.chat.id for s in self._sources.live}
        waiting_ids = set(live_ids)  # chats a "chat_id/input_id" key may name
        for store in self._sources.stores:
            for si in store.inputs():
                waiting_ids.add(si.chat_id)
                if si.chat_id in live_ids or key not in (si.id, si.call_id):
                    continue
                found = stored.setdefault(si.chat_id, [])
                if all(si.id != s.id for _, s in found):  # one store given twice
                    found.append((store, si))
        if "/" in key and chat_id is None and not live and not stored:  # "chat_id/input_id"
            head, _, tail = key.partition("/")
            if head in waiting_ids:
                return self._input_owner(tail, head)
        chats = [*live, *stored]
        if chat_id is not None:
            chats = [c for c in chats if c == chat_id]
        if not chats:
            where = f" in chat {chat_id!r}" if chat_id is not None else ""
            raise InputError(
                f"no chat of this inbox waits for input {key!r}{where} (inbox.inputs lists "
                "the inputs waiting)"
            )
        if len(chats) > 1:
            raise InputError(
                f"input {key!r} is waited for in several chats ({', '.join(map(repr, chats))}); "
                "pass chat_id= (or a row of inbox.inputs) to choose; nothing was answered"
            )
        if chats[0] in live:
            return live[chats[0]], None, key
        found = stored[chats[0]]
        exact = [f for f in found if f[1].id == key]
        if len(exact) == 1 or len(found) == 1:
            return None, (exact or found)[0], key
        ids = ", ".join(repr(si.id) for _, si in found)
        raise InputError(f"call {key!r} waits for several inputs ({ids}); answer each by its id")

    def _continue_after_input(self, chat: Any) -> None:
        """A parked chat carries on once nothing else waits (as after a decision here)."""
        source = next((s for s in self._sources.live if s.chat is chat), None)
        if (
            source is None
            or not (self.continue_chats and source.continues)
            or chat.pending_inputs
            or chat.pending_approvals
        ):
            return
        self._continue(chat)

    # --------------------------------------------------------------- filter
    def filter(
        self,
        tool: Any = None,
        server: Any = None,
        where: Mapping[str, Any] | Callable[[dict[str, Any]], bool] | None = None,
        text: str = "",
    ) -> Inbox:
        """Show only the calls that match (every part given must hold); no arguments: all.

        Args:
            tool: A glob (``"write_*"``), a list of globs, or a predicate on the tool name.
            server: The same on the MCP server's label.
            where: Argument values, ``{"path": "/tmp/*", "force": True}`` (globs match
                the value as text; a callable is a predicate; dotted keys reach nested
                objects), or a predicate on the whole arguments dict.
            text: What the widget's filter box takes: ``path=/tmp/* overwrite``.

        Returns:
            The inbox (its widget shows the same filter).
        """
        spec = Filter(tool=tool, server=server, where=where, text=text).check()
        with self._lock:
            self._filter = spec
        self._changed()
        return self

    @property
    def current_filter(self) -> Filter:
        with self._lock:
            return self._filter

    def preview(self, what: Any = None) -> pd.DataFrame:
        """The pending calls :meth:`approve` / :meth:`deny` of ``what`` would decide.

        ``what`` as for :meth:`approve`; ``None`` or ``"all"``: every call the current
        filter covers (what the widget's "approve all matching" covers). Unlike
        :meth:`approve`, ``preview`` takes ``None`` and an empty dict (it decides nothing).
        """
        return _frame(self._resolve(what))

    # ------------------------------------------------------------- decisions
    def approve(self, what: Any, *, reason: str | None = None) -> pd.DataFrame:
        """Approve calls; each runs at most once, in the process that drives its chat.

        Args:
            what: Rows of :attr:`pending` (a DataFrame or one row), call ids or
                ``"chat_id/call_id"`` keys (one or a list), ``ToolCall`` /
                ``StoredCall`` objects (each in its own chat), a filter
                (``{"tool": ..., "where": {...}}`` or a :class:`Filter`): every pending
                call it matches, now; ``"all"``: every call the current filter covers
                (what :meth:`preview` lists); ``Filter()``: every pending call.
            reason: Kept with each decision.

        Returns:
            One row per call: ``outcome`` ``approved``, ``decided elsewhere`` (someone
            decided first; nothing recorded; ``verdict``/``by``/``at`` say what
            stands) or ``error`` (``detail``).

        Raises:
            TypeError: ``what`` is ``None`` (it names no call; nothing is decided).
            ValueError: ``what`` names a call this inbox never listed, or a call id
                found in several chats, or is a dict filter asking for nothing
                (``{}``, ``{"text": ""}``: say ``"all"`` or ``Filter()``); nothing is
                decided then.
        """
        return _outcomes(self.decide_rows(self._resolve(what, deciding=True), "approved", reason))

    def deny(self, what: Any, *, reason: str | None = None) -> pd.DataFrame:
        """Deny calls: they never run; the model is told why (``reason``, as ``chat.deny``)."""
        return _outcomes(self.decide_rows(self._resolve(what, deciding=True), "denied", reason))

    # the widget's side of the same operations
    def set_controls(self, tool: str, server: str, text: str) -> None:
        """The widget's filter controls changed (a Python ``where`` stays)."""
        with self._lock:
            self._filter = self._filter.with_ui(tool, server, text)
        self._changed()

    def rows_for_keys(self, keys: list[str]) -> list[Row]:
        """Rows of the widget's ``chat_id/call_id`` keys (read fresh; unknown keys skipped)."""
        self.refresh()
        known = self._known()
        return [known[k] for k in dict.fromkeys(keys) if k in known]

    def _known(self) -> dict[str, Row]:
        """Every row this inbox lists or decided, by key (pending ones win)."""
        with self._lock:
            return {**{k: r for k, (r, _) in self._decided.items()}, **self._rows}

    def _resolve(self, what: Any, *, deciding: bool = False) -> list[Row]:
        """The rows ``what`` names; every key checked before anything is decided.

        ``deciding`` (approve, deny): ``None``, an empty dict or a dict filter that asks
        for nothing is refused: a lookup that found nothing (``None``) or a filter built
        from empty input would otherwise decide every pending call. Everything is asked
        for by name: ``"all"`` (what the current filter covers) or ``Filter()``.
        """
        if isinstance(what, str) and what == ALL:
            return self.matching_rows()
        if what is None:
            if deciding:
                raise TypeError(
                    "approve/deny got None, which names no call (a lookup that found "
                    "nothing?); nothing was decided. Pass rows of inbox.pending, call ids, "
                    "a filter, or 'all' for every call the current filter covers"
                )
            return self.matching_rows()
        if isinstance(what, (Filter, Mapping)):
            spec = as_filter(what)
            if deciding and isinstance(what, Mapping) and spec.empty:
                raise ValueError(
                    f"approve/deny got the filter {dict(what)!r}, which asks for nothing and "
                    "so matches every pending call; nothing was decided. Say so explicitly: "
                    "Filter() for every pending call, or 'all' for what the current filter covers"
                )
            return self.matching_rows(spec)
        rows = self._rows_now(refresh=True)
        known = self._known()
        by_call: dict[str, list[Row]] = {}
        for r in known.values():
            by_call.setdefault(r.call_id, []).append(r)
        out: list[Row] = []
        for ref in _references(what):
            if isinstance(ref, tuple):
                key = f"{ref[0]}/{ref[1]}"
                if key not in known:
                    raise ValueError(f"no call {ref[1]!r} of chat {ref[0]!r} in this inbox")
                out.append(known[key])
                continue
            if ref in known:
                out.append(known[ref])
                continue
            hits = by_call.get(ref, [])
            if not hits:
                raise ValueError(
                    f"no call {ref!r} in this inbox ({len(rows)} pending; inbox.pending lists them)"
                )
            if len(hits) > 1:
                chats = ", ".join(h.chat_id for h in hits)
                raise ValueError(
                    f"call id {ref!r} is in several chats ({chats}); pass chat_id/call_id"
                )
            out.append(hits[0])
        return list({r.key: r for r in out}.values())

    def decide_rows(
        self, rows: Iterable[Row], verdict: Verdict, reason: str | None
    ) -> list[Outcome]:
        """Decide these rows (the widget's and :meth:`approve`/:meth:`deny`'s one path)."""
        if reason is not None and not isinstance(reason, str):
            raise TypeError("reason must be a string")
        reason = reason.strip() or None if reason is not None else None
        with self._op:
            outcomes, touched = self._decide_locked(rows, verdict, reason)
        for source in touched:
            if source.continues and self.continue_chats:
                self._continue(source.chat)
        self._changed()
        return outcomes

    def _decide_locked(
        self, rows: Iterable[Row], verdict: Verdict, reason: str | None
    ) -> tuple[list[Outcome], list[LiveSource]]:
        outcomes: list[Outcome] = []
        touched: dict[int, LiveSource] = {}
        for row in rows:
            with self._lock:
                source: Source | None = self._where.get(row.key)
                earlier = self._decided.get(row.key)
            if source is None:  # left the inbox: decided here or elsewhere already
                outcome = (
                    earlier[1]
                    if earlier is not None
                    else Outcome(row.chat_id, row.call_id, row.tool, "decided elsewhere")
                )
                if outcome.outcome != "decided elsewhere":  # this inbox decided it
                    detail = "already decided in this inbox"
                    outcome = replace(outcome, outcome="decided elsewhere", detail=detail)
                outcomes.append(outcome)
                continue
            outcome = source.decide(row, verdict, reason, self.by)
            if outcome.outcome in ("approved", "denied") and self._unwatched(source, row):
                outcome = replace(outcome, detail=_join(outcome.detail, RERUN))
            outcomes.append(outcome)
            if outcome.outcome != "error":
                self._remember(row, outcome)
                with self._lock:
                    self._rows.pop(row.key, None)
                    self._where.pop(row.key, None)
            if isinstance(source, LiveSource) and outcome.outcome in ("approved", "denied"):
                touched[id(source)] = source
        return outcomes, list(touched.values())

    def _unwatched(self, source: Source, row: Row) -> bool:
        """Whether nothing here continues the row's chat after a decision: a batch's chat
        this process does not hold (it ran on a Ray worker), decided through the store,
        whose batch run no longer watches its parked rows (it returned in a script)."""
        if not isinstance(source, StoreSource):
            return False
        return any(
            row.chat_id in ids and not getattr(holder, "running", False)
            for holder, ids in self._sources.batches
        )

    def _continue(self, chat: Any) -> None:
        """Run the chat's loop again, as a card click does (one driver at a time)."""
        from ..notebook import continuation_for

        cont = continuation_for(chat)
        with self._lock:
            if all(c is not cont for c in self._continued):
                self._continued.append(cont)
        cont.request()

    def wait(self, timeout: float | None = 30.0) -> bool:
        """Block until the chats this inbox continued have stopped (cells, scripts, tests).

        They continue on nbagent's background loop, as after a click; a cell that drives
        one of them meanwhile waits for it (one driver at a time).
        """
        with self._lock:
            conts = list(self._continued)
        return all(c.wait(timeout) for c in conts)

    def _remember(self, row: Row, outcome: Outcome) -> None:
        with self._lock:
            self._decided.pop(row.key, None)
            self._decided[row.key] = (row, outcome)
            while len(self._decided) > KEEP_DECIDED:
                self._decided.pop(next(iter(self._decided)))

    # ----------------------------------------------------------- following
    def _subscribe(self) -> None:
        ref = weakref.ref(self)

        def on_event(event: Event) -> None:
            inbox = ref()
            if inbox is None:
                return
            follower = inbox._follower
            if follower is not None:
                follower.poke()

        self._on_event = on_event
        for live in self._sources.live:
            self._subscribe_to(live)

    def _subscribe_to(self, live: LiveSource) -> None:
        for kind in (ApprovalRequested, ApprovalDecided, StepFinished):
            live.chat.on(kind, self._on_event)

    def follow(self) -> None:
        """Keep the rows fresh in the background (the widget does this while shown)."""
        with self._lock:
            self._by_hand = True
        self._follow()

    def _follow(self) -> None:
        with self._lock:
            if self._follower is None and not self._closed:
                stores = [(s.store, s.only) for s in self._sources.stores]
                self._follower = _Follower(self, stores)

    def close(self) -> None:
        """Stop following, unsubscribe from the chats, close stores opened from a path."""
        with self._lock:
            self._closed = True
            follower, self._follower = self._follower, None
        if follower is not None:
            follower.stop()
        for output in self._outputs:
            output.go_static()  # the output no longer names the widget closed below
        widget = self._widget
        if widget is not None:
            close_models([widget])
        for live in self._sources.live:
            live.chat.off(self._on_event)
        for stored in self._sources.stores:
            stored.close()

    def __enter__(self) -> Inbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def on_change(self, fn: Callable[[], Any]) -> None:
        """Call ``fn()`` after every change of the rows, the filter or the decisions."""
        with self._lock:
            self._listeners = [*self._listeners, fn]

    def _changed(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for fn in listeners:
            with contextlib.suppress(Exception):  # a widget must never break a decision
                fn()

    # ------------------------------------------------------------- showing
    def snapshot(self) -> dict[str, Any]:
        """What the widget draws (plain values; everything a model produced made safe)."""
        now = datetime.now(UTC)
        with self._lock:
            rows = list(self._rows.values())
            decided = list(self._decided.values())
            f = self._filter
        views = [row_view(r, f.matches(r.tool, r.server, r.arguments)) for r in rows]
        return {
            "rows": views,
            "decided": [
                {
                    "key": r.key,
                    "line": one_line(r),
                    "chat": chat_label(r),
                    "words": decided_words(o, self.by),
                    "outcome": o.outcome,
                    "verdict": o.verdict or "",
                }
                for r, o in reversed(decided)
            ],
            "tools": sorted({v["tool"] for v in views}),
            "servers": sorted({v["server"] for v in views if v["server"]}),
            "filter": f,
            "clock": now.isoformat(),
            "stale": self.read_problem,
        }

    @property
    def widget(self) -> InboxWidget:
        """The inbox's widget (made on first use; following starts with it)."""
        with self._lock:
            if self._widget is None:
                from ._widget import InboxWidget

                self._widget = InboxWidget(self)
                self.on_change(self._widget.update_from_inbox)
        self._follow()
        return self._widget

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The static forms: a table of the pending calls (HTML and text)."""
        return self._static()

    def _static(self, refresh: bool = True) -> dict[str, Any]:
        try:
            everything = self._rows_now(refresh)
        except Exception:  # a store that cannot be read now: the rows as last read, and
            everything = self._rows_now(refresh=False)  # why (read_problem), as the widget
        with self._lock:
            f = self._filter
        rows = [r for r in everything if f.matches(r.tool, r.server, r.arguments)]
        now = datetime.now(UTC)
        describe = self._sources.describe()
        words = _filter_words(f)
        trouble = self.read_problem
        if trouble:  # the rows are as last read: say so
            describe += f"; {trouble}"
        return {
            "text/plain": text_table(
                rows, describe, now, total=len(everything), filter_words=words
            ),
            "text/html": html_table(rows, describe, now, total=len(everything), filter_words=words),
        }

    def _ipython_display_(self) -> None:
        """In a kernel with ipywidgets: the widget, with its static forms and twin."""
        if not widgets_available():
            from IPython.display import display

            display(self._static(), raw=True)
            return
        output = LiveOutput(
            "nbagent-inbox",
            lambda: self._static(refresh=False),
            self._ended,
            cleared=self._off_page,
        )
        output.attach(self.widget)
        output.show()
        with self._lock:
            self._outputs.append(output)
        self.on_change(output.refresh_twin)  # a reopened notebook shows the rows as they were

    def _off_page(self) -> None:
        """A cell that showed the inbox ran again or was deleted. Once no output shows it,
        its widget closes and it stops following its stores (unless :meth:`follow` was
        called); a later display makes a new widget. Nothing is decided."""
        with self._lock:
            gone = [o for o in self._outputs if not o.shown]
            self._outputs = [o for o in self._outputs if o.shown]
            if self._outputs:
                widget = follower = None
            else:
                widget, self._widget = self._widget, None
                follower = None if self._by_hand else self._follower
                if follower is not None:
                    self._follower = None
            drop: set[Callable[..., Any]] = {o.refresh_twin for o in gone}
            if widget is not None:
                drop.add(widget.update_from_inbox)
            self._listeners = [fn for fn in self._listeners if fn not in drop]
        if follower is not None:
            follower.stop()
        if widget is not None:
            close_models([widget])

    def _ended(self) -> dict[str, Any]:
        return ended_note(
            self._static(refresh=False),
            "This inbox belongs to a kernel session that has ended: these calls were pending "
            "when the notebook was saved. Run the cell again to decide what still waits (the "
            "calls of chats with a store outlive the kernel).",
            "This inbox belongs to a kernel session that has ended (rows as saved); run the "
            "cell again to decide what still waits.",
        )


RERUN = (
    "nothing continues this chat now: its batch no longer watches its rows and the chat is "
    "not in this process (a Ray worker ran it); rerun the batch with its store to continue it"
)
"""An outcome's detail for a batch row nothing here continues (see ``Inbox._unwatched``)."""


def _join(detail: str, more: str) -> str:
    return f"{detail}; {more}" if detail else more


def _filter_words(f: Filter) -> str:
    """The filter in words, or ``""`` when it asks for nothing (every call counts)."""
    return "" if f.empty else f.describe()


def _order(row: Row) -> tuple[float, str]:
    at = row.requested_at
    return (at.timestamp() if at is not None else float("inf"), row.key)


def _references(what: Any) -> list[str | tuple[str, str]]:
    """Call references from rows, ids, keys, calls, or lists of them."""
    from ..store import StoredCall

    if isinstance(what, str):
        return [what]
    if isinstance(what, StoredCall):
        return [(what.chat_id, what.id)]
    if isinstance(what, ToolCall):  # its chat's, when it came from one: forks share call ids
        return [(what.chat_id, what.id)] if what.chat_id else [what.id]
    if isinstance(what, Row):
        return [(what.chat_id, what.call_id)]
    if isinstance(what, tuple) and len(what) == 2 and all(isinstance(x, str) for x in what):
        return [(what[0], what[1])]
    columns = getattr(what, "columns", None)
    if columns is not None:  # a DataFrame of pending rows
        if "call_id" not in columns:
            raise TypeError("a DataFrame of calls needs a call_id column (inbox.pending has one)")
        if "chat_id" in columns:
            return [(str(a), str(b)) for a, b in zip(what["chat_id"], what["call_id"], strict=True)]
        return [str(x) for x in what["call_id"]]
    index = getattr(what, "index", None)
    if hasattr(what, "to_dict") and index is not None and "call_id" in index:  # a Series
        if "chat_id" in index:
            return [(str(what["chat_id"]), str(what["call_id"]))]
        return [str(what["call_id"])]
    if isinstance(what, Iterable):
        out: list[str | tuple[str, str]] = []
        for item in what:
            out.extend(_references(item))
        return out
    raise TypeError(
        "approve/deny take rows of inbox.pending, call ids, calls, or a filter "
        f"({{'tool': ..., 'where': {{...}}}}); got {type(what).__name__}"
    )


def _input_ref(ref: Any) -> tuple[str, str | None]:
    """The input id ``ref`` names and, when it says, its chat's id: a row of
    :attr:`Inbox.inputs` (a Series, or a one-row frame), a ``StoredInput``, a
    ``PendingInput``, a ``ToolCall`` (its chat's), or an id."""
    from ..store import StoredInput

    if isinstance(ref, str):
        return ref, None
    if isinstance(ref, StoredInput):
        return ref.id, ref.chat_id
    if isinstance(ref, PendingInput):
        return ref.id, None
    if isinstance(ref, ToolCall):
        return ref.id, ref.chat_id
    columns = getattr(ref, "columns", None)
    if columns is not None:  # a frame of inputs: one row only
        if len(ref) != 1:
            raise TypeError(
                f"answer/decline take one input; got a frame of {len(ref)} rows (pass one "
                "row: inbox.inputs.iloc[0])"
            )
        ref = ref.iloc[0]
    index = getattr(ref, "index", None)
    if hasattr(ref, "to_dict") and index is not None and "input_id" in index:  # a row
        chat = ref["chat_id"] if "chat_id" in index else None
        return str(ref["input_id"]), (str(chat) if chat is not None else None)
    raise TypeError(
        "answer/decline take a row of inbox.inputs, an input id, a 'chat_id/input_id' key, "
        f"or a PendingInput/StoredInput; got {type(ref).__name__}"
    )


def _input_row(
    chat_id: str, p: PendingInput, at: Any, title: str | None, source: str, now: datetime
) -> dict[str, Any]:
    """One row of :attr:`Inbox.inputs`."""
    return {
        "chat_id": chat_id,
        "input_id": p.id,
        "kind": p.kind,
        "call_id": p.call_id,
        "tool": p.tool,
        "server": p.server,
        "message": p.message,
        "choices": p.choices,
        "requested_at": at,
        "age_s": (now - at).total_seconds() if at else None,
        "title": title,
        "source": source,
    }


def _table(items: Sequence[Any], types: dict[str, str], **given: list[Any]) -> pd.DataFrame:
    """A frame of the items' attributes (or the ``given`` columns), typed by ``types``
    (``"utc"``: datetime64 in UTC). Displayed, a key or a URL's password in its cells (a
    call's arguments) shows as ``***``, as in the inbox's own view; its values are the
    calls' own."""
    import pandas as pd

    data: dict[str, Any] = {}
    for name, kind in types.items():
        values = given[name] if name in given else [getattr(i, name) for i in items]
        data[name] = (
            pd.to_datetime(pd.Series(values, dtype=object), utc=True) if kind == "utc" else values
        )
    frame = pd.DataFrame(data, columns=list(types))
    return safe_display(frame.astype({name: kind for name, kind in types.items() if kind != "utc"}))


def _frame(rows: list[Row]) -> pd.DataFrame:
    now = datetime.now(UTC)
    ages = [(now - r.requested_at).total_seconds() if r.requested_at else None for r in rows]
    return _table(rows, _PENDING_TYPES, age_s=ages)


def _outcomes(outcomes: list[Outcome]) -> pd.DataFrame:
    return _table(outcomes, _OUTCOME_TYPES)


class _Follower:
    """The inbox's subscriptions on its stores' followers (:func:`nbagent.store.follow`):
    a refresh when a store reports a decision, when a live chat emits an approval event
    (:meth:`poke`), and every :data:`POLL_SECONDS` (new pending calls in a store)."""

    def __init__(self, inbox: Inbox, stores: Iterable[tuple[Any, Any]] = ()):
        self._inbox = weakref.ref(inbox)
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self._poked = False
        self._stopped = False
        self._subs: list[Any] = []
        self._unfollowed: list[tuple[Any, Any]] = []  # stores that could not be followed yet
        for store, only in stores:
            try:
                self._subs.append(follow(store, only, self._tick, look=False, every_tick=True))
            except Exception:  # the store cannot be read now: ticks try again
                self._unfollowed.append((store, only))
        if not self._subs or self._unfollowed:  # ticks all the same (live chats, retries)
            self._subs.append(follow(None, (), self._tick, look=False, every_tick=True))

    def poke(self) -> None:
        self._poked = True
        self._subs[0].nudge()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        for sub in self._subs:
            sub.close()

    def _retry(self) -> None:
        """Follow the stores that could not be followed when the inbox started to."""
        still = []
        for store, only in self._unfollowed:
            try:
                sub = follow(store, only, self._tick, look=False, every_tick=True)
            except Exception:
                still.append((store, only))
            else:
                self._subs.insert(0, sub)
        self._unfollowed = still

    def _tick(self, decided: set[str]) -> None:
        """From a follower (a worker thread): refresh if there is news, or it is time to."""
        inbox = self._inbox()
        if inbox is None:
            return self.stop()
        if not (decided or self._poked or time.monotonic() - self._last >= POLL_SECONDS):
            return None
        with self._lock:  # one refresh at a time (several stores: several followers)
            if self._stopped:
                return None
            self._poked, self._last = False, time.monotonic()
            if self._unfollowed:
                self._retry()
            # A store that cannot be read now: refresh() marks the rows stale (the widget
            # says so) and the next tick reads again; the first read that works clears it.
            with contextlib.suppress(Exception):
                inbox.refresh()
        return None


def inbox(store_or_chats: Any, *, by: str = BY, continue_chats: bool = True) -> Inbox:
    """One place to decide every pending approval across chats.

    Args:
        store_or_chats: A store (``SQLiteStore``, a path, any ``nbagent.store.Store``),
            live chats, a batch result (the DataFrame ``nbagent.batch`` returns), or a
            list or dict mixing them.
        by: Who the decisions are recorded as (``decided_by``; default ``"inbox"``).
        continue_chats: Continue a live chat after deciding its calls, as a card
            click does (default). Chats of a batch are continued by the batch.

    Returns:
        An :class:`Inbox`: a widget in a notebook (a table elsewhere), and a Python
        API: ``pending``, ``filter(...)``, ``preview(...)``, ``approve(...)``,
        ``deny(..., reason=...)``, ``refresh()``.

    Raises:
        TypeError: Something that is not a store, a chat or a batch result.
    """
    return Inbox(sources_of(store_or_chats), by=by, continue_chats=continue_chats)
