"""Attaching a chat to a store: a new chat (``Chat(store=...)``), or a stored one loaded back.

``Chat(store=...)`` calls :func:`attach_store`, ``Chat.load`` calls
:func:`load_chat`; both take the store object shared by this process's chats if given
a path or URL (:mod:`._shared`) and plug a
:class:`~nbagent.store._extension.StoreExtension` into the chat.
Loading rebuilds the chat's state from the stored record (a
:class:`~nbagent._extension.Snapshot` the core restores with its own rules);
then the extension replays the stored events, settles calls left running and
applies decisions made meanwhile.

**Secrets**: the provider object is never stored, only its name and model.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .._aio import to_the_end
from .._base_chat import adopt_code
from .._chat_state import SETTINGS
from .._errors import StoreError
from .._events import utcnow
from .._extension import Snapshot
from .._leases import Release
from .._options import ToolOptions
from .._rules import Rule
from .._tools import tool_name_of
from .._types import ForkParent, Message, ToolCall
from . import _codec as codec
from ._extension import StoreExtension
from ._protocol import ChatInfo, ChatRecord, Store
from ._shared import leased
from ._waiting import LATER, here_or_later

if TYPE_CHECKING:
    from .._base_chat import BaseChat as Chat

ChatT = TypeVar("ChatT", bound="Chat")
T = TypeVar("T")


# --------------------------------------------------------------- opening
def open_store(store: Store | str | os.PathLike[str]) -> Store:
    """A store object from a path (SQLite), a ``postgresql://`` URL (PostgreSQL),
    or a store object (returned as is).

    Raises:
        StoreError: The file or database cannot be opened as an nbagent store.
    """
    return _open(store)[0]


def _open(store: Any) -> tuple[Store, bool]:
    """The store and whether we opened it (and so must close it)."""
    from ._postgres import PostgresStore, is_dsn
    from ._sql import SQLStore
    from ._sqlite import SQLiteStore

    if is_dsn(store):
        return PostgresStore(store), True
    if isinstance(store, (str, os.PathLike)):
        # a str as it is: SQLiteStore refuses a URL (mysql://...) without echoing it; as a
        # Path its // folds to / and a password in it showed in the error
        return SQLiteStore(store if isinstance(store, str) else Path(store)), True
    if isinstance(store, (SQLStore, Store)):  # the first check is much the cheaper
        return store, False
    raise TypeError(
        f"store must be a path, a postgresql:// URL or a store object "
        f"(e.g. nbagent.store.SQLiteStore), "
        f"got {type(store).__name__}"
    )


def _for_chat(store: Any) -> tuple[Store, Release | None]:
    """A chat's store, and how the chat lets go of it (``None``: the caller's object, left
    open). A path or URL gives the store object every chat of this process opened with it
    shares (:mod:`._shared`), made by :func:`_open`."""
    from ._postgres import is_dsn

    if is_dsn(store):
        return leased("postgres", store, lambda: _open(store)[0])
    if isinstance(store, (str, os.PathLike)):
        return leased("sqlite", os.fspath(store), lambda: _open(store)[0])
    return _open(store)[0], None  # a store object (or the TypeError)


# ------------------------------------------------------------ attaching
def attach_store(chat: Chat, store: Any, parent: ForkParent | None = None) -> Store:
    """Persist a new chat in ``store`` (a path or a store object) as it runs.

    ``parent``: the chat is a fork (``chat.fork``); its parent link is stored with it.

    Raises:
        StoreError: The store cannot be opened, or already has a chat with this id
            (use ``Chat.load`` to continue it).
    """
    st, ext, info = _plugged(chat, store)
    ext.create(info, chat.system, parent)
    return st


def _plugged(chat: Chat, store: Any) -> tuple[Store, StoreExtension, ChatInfo]:
    """A new chat's store (opened if a path), the extension plugged into the chat, and the
    chat's info to create it with (:meth:`StoreExtension.create`)."""
    st, release = _for_chat(store)
    ext = StoreExtension(chat.id, st, release)
    chat.extend(ext)
    now = utcnow()
    return st, ext, ChatInfo(chat.id, now, now, chat.provider.name, chat.model)


async def attach_batch_chat(chat: Chat, store: Any, batch_id: str, key: str) -> str:
    """:func:`attach_store` for input ``key`` of batch ``batch_id`` (``nbagent.batch``'s rows),
    from the batch's loop: the chat is created in the store, then recorded as the input's
    chat (first writer wins: ``BatchStore.add_batch_chat``). Returns the chat id recorded for
    the key (another one: another process started this input first).

    On PostgreSQL both are one job of the loop's sender (one transaction, grouped with the
    other chats' writes: ``StoreExtension.created_in_batch``). If it is not written
    (another process recorded the input first, a failure), or on another store, each of
    the two is one transaction, written on this thread when the store writes inline and
    nothing waits (``_waiting.no_wait``: SQLite in WAL with ``synchronous`` NORMAL), else
    on a worker thread. A cancelled batch waits for either (a record half made would make
    a rerun start the input again).

    Raises:
        StoreError: The store cannot be written, or already has a chat with this id.
    """
    st, ext, info = _plugged(chat, store)
    # The batch keeps the input's prompt and asks again a chat of its own found stored empty
    # (its process died before the prompt was written): the prompt needs no commit of its own.
    ext.keeps_questions = False
    if await ext.created_in_batch(info, chat.system, batch_id, key):
        return chat.id  # one job with the loop's other chats' writes (PostgreSQL)
    await _written(st, ext.create, info, chat.system, None)
    return str(await _written(st, st.add_batch_chat, batch_id, key, chat.id))  # type: ignore[attr-defined]


async def _written(st: Store, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, one transaction of ``st``: here if it writes inline and nothing would
    wait, else on a worker thread, to the end."""
    if getattr(st, "writes_inline", False):
        done = here_or_later(fn, *args)
        if done is not LATER:
            return cast(T, done)
    return await to_the_end(fn, *args)


def store_of(chat: Chat) -> Store | None:
    """The store a chat is attached to (its forks go there too), else ``None``."""
    for ext in chat.extensions:
        if isinstance(ext, StoreExtension):
            return ext.store
    return None


def fork_store(chat: Chat) -> tuple[Store | None, Release | None]:
    """The store a fork of ``chat`` goes to (``chat``'s, else ``None``) and the fork's own
    lease on it when it is shared by path or URL (``None``: the user's object, never closed
    for them): closing the parent leaves the fork's store open."""
    for ext in chat.extensions:
        if isinstance(ext, StoreExtension):
            return ext.fork_store()
    return None, None


def hold_lease(fork: Chat, store: Store, lease: Release) -> None:
    """The fork attached to ``store`` keeps ``lease`` (:func:`fork_store`'s) until it is
    closed or collected; a fork not attached to it lets go at once."""
    for ext in fork.extensions:
        if isinstance(ext, StoreExtension) and ext.store is store:
            ext.hold(lease)
            return
    lease(False)


def load_chat(
    cls: type[ChatT],
    chat_id: str,
    *,
    store: Any,
    tools: Sequence[Any] = (),
    provider: Any = None,
    model: str | None = None,
    always_allow: Mapping[Any, Callable[[ToolCall], bool]] | None = None,
    template: Chat | None = None,
    **chat_kwargs: Any,
) -> ChatT:
    """Rebuild a stored chat (see ``Chat.load``).

    ``template``: a chat set up as this one is to go on (``nbagent.batch`` continuing a
    row: the chat its ``make_chat`` made just now). Its settings (``SETTINGS``: the
    budgets, ``max_steps``, ``stream``...) replace the stored ones unless ``chat_kwargs``
    give them, and what it was set up with in code (callbacks, subscriptions, extensions,
    ``always_allow`` predicates) moves to the loaded chat before its stored state is put
    back: see :func:`~nbagent._base_chat.adopt_code`.
    """
    if template is not None:
        chat_kwargs = {**{k: getattr(template, k) for k in SETTINGS}, **chat_kwargs}
    st, release = _for_chat(store)
    try:
        record = st.load(chat_id)
        rules = _rules_of(record, st.location)
        predicates = _predicates(always_allow, rules, record.info.id)
        chat = _new_chat(cls, record, tools, provider, model, chat_kwargs)
        snapshot = _snapshot_of(record, st.location, rules, predicates)
    except BaseException:
        if release is not None:
            release(False)
        raise
    if template is not None:  # before the store: its claims come after the template's own
        adopt_code(chat, template)
    ext = StoreExtension(chat_id, st, release)
    chat.extend(ext)
    ext.resume(record, snapshot)
    _warn_unrestored(rules, predicates, record.info.id, chat.always_allowed)
    return chat


# ----------------------------------------------------- always-allow rules
def _rules_of(record: ChatRecord, location: str) -> tuple[tuple[str, bool], ...] | None:
    """The chat's stored always-allow rules as ``(tool, conditional)``; ``None``: none stored
    (a chat written before rules were kept).

    Raises:
        StoreError: The stored rules are not in the form this version writes (edited).
    """
    stored = record.state.get("always_allow")
    if stored is None:
        return None
    rules: list[tuple[str, bool]] = []
    for rule in stored if isinstance(stored, list) else [stored]:
        if not (
            isinstance(rule, dict)
            and isinstance(rule.get("tool"), str)
            and isinstance(rule.get("when", False), bool)
        ):
            raise StoreError(
                f"chat {record.info.id} of store {location} has an always-allow rule this "
                f"version cannot read ({rule!r}; expected {{'tool': name, 'when': true|false}}): "
                "upgrade nbagent, or correct the rule in the chat's stored state."
            )
        rules.append((rule["tool"], bool(rule.get("when", False))))
    return tuple(rules)


def _predicates(
    given: Mapping[Any, Callable[[ToolCall], bool]] | None,
    rules: tuple[tuple[str, bool], ...] | None,
    chat_id: str,
) -> dict[str, Callable[[ToolCall], bool]]:
    """``Chat.load(always_allow=)`` checked: a predicate for each stored conditional rule.

    Raises:
        TypeError: Not a mapping of tools (or names) to callables.
        ValueError: A predicate for a tool with no stored conditional rule (it would
            restore nothing: adding a rule is ``chat.always_allow``).
    """
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise TypeError(
            "always_allow must map tools (or their names) to the `when` predicates of the "
            f"chat's stored conditional rules, got {type(given).__name__}"
        )
    conditional = sorted({tool for tool, cond in rules or () if cond})
    out: dict[str, Callable[[ToolCall], bool]] = {}
    for key, when in given.items():
        name = tool_name_of(key)
        if not callable(when):
            raise TypeError(
                f"always_allow[{name!r}] must be a callable taking the call, "
                f"got {type(when).__name__}"
            )
        if name not in conditional:
            have = ", ".join(map(repr, conditional)) or "none"
            raise ValueError(
                f"chat {chat_id} has no stored conditional always_allow rule for {name!r} "
                f"(stored conditional rules: {have}), so always_allow={{{name!r}: ...}} would "
                f"restore nothing; to add a rule, call chat.always_allow({name!r}, when=...)"
            )
        out[name] = when
    return out


def _warn_unrestored(
    rules: tuple[tuple[str, bool], ...] | None,
    predicates: Mapping[str, Callable[[ToolCall], bool]],
    chat_id: str,
    allowed: Sequence[str] = (),
) -> None:
    """Say which conditional rules were not restored (their predicate was not given back,
    neither to ``Chat.load`` nor by a template: ``allowed``, the tools the chat approves)."""
    given = {*predicates, *allowed}
    missing = sorted({tool for tool, cond in rules or () if cond and tool not in given})
    if not missing:
        return
    names = ", ".join(map(repr, missing))
    example = f"{{{missing[0]!r}: predicate}}"
    warnings.warn(
        f"nbagent: chat {chat_id} always allows {names} only when a `when` predicate holds; "
        "a predicate is code and is not stored, so these rules approve nothing now (their "
        f"calls ask for approval). Give the predicates back with Chat.load({chat_id!r}, ..., "
        f"always_allow={example}), or call chat.always_allow(tool, when=...) again.",
        UserWarning,
        stacklevel=4,
    )


def _new_chat(
    cls: type[ChatT],
    record: ChatRecord,
    tools: Sequence[Any],
    provider: Any,
    model: str | None,
    chat_kwargs: dict[str, Any],
) -> ChatT:
    state = record.state
    kwargs: dict[str, Any] = {"system": record.system}
    for key in SETTINGS:
        if state.get(key) is not None:
            kwargs[key] = state[key]
    kwargs.update(chat_kwargs)
    if "store" in kwargs or "id" in kwargs:
        raise TypeError("Chat.load takes the store and chat id as its own arguments")
    if provider is None:
        provider = record.info.provider
        if model is None:
            model = record.info.model
    elif model is None and isinstance(provider, str):
        model = record.info.model
    chat = cls(model, provider=provider, id=record.info.id, **kwargs)
    if tools:
        chat.with_tools(*tools)
    return chat


def _snapshot_of(
    record: ChatRecord,
    location: str,
    rules: tuple[tuple[str, bool], ...] | None = None,
    predicates: Mapping[str, Callable[[ToolCall], bool]] | None = None,
) -> Snapshot:
    """The chat state a stored record describes (with its always-allow rules, and the
    predicates given back for the conditional ones)."""
    state = record.state
    calls: dict[str, ToolCall] = {}
    for sc in record.calls:
        # decided through the store, not applied yet, or denied before the chat that
        # decided it wrote the denial's result: apply_decisions() applies it
        undecided = sc.id in record.unapplied or (sc.status == "denied" and sc.result is None)
        calls[sc.id] = sc.to_tool_call(undecided=undecided)
    messages: list[Message] = [codec.message_in(m, calls) for m in record.messages]
    options = _options_of(record, location)
    return Snapshot(
        messages=tuple(messages),
        calls=tuple(calls.values()),
        call_turn={sc.id: sc.turn for sc in record.calls},
        call_step={sc.id: sc.step for sc in record.calls},
        turn=max([int(state.get("turn", 0)), *(getattr(m, "turn", 0) for m in messages)]),
        step=int(state.get("step", 0)),
        forced_spent=bool(state.get("forced_spent", False)),
        options=options,
        last_step=state.get("last_step"),
        last_budget=state.get("last_budget"),
        next_seq=record.next_seq,
        parent=ForkParent.from_dict(record.parent) if record.parent else None,
        always_allow=rules,
        predicates=dict(predicates or {}),
        rules=_added_rules(record, location),
    )


def _added_rules(record: ChatRecord, location: str) -> tuple[Rule, ...] | None:
    """The chat's stored rules (``chat.add_rule``); ``None``: none stored (an older chat).

    Raises:
        StoreError: A stored rule this version cannot read (edited, or a newer form).
    """
    stored = record.state.get("rules")
    if stored is None:
        return None
    try:
        if not isinstance(stored, list):
            raise ValueError(f"expected a list of rules, got {stored!r}")
        return tuple(Rule.from_dict(r) for r in stored)
    except ValueError as exc:
        raise StoreError(
            f"chat {record.info.id} of store {location} has a rule this version cannot read "
            f"({exc}): upgrade nbagent, or correct the rule in the chat's stored state."
        ) from None


def _options_of(record: ChatRecord, location: str) -> dict[str, Any] | None:
    """The stored tool options, checked as ``with_tool_options`` checks them.

    Raises:
        StoreError: An option this version does not know (written by a newer
            nbagent, or edited), or a value it cannot take; naming both.
    """
    options = record.state.get("options")
    if not isinstance(options, dict):
        return None
    where = f"chat {record.info.id} of store {location}"
    fix = "upgrade nbagent, or correct the option in the chat's stored state"
    known = [f.name for f in dataclasses.fields(ToolOptions)]
    unknown = [key for key in options if key not in known]
    if unknown:
        raise StoreError(
            f"{where} has tool option(s) {', '.join(map(repr, unknown))} that this version "
            f"of nbagent does not know (known: {', '.join(known)}); it was written by a newer "
            f"nbagent or edited: {fix}."
        )
    for key, value in options.items():
        try:
            ToolOptions().updated({key: value})
        except ValueError as exc:
            raise StoreError(
                f"{where} has an invalid value for tool option {key!r} ({exc}): {fix}."
            ) from None
    return options


__all__ = ["attach_store", "load_chat", "open_store", "store_of"]
