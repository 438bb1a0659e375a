"""The PostgreSQL store: the same rows, claims and decisions as SQLite's, on a shared server.

::

    store = PostgresStore("postgresql://agent:secret@db.internal/agents")
    chat = Chat(model="gpt-4.1-mini", store=store)          # or store="postgresql://..."
    chat = Chat.load(chat_id, store="postgresql://...")     # in any process, on any machine

Everything a chat and the outside do goes through :class:`~nbagent.store._sql.SQLStore`
(the statements SQLite runs too, ``?`` placeholders translated here); what is
PostgreSQL's own:

- **transactions**: one connection per store object (a lock serialises its
  users, like SQLite's), autocommit, each write an explicit ``BEGIN`` that
  first takes the chat's advisory lock (``pg_advisory_xact_lock``), in the
  same round trip: writes to one chat are serialised as SQLite's ``BEGIN
  IMMEDIATE`` serialises every write, and writes to different chats run in
  parallel. Reads are ``REPEATABLE READ, READ ONLY`` snapshots.
- **group commit**: the writes and claims of chats waiting for the connection
  go together, one transaction in two round trips (:meth:`PostgresStore._at_once`);
  each returns once that transaction committed, so a claim is never granted
  before it is durable, and a group that cannot commit writes none of it.
- **at most once**: a claim is ``UPDATE tool_calls SET status = 'running' ...
  WHERE status IN (...)``: of two processes claiming one call, the second
  waits for the first's row lock, re-checks the condition and changes nothing.
  An approved call's claim also checks that its decision is still the one the
  claimant holds (its ``by`` and ``at``, in the same statement: a grouped claim
  costs no more round trips), so a person's decision overruling the chat's own
  in another process since refuses it rather than running the old arguments.
  A decision reads the call's row ``FOR UPDATE``: of two processes deciding
  at once, the second sees the first's decision (first decision wins).
- **decisions reach running chats without polling**: a trigger NOTIFYs every
  recorded decision (and every rule change: m017); one listening connection per
  store object (opened with the first :meth:`PostgresStore.watch`, or the first
  step of a chat driven on the store, in the background) wakes the watches that
  follow that chat and tells driven chats when to read their rules again.
- **the schema**: :mod:`nbagent.store._pg_migrations` (the same versions as
  SQLite's), applied once under an advisory lock.
- **a database that goes away** (a restart, a terminated backend, a network
  cut): the operation under way raises :class:`~nbagent.StoreError` (its
  transaction is rolled back by the server: nothing of it is written; a commit
  whose answer was lost may have been, and a chat's retried write recognises
  its own rows), and the next operation connects again. The listener
  reconnects by itself and catches up on the decisions it missed.
- **secrets**: the DSN's password is kept out of ``location``, ``repr``, every
  error message and log (``location`` is the DSN without it). Text PostgreSQL
  cannot hold (a NUL character) is stored as U+FFFD; JSON keeps it escaped.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import re
import select
import threading
import time
import weakref
from collections.abc import Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import quote, unquote

from .._aio import on_background_loop
from .._errors import StoreError
from .._optional import require
from .._secrets import redact_keys
from . import _pg_migrations as migrations
from ._follow import release as release_follower
from ._migrations import SCHEMA_VERSION
from ._pg_listener import Listener as _Listener
from ._pg_sender import Senders
from ._sql import (
    RULE_CHANGES,
    SQLStore,
    _GroupConn,
    _Job,
    next_seq_sql,
    planned,
    updated_at_sql,
)
from ._sql import _Held as _HeldRows
from ._waiting import WouldWait, may_wait

DSN_SCHEMES = ("postgresql://", "postgres://")
"""A store given as a string starting with one of these is a PostgreSQL DSN."""

_KEYWORD_DSN = re.compile(
    r"^\s*(host|hostaddr|port|dbname|user|password|passfile|service|sslmode|options|"
    r"application_name|connect_timeout|target_session_attrs)\s*=",
    re.IGNORECASE,
)


_UNSURE = itertools.count(1)
"""Rule tokens that equal no other (:meth:`PostgresStore.rules_token` before it listens)."""
LISTENER_CLOSE_WAIT = 2.0  # s: how long close() waits for the listener to close its connection


def is_dsn(value: object) -> bool:
    """Whether ``value`` is a PostgreSQL DSN: a URL (``postgresql://...``) or libpq
    ``key=value`` pairs starting with a connection keyword (``host=... dbname=...``)."""
    if not isinstance(value, str):
        return False
    return value.lower().startswith(DSN_SCHEMES) or _KEYWORD_DSN.match(value) is not None


# ------------------------------------------------------------------ secrets
class _Secret:
    """A string that never shows itself (``repr``, ``str``, ``vars()`` of its owner)."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'***'"

    __str__ = __repr__


_URL_SCHEME = re.compile(r"^[a-z]+://", re.IGNORECASE)
_KW_PASSWORD = re.compile(r"(?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_QUERY_PASSWORD = re.compile(r"[?&]password=([^&#]*)", re.IGNORECASE)


def _url_passwords(dsn: str) -> list[str]:
    """A URL's ``user:password@`` password as libpq reads it: the userinfo runs up to the
    first ``@`` before the first ``/`` (a ``?`` or a ``#`` in it is the password's: libpq
    has no fragment, and reads the query only after the host), the password from its first
    ``:``. And, for each later ``@``, the text from that ``:`` to it: a password with an
    unencoded ``/`` or ``@`` as its writer meant it, which libpq reads in part as the host
    or the query (its messages then quote a piece of it)."""
    scheme = _URL_SCHEME.match(dsn)
    if scheme is None:
        return []
    rest = dsn[scheme.end() :]
    colon = rest.find(":")
    first_at, first_slash = rest.find("@"), rest.find("/")
    if colon < 0 or first_at < 0 or not colon < first_at or 0 <= first_slash < colon:
        return []  # no password written (a host:port, or a user alone)
    return [rest[colon + 1 : at] for at in range(first_at, len(rest)) if rest[at] == "@"]


def _unquoted(text: str, dsn: str) -> str:
    """libpq's message about a DSN it cannot parse, quoting none of the DSN: the DSN itself
    (libpq quotes it whole: ``... in URI: "postgresql://..."``) is named, not shown, and a
    quoted piece of it is hidden unless it is an option's name (``invalid connection option
    "sslmod"``). A password libpq read otherwise than its writer meant (a ``?`` or a ``/``
    in it) is then never shown, whole or in part, whatever the scrub knew of it. A piece
    is the longest quoted text found in the DSN (it may hold a ``"`` of its own)."""
    for whole in dict.fromkeys((dsn, dsn.strip())):
        if whole:
            text = text.replace(whole, "<the DSN>")
    out: list[str] = []
    at = 0
    while (start := text.find('"', at)) >= 0:
        ends = [j for j in range(len(text) - 1, start, -1) if text[j] == '"']
        if not ends:
            break
        end = next((j for j in ends if text[start + 1 : j] in dsn), ends[-1])
        piece = text[start + 1 : end]
        named = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", piece) and re.search(
            rf"(?:^|[\s?&]){re.escape(piece)}\s*=", dsn
        )
        if len(piece) > 1 and piece != "<the DSN>" and not named and piece in dsn:
            piece = "..."
        out += [text[at:start], f'"{piece}"']
        at = end + 1
    return "".join(out) + text[at:]


def _passwords_in(dsn: str) -> list[str]:
    """The password(s) written in a DSN's text, read without parsing it (for scrubbing): a
    URL's (``user:password@``, or its ``?password=`` query parameter) and a ``key=value``
    string's, each as written and percent-decoded (libpq's messages quote either)."""
    found = _url_passwords(dsn)
    found += [m.group(1) for m in _QUERY_PASSWORD.finditer(dsn)]
    found += [unquote(p) for p in found]
    found += [m.group(1).strip("'") for m in _KW_PASSWORD.finditer(dsn)]
    return list(dict.fromkeys(p for p in found if p))


RECONNECT_WINDOW = 5.0
"""Seconds a store that lost its server waits for it to come back (a restart) before its
writes fail; once past, they fail at once until the server answers again."""


def _unencoded_password(dsn: str) -> bool:
    """Whether a URL's password holds an ``@`` or ``/`` not percent-encoded.

    libpq then reads part of the password as the host, the port or the database, and
    every message it writes (and the store's location) shows that part: refused before
    anything is parsed or connected. (A database name with an ``@`` is refused too; it
    can be percent-encoded the same way.)
    """
    head, sep, rest = dsn.partition("://")
    if not sep or not head.isalpha():
        return False
    # as libpq reads it: the userinfo up to the first '@' before the first '/' (a '?' or
    # a '#' in a password is the password's), then the host and the database up to a '?':
    # an '@' there (Zq9?x@y@host, Zq9?x@/y@host) is the password's
    at, slash = rest.find("@"), rest.find("/")
    after_at = rest[at + 1 :].split("?", 1)[0] if at >= 0 else ""
    if not 0 <= slash < at and "@" in after_at and ":" in rest[:at]:
        return True
    # a '/' in a password, with a '?' or a '#' in it (Zq9?a/b@host, Zq9/#b@host): libpq
    # finds no userinfo (the '/' comes first) and reads the password as host:port, a
    # database, a query; what comes between the ':' and that '/' is no port (list)
    after = re.match(r"[^:/@?#\[]*:([^/@]*)/[^@]*@", rest)
    if after is not None and not re.fullmatch(r"\d*(?:[,?#].*)?", after.group(1)):
        return True
    rest = re.split(r"[?#]", rest, maxsplit=1)[0]
    userinfo, at_sign, _ = rest.rpartition("@")
    if not at_sign:
        return False
    _, colon, password = userinfo.partition(":")
    return bool(colon) and ("@" in password or "/" in password)


def _location(params: dict[str, str]) -> str:
    """The DSN a user recognises, without its password: ``postgresql://user@host:port/db``."""
    user = params.get("user")
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port")
    where = f"{quote(user, safe='')}@" if user else ""
    where += host if "/" not in host else quote(host, safe="")
    where += f":{port}" if port else ""
    db = params.get("dbname")
    return f"postgresql://{where}/{quote(db, safe='') if db else ''}"


def _path_names(path: str) -> list[str]:
    """The schema names of a ``search_path`` setting, in order (``"My Schema"`` unquoted)."""
    names: list[str] = []
    for part in re.findall(r'\s*("(?:[^"]|"")*"|[^,]*)\s*(?:,|$)', path):
        part = part.strip()
        if part.startswith('"') and part.endswith('"') and len(part) >= 2:
            part = part[1:-1].replace('""', '"')
        elif part:
            part = part.lower()
        if part:
            names.append(part)
    return names


# ------------------------------------------------------------------ the connection
def _dialect(sql: str) -> str:
    """A shared statement with SQLite's ``IS ?`` in PostgreSQL's words (``?`` kept)."""
    return re.sub(r"\bIS \?", "IS NOT DISTINCT FROM ?", sql)


@functools.lru_cache(maxsize=512)
def _pg_sql(sql: str) -> str:
    """A shared statement (``?`` placeholders, SQLite's ``IS ?``) in psycopg's form."""
    return _dialect(sql.replace("%", "%%")).replace("?", "%s")


def _param(value: Any) -> Any:
    if type(value) is str and "\x00" in value:
        return value.replace("\x00", "\ufffd")  # PostgreSQL text cannot hold NUL
    return value


@functools.lru_cache(maxsize=512)
def _pieces(sql: str) -> tuple[str, ...]:
    """A shared statement cut at its placeholders (SQLite's ``IS ?`` made PostgreSQL's)."""
    return tuple(_dialect(sql).split("?"))


def _literal(value: Any, client: Any) -> str:
    """``value`` as an SQL literal: text quoted (an ``E''`` string, its backslashes doubled,
    when it has any: right whatever ``standard_conforming_strings`` says), integers and
    ``NULL`` as they are, bytes as ``decode(hex)``; anything else by psycopg's
    ``client.mogrify``. psycopg binds each value through its adapters and parses every
    statement with more than 50 values anew (a group's multi-row inserts): about 9 us a
    row, against 1.3 us here."""
    kind = type(value)
    if kind is str:
        value = _param(value)
        if "\\" in value:
            return "E'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
        return "'" + value.replace("'", "''") + "'"
    if value is None:
        return "NULL"
    if kind is int:
        return str(value)
    if kind is bytes:
        return f"decode('{value.hex()}', 'hex')"
    return str(client.mogrify("%s", [value]))


class _Conn:
    """A psycopg connection answering the shared statements (``execute`` like ``sqlite3``'s)."""

    __slots__ = ("client", "raw")

    def __init__(self, raw: Any, client: Any):
        self.raw = raw
        self.client = client  # a ClientCursor on ``raw``: binds parameters as literals

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(_pg_sql(sql), [_param(p) for p in params])

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        cur = self.raw.cursor()
        cur.executemany(_pg_sql(sql), [[_param(p) for p in row] for row in rows])
        return cur


class _Script:
    """One group's statements as one simple query (:meth:`PostgresStore._scripted`).

    Each statement is bound client-side (:func:`_literal`) and kept; :meth:`run` (or
    :meth:`run_async`) sends them, joined, in one round trip and gives each its row count. psycopg's
    pipeline mode sent the same statements in one round trip too, at 3-5x the client
    CPU (its per-statement protocol work: about 70 us a statement against 13 us to bind
    one here).
    """

    __slots__ = ("client", "counts", "parts")

    def __init__(self, client: Any):
        self.client = client  # a ClientCursor (sync, or async: binding waits for nothing)
        self.parts: list[str] = []
        self.counts: list[int] = []

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Count:
        pieces = _pieces(sql)
        if len(pieces) != len(params) + 1:
            raise ValueError(f"{len(params)} values for {len(pieces) - 1} placeholders: {sql}")
        client = self.client
        bound = [pieces[0]]
        for value, piece in zip(params, pieces[1:], strict=True):
            bound += (_literal(value, client), piece)
        self.parts.append("".join(bound))
        return _Count(self, len(self.parts) - 1, 1)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> _Count:
        start = len(self.parts)
        for row in rows:
            self.execute(sql, row)
        return _Count(self, start, len(self.parts) - start)

    def text(self) -> str:
        """Every statement kept, as one query (no parameters: the simple protocol, as it is)."""
        return ";".join(self.parts)

    def counted(self, cur: Any) -> None:
        """Read each statement's row count off ``cur``, the cursor that ran :meth:`text`."""
        counts = [cur.rowcount]
        while cur.nextset():
            counts.append(cur.rowcount)
        self.counts = counts

    def committing(self, expect: list[tuple[Any, int]]) -> str | None:
        """The statements kept, each checked against the rows ``expect`` says it must change,
        then ``COMMIT``, as one query: a statement that changes other than expected raises
        (``division_by_zero``: ``1 / (count(*) = n)::int``, evaluated on the rows it changed,
        never folded by the planner) and the transaction is aborted before its ``COMMIT``.
        One round trip instead of two (the statements, then ``COMMIT`` once the counts were
        read). ``None``: an expectation spans statements (it cannot be checked one by one).
        """
        want = _checks(expect)
        if want is None:
            return None
        parts = list(self.parts)
        for i, n in want.items():
            parts[i] = f"WITH w AS ({parts[i]} RETURNING 1) SELECT 1 / (count(*) = {n})::int FROM w"
        parts.append("COMMIT")
        return ";".join(parts)


class _Unexpected(Exception):
    """A group's statement changed other rows than its plan expects (``PostgresStore._trips``)."""


class _Count:
    """A cursor stand-in for statements of a :class:`_Script`: their rows changed, once run
    (-1 before)."""

    __slots__ = ("n", "script", "start")

    def __init__(self, script: _Script, start: int, n: int):
        self.script, self.start, self.n = script, start, n

    @property
    def rowcount(self) -> int:
        counts = self.script.counts[self.start : self.start + self.n]
        return sum(counts) if len(counts) == self.n else -1


def _checks(expect: list[tuple[Any, int]]) -> dict[int, int] | None:
    """Which statement of a script must change how many rows, from a group's expectations
    (``(cursor, rows)``: a statement's :class:`_Count`, or a row held for a multi-row insert,
    whose chunks must each insert all their rows); ``None`` if one spans statements."""
    want: dict[int, int] = {}
    for cur, n in expect:
        if isinstance(cur, _Count) and cur.n == 1:
            pairs = [(cur.start, n)]
        elif isinstance(cur, _HeldRows) and cur.n == n and cur.sent:
            pairs = [(c.start, rows) for c, rows in cur.sent if isinstance(c, _Count) and c.n == 1]
            if len(pairs) != len(cur.sent):
                return None
        else:
            return None
        for i, rows in pairs:
            if want.setdefault(i, rows) != rows:
                return None
    return want


def _chat_key(chat_id: str) -> int:
    """A chat's advisory lock key: 32 bits of its id's hash (a collision only serialises more)."""
    return int.from_bytes(
        hashlib.blake2b(chat_id.encode(), digest_size=4).digest(), "big", signed=True
    )


# ------------------------------------------------------------------ the store
class PostgresStore(SQLStore):
    """Chats in a PostgreSQL database: ``Chat(store=PostgresStore(dsn))`` or ``store=dsn``.

    The same protocol and guarantees as :class:`~nbagent.store.SQLiteStore`
    (at-most-once claims, in-doubt calls, decisions from anywhere, the first
    decision wins), shared by every process and machine that reaches the
    server; decisions reach waiting chats at once (``LISTEN``/``NOTIFY``:
    :meth:`watch`). Needs ``pip install 'nbagent[postgres]'`` (psycopg 3).

    Args:
        dsn: ``postgresql://user:password@host:port/dbname`` (a libpq URL or
            ``key=value`` string; ``PGPASSWORD``, ``~/.pgpass`` and the other
            libpq settings apply). The tables go to the connection's current
            schema (``?options=-csearch_path%3Dmyschema`` for another one: created if
            no schema of the path exists). The
            password is never shown (``location`` is the DSN without it).
        connect_timeout: Seconds to wait for the server when connecting.
        claim_timeout: Seconds after which a claim by a process that cannot be
            checked (another host) counts as abandoned; ``None``: never.
        application_name: What the server's ``pg_stat_activity`` shows.
        timeout: Seconds a statement waits for a lock another session holds (a row, a
            chat's advisory lock, a table an ``ALTER`` or a ``LOCK`` took) before the
            operation fails with ``StoreError`` ("... is locked"), as SQLite's busy
            timeout (``SQLiteStore(path, timeout=30)``): PostgreSQL's ``lock_timeout`` of
            each of the store's sessions. ``None``: the DSN's or the server's setting
            (the server's default waits forever).

    Raises:
        StoreError: The server cannot be reached or refuses the login, the
            schema has tables and is not an nbagent store, or was written by a
            newer nbagent (nothing is changed then).
        ModuleNotFoundError: psycopg is not installed (the message names the extra).
    """

    _UPDATED_AT = updated_at_sql("GREATEST")
    _NEXT_SEQ = next_seq_sql("GREATEST")
    _FOR_UPDATE = " FOR UPDATE"
    # A JSON \u0000 (a NUL in a reason or an edited argument) has no text form in PostgreSQL:
    # decoding the document raised for every claim of that call, which then never ran. The
    # escape is read as U+FFFD for the check only (by and at hold no NUL; a mismatch goes
    # to the careful path, which compares in Python).
    _DECIDED_AS = (
        r"(replace(decision, '\u0000', '\ufffd')::json ->> 'by') = ? AND "
        r"(replace(decision, '\u0000', '\ufffd')::json ->> 'at') = ?"
    )
    _GROUPS = True

    def __init__(
        self,
        dsn: str,
        *,
        connect_timeout: float = 10.0,
        claim_timeout: float | None = None,
        application_name: str = "nbagent",
        timeout: float | None = 30.0,
    ):
        if not isinstance(dsn, str):
            raise TypeError(f"dsn must be a string, got {type(dsn).__name__}")
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not timeout > 0
            or timeout == float("inf")
        ):
            raise ValueError(
                f"timeout must be a positive number of seconds or None, got {timeout!r}"
            )
        self.timeout = timeout
        # PostgreSQL's lock_timeout is in whole milliseconds; 0 would mean "wait forever"
        self._lock_ms = None if timeout is None else max(1, round(timeout * 1000))
        self._pg = require("psycopg", "PostgresStore")
        if _unencoded_password(dsn):
            raise StoreError(
                "cannot open a PostgreSQL store: the URL's password holds an '@' or a '/' "
                "that is not percent-encoded, so part of it would be read as the host or the "
                "database; write it as urllib.parse.quote(password, safe='') (nothing was "
                "connected)"
            )
        self._secrets = [_Secret(p) for p in _passwords_in(dsn)]
        error: StoreError | None = None
        try:
            params = self._pg.conninfo.conninfo_to_dict(dsn)
        except self._pg.Error as exc:
            error = StoreError(
                "cannot open a PostgreSQL store: "
                f"{self._scrub(_unquoted(str(exc), dsn)).strip()} "
                "(expected postgresql://user:password@host:port/dbname)"
            )
        except UnicodeDecodeError:  # libpq decoded a '%a0' escape to bytes that are no text
            error = StoreError(
                "cannot open a PostgreSQL store: the URL holds a percent-escape that is not "
                "UTF-8 text (a password with a '%' in it, say); write the password as "
                "urllib.parse.quote(password, safe='') (nothing was connected)"
            )
        if error is not None:  # raised here, so that it holds no trace of libpq's message
            raise error
        if params.get("password"):
            self._secrets.append(_Secret(str(params["password"])))
        self.location = _location({k: str(v) for k, v in params.items() if v is not None})
        self.claim_timeout = claim_timeout
        self._dsn = _Secret(dsn)
        self._connect_timeout = max(1, round(connect_timeout))
        self._options: dict[str, Any] = {
            "connect_timeout": self._connect_timeout,
            "application_name": application_name,
        }
        self._down_since: float | None = None  # when the server was first found away
        self._lock = threading.RLock()
        self._depth = 0  # uses of the connection open on the thread holding _lock (_scope)
        self._queue_lock = threading.Lock()
        self._queue: list[_Job] = []  # writes waiting for the next group commit
        self._closed = False
        self._conn: _Conn | None = None
        self._listener: _Listener | None = None
        self._listener_lock = threading.Lock()  # who starts it (a step's look never waits)
        self._held = _Held()  # what a store dropped without close() lets go of
        self._senders = self._held.senders = Senders()  # send_async's, one per event loop
        self._ref = weakref.ref(self)  # what they hold of this store
        self._conn = self._held.conn = self._open()
        weakref.finalize(self, self._held.release)

    # -- lifecycle -------------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        # the longest first: a password's decoded form may be a part of its written one
        for secret in sorted(self._secrets, key=lambda s: len(s.reveal()), reverse=True):
            value = secret.reveal()
            if value:
                text = text.replace(value, "***")
                text = text.replace(quote(value, safe=""), "***")
        return text

    def _raw_connect(self, reconnect: bool = False) -> Any:
        """A new autocommit psycopg connection; ``StoreError`` (scrubbed) if it fails.

        ``reconnect``: the store had a connection and lost it; a server that is away
        (restarting) is waited for, within :data:`RECONNECT_WINDOW` (see :meth:`_wait`).
        """
        attempts = self._attempts(reconnect)
        pause = next(attempts)
        while True:
            time.sleep(pause)
            try:
                raw = self._pg.connect(self._dsn.reveal(), autocommit=True, **self._options)
                if self._lock_ms is not None:
                    try:
                        raw.execute(f"SET lock_timeout = {self._lock_ms}")
                    except BaseException:
                        raw.close()
                        raise
            except (self._pg.Error, UnicodeError) as exc:  # a host name's empty label: idna's
                failure = exc
            else:
                self._down_since = None
                return raw
            pause = attempts.send(failure)  # outside the handler: no trace of libpq's text

    async def _async_connect(self, reconnect: bool = False) -> Any:
        """A new autocommit ``AsyncConnection``; ``StoreError`` if it fails (``reconnect``:
        as :meth:`_raw_connect`'s)."""
        import asyncio

        attempts = self._attempts(reconnect)
        pause = next(attempts)
        while True:
            await asyncio.sleep(pause)
            try:
                raw = await self._pg.AsyncConnection.connect(
                    self._dsn.reveal(), autocommit=True, **self._options
                )
                if self._lock_ms is not None:
                    try:
                        await raw.execute(f"SET lock_timeout = {self._lock_ms}")
                    except BaseException:
                        await raw.close()
                        raise
            except (self._pg.Error, UnicodeError) as exc:  # as _raw_connect's
                failure = exc
            else:
                self._down_since = None
                return raw
            pause = attempts.send(failure)

    def _attempts(self, reconnect: bool) -> Generator[float, BaseException, None]:
        """The pauses before each attempt to connect, the sync and async ones alike: none
        before the first; sent each failure, the next pause, or the failure's
        ``StoreError`` (scrubbed: it holds no trace of libpq's message, which may echo the
        DSN) when no more waiting is due."""
        attempt = 0
        failure = yield 0.0
        while True:
            pause = self._wait(failure, attempt) if reconnect else None
            if pause is None:
                raise self._connect_error(failure)
            attempt += 1
            failure = yield pause

    def _wait(self, exc: BaseException, attempt: int) -> float | None:
        """How long to wait before connecting again (``None``: fail now).

        A server that went away (refused, starting up, shutting down, out of connections)
        is waited for up to :data:`RECONNECT_WINDOW` from when it was first found away, so a
        restart loses no write: a batch's rows failed by the dozen on a one-second restart.
        Past the window every attempt fails at once (a server gone for good does not make
        each write wait), until a connection succeeds again. A refused password or a
        missing database fails at once.
        """
        state = getattr(exc, "sqlstate", None)
        if state is not None and not (state.startswith(("57P", "08")) or state == "53300"):
            return None
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
        left = RECONNECT_WINDOW - (now - self._down_since)
        if left <= 0:
            return None
        return min(0.1 * 2**attempt, 1.0, left)

    def _connect_error(self, exc: BaseException) -> StoreError:
        text = " ".join(self._scrub(str(exc)).split())  # libpq's lines and tab, as one line
        return StoreError(f"cannot connect to PostgreSQL store {self.location}: {text}")

    def _open(self) -> _Conn:
        """Connect, and bring the schema to this version (once, under the migration lock)."""
        raw = self._raw_connect()
        try:
            self._schema_named(raw)
            version = migrations.schema_version(raw)
            if version < 0:
                raise StoreError(
                    f"{self.location} has tables and no schema_migrations in its schema: it is "
                    "not an nbagent store, and was not changed. Use another database or schema "
                    "(?options=-csearch_path%3Dnbagent: the schema is created if missing)."
                )
            if version > SCHEMA_VERSION:
                raise StoreError(self._newer(version))
            if version < SCHEMA_VERSION:
                try:
                    migrations.migrate(raw)
                except ValueError as exc:  # found under the lock (another process raced)
                    raise StoreError(
                        f"{self.location} cannot be migrated: {exc}; it was not changed"
                    ) from None
        except self._pg.errors.InsufficientPrivilege as exc:
            raw.close()
            raise StoreError(
                f"{self.location}: this role cannot create nbagent's tables "
                f"({self._scrub(str(exc)).strip().splitlines()[0]}). Grant it CREATE on the "
                "schema, or use a "
                "schema it owns (?options=-csearch_path%3Dmyschema); nothing was changed."
            ) from None
        except self._pg.Error as exc:
            # opening, on a connection that works: a lock or statement timeout is not
            # "lost the connection ... the next operation connects again" (there is none)
            text = " ".join(self._scrub(str(exc)).split()) or type(exc).__name__
            raw.close()
            raise StoreError(
                f"cannot open PostgreSQL store {self.location}: {text}; nothing was changed"
            ) from None
        except BaseException:
            raw.close()
            raise
        return _Conn(raw, self._pg.ClientCursor(raw))

    def _schema_named(self, raw: Any) -> None:
        """The schema the connection's ``search_path`` names first, created if no schema of
        the path exists (``?options=-csearch_path%3Dnbagent``, the way to keep nbagent's
        tables apart from a database's others): else every ``CREATE TABLE`` failed with "no
        schema has been selected to create in". A path with a schema that exists is left as
        it is."""
        if raw.execute("SELECT current_schema()").fetchone()[0] is not None:
            return
        path = str(raw.execute("SELECT current_setting('search_path')").fetchone()[0])
        name = next((n for n in _path_names(path) if n != "$user"), None)
        if name is None:
            return  # nothing named: the migrations' error says so
        try:
            raw.execute(
                self._pg.sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                    self._pg.sql.Identifier(name)
                )
            )
        except (self._pg.errors.UniqueViolation, self._pg.errors.DuplicateSchema):
            pass  # another process created it at the same moment
        except self._pg.errors.InsufficientPrivilege as exc:
            raise StoreError(
                f"{self.location}: the search_path names schema {name!r}, which does not "
                f"exist, and this role cannot create it "
                f"({self._scrub(str(exc)).strip().splitlines()[0]}). Create it first "
                f"(CREATE SCHEMA {name} AUTHORIZATION <role>), or name a schema that exists; "
                "nothing was changed."
            ) from None

    def _newer(self, version: int) -> str:
        return (
            f"{self.location} was written by a newer nbagent (schema version {version}; this "
            f"version knows up to {SCHEMA_VERSION}). Upgrade nbagent to open it; the "
            "database was not changed."
        )

    def close(self) -> None:
        """Close the connections (idempotent); every watch of this store is closed too.
        Returns once they are closed, the listener's too (within ``LISTENER_CLOSE_WAIT``)."""
        with self._lock, self._listener_lock:  # no listener starts after this
            self._closed = True
            self._conn = self._listener = None
        self._held.release()
        release_follower(self)

    @property
    def closed(self) -> bool:
        return self._closed

    def reveal_dsn(self) -> str:
        """The DSN this store was opened with, password included: to open the same store
        elsewhere (a worker process). Never print or log it."""
        return self._dsn.reveal()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (for a worker process: Ray, multiprocessing) as the way to open it again:
        the unpickled store has its own connections. The pickle holds the password."""
        return (
            _reopen,
            (
                self._dsn.reveal(),
                self._connect_timeout,
                self.claim_timeout,
                self._options["application_name"],
                self.timeout,
            ),
        )

    def __enter__(self) -> PostgresStore:
        return self

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"schema v{SCHEMA_VERSION}"
        return f"PostgresStore({self.location!r}, {state})"

    @property
    def schema_version(self) -> int:
        with self._read() as conn:
            return migrations.schema_version(conn.raw)

    # -- transactions ------------------------------------------------------------------
    def _may_send(self) -> None:
        """Inside ``no_wait`` (a chat's step on its driver's loop) nothing is sent: a round
        trip waits. Raises ``WouldWait`` before the connection's lock is even asked for."""
        if not may_wait():
            raise WouldWait(f"a round trip to {self.location}")

    def _c(self) -> _Conn:
        """The connection; a new one if the last was lost (nothing is in flight here)."""
        self._may_send()
        if self._closed:
            raise StoreError(f"store {self.location} is closed")
        conn = self._conn
        if conn is None or conn.raw.closed or conn.raw.broken:
            if conn is not None:
                with suppress(self._pg.Error):
                    conn.raw.close()
            self._conn = None
            raw = self._raw_connect(reconnect=True)
            self._conn = self._held.conn = conn = _Conn(raw, self._pg.ClientCursor(raw))
        return conn

    @contextmanager
    def _scope(self) -> Iterator[None]:
        """The store's lock, for one use of the connection (a transaction, a statement).

        The first scope on the thread rolls back a transaction left open on the connection
        (or closes it if that fails: the next use connects anew). The stop button
        (``KeyboardInterrupt``) can cut a transaction short before its ``ROLLBACK``: every
        later ``BEGIN`` then failed ("SET TRANSACTION ISOLATION LEVEL must be called before
        any query") and the chat could neither go on nor close. The leftover committed
        nothing; its writer saw the interrupt and keeps what it was writing. A nested
        scope leaves the open transaction to its own (``_depth``).
        """
        with self._lock:
            self._depth += 1
            try:
                conn = self._conn
                if self._depth == 1 and conn is not None and self._left_open(conn):
                    self._rollback(conn)
                yield
            finally:
                self._depth -= 1

    def _left_open(self, conn: _Conn) -> bool:
        """Whether ``conn`` (live) is inside a transaction (or a query) out of any scope."""
        if conn.raw.closed or conn.raw.broken:
            return False
        return bool(conn.raw.info.transaction_status != self._pg.pq.TransactionStatus.IDLE)

    def _idle(self) -> _Conn:
        """The connection, checked without a round trip: one the server ended while it sat
        idle (a restart, a terminated backend) has the server's last words waiting on its
        socket, and is replaced before anything is sent (``_begin`` does the same by
        sending ``BEGIN`` alone). Nothing else arrives on an idle connection that does
        not listen."""
        conn = self._c()
        with suppress(OSError, ValueError):
            if select.select([conn.raw.fileno()], [], [], 0)[0]:
                with suppress(self._pg.Error):
                    conn.raw.close()
                conn = self._c()  # connects again
        return conn

    @contextmanager
    def _tx(self, chat_id: str | None = None) -> Iterator[_Conn]:
        """One write transaction (holding the chat's advisory lock); any error rolls it back."""
        begin = "BEGIN"
        if chat_id is not None:
            begin += "; " + migrations.chat_lock(_chat_key(chat_id))
        with self._transaction(begin, write=True) as conn:
            yield conn

    @contextmanager
    def _transaction(self, begin: str, *, write: bool) -> Iterator[_Conn]:
        """A transaction begun with ``begin``: committed at the end, rolled back on any error
        (a ``KeyboardInterrupt`` too, without trying ``COMMIT``: after the stop button in a
        query, ``COMMIT`` failed with "another command is already in progress" and that
        error replaced the interrupt). A write always tries its ``COMMIT``: on a lost
        connection that raises, where skipping it would say nothing of a write never made."""
        self._may_send()
        with self._scope():
            conn = self._begin(begin)
            try:
                yield conn
            except BaseException as exc:
                self._rollback(conn)
                if isinstance(exc, self._pg.Error):
                    raise self._error(exc) from None
                raise
            try:
                if write or not conn.raw.broken:
                    conn.raw.execute("COMMIT")
            except self._pg.Error as exc:
                self._rollback(conn)
                raise self._error(exc, committing=write) from None

    def _send_group(self, group: list[_Job]) -> None:
        """:meth:`SQLStore._send_group` on the store's connection (:meth:`_trips`)."""
        with self._scope():
            conn = self._idle()
            trips = self._trips(group, conn.client, conn.raw, one_trip=False)
            try:
                query = next(trips)
                while True:
                    try:
                        sent = conn.raw.execute(query)
                    except BaseException as exc:
                        query = trips.throw(exc)
                    else:
                        query = trips.send(sent)
            except StopIteration:
                return

    def _scripted(self, group: list[_Job], client: Any) -> tuple[_Script, list[tuple[Any, int]]]:
        """``group`` as one script (bound by ``client``, a client cursor): ``BEGIN``, the
        chats' advisory locks in order (no deadlock; one statement), each table's rows in one
        statement (:class:`_GroupConn`), every other statement; and the rows each must
        change."""
        script = _Script(client)
        script.execute("BEGIN")
        keys = sorted({_chat_key(j.chat_id) for j in group if j.chat_id})
        if keys:
            script.execute(migrations.chat_locks(keys))
        grouped = _GroupConn(script)
        expect = planned(group, grouped)
        grouped.send()
        return script, expect

    # -- group commit from an event loop (_pg_sender) ------------------------------------
    async def send_async(self, job: _Job) -> bool:
        """Send ``job`` (:meth:`SQLStore.write_job`) with the other jobs of the running
        loop's chats, as one transaction on that loop's own connection
        (:class:`~nbagent.store._pg_sender.Sender`), without a thread. Returns whether it
        was written (committed); ``False``: nothing of it was, and the caller writes it the
        usual way, which decides what happened.

        Raises:
            StoreError: The group could not be committed (the connection was lost: nothing
                of it is written; a commit whose answer was lost may have been).
        """
        if self._closed:
            raise StoreError(f"store {self.location} is closed")
        await self._senders.get(self._ref).send(job)
        if isinstance(job.error, StoreError):
            raise job.error
        return job.written

    async def _send_group_async(self, conn: Any, group: list[_Job]) -> None:
        """:meth:`_send_group` on ``conn``, an ``AsyncConnection`` of the loop's sender."""
        trips = self._trips(group, self._pg.AsyncClientCursor(conn), conn, one_trip=True)
        try:
            query = next(trips)
            while True:
                try:
                    sent = await conn.execute(query)
                except BaseException as exc:
                    query = trips.throw(exc)
                else:
                    query = trips.send(sent)
        except StopIteration:
            return

    def _trips(
        self, group: list[_Job], client: Any, raw: Any, one_trip: bool
    ) -> Generator[str, Any, None]:
        """A group's round trips, written once for both connections: yields each query for
        the caller to send on ``raw`` and send back its cursor (or throw in its error).

        ``one_trip`` (the async sender's, where each round trip is a turn of the loop that
        every chat of a batch waits behind): one round trip when each expectation is one
        statement's (:meth:`_Script.committing`: the statements checked, then ``COMMIT``).
        Else two: the statements, their row counts read here, then ``COMMIT`` or
        ``ROLLBACK``; a connection lost in the first is then known to have written nothing
        (the error says so), where in one round trip it may have committed (a writer
        that falls back to the careful path recognises its rows). A statement that changes
        other rows than expected, or an error that leaves the connection up, rolls back:
        nothing written, each job then writes alone. A lost connection raises
        ``StoreError``. Committed, every job is ``written``.
        """
        script, expect = self._scripted(group, client)
        query = script.committing(expect) if one_trip else None
        sent = "statements" if query is None else "both"  # what a failure may have reached
        try:
            if query is not None:
                yield query
            else:
                script.counted((yield script.text()))
                if any(cur.rowcount != n for cur, n in expect):
                    raise _Unexpected
                sent = "commit"
                yield "COMMIT"
        except (_Unexpected, self._pg.errors.DivisionByZero):
            yield from self._rolled_back(raw)
            return
        except self._pg.Error as exc:
            if not (raw.broken or raw.closed):
                yield from self._rolled_back(raw)
                if sent != "commit":  # a statement failed, and COMMIT with it: nothing
                    self._refused_read_only(exc, raw)  # is written, each job alone (on a
                    return  # new connection, if this one is read-only)
            raise self._error(exc, committing=sent != "statements", raw=raw) from None
        except BaseException:
            yield from self._rolled_back(raw)
            raise
        for job in group:
            job.written = True
        self._links_written(row for job in group for row in job.links)

    def _rolled_back(self, raw: Any) -> Generator[str, Any, None]:
        """``ROLLBACK`` on ``raw`` (as a :meth:`_trips` round trip), unless it is lost; a
        failure to roll back is the connection's (the next use finds it broken)."""
        if raw.broken or raw.closed:
            return
        with suppress(self._pg.Error):
            yield "ROLLBACK"

    @contextmanager
    def _read(self) -> Iterator[_Conn]:
        """A consistent snapshot for several reads."""
        with self._transaction(
            "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", write=False
        ) as conn:
            yield conn

    def rule_changes(self, chat_id: str) -> list[tuple[str, str, str]]:
        """:meth:`SQLStore.rule_changes` in one round trip (one statement needs no
        transaction of its own: every step of a driven chat asks)."""
        self._may_send()
        with self._scope():
            for again in (True, False):
                conn = self._c()
                try:
                    rows = conn.execute(RULE_CHANGES, (chat_id,)).fetchall()
                    break
                except self._pg.Error as exc:
                    if again and (conn.raw.broken or conn.raw.closed):
                        continue  # it died while idle (a server restart): a read is safe again
                    raise self._error(exc) from None
        return [(str(ts), str(kind), str(data)) for ts, kind, data in rows]

    def _begin(self, sql: str) -> _Conn:
        """Begin a transaction. A connection found dead here (the server restarted, the
        backend was terminated, while it sat idle) is replaced once: nothing of this
        transaction was sent, so connecting again is safe."""
        conn = self._c()
        try:
            conn.raw.execute(sql)
            return conn
        except self._pg.Error as exc:
            if not (conn.raw.broken or conn.raw.closed):
                self._rollback(conn)
                raise self._error(exc) from None
        conn = self._c()  # connects again
        try:
            conn.raw.execute(sql)
        except self._pg.Error as exc:
            self._rollback(conn)
            raise self._error(exc) from None
        return conn

    def _rollback(self, conn: _Conn) -> None:
        if conn.raw.closed or conn.raw.broken:
            return
        try:
            conn.raw.execute("ROLLBACK")
        except self._pg.Error:
            # a query cut short by the stop button is still in progress: the connection
            # cannot be used again; closed, the next use connects anew
            with suppress(self._pg.Error):
                conn.raw.close()

    def _error(self, exc: BaseException, committing: bool = False, raw: Any = None) -> StoreError:
        """What ``exc`` (psycopg's) says, scrubbed; ``raw``: the connection it came from
        (default: the store's own), closed if it refused a write as read-only
        (:meth:`_refused_read_only`)."""
        # libpq's lines; its CONTEXT may quote a statement's values (a decision's JSON)
        text = " ".join(redact_keys(self._scrub(str(exc))).split()) or type(exc).__name__
        if raw is None and self._conn is not None:
            raw = self._conn.raw
        self._refused_read_only(exc, raw)
        if isinstance(exc, self._pg.OperationalError) and (raw is None or raw.closed or raw.broken):
            outcome = (
                "its commit was sent but not confirmed: it may or may not have been written"
                if committing
                else "what it was writing was rolled back by the server: nothing of it is written"
            )
            return StoreError(
                f"lost the connection to PostgreSQL store {self.location} ({text}); {outcome}. "
                "The next operation connects again."
            )
        if getattr(exc, "sqlstate", None) == "55P03":  # lock_not_available: lock_timeout
            waited = "" if self.timeout is None else f" ({self.timeout:g} s)"
            return StoreError(
                f"store {self.location} is locked: another session holds a lock this "
                f"operation needs past the lock timeout{waited} (a long transaction, an "
                "ALTER, a LOCK, another process's write?) (" + text + "); try again once it "
                "lets go (PostgresStore(dsn, timeout=SECONDS) waits longer)"
            )
        return StoreError(f"store {self.location}: {text}")

    def _refused_read_only(self, exc: BaseException, raw: Any) -> None:
        """Close ``raw`` if it refused a write as read-only (SQLSTATE 25006, after its
        transaction was rolled back or aborted: nothing of it is written). A session reads
        ``default_transaction_read_only`` (``ALTER DATABASE ... SET``, a standby's
        ``transaction_read_only``) once, when it connects: a connection made while the
        database was read-only refused every write for its life, after the setting was
        lifted too (another process wrote), and only a broken one was replaced. Closed, the
        next operation connects again (the store's ``_c``, the sender's next group) and
        reads the setting of the moment (``target_session_attrs=read-write`` finds the new
        primary after a failover); the write refused raises as it did."""
        if getattr(exc, "sqlstate", None) != "25006" or raw is None or raw.closed:
            return
        with suppress(Exception):
            raw.pgconn.finish()  # sync or async connection alike: libpq's PQfinish

    # -- the dialect -------------------------------------------------------------------
    def _insert_events(self, conn: Any, rows: list[tuple[str, int, str, str, str]]) -> int:
        cur = conn.executemany(
            "INSERT INTO events (chat_id, seq, type, ts, json) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            rows,
        )
        return int(cur.rowcount)

    # -- following decisions (and rule changes) ------------------------------------------
    def rules_token(self) -> tuple[int, int]:
        """What a driven chat compares before reading its rules again at a step
        (``StoreExtension.apply_rules``), without a round trip: the listener's count of the
        rule changes announced (m017: a trigger NOTIFYs each one at its commit), and the
        second. Equal tokens: no rule changed elsewhere in between, as far as announced,
        and at most a second went by, so a chat reads its rules at least once a second
        whatever the network does to the listener. Until the listener listens (it is
        started here, in the background) every token differs: each look reads.
        """
        listener = self._listener or self._listen_in_background()
        if listener is None or not listener.listening.is_set():
            return (-next(_UNSURE), 0)
        return (listener.rules, int(time.monotonic()))

    def _listen_in_background(self) -> _Listener | None:
        """Start the listener without waiting for it (nor for the connection's lock: a
        chat's step asks, on its driver's loop); ``None`` if closed or being started."""
        if self._closed or not self._listener_lock.acquire(blocking=False):
            return None
        try:
            if self._listener is None and not self._closed:
                self._listener = self._held.listener = _Listener(self._async_connect, None, None)
            return self._listener
        finally:
            self._listener_lock.release()

    def _decision_feed(self, follower: Any) -> None:
        """Pushed by the server (``LISTEN nbagent_decisions``; a trigger NOTIFYs each
        decision at its commit) to ``follower``, on one listening connection per store
        object (a task on nbagent's background loop); it reconnects by itself if the
        server goes away, and then reports the decisions recorded meanwhile.

        Every decision recorded once this returns is reported: the listener reports
        those above the last id read here, and this waits until it listens (except on
        the background loop itself, which the listener needs to run). A listener started
        earlier for :meth:`rules_token` alone is replaced: it may still hold announcements
        of decisions made before this began, which are not news to ``follower``.

        Raises:
            StoreError: The store is closed, or the server cannot be reached.
        """
        with self._lock, self._listener_lock:
            early = self._listener
            if early is not None and not early.followed:  # started for the rules token alone:
                self._listener = self._held.listener = None  # it may hold announcements of
                early.stop()  # decisions made before this began; a new one starts after them
            if self._listener is None:
                with self._read() as conn:  # raises if closed or unreachable
                    row = conn.execute(
                        "SELECT (SELECT COALESCE(MAX(id), 0) FROM decisions), "
                        "(SELECT COALESCE(MAX(id), 0) FROM input_answers)"
                    ).fetchone()
                self._listener = self._held.listener = _Listener(
                    self._async_connect, int(row[0]), int(row[1])
                )
            listener = self._listener
            listener.add(follower)
        wait = self._connect_timeout + 5.0
        if not on_background_loop() and not listener.listening.wait(wait):
            with self._lock:
                if self._listener is listener:
                    self._listener = self._held.listener = None
            listener.stop()
            why = self._scrub(str(listener.last_error or "no answer"))
            raise StoreError(
                f"could not listen for decisions on {self.location} within {wait:g} s ({why})"
            )


def _reopen(
    dsn: str,
    connect_timeout: float,
    claim_timeout: float | None,
    application_name: str,
    timeout: float | None = 30.0,  # a pickle made before the lock timeout: the default
) -> PostgresStore:
    return PostgresStore(
        dsn,
        connect_timeout=connect_timeout,
        claim_timeout=claim_timeout,
        application_name=application_name,
        timeout=timeout,
    )


class _Held:
    """A store's connection and listener, for a store dropped without ``close()``."""

    def __init__(self) -> None:
        self.conn: _Conn | None = None
        self.listener: _Listener | None = None
        self.senders: Senders | None = None

    def release(self) -> None:
        if self.senders is not None:
            self.senders.close()
        listener, self.listener = self.listener, None
        conn, self.conn = self.conn, None
        if listener is not None:
            listener.stop(wait=LISTENER_CLOSE_WAIT)  # close() returns with no connection open
        if conn is not None:
            with suppress(Exception):
                conn.raw.close()


__all__ = ["DSN_SCHEMES", "PostgresStore", "is_dsn"]
