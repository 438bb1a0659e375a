"""The embedded default store: one SQLite file, WAL mode, versioned schema.

Tables (schema version 15; PostgreSQL has the same, :mod:`~nbagent.store._pg_migrations`)::

    schema_migrations(version PK, name, applied_at)
    chats(id PK, created_at, updated_at, provider, model, system, title, state json, tools json,
          parent_id, fork json)
    messages(chat_id, idx, turn, role, json, seq, ts)        PK (chat_id, idx)
    tool_calls(chat_id, call_id, name, arguments json, raw_arguments, parse_error,
               status, gated, approval json, decision json, result json, turn, step,
               requested_at, started_at, finished_at, claimed_by, claimed_at,
               server, hosted 0|1)
                                                             PK (chat_id, call_id)
    call_arguments(chat_id, call_id, arguments json)         PK (chat_id, call_id)
    events(chat_id, seq, type, ts, json)                     PK (chat_id, seq)
    decisions(id PK, chat_id, call_id, verdict, decided_by, at, reason, arguments json,
              source 'chat'|'store', applied 0|1|-1, applied_at, error)
    blobs(sha256 PK, media_type, size, data, created_at)
    recordings(key PK, chat_id, step, model, fingerprint json, response json, deltas json,
               created_at)                                   (since version 9)
    model_requests(chat_id, step, key, replayed 0|1)         PK (chat_id, step)
    recording_links(chain PK, parent, n, digests json)       (since version 14)
    batch_chats(batch_id, key, chat_id, created_at)          PK (batch_id, key) (since 11)
    inputs(chat_id, input_id, call_id, kind, tool, server, prompt, content json, schema json,
           requested_at, resume json)                        PK (chat_id, input_id) (since 15)
    input_answers(id PK, chat_id, input_id, action, data json, answered_by, at, reason,
                  source 'chat'|'store', applied, applied_at, error)   (since 15)

``recordings`` holds every model response by its request's key (record and
replay, :mod:`nbagent._replay`); ``model_requests`` the key of each step of
each chat, so a call's recorded result is read from ``tool_calls``; and
``recording_links`` each request's messages as links of a digest chain, each
written once (a row's fingerprint names its chain; since version 14). A fork
names its parent in ``chats.parent_id`` and what it changed in ``chats.fork``
(since version 10). ``chats.state`` holds the chat's ``always_allow`` rules (since
version 12: the tool, and whether the rule had a ``when`` predicate, which is code
and not stored).

A call's arguments are stored once (since version 6): in its row, or, when
longer than :data:`_INLINE_ARGUMENTS`, in ``call_arguments`` with the row's
``arguments`` left empty, so updating the call (decision, claim, result) never
rewrites them. Message rows and started events refer to them.

An event is not stored twice: a ``ToolCallRequested`` *is* its call's row
(``tool_calls.seq`` and ``requested_at`` are its ``seq`` and ``ts``; since
version 4), a ``MessageAdded`` its message's row (``messages.seq`` and ``ts``;
since version 5; before, an ``events`` row referred to the message row), and a
``ToolCallFinished`` refers to its call's ``result`` (since version 4; a
denial keeps its own). A ``ModelRequestStarted`` or ``ToolCallStarted``
written with its finishing event rides in that event's row (since version 5).
:meth:`SQLiteStore.iter_events` rebuilds them all (what the rows hold is
described, written and read by :mod:`~nbagent.store._codec`).

A call that runs as soon as it is written is inserted already claimed (one
statement instead of two), and the index on call ids covers gated calls only:
those are the ones decided by id from outside, and every other call is one
index page fewer to write per round.

The schema's versions are the migrations of :mod:`~nbagent.store._migrations`,
all pending ones applied in one transaction when a store is opened; a file
written by an older version opens in a newer one, and a file from a newer
version is refused (never modified). Every write is one ``BEGIN IMMEDIATE``
transaction; readers never block writers (WAL), and the WAL is copied back
off the chat's path and kept bounded (:mod:`~nbagent.store._checkpointer`).
The writes and claims of chats waiting for the connection (a batch's) go in one
transaction (group commit, :meth:`~nbagent.store._sql.SQLStore._at_once`): a
commit costs per page it writes, and the chats of a group share the last pages
of the events, messages and calls tables. Each writer returns once that
transaction committed: a claim is never granted before it is on disk.

Durability: ``synchronous=NORMAL`` (the default) keeps every committed
transaction through a crash of the process or kernel restart; pass
``synchronous="FULL"`` to also survive a power loss, at about 1 ms a commit.

The statements themselves (rows, claims, decisions, reads) are shared with the
PostgreSQL store: :class:`~nbagent.store._sql.SQLStore`. This module is
SQLite's connection, transactions, error messages and the polled decision watch.
"""

from __future__ import annotations

import os
import re
import sqlite3
import stat
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from .._errors import StoreError
from . import _migrations as migrations
from ._checkpointer import (
    Checkpointer,
    Files,
    changed,
    checkpointer_for,
    close_connection,
    close_held,
    drop_files,
    files_id,
    hold_files,
    release_unclosed,
    take_over,
)
from ._follow import release as release_follower
from ._postgres import is_dsn
from ._sql import SQLStore, _Job, planned
from ._waiting import WouldWait, held, may_wait

try:
    import pwd
except ImportError:  # Windows
    pwd = None  # type: ignore[assignment]

# ------------------------------------------------------------------ store
_POSTGRES_ISH = re.compile(r"\s*(?:postgres(?:ql)?|pgsql|psql)(?:\+[\w.-]+)?:", re.IGNORECASE)
"""A string meant as a PostgreSQL URL that is not one libpq reads (``postgresql:/...``, one
slash short; SQLAlchemy's ``postgresql+psycopg://``): never a file path, never echoed."""


def rollback(conn: sqlite3.Connection) -> None:
    """``ROLLBACK`` what is still open. SQLite rolls a transaction back itself when the
    disk is full or a write fails (``SQLITE_FULL``, ``SQLITE_IOERR``): a ``ROLLBACK``
    then fails with "cannot rollback - no transaction is active", and raised from an
    ``except`` block it hid why the write failed. A ``ROLLBACK`` that fails for another
    reason is not raised either: the error being handled says more."""
    if conn.in_transaction:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _locked(exc: sqlite3.Error) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


class SQLiteStore(SQLStore):
    """Chats in one SQLite file: ``Chat(store=SQLiteStore("agent.db"))`` or ``store="agent.db"``.

    Also the place to answer questions across chats and to decide from elsewhere::

        store = SQLiteStore("agent.db")
        store.pending_approvals()            # every call waiting for a decision
        store.approve(call_id)               # or store.deny(call_id, reason="...")
        nbagent.read_log(store)              # one row per tool call, every chat

    Args:
        path: The database file (created if missing; its directory must exist).
        timeout: Seconds to wait for another process's write transaction.
        synchronous: ``"NORMAL"`` (survives process crashes) or ``"FULL"``
            (also power loss; slower).
        claim_timeout: Seconds after which a claim by a process that cannot be
            checked (another host) counts as abandoned; ``None``: never.
        read_only: Only read the store (``read_log``, ``pending_approvals``, a chat
            loaded to look at): a file this user may not write (a teammate's, a
            finished batch's). Nothing is ever written or created next to the file:
            every write raises ``StoreError`` before it starts, so a chat loaded from
            it cannot decide or run a call. It reads what another process commits
            meanwhile. The file must exist and be of this nbagent's schema version.

    Raises:
        StoreError: The file is not an nbagent store (or is damaged), is from a
            newer nbagent, or cannot be opened; this user cannot write it, its
            ``-wal`` or its ``-shm`` (unless ``read_only``). The file is left untouched.
    """

    _GROUPS = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 30.0,
        synchronous: str = "NORMAL",
        claim_timeout: float | None = None,
        read_only: bool = False,
    ):
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        if isinstance(path, str) and ("://" in path or is_dsn(path) or _POSTGRES_ISH.match(path)):
            # not echoed: a URL may hold a password (as a path, "//" folded to "/" hid it
            # from redaction and the error showed it; "postgresql:/user:pw@host/db", one
            # slash short, was a path whose missing directory the error named)
            if is_dsn(path):
                hint = (
                    ": open a PostgreSQL store with nbagent.open_store(url) or PostgresStore(url)"
                )
            elif _POSTGRES_ISH.match(path):
                hint = (
                    ": a PostgreSQL URL starts with postgresql:// (or postgres://), as libpq "
                    "reads it; open it with nbagent.open_store(url) or PostgresStore(url)"
                )
            else:
                hint = ""
            raise StoreError("SQLiteStore takes a file path, not a URL" + hint)
        self.path = Path(path)
        self.location = str(self.path)
        self.claim_timeout = claim_timeout
        self.read_only = bool(read_only)
        self._held = False  # the connection is counted by hold_files (drop_files at close)
        self._immutable: tuple[int, int, int, int] | None = None  # see _connect_read_only
        self._reopened = 0  # read-only connections replaced (rules_token)
        self._open = _ReadOnly()  # a read-only store's connection, for its finalizer
        self._synchronous = synchronous.upper()
        self._busy_ms = int(timeout * 1000)
        self._lock = threading.RLock()
        self._queue_lock = threading.Lock()
        self._queue: list[_Job] = []  # writes waiting for the next group commit
        self._conn: sqlite3.Connection | None = None
        self._files: Files = (None, None, None)  # the files opened (files_id)
        self._absolute = os.path.abspath(self.path)  # SQLite's too: a %cd moves neither
        self._depth = 0  # transaction scopes open (_scope)
        if self.read_only:  # never commits: no checkpointer (its connection could write)
            self._conn = self._connect_read_only()
            self._checkpointer: Checkpointer | None = None
            self._finalizer: weakref.finalize[Any, Any] = weakref.finalize(
                self, _close_read_only, self._open
            )
            return
        self._conn = self._connect(timeout, synchronous.upper())
        self._held = True
        self._checkpointer = checkpointer_for(self.location, synchronous.upper())
        # Not ``self._checkpointer.release``: garbage collection may run the finalizer on a
        # thread holding the checkpointers' lock (see ``release_unclosed``); it closes the
        # connection as ``close`` does (not SQLite's close alone: see ``close_connection``).
        self._finalizer = weakref.finalize(
            self, release_unclosed, self._checkpointer, self._conn, self._absolute, self._files
        )

    @property
    def options(self) -> dict[str, Any]:
        """The keywords that open this file the same way again (another process, a Ray
        worker): ``timeout``, ``synchronous``, ``claim_timeout`` (and ``read_only``)."""
        options: dict[str, Any] = {
            "timeout": self._busy_ms / 1000,
            "synchronous": self._synchronous,
            "claim_timeout": self.claim_timeout,
        }
        if self.read_only:
            options["read_only"] = True
        return options

    # -- lifecycle ---------------------------------------------------------------
    def _connect(self, timeout: float, synchronous: str) -> sqlite3.Connection:
        if not self.path.parent.exists():
            raise StoreError(
                f"cannot open store {self.location}: directory {self.path.parent} does not exist"
            )
        if self.path.is_dir():
            raise StoreError(f"cannot open store {self.location}: it is a directory")
        self._refuse_unwritable()
        deadline = time.monotonic() + timeout
        while True:
            try:
                conn = sqlite3.connect(
                    self.location, timeout=timeout, isolation_level=None, check_same_thread=False
                )
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open store {self.location}: {self._why(exc)}") from exc
            try:
                wal = self._prepare(conn, timeout, synchronous)
                conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # its log open
                break
            except sqlite3.OperationalError as exc:
                conn.close()
                # Another process is creating or converting the file (switching to WAL
                # takes a lock SQLite does not wait for): try again shortly.
                if _locked(exc) and time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                raise self._error(exc) from exc
            except sqlite3.DatabaseError as exc:
                self._leave_unchanged(conn)
                raise StoreError(self._damaged(exc)) from exc
            except StoreError:  # a newer nbagent's, or not a store: refused
                self._leave_unchanged(conn)
                raise
            except BaseException:
                conn.close()
                raise
        files = files_id(self._absolute)
        if not wal:  # no log, no index: nothing to look at but the file (a VFS without WAL)
            files = (files[0], None, None)
        if not hold_files(files):
            close_connection(conn, self._absolute, files, stale=True)
            raise StoreError(
                f"cannot open store {self.location}: {self.location}-shm (SQLite's index of the "
                "write-ahead log) was deleted or replaced while this process had the store "
                "open, and SQLite in a process keeps the old one as long as any connection to "
                "the file is open there: another store object or chat on it is still open in "
                "this process, reading a stale index. Close them (chat.close(), store.close()) "
                "or restart the kernel, then open it again; nothing was read or written."
            )
        self._files = files
        return conn

    def _connect_read_only(self) -> sqlite3.Connection:
        """A connection that only reads, and creates nothing next to the file.

        SQLite's read-only connection (``mode=ro``) to a WAL file with no ``-wal`` and
        ``-shm`` creates both, owned by this user with the file's mode, and cannot delete
        them at close: the next writer, another user, could not write that ``-shm`` and was
        read-only through it (as a 0444 ``-shm`` made the store unwritable for good, see
        :meth:`_refuse_unwritable`). So with no ``-wal`` or ``-shm`` (no connection is
        open, the log is in the file) the file is opened ``immutable``: no lock, no log,
        nothing created; a writer that comes later makes them, as itself, and
        :meth:`_fresh` opens the file again, ``mode=ro``, through them (or again
        ``immutable`` after that writer checkpointed into the file and closed). With a
        ``-wal`` and ``-shm`` there (a writer has the store open), ``mode=ro`` reads through
        them: SQLite maps a ``-shm`` it may not write read-only, and this connection's lock
        keeps a writer closing from deleting them.
        """
        if self.path.is_dir():
            raise StoreError(f"cannot open store {self.location}: it is a directory")
        if not os.path.exists(self._absolute):
            raise StoreError(
                f"cannot open store {self.location} read_only: there is no such file (a "
                "store opened read_only is never created)"
            )
        for _ in range(20):  # a writer closing meanwhile: look again
            before = files_id(self._absolute)
            immutable = before[1] is None and before[2] is None
            sig = _signature(self._absolute) if immutable else None
            uri = Path(self._absolute).as_uri() + ("?immutable=1" if immutable else "?mode=ro")
            try:
                conn = sqlite3.connect(
                    uri, uri=True, timeout=0.1, isolation_level=None, check_same_thread=False
                )
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open store {self.location}: {self._why(exc)}") from exc
            try:
                conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
                version = self._check_version(conn)  # reads: its log open (mode=ro)
            except StoreError:
                conn.close()
                raise
            except sqlite3.Error as exc:
                conn.close()
                if _locked(exc):
                    raise self._error(exc) from exc
                if isinstance(exc, sqlite3.OperationalError):
                    raise StoreError(
                        f"cannot open store {self.location}: {self._why(exc)}"
                    ) from exc
                raise StoreError(self._damaged(exc)) from exc
            except BaseException:
                conn.close()
                raise
            if version < migrations.SCHEMA_VERSION:
                conn.close()
                raise StoreError(
                    f"cannot open store {self.location} read_only: it has schema version "
                    f"{version} and this nbagent reads version {migrations.SCHEMA_VERSION}, "
                    "which it writes when it opens the store to write (the file was not "
                    "changed). Open it once without read_only=True (its owner, or with an "
                    "older nbagent), or copy it with its -wal somewhere you can write."
                )
            files = files_id(self._absolute)
            if immutable:
                if files == before and _signature(self._absolute) == sig:
                    self._immutable = sig
                    self._files, self._held = files, False
                    self._open.set(conn, files, False)
                    return conn
                conn.close()  # a writer came meanwhile: look again
                continue
            if files[1:] != before[1:]:
                # the -wal and -shm went (their writer closed) before SQLite opened them: it
                # made new ones, this user's; they hold nothing (a new log is empty)
                conn.close()
                _remove_own_empty_log(self._absolute, files)
                continue
            if not hold_files(files):
                close_connection(conn, self._absolute, files, stale=True)
                raise StoreError(
                    f"cannot open store {self.location}: {self.location}-shm was deleted or "
                    "replaced while this process had the store open (another store object "
                    "or chat on it, still open here, reads a stale index). Close them or "
                    "restart the kernel, then open it again; nothing was read or written."
                )
            self._immutable = None
            self._files, self._held = files, True
            self._open.set(conn, files, True)
            return conn
        raise StoreError(
            f"cannot open store {self.location} read_only: its -wal and -shm kept coming and "
            "going (writers opening and closing it); try again"
        )

    def _refuse_read_only(self) -> None:
        """Raise before a write on a store opened ``read_only``."""
        raise StoreError(
            f"store {self.location} was opened read_only: nothing is written to it (no "
            "question, decision, claim or result), so a chat on it cannot ask, decide or run "
            "a call; nothing was written. Open it without read_only=True, as a user "
            "who can write it, to do that."
        )

    def _refuse_unwritable(self) -> None:
        """Refuse a store this user cannot write before SQLite opens anything.

        SQLite opens such a file read-only and makes the ``-wal`` and ``-shm`` next to it
        with the file's mode: a ``-shm`` made while the file was read-only (0444) stays when
        the file is writable again, and every later connection is read-only through it (the
        store could not be written for good). A store is written at every turn, decision and
        result: one that cannot be is refused at once, with what to do.
        """
        if not os.path.exists(self._absolute):
            return
        name = _unwritable_file(self.location)
        if name is not None:
            raise StoreError(
                f"cannot open store {self.location}: {_cannot_write(name)}. nbagent writes "
                "every question, decision and result to the store, so it opens only one it "
                f"can write; nothing was created or changed. Make it writable (chmod u+w "
                f"{name}, or ask its owner) and open it again; or, only to read it "
                f"(read_log, pending_approvals, a chat loaded to look at), open it with "
                f"SQLiteStore({self.location!r}, read_only=True)."
            )

    def _leave_unchanged(self, conn: sqlite3.Connection) -> None:
        """Close the connection that read a file it refuses without a checkpoint: as the
        file's last connection it would copy a ``-wal`` left next to it (a newer nbagent's
        process killed) into the file, and delete the log, which the refusal says it left as
        it is (:func:`~nbagent.store._checkpointer.close_connection`)."""
        close_connection(conn, self._absolute, files_id(self._absolute), stale=True)

    def _check_version(self, conn: sqlite3.Connection) -> int:
        """The file's schema version; raise if this version cannot read it (only reads)."""
        version = migrations.schema_version(conn)  # reads only: a damaged file is not touched
        if version < 0:
            raise StoreError(
                f"{self.location} is an SQLite database but not an nbagent store (it has "
                "tables and no schema_migrations); it was not changed. Use another path."
            )
        if version > migrations.SCHEMA_VERSION:
            raise StoreError(
                f"{self.location} was written by a newer nbagent (schema version {version}; "
                f"this version knows up to {migrations.SCHEMA_VERSION}). Upgrade nbagent to "
                "open it; the file was not changed."
            )
        return version

    def _prepare(self, conn: sqlite3.Connection, timeout: float, synchronous: str) -> bool:
        """Check the file is an nbagent store this version can read, then set it up; whether
        it is in WAL mode (it is, but on a VFS without shared memory)."""
        version = self._check_version(conn)
        conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        take_over(conn)  # checkpoints (which fsync) run off the chat's path, on a worker thread
        if version < migrations.SCHEMA_VERSION:
            migrations.migrate(conn)
        return str(mode).lower() == "wal"

    def _damaged(self, exc: BaseException) -> str:
        return (
            f"cannot read store {self.location}: {exc}. The file is not a valid nbagent "
            "store (damaged, truncated, or not a database); nbagent left it as it is. "
            "Restore it from a copy, or move it away to start a new store."
        )

    def close(self) -> None:
        """Close the database connection (idempotent); its decision watches are closed too."""
        if self._finalizer.detach() is not None and self._checkpointer is not None:
            self._checkpointer.release()
        release_follower(self)
        with self._lock:
            if self._conn is not None:
                conn, self._conn = self._conn, None
                self._open.set(None, self._files, False)
                try:
                    close_held(conn, self._absolute, self._files, held=self._held)
                finally:
                    self._held = False

    @property
    def closed(self) -> bool:
        return self._conn is None

    def __enter__(self) -> SQLiteStore:
        return self

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else f"schema v{migrations.SCHEMA_VERSION}"
        return f"SQLiteStore({self.location!r}, {state})"

    @property
    def schema_version(self) -> int:
        with self._read() as conn:
            return migrations.schema_version(conn)

    # -- transactions --------------------------------------------------------------
    def _c(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"store {self.location} is closed")
        return self._conn

    @contextmanager
    def _scope(self) -> Iterator[sqlite3.Connection]:
        """The connection, for one transaction, with the store's lock held (reentrant:
        ``_depth`` counts the scopes open on this thread, see :meth:`_fresh`)."""
        with held(self._lock):
            self._depth += 1
            try:
                yield self._c()
            finally:
                self._depth -= 1

    @contextmanager
    def _tx(self, chat_id: str | None = None) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``: every writer waits its turn);
        any error rolls it back."""
        with self._scope() as conn:
            self._begin_write(conn)
            try:
                yield conn
            except BaseException as exc:
                rollback(conn)
                if isinstance(exc, sqlite3.Error):
                    raise self._error(exc) from exc
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                rollback(conn)
                raise self._error(exc) from exc
            if self._checkpointer is not None:
                self._checkpointer.committed(conn, self.names_its_file)

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for several reads."""
        with self._scope() as conn:
            self._fresh(conn)
            conn = self._c()  # a read-only store's may be new (_fresh)
            try:
                conn.execute("BEGIN")
                try:
                    yield conn
                except BaseException:
                    rollback(conn)  # a failed read may have ended it already
                    self._torn()
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise self._error(exc) from exc
            self._torn()

    def _torn(self) -> None:
        """Raise if the file an ``immutable`` connection read changed while it read (a
        writer's checkpoint copied pages into it): what was read may mix two states."""
        if self._immutable is not None and _signature(self._absolute) != self._immutable:
            raise StoreError(
                f"store {self.location} (opened read_only) was written by another process "
                "while this read it; nothing was written here: read again"
            )

    def rules_token(self) -> int:
        """A number that changes whenever another connection (another process, another
        store object) commits to the file (SQLite's ``data_version``): one cheap statement,
        no transaction. A chat that saw it unchanged has no rule changed elsewhere
        (``StoreExtension.apply_rules``); nor anything else new from elsewhere."""
        with held(self._lock):
            try:
                token = int(self._c().execute("PRAGMA data_version").fetchone()[0])
                return token + (self._reopened << 32)  # another connection counts anew
            except sqlite3.Error as exc:
                raise self._error(exc) from exc

    @property
    def writes_inline(self) -> bool:
        """Whether a driver may do this store's work on its own thread (inside
        ``_waiting.no_wait``): a commit waits for nothing but the CPU unless
        ``synchronous`` makes each one fsync (``FULL``, ``EXTRA``)."""
        return self._synchronous in ("OFF", "NORMAL")

    def names_its_file(self) -> bool:
        """Whether the path still names the files this store opened, the database and its
        ``-wal`` and ``-shm`` (none deleted nor replaced since): three ``stat``."""
        return changed(self._absolute, self._files) is None

    def _same_file(self) -> None:
        """Raise if the path no longer names the files this store opened.

        SQLite keeps writing to the files it opened. The database deleted (``rm agent.db``
        to start afresh while a kernel still holds a chat) or replaced (``mv``, a sync
        client, a ``git checkout``): its writes would go where nobody reads them, and be gone
        when the store closes, while another process opening the path finds another file.
        Its ``-wal`` deleted or replaced: its commits go into a log no other connection
        reads (a crash loses them); its ``-shm``: it keeps its own index of the log while
        every other connection builds a new one, and each writes over the other's commits
        (a call run elsewhere shows as waiting here, and runs again). Three ``stat`` per
        transaction.
        """
        gone = changed(self._absolute, self._files)
        if gone is None:
            return
        suffix, what = gone
        if not suffix:
            raise StoreError(
                f"store {self.location}: the file was {what} after this store opened it; "
                "this store no longer reads or writes it (its writes would be lost, its reads "
                "stale). What a chat has not written stays in the chat: chat.fork(store=...) "
                f"copies a whole chat into a store that exists; open {self.location} again "
                "for new chats."
            )
        role = (
            "its write-ahead log: commits not yet copied into the file were in it"
            if suffix == "-wal"
            else "SQLite's index of its write-ahead log"
        )
        raise StoreError(
            f"store {self.location}: the file {self.location}{suffix} ({role}) was {what} "
            f"after this store opened it; this store no longer reads or writes {self.location} "
            "(its writes would go where other connections do not read, or over theirs; its "
            "reads would be stale). What a chat has not written stays in the chat: "
            "chat.fork(store=...) copies a whole chat into a store that exists. Close every "
            f"chat and store on {self.location} in this process (SQLite keeps the old "
            f"{suffix} while one is open) and open it again."
        )

    def _fresh(self, conn: sqlite3.Connection) -> None:
        """Before a transaction: the file is the one opened (:meth:`_same_file`), and no
        transaction is left open. The stop button (``KeyboardInterrupt``) can cut one short
        between its ``BEGIN`` and the ``try`` that would roll it back: every later ``BEGIN``
        then failed ("cannot start a transaction within a transaction") and the chat could
        neither go on nor close until the kernel restarted. Such a leftover committed
        nothing (its writer saw the interrupt and keeps what it was writing): rolled back.

        A read-only store's ``immutable`` connection (:meth:`_connect_read_only`) is opened
        again when a writer made a ``-wal`` or changed the file since it opened."""
        if (
            self._immutable is not None
            and self._depth == 1
            and (
                files_id(self._absolute) != self._files
                or _signature(self._absolute) != self._immutable
            )
        ):
            self._reconnect()
            return
        self._same_file()
        if conn.in_transaction and self._depth == 1:  # nested, it is its own scope's
            rollback(conn)

    def _reconnect(self) -> None:
        """A read-only store's connection replaced by one opened as the files are now."""
        old, self._conn = self._conn, None
        self._immutable = None
        if old is not None:
            old.close()  # immutable: no lock, no log, nothing to copy back
        self._reopened += 1
        self._conn = self._connect_read_only()

    def _begin_write(self, conn: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``: wait up to the timeout for another connection's write
        transaction, or, inside ``no_wait``, raise ``WouldWait`` at once."""
        if self.read_only:
            self._refuse_read_only()
        self._fresh(conn)
        try:
            if may_wait():
                conn.execute("BEGIN IMMEDIATE")
                return
            cp = self._checkpointer
            if cp is not None and cp.truncate_owed:  # a commit here would wait for it
                raise WouldWait(f"the WAL of {self.location} must be truncated")
            conn.execute("PRAGMA busy_timeout = 0")
            try:
                conn.execute("BEGIN IMMEDIATE")
            finally:
                conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        except sqlite3.Error as exc:
            if not may_wait() and _locked(exc):
                raise WouldWait(f"another connection is writing to {self.location}") from None
            raise self._error(exc) from exc

    def _error(self, exc: sqlite3.Error) -> StoreError:
        text = str(exc)
        if _locked(exc):
            return StoreError(
                f"store {self.location} is locked: another connection holds a write "
                f"transaction on it past the busy timeout (a DB browser, a backup, another "
                f"process or store object?) ({text}); try again once it lets go"
            )
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(
            exc, (sqlite3.IntegrityError, sqlite3.OperationalError, sqlite3.ProgrammingError)
        ):
            return StoreError(self._damaged(exc))
        return StoreError(f"store {self.location}: {self._why(exc)}")

    def _why(self, exc: sqlite3.Error) -> str:
        """SQLite's error with its code (``SQLITE_FULL``, ``SQLITE_IOERR_WRITE``, ...); for a
        write refused as read-only or a file that cannot be opened, which of the file, its
        ``-wal``, its ``-shm`` or their directory this user cannot write."""
        text = str(exc)
        name = getattr(exc, "sqlite_errorname", None)
        if name and name not in text:
            text = f"{text} ({name})"
        if name and name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")):
            cause = self._unwritable()
            if cause:
                text = f"{text}: {cause}"
        elif name == "SQLITE_IOERR_SHORT_READ":
            text += (
                f": {self.location}-wal is shorter than SQLite's index of it says (deleted or "
                "replaced while another connection, in this process or another, had it open?); "
                "the store reads again once every connection holding the old one is closed"
            )
        return text

    def _unwritable(self) -> str:
        """Which of the store's files, or their directory, this user cannot write ('' if
        none)."""
        name = _unwritable_file(self.location)
        if name is not None:
            return _cannot_write(name)
        folder = os.path.dirname(self._absolute)
        missing = any(not os.path.exists(self._absolute + s) for s in ("", "-wal", "-shm"))
        if missing and not _writable(folder):
            return (
                f"{_user()} cannot write the directory {folder}, where SQLite creates the "
                f"file's -wal and -shm next to it ({_mode(folder)})"
            )
        return ""

    def _send_group(self, group: list[_Job]) -> None:
        """:meth:`SQLStore._send_group` on SQLite: one ``BEGIN IMMEDIATE`` ... ``COMMIT``
        for the group (a commit writes each page it changed once, however many chats
        changed it)."""
        with self._scope() as conn:
            self._begin_write(conn)
            try:
                expect = planned(group, conn)
            except sqlite3.Error:
                rollback(conn)
                return  # nothing written: each job alone, statement by statement
            except BaseException:
                rollback(conn)
                raise
            if any(cur.rowcount != n for cur, n in expect):
                rollback(conn)
                return
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                rollback(conn)
                raise self._error(exc) from exc
            if self._checkpointer is not None:
                self._checkpointer.committed(conn, self.names_its_file)
            for job in group:
                job.written = True

    def _insert_events(
        self, conn: sqlite3.Connection, rows: list[tuple[str, int, str, str, str]]
    ) -> int:
        before = conn.total_changes
        conn.executemany(
            "INSERT INTO events (chat_id, seq, type, ts, json) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            rows,
        )
        return conn.total_changes - before

    # -- following decisions ----------------------------------------------------------
    def _decision_feed(self, follower: Any) -> Callable[[], list[str]]:
        """SQLite cannot push news: the follower polls the ``decisions`` and
        ``input_answers`` tables (ids only increase), one indexed query each per look, from
        the last ids seen (now, at first).

        Raises:
            StoreError: The store is closed or cannot be read.
        """
        tables = ("decisions", "input_answers")
        with self._read() as conn:
            cursor = [
                int(conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM {t}").fetchone()[0])
                for t in tables
            ]
        ref = weakref.ref(self)

        def poll() -> list[str]:
            store = ref()
            if store is None:
                return []
            news: list[str] = []
            with store._read() as conn:
                for i, table in enumerate(tables):
                    rows = conn.execute(
                        f"SELECT id, chat_id FROM {table} WHERE id > ? ORDER BY id", (cursor[i],)
                    ).fetchall()
                    if rows:
                        cursor[i] = int(rows[-1][0])
                        news.extend(r[1] for r in rows)
            return news

        return poll


class _ReadOnly:
    """A read-only store's connection as it is now (it may be replaced), for its finalizer."""

    def __init__(self) -> None:
        self.conn: sqlite3.Connection | None = None
        self.files: Files = (None, None, None)
        self.held = False

    def set(self, conn: sqlite3.Connection | None, files: Files, held: bool) -> None:
        self.conn, self.files, self.held = conn, files, held


def _close_read_only(open_: _ReadOnly) -> None:
    """The finalizer of a read-only store nobody closed."""
    conn, open_.conn = open_.conn, None
    if conn is not None:
        with suppress(sqlite3.Error):
            conn.close()  # read-only: it never checkpoints
        if open_.held:
            drop_files(open_.files)


def _signature(path: str) -> tuple[int, int, int, int]:
    """What changes when a file is written: its identity, size and time of change."""
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0, 0, 0)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _remove_own_empty_log(path: str, files: Files) -> None:
    """Remove the ``-wal`` and ``-shm`` a read-only connection just made: this user's, the
    log empty, and still the files it made (``files``). SQLite made them because their
    writer closed (and deleted them) between the look and the open; left, a writer of
    another user could not write them."""
    uid = getattr(os, "geteuid", lambda: -1)()
    try:
        db = os.stat(path)
        wal = os.stat(path + "-wal")
        shm = os.stat(path + "-shm")
    except OSError:
        return
    if db.st_uid == uid and db.st_mode & stat.S_IWUSR:
        return  # the file's owner writes them as they are: left for its next connection
    if (
        wal.st_uid != uid
        or shm.st_uid != uid
        or wal.st_size != 0
        or files_id(path)[1:] != files[1:]
    ):
        return
    for suffix in ("-wal", "-shm"):
        with suppress(OSError):
            os.unlink(path + suffix)


def _unwritable_file(location: str) -> str | None:
    """The first of the store's file, its ``-wal`` and its ``-shm`` that exists and this user
    cannot write (``None``: none). A log gone between the two looks (a store on the file
    closing, its last connection deleting it) is none this user cannot write."""
    for suffix in ("", "-wal", "-shm"):
        name = location + suffix
        if os.path.exists(name) and not _writable(name) and os.path.lexists(name):
            return name
    return None


def _writable(path: str) -> bool:
    return os.access(path, os.W_OK, effective_ids=os.access in os.supports_effective_ids)


def _user() -> str:
    uid = getattr(os, "geteuid", None)
    return f"this user (uid {uid()})" if uid is not None else "this user"


def _mode(path: str) -> str:
    """A file's mode and owner, and whether its file system is mounted read-only."""
    try:
        st = os.stat(path)
    except OSError:
        return "cannot be read"
    owner = str(st.st_uid)
    if pwd is not None:
        with suppress(KeyError):
            owner = pwd.getpwuid(st.st_uid).pw_name
    said = f"mode {stat.S_IMODE(st.st_mode):04o}, owned by {owner}"
    statvfs = getattr(os, "statvfs", None)
    if statvfs is not None:
        with suppress(OSError):
            if statvfs(path).f_flag & os.ST_RDONLY:
                said += ", on a read-only file system"
    return said


def _cannot_write(path: str) -> str:
    return f"{_user()} cannot write {path} ({_mode(path)})"


__all__ = ["SQLiteStore"]
