"""Where pending approvals come from, and where a decision goes: live chats and stores.

``nbagent.inbox(store_or_chats)`` turns what it is given into sources (:func:`sources_of`):

- a **live chat** (a :class:`~nbagent.Chat` in this kernel): its pending calls
  are ``chat.pending_approvals``; a decision is ``chat.approve/deny`` (so the
  chat's event stream, log, view and store see it as they see a card click,
  and a store's first-decision-wins rule applies through the chat's ``decide``
  hook); it follows the chat's events;
- a **store** (a :class:`~nbagent.store.Store` or a path): its pending calls are
  ``store.pending_approvals()`` across chats; a decision is
  ``store.approve/deny(..., chat_id=...)``, which the process running the chat
  applies at its next step (first decision wins, across processes);
- a **batch result** (the DataFrame ``nbagent.batch`` returns, ``chat_id``
  column): the batch's live chats and store, restricted to its chat ids
  (chats the batch starts later join). While the batch run watches its parked
  rows (``run.running``) it continues them itself, so the inbox does not.

A chat that is both live here and in a store is decided through the live chat.
Only the :class:`~nbagent.store.Store` protocol and the chat's public API are used.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from .._errors import DecisionError, StoreError
from .._events import ApprovalDecided
from .._secrets import hidden_from
from .._types import Decision, ToolCall
from .._unicode import clean

if TYPE_CHECKING:
    from .._base_chat import BaseChat
    from ..store import Store, StoredCall

Verdict = Literal["approved", "denied"]


@dataclass(frozen=True)
class Row:
    """One pending approval as the inbox lists it."""

    chat_id: str
    call_id: str
    tool: str
    server: str | None
    arguments: dict[str, Any]
    reason: str
    requested_at: datetime | None
    hosted: bool
    title: str | None
    source: Literal["chat", "store"]
    raw_arguments: str | None = None
    batch_key: str | None = None
    """The input's key when the chat is a batch's row (what the user knows it by)."""

    @property
    def key(self) -> str:
        return f"{self.chat_id}/{self.call_id}"

    @classmethod
    def of(
        cls,
        chat_id: str,
        call: ToolCall | StoredCall,
        requested_at: datetime | None,
        title: str | None,
        source: Literal["chat", "store"],
    ) -> Row:
        """The row of a pending call, live (:class:`~nbagent.ToolCall`) or stored."""
        return cls(
            chat_id,
            call.id,
            call.name,
            call.server,
            dict(call.arguments),
            call.approval.reason if call.approval else "",
            requested_at,
            call.hosted,
            title,
            source,
            call.raw_arguments,
        )


@dataclass(frozen=True)
class Outcome:
    """What happened to one decision the inbox tried to make.

    ``outcome``: ``approved`` / ``denied`` (recorded by this inbox), ``decided
    elsewhere`` (someone decided first: nothing was recorded; ``verdict`` and
    ``by`` say what stands), ``no longer pending`` (the call left its chat or store
    with no decision this inbox can read: ``verdict`` is None), or ``error``
    (``detail`` says why; nothing recorded).
    """

    chat_id: str
    call_id: str
    tool: str
    outcome: str
    verdict: str | None = None
    by: str | None = None
    at: datetime | None = None
    detail: str = ""


def decided_elsewhere(row: Row, decision: Decision, *, ours: bool = False) -> Outcome:
    """The outcome a recorded decision stands for: someone else decided first (nothing
    recorded here), or, ``ours``, it is the one this inbox just recorded."""
    return Outcome(
        row.chat_id,
        row.call_id,
        row.tool,
        decision.verdict if ours else "decided elsewhere",
        decision.verdict,
        decision.by,
        decision.at,
        decision.reason or "",
    )


class _Source:
    """What both kinds of source do alike: decide a row unless someone decided first."""

    def decision(self, row: Row) -> Decision | None:
        """The decision that stands for the row's call, if any."""
        raise NotImplementedError

    def _record(self, row: Row, verdict: Verdict, reason: str | None, by: str) -> Decision | None:
        """Record the decision (raises :class:`~nbagent.DecisionError` when refused)."""
        raise NotImplementedError

    def decide(self, row: Row, verdict: Verdict, reason: str | None, by: str) -> Outcome:
        before = self.decision(row)
        if before is not None:  # decided since the row was read: record nothing
            return decided_elsewhere(row, before)
        started = datetime.now(UTC)
        try:
            decision = self._record(row, verdict, reason, by)
        except DecisionError as exc:
            now = self.decision(row)  # someone decided first; else it is an error
            if now is not None:
                return decided_elsewhere(row, now)
            return Outcome(row.chat_id, row.call_id, row.tool, "error", detail=str(exc))
        finished = datetime.now(UTC)
        if decision is None:  # cannot happen after a successful decide; be honest anyway
            return Outcome(
                row.chat_id, row.call_id, row.tool, "error", detail="no decision recorded"
            )
        ours = _written_here(decision, verdict, reason, by, started, finished)
        return decided_elsewhere(row, decision, ours=ours and not self._found(row))

    def _found(self, row: Row) -> bool:
        """The decision :meth:`_record` returned was found recorded, not written by it."""
        return False


def _written_here(
    decision: Decision,
    verdict: Verdict,
    reason: str | None,
    by: str,
    started: datetime,
    finished: datetime,
) -> bool:
    """Whether ``decision`` is the one this inbox just recorded, not one that was there.

    A chat or a store answers a decision with the same verdict as the one it already
    has by returning that one, unchanged (no error), so two inboxes deciding alike
    (both ``by="inbox"``) would each read the decision as theirs. Ours has our decider,
    verdict and reason, and a time stamped by this process (``chat.approve`` and
    nbagent's stores stamp it where the call is made, not on a database server) while
    the call was being made: a decision that differs, or was stamped before the call
    began or after it returned, is someone else's. A store source decides with
    ``exclusive=True`` besides, so the store refuses a call another inbox decided
    alike while this one waited for its lock.
    """
    return (
        decision.by == by
        and decision.verdict == verdict
        and (
            clean(decision.reason or "") == clean(reason or "")
            # the chat, the store scrub a reason: a key in it (the chat's own) reads ***
            or hidden_from(decision.reason, clean(reason or ""))
        )
        and started <= decision.at <= finished
    )


class LiveSource(_Source):
    """A chat object in this process (see the module docstring)."""

    kind = "chat"

    def __init__(self, chat: BaseChat, *, batch: Any = None):
        self.chat = chat
        self.batch = batch  # the batch run driving it, if any
        self._wrote: dict[str, bool] = {}  # call id -> its last _record wrote the decision

    @property
    def continues(self) -> bool:
        """Whether the inbox continues the chat after deciding: not while a batch run
        still watches it (``run.running``); the batch continues it then."""
        return self.batch is None or not getattr(self.batch, "running", True)

    @property
    def chat_ids(self) -> frozenset[str]:
        return frozenset({self.chat.id})

    def pending(self) -> list[Row]:
        chat, record = self.chat, self.chat.record
        calls = chat.pending_approvals
        title = record.title if calls else None
        rows = []
        for call in calls:
            r = record.get(call.id)  # when it was requested, from the chat's record
            at = r.requested_at if r is not None and r.requested_at else datetime.now(UTC)
            rows.append(Row.of(chat.id, call, at, title, "chat"))
        return rows

    def decision(self, row: Row) -> Decision | None:
        try:
            return self.chat.get_call(row.call_id).decision
        except (KeyError, ValueError, DecisionError):
            return None

    def _record(self, row: Row, verdict: Verdict, reason: str | None, by: str) -> Decision | None:
        decide = self.chat.approve if verdict == "approved" else self.chat.deny
        before = len(self.chat.events)
        decision = decide(row.call_id, reason=reason, by=by).decision
        # written here only if this decide recorded it, as made here: a decision the chat
        # found (its store held another process's, alike) is recorded "elsewhere", and one
        # another inbox of this process made first records nothing new
        self._wrote[row.call_id] = any(
            isinstance(e, ApprovalDecided) and e.call.id == row.call_id and not e.elsewhere
            for e in self.chat.events[before:]
        )
        return decision

    def _found(self, row: Row) -> bool:
        return not self._wrote.pop(row.call_id, True)


class StoreSource(_Source):
    """A store: every chat in it, or only ``chat_ids`` (a batch's)."""

    kind = "store"

    def __init__(self, store: Store, *, chat_ids: Iterable[str] | None = None, owned: bool = False):
        self.store = store
        self.only = frozenset(chat_ids) if chat_ids is not None else None
        self.owned = owned  # opened from a path: the inbox closes it
        self._titles: dict[str, str | None] = {}

    def title(self, chat_id: str) -> str | None:
        """The title of a chat of this store (see :meth:`titles`)."""
        return self.titles([chat_id])[chat_id]

    def titles(self, chat_ids: Iterable[str]) -> dict[str, str | None]:
        """The titles of these chats. The store's protocol reads titles only with every
        chat's (``store.chats()``, a scan of the store), so the chats not known yet are
        read in one scan, and a chat the scan does not list is remembered as untitled
        (not scanned for again at every refresh)."""
        wanted = list(dict.fromkeys(chat_ids))
        if any(c not in self._titles for c in wanted):
            self._titles.update({info.id: info.title for info in self.store.chats()})
            for c in wanted:
                self._titles.setdefault(c, None)
        return {c: self._titles[c] for c in wanted}

    def pending(self) -> list[Row]:
        calls = [
            sc
            for sc in self.store.pending_approvals()
            if self.only is None or sc.chat_id in self.only
        ]
        titles = self.titles(sc.chat_id for sc in calls)
        return [
            Row.of(sc.chat_id, sc, sc.requested_at, titles[sc.chat_id], "store") for sc in calls
        ]

    def decision(self, row: Row) -> Decision | None:
        try:
            return self.store.call(row.call_id, chat_id=row.chat_id).decision
        except DecisionError:
            return None

    def _record(self, row: Row, verdict: Verdict, reason: str | None, by: str) -> Decision | None:
        decide = self.store.approve if verdict == "approved" else self.store.deny
        # exclusive: a call decided already (even alike, by another inbox of the same name)
        # is refused in the transaction that would write, so only the writer says so
        return decide(
            row.call_id, reason=reason, by=by, chat_id=row.chat_id, exclusive=True
        ).decision

    def inputs(self) -> list[Any]:
        """The inputs waiting in the store (``store.pending_inputs()``: ``StoredInput``s)."""
        return [
            si for si in self.store.pending_inputs() if self.only is None or si.chat_id in self.only
        ]

    def settle(self, si: Any, action: str, data: Any, reason: str | None, by: str) -> Any:
        """Answer (``accept``) or decline one of :meth:`inputs` through the store (first
        answer wins; checked as ``chat.answer`` checks it). Returns the ``StoredInput``."""
        if action == "accept":
            return self.store.answer(si.id, data, by=by, chat_id=si.chat_id)
        return self.store.decline(si.id, reason, by=by, chat_id=si.chat_id)

    def close(self) -> None:
        if self.owned:
            self.store.close()


Source = LiveSource | StoreSource


@dataclass
class Sources:
    """The inbox's sources, live chats first (they win over a store for the same chat)."""

    live: list[LiveSource] = field(default_factory=list)
    stores: list[StoreSource] = field(default_factory=list)
    batches: list[tuple[Any, frozenset[str]]] = field(default_factory=list)
    """Running batches (their run object, their chat ids): chats they start later join."""

    def adopt(self) -> list[LiveSource]:
        """The live chats batches started since the last look, added (never continued here)."""
        if not self.batches:
            return []
        have = {id(s.chat) for s in self.live}
        new = []
        for holder, ids in self.batches:
            for chat in _chats_of(holder):
                if id(chat) not in have and chat.id in ids:
                    have.add(id(chat))
                    new.append(LiveSource(chat, batch=holder))
        self.live.extend(new)
        return new

    def batch_key(self, chat_id: str) -> str | None:
        """The key of the batch row whose chat this is, if a batch of the inbox ran it."""
        for holder, ids in self.batches:
            if chat_id not in ids:
                continue
            for key, row in dict(getattr(holder, "rows", {}) or {}).items():
                if getattr(row, "chat_id", None) == chat_id:
                    return str(key)
        return None

    def describe(self) -> str:
        parts = []
        if self.live:
            parts.append(f"{len(self.live)} live chat{'s' if len(self.live) != 1 else ''}")
        for s in self.stores:
            where = s.store.location
            parts.append(f"store {where}" + (f" ({len(s.only)} chats)" if s.only else ""))
        return ", ".join(parts) or "nothing"


def _is_chat(obj: Any) -> bool:
    from .._base_chat import BaseChat

    return isinstance(obj, BaseChat)


def _is_store(obj: Any) -> bool:
    from ..store import Store

    return isinstance(obj, (str, os.PathLike, Store))


def _chats_of(holder: Any) -> list[Any]:
    chats = getattr(holder, "chats", None)
    if isinstance(chats, Mapping):
        chats = list(chats.values())
    return [c for c in (chats or ()) if _is_chat(c)]


def _batch_parts(df: Any) -> tuple[Any, list[Any], Any, frozenset[str]]:
    """A batch result's run object, live chats, store and chat ids.

    ``nbagent.batch`` puts its run in ``df.attrs["nbagent_batch"]`` (``.chats``: chat id ->
    live chat, ``.store``); it deep-copies to itself, as pandas deep-copies attrs.
    """
    import pandas as pd

    attrs = getattr(df, "attrs", {}) or {}
    # pd.DataFrame(df) drops attrs: pandas deep-copies attrs on every column access
    ids = frozenset(str(x) for x in pd.DataFrame(df)["chat_id"].dropna().unique())
    holder = attrs.get("nbagent_batch")
    if holder is None or isinstance(holder, str):
        raise TypeError(
            "this DataFrame has a chat_id column but no batch run in its attrs (a result "
            "read back from a file?); pass the store the batch used: nbagent.inbox(store)"
        )
    chats = [c for c in _chats_of(holder) if c.id in ids]
    return holder, chats, getattr(holder, "store", None), ids


def _is_batch_result(obj: Any) -> bool:
    columns = getattr(obj, "columns", None)
    return columns is not None and "chat_id" in columns and hasattr(obj, "attrs")


def _must_exist(where: str | os.PathLike[str]) -> None:
    """A store path names a file that is there: opening a path creates a store file where
    none is, so a mistyped path would show an empty inbox ("nothing waits") while the
    calls wait in the real one. A PostgreSQL URL is the server's to refuse."""
    from ..store import is_dsn

    path = os.fspath(where)
    if is_dsn(where) or "://" in path:  # a URL: the store refuses it, and never shows it
        return
    if not os.path.isfile(path):
        what = "is a directory" if os.path.isdir(path) else "does not exist"
        raise StoreError(
            f"no store at {path}: the file {what} (nbagent.inbox opens a store chats "
            "wrote; check the path, or pass the store object the chats used)"
        )


def sources_of(what: Any) -> Sources:
    """Sources from a store, a path, a chat, a batch result, or a list/dict mixing them.

    Raises:
        TypeError: Something that is none of these (nothing is opened then).
        StoreError: A path that is not an nbagent store, or where there is no file.
    """
    from ..store import open_store

    sources = Sources()
    chats: dict[int, LiveSource] = {}
    stores: list[tuple[Any, frozenset[str] | None]] = []  # opened once everything is checked

    def add_chat(chat: Any, batch: Any = None) -> None:
        seen = chats.get(id(chat))
        if seen is None:
            chats[id(chat)] = live = LiveSource(chat, batch=batch)
            sources.live.append(live)
        elif batch is not None:  # a batch drives it: the batch continues it
            seen.batch = batch

    def collect(obj: Any) -> None:
        if _is_chat(obj):
            add_chat(obj)
        elif _is_store(obj):
            stores.append((obj, None))
        elif _is_batch_result(obj):
            holder, batch_chats, store, ids = _batch_parts(obj)
            sources.batches.append((holder, ids))
            for chat in batch_chats:
                add_chat(chat, holder)
            if store is not None:
                stores.append((store, ids))
        elif isinstance(obj, Mapping):
            for value in obj.values():
                collect(value)
        elif isinstance(obj, Iterable) and not isinstance(obj, (bytes, str)):
            for value in obj:
                collect(value)
        else:
            raise TypeError(
                "nbagent.inbox takes a store (a Store or a path), chats, a batch result, "
                f"or a list or dict of them; got {type(obj).__name__}"
            )

    collect(what)
    if not sources.live and not stores and not sources.batches:
        raise TypeError("nbagent.inbox needs at least one store or chat")
    opened: dict[int, StoreSource] = {}
    try:
        for obj, only in stores:
            owned = isinstance(obj, (str, os.PathLike))
            if owned:
                _must_exist(obj)
            store = open_store(obj)
            known = opened.get(id(store))
            if known is None:
                opened[id(store)] = source = StoreSource(store, chat_ids=only, owned=owned)
                sources.stores.append(source)
            elif known.only is not None:
                known.only = None if only is None else known.only | only
    except BaseException:
        for s in sources.stores:
            s.close()
        raise
    return sources
