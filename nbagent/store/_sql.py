"""What the SQLite and PostgreSQL stores share: the rows, and every statement that is the same.

:class:`SQLStore` is the store written once against a DB-API connection whose
``execute(sql, params)`` takes ``?`` placeholders (``sqlite3`` natively; the
PostgreSQL store's connection translates them, see
:mod:`nbagent.store._postgres`). A subclass brings the connection, the
transactions and what differs between the two dialects:

- ``_tx(chat_id)`` (one write transaction; PostgreSQL also takes the chat's
  advisory lock, so writes to one chat are serialised as SQLite serialises
  every write) and ``_read()`` (a consistent snapshot for several reads);
- ``_UPDATED_AT`` / ``_NEXT_SEQ`` (SQLite's scalar ``MAX(a, b)`` is
  PostgreSQL's ``GREATEST``) and ``_FOR_UPDATE`` (the row lock PostgreSQL needs
  where SQLite's write transaction already excludes everyone);
- ``_insert_events`` (how many rows an ``INSERT ... ON CONFLICT DO NOTHING``
  batch wrote) and ``_TEXT_ERRORS`` (text the database cannot store: the write
  is retried once with it cleaned).

The rows and what they mean are described in :mod:`nbagent.store._sqlite`
(the schema) and :mod:`nbagent.store._codec` (what the JSON columns hold).

**Retried writes are idempotent.** A write whose commit was lost with the
connection may have been applied; written again, its message and call rows
are recognised as its own (same content: ``"dup"``, not a conflict), and a
claim already held by the same owner is reported claimed.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from datetime import datetime
from typing import Any, ClassVar

from .._chat_state import answer_json, checked_answer, same_arguments
from .._errors import DecisionError, InputError, StoreError
from .._events import (
    ApprovalDecided,
    CallInDoubt,
    Event,
    ToolCallFinished,
    ToolCallRequested,
    ToolCallStarted,
    utcnow,
)
from .._recording import (
    Recording,
    arguments_digest,
    deltas_in,
    deltas_out,
    digest_links,
    fingerprint_in,
    full_deltas,
    linked_digests,
    response_in,
    response_out,
    slim_deltas,
    split_slot,
    stored_fingerprint,
)
from .._rules import Rule, denied_edit
from .._schema import validate_json_schema
from .._secrets import hidden_from, redact_keys, redacted
from .._types import (
    INPUT_ACTIONS,
    Decision,
    LLMToolResponse,
    Message,
    PendingInput,
    ToolCall,
    ToolResultMessage,
    automatic_decider,
    by_machine,
)
from .._unicode import TooDeep, clean, clean_json
from . import _codec as codec
from ._follow import follow
from ._process import abandoned
from ._protocol import (
    Blob,
    CallFinal,
    CallReset,
    Change,
    ChatInfo,
    ChatRecord,
    ClaimResult,
    DecisionChange,
    Entry,
    InputAnswer,
    NewCall,
    NewInput,
    NewMessage,
    StoredCall,
    StoredInput,
)
from ._waiting import held, may_wait
from ._watch import DecisionWatch

_INLINE_ARGUMENTS = 2048
"""Encoded arguments longer than this go to ``call_arguments`` (a row written once)."""
_ARGUMENTS = (
    "CASE WHEN arguments <> '' THEN arguments ELSE (SELECT a.arguments FROM call_arguments a "
    "WHERE a.chat_id = tool_calls.chat_id AND a.call_id = tool_calls.call_id) END"
)
_COLUMNS = (
    "chat_id",
    "call_id",
    "name",
    _ARGUMENTS,
    "raw_arguments",
    "parse_error",
    "status",
    "approval",
    "decision",
    "result",
    "turn",
    "step",
    "requested_at",
    "started_at",
    "finished_at",
    "claimed_by",
    "claimed_at",
    "server",
    "hosted",
)
_CALL_COLUMNS = ", ".join(_COLUMNS)
"""A call's columns, for ``SELECT ... FROM tool_calls`` (the table not aliased)."""
_RESULT = _COLUMNS.index("result")


def _put_blobs(conn: Any, blobs: Sequence[Blob]) -> None:
    """Store each blob's bytes, once per hash (a hash already stored is left as it is)."""
    now = utcnow().isoformat()
    conn.executemany(
        "INSERT INTO blobs (sha256, media_type, size, data, created_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING",
        [(b.sha256, b.media_type, len(b.data), b.data, now) for b in blobs],
    )


def _with_bytes(conn: Any, message: Any) -> Any:
    """A message dict with each part's bytes put back under ``"data"`` (from ``blobs``)."""
    parts = message.get("parts") if isinstance(message, dict) else None
    for part in parts or ():
        row = conn.execute("SELECT data FROM blobs WHERE sha256 = ?", (part["sha256"],)).fetchone()
        if row is None:
            raise StoreError(
                f"the bytes of a {part.get('kind', 'part')} ({part['sha256']}) are missing"
            )
        part["data"] = bytes(row[0])
    return message


def _ran_with(row: Sequence[Any]) -> Any:
    """The arguments a call row ran with: its decision's edit, else the model's."""
    decision = codec.loads(row[8])
    edit = decision.get("arguments") if isinstance(decision, dict) else None
    return edit if edit is not None else (codec.loads(row[3]) or {})


def _stored_call(row: Sequence[Any], conn: Any | None = None) -> StoredCall:
    result = codec.loads(row[9])
    if conn is not None and result is not None:
        result = _with_bytes(conn, result)
    return StoredCall(
        chat_id=row[0],
        id=row[1],
        name=row[2],
        arguments=codec.loads(row[3]) or {},
        raw_arguments=row[4],
        parse_error=row[5],
        status=row[6],
        approval=codec.approval_in(codec.loads(row[7])),
        decision=codec.decision_in(codec.loads(row[8])),
        result=codec.message_in(result) if result is not None else None,  # type: ignore[arg-type]
        turn=row[10],
        step=row[11],
        requested_at=codec.dt_in(row[12]),
        started_at=codec.dt_in(row[13]),
        finished_at=codec.dt_in(row[14]),
        claimed_by=row[15],
        claimed_at=codec.dt_in(row[16]),
        server=row[17],
        hosted=bool(row[18]),
    )


def updated_at_sql(greatest: str) -> str:
    """When chat ``c`` was last written: its row, its last event, its last message (one of them
    may be later than the others: a message row is its own event since version 5)."""
    return (
        f"{greatest}(c.updated_at, "
        "COALESCE((SELECT e.ts FROM events e WHERE e.chat_id = c.id ORDER BY e.seq DESC LIMIT 1), "
        "''), COALESCE((SELECT m.ts FROM messages m WHERE m.chat_id = c.id "
        "ORDER BY m.idx DESC LIMIT 1), ''))"
    )


def next_seq_sql(greatest: str) -> str:
    """The next event ``seq`` of a chat (three ``?``: its id): calls and messages hold their
    events (m004, m005)."""
    return (
        f"SELECT {greatest}((SELECT COALESCE(MAX(seq), -1) FROM events WHERE chat_id = ?), "
        "(SELECT COALESCE(MAX(seq), -1) FROM tool_calls WHERE chat_id = ?), "
        "(SELECT COALESCE(MAX(seq), -1) FROM messages WHERE chat_id = ?)) + 1"
    )


_IN_MESSAGE = ("text", "tool_calls", "items")
"""What of a recorded response its assistant message row holds (kept once, there)."""


def _as_message(response: LLMToolResponse) -> bool:
    """Whether the chat writes ``response`` as its message unchanged (text, calls, items)."""
    if response.refusal is not None and not response.text:
        return False  # the message says the refusal instead
    return clean(response.text) is response.text


def _message_at(conn: Any, chat_id: str, idx: int) -> Message | None:
    """The assistant message at ``idx`` of a chat, with its calls' arguments (or ``None``)."""
    row = conn.execute(
        "SELECT json FROM messages WHERE chat_id = ? AND idx = ?", (chat_id, idx)
    ).fetchone()
    if row is None:
        return None
    data = _with_bytes(conn, codec.loads(row[0]))
    if data.get("role") != "assistant":
        return None
    calls = None
    if "tool_calls" in data:
        ids = [c["id"] for c in data["tool_calls"]]
        marks = ", ".join("?" * len(ids))
        rows = conn.execute(
            f"SELECT {_CALL_COLUMNS} FROM tool_calls WHERE chat_id = ? AND call_id IN ({marks})",
            (chat_id, *ids),
        ).fetchall()
        calls = {sc.id: sc.to_tool_call() for sc in (_stored_call(r, conn) for r in rows)}
        if len(calls) != len(ids):
            return None
    return codec.message_in(data, calls)


_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "cache_write_tokens",
)


def _derived_state(conn: Any, chat_id: str) -> dict[str, Any]:
    """What the event stream already records: usage, cost, steps taken, the last step's kind.

    Summed from the stored ``model_request_finished`` events (read here, the same
    way in both dialects); ``cost_usd`` sums the priced requests, ``unpriced``
    counts the others.
    """
    usage = dict.fromkeys(_USAGE_KEYS, 0)
    cost, unpriced = 0.0, 0
    for (text,) in conn.execute(
        "SELECT json FROM events WHERE chat_id = ? AND type = 'model_request_finished'",
        (chat_id,),
    ).fetchall():
        data = codec.loads(text) or {}
        for key, value in (data.get("usage") or {}).items():
            if key in usage:
                usage[key] += int(value or 0)
        value = data.get("cost_usd")
        if isinstance(value, int | float) and not isinstance(value, bool):
            cost += float(value)
        else:
            unpriced += 1
    out: dict[str, Any] = {"usage": usage, "cost_usd": cost, "unpriced": unpriced}
    last = conn.execute(
        "SELECT json FROM events WHERE chat_id = ? AND type = 'step_finished' "
        "ORDER BY seq DESC LIMIT 1",
        (chat_id,),
    ).fetchone()
    if last is not None:
        data = codec.loads(last[0]) or {}
        out["step"], out["last_step"] = data.get("step"), data.get("kind")
        out["last_budget"] = data.get("budget")
    return out


class _Claim:
    """The call a write claims for ``owner``; ``done`` once its row was written claimed.
    ``held``: the decision the claimant holds (an approved call's), which the claim checks."""

    __slots__ = ("at", "call_id", "done", "held", "owner")

    def __init__(self, call_id: str, owner: str, at: str, held: Decision | None = None):
        self.call_id, self.owner, self.at, self.done = call_id, owner, at, False
        self.held = held


def _decided_as(decision: Decision) -> tuple[str, str]:
    """What a claim checks of the decision its claimant holds (:meth:`SQLStore._claim_call`):
    its decider and time as the row's JSON has them (``decision_out``'s ``by`` and ``at``).
    An overruling decision has another of both (a person's, made later than the chat's own)."""
    return decision.by, decision.at.isoformat()


def same_decider(held: Decision, stored: Decision | None) -> bool:
    """Whether ``stored`` is the decision ``held`` (its verdict, decider and time): the check
    of :func:`_decided_as` made on the decoded row (a time written in another form)."""
    return stored is not None and (held.verdict, held.by, held.at) == (
        stored.verdict,
        stored.by,
        stored.at,
    )


_NO_CLAIMS: Mapping[str, _Claim] = {}


class _Conflict(Exception):
    """A batch met a row another process wrote (:meth:`SQLStore._apply`'s conflict): raised
    inside the batch's transaction, so that it is rolled back and nothing of the batch is
    written. Committing what came before the conflict stored a stale copy's rows (a model
    request another copy also made, numbered after that copy's events: phantom steps)."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


class _Job:
    """A write waiting for the next group commit (:meth:`SQLStore._at_once`, or an async
    sender's: :meth:`SQLStore.write_job`)."""

    __slots__ = ("chat_id", "error", "links", "plan", "raised", "settled", "written")

    def __init__(
        self,
        chat_id: str | None,
        plan: Callable[[Any], list[tuple[Any, int]]],
        links: Sequence[tuple[Any, ...]] = (),
    ):
        self.chat_id, self.plan, self.links = chat_id, plan, links
        self.settled = self.written = False  # settled: its group's transaction ended
        self.error: BaseException | None = None  # what its caller raises
        self.raised: BaseException | None = None  # what its plan raised


_ROWS = re.compile(
    r"^INSERT INTO (\w+) (\([\w, ]+\)) VALUES (\([?, ]+\)) (ON CONFLICT .*DO NOTHING)$"
)
"""An insert a group sends as one multi-row statement: ``INSERT INTO t (cols) VALUES (?, ...)
ON CONFLICT ... DO NOTHING`` (a row already there is skipped, even one of the same statement)."""

_UPSERTS = re.compile(
    r"^INSERT INTO (\w+) (\([\w, ]+\)) VALUES (\([?, ]+\)) "
    r"(ON CONFLICT \(([\w, ]+)\) DO UPDATE SET (?!.*\bRETURNING\b).*)$"
)
"""An insert that replaces the row already there (``ON CONFLICT (key) DO UPDATE``: the
recordings, the steps' requests), sent as one multi-row statement too, as long as no two
of its rows have the same key: PostgreSQL refuses to change a row twice in one statement,
so a row whose key is held already sends those held first (the last one wins, as one by one).
One that returns rows (``RETURNING``) is sent as it comes: its caller reads them."""

_FIRST: dict[str, str] = {"call_arguments": "tool_calls"}
"""A table whose rows refer to another's: that one's held rows go first."""

_MAX_ROWS = 200  # rows per multi-row statement (SQLite allows 32,766 values)

_WRITES = re.compile(r"^(?:INSERT INTO|UPDATE|DELETE FROM) (\w+)")


@dataclasses.dataclass(frozen=True, slots=True)
class _Form:
    """How the rows held for one statement go as one: ``head``, then ``row`` once per row
    (its placeholders), comma-separated, then ``tail``.

    Attributes:
        table: The table it writes.
        first: A table whose held rows must go before these (``None``: none).
        key: Where a row's key is in its values (``None``: rows may repeat one); a row
            whose key is held already sends those held first, and rows repeating a key
            among themselves go one by one.
        update: An update of rows already there: it goes after the held inserts of its
            table (a row a group inserts can be changed by the same group).
        names: The columns of a row's values, in order.
    """

    table: str
    head: str
    row: str
    tail: str
    first: str | None = None
    key: tuple[int, ...] | None = None
    update: bool = False
    names: tuple[str, ...] = ()

    def text(self, rows: int) -> str:
        return f"{self.head}{', '.join([self.row] * rows)}{self.tail}"

    def at(self, names: Iterable[str]) -> tuple[int, ...] | None:
        """Where the columns ``names`` are in a row of this form (``None``: not all are)."""
        try:
            return tuple(self.names.index(n) for n in names)
        except ValueError:
            return None


def _keyed_update(
    sql: str, table: str, columns: str, sets: str, where: str, key: tuple[int, ...]
) -> tuple[str, _Form]:
    """An update of one row by its key (``sql``, ``?`` placeholders) and its form for many
    rows: ``UPDATE table AS t SET sets FROM (VALUES ...) AS v (columns) WHERE where``
    (``v.`` the row's values, ``t.`` the table's; ``columns`` name ``sql``'s placeholders
    in order). Held rows of these statements must commute with one another (other columns,
    or other rows): they are sent in the order each statement first came."""
    names = tuple(c.strip() for c in columns.split(","))
    row = "(" + ", ".join(["?"] * len(names)) + ")"
    head = f"UPDATE {table} AS t SET {sets} FROM (VALUES "
    tail = f") AS v ({columns}) WHERE {where}"
    return sql, _Form(table, head, row, tail, key=key, update=True, names=names)


_FINAL_CALL = (
    "UPDATE tool_calls SET status = ?, result = ?, "
    "started_at = COALESCE(?, started_at), finished_at = ? "
    "WHERE chat_id = ? AND call_id = ? AND result IS NULL "
    "AND (status != 'running' OR claimed_by IS ?)"
)
_TITLE = "UPDATE chats SET title = ? WHERE id = ? AND title IS NULL"
_TOUCH = (
    "UPDATE chats SET updated_at = ?, state = COALESCE(?, state), "
    "tools = COALESCE(?, tools) WHERE id = ?"
)

_UPDATES: dict[str, _Form] = dict(
    [
        _keyed_update(
            _FINAL_CALL,
            "tool_calls",
            "status, result, started_at, finished_at, chat_id, call_id, owner",
            "status = v.status, result = v.result, "
            "started_at = COALESCE(v.started_at, t.started_at), finished_at = v.finished_at",
            "t.chat_id = v.chat_id AND t.call_id = v.call_id AND t.result IS NULL "
            "AND (t.status != 'running' OR t.claimed_by IS NOT DISTINCT FROM v.owner)",
            (4, 5),
        ),
        _keyed_update(
            _TITLE, "chats", "title, id", "title = v.title", "t.id = v.id AND t.title IS NULL", (1,)
        ),
        _keyed_update(
            _TOUCH,
            "chats",
            "updated_at, state, tools, id",
            "updated_at = v.updated_at, state = COALESCE(v.state, t.state), "
            "tools = COALESCE(v.tools, t.tools)",
            "t.id = v.id",
            (3,),
        ),
    ]
)
"""The updates of one row by its key a group sends as one statement (PostgreSQL's words:
``UPDATE ... FROM (VALUES ...)``): a call's result (every call of a batch has one), a
chat's title and its state. Each row of the one statement changes the row its key names,
as alone: a call's result is expected to change its row, so a call finished twice in one
group (or one no longer the group's to finish) fails the group's expectation, and each
job is written again alone."""


_SHAPES: dict[str, tuple[_Form | None, str | None]] = {}


def _shape(sql: str) -> tuple[_Form | None, str | None]:
    """A statement's form for many rows (:data:`_ROWS`, :data:`_UPSERTS`, :data:`_UPDATES`;
    ``None``: sent at once) and the table it writes (``None``: a read, or none);
    worked out once per statement text."""
    shape = _SHAPES.get(sql)
    if shape is None:
        written = _WRITES.match(sql)
        table = written.group(1) if written else None
        form = _UPDATES.get(sql)
        match = _ROWS.match(sql) or _UPSERTS.match(sql)
        if form is None and match is not None:
            names = tuple(c.strip() for c in match.group(2)[1:-1].split(","))
            key = None
            if match.re is _UPSERTS:
                key = tuple(names.index(c.strip()) for c in match.group(5).split(","))
            into = match.group(1)
            head = f"INSERT INTO {into} {match.group(2)} VALUES "
            tail = f" {match.group(4)}"
            form = _Form(into, head, match.group(3), tail, _FIRST.get(into), key, names=names)
        shape = (form, table)
        if len(_SHAPES) < 256:  # the store's own statements (a handful)
            _SHAPES[sql] = shape
    return shape


class _Held:
    """A cursor stand-in for rows a group sends later (:class:`_GroupConn`): its rowcount is
    the rows it holds if the multi-row statement that sent them changed as many rows as it
    was sent (each of them inserted, or updated), else -1 (a group's expectation then
    fails)."""

    __slots__ = ("n", "sent")

    def __init__(self, n: int, sent: list[tuple[Any, int]]):
        self.n, self.sent = n, sent  # sent: the statements (cursor, rows sent) of its rows

    @property
    def rowcount(self) -> int:
        if not self.sent or any(cur.rowcount != n for cur, n in self.sent):
            return -1
        return self.n


class _Rows:
    """The rows a group holds for one statement: its form, the rows, a stand-in for each
    call that held some, and the keys held (a keyed form's)."""

    __slots__ = ("form", "keys", "rows", "stand_ins")

    def __init__(self, form: _Form):
        self.form = form
        self.rows: list[Sequence[Any]] = []
        self.stand_ins: list[_Held] = []
        self.keys: set[tuple[Any, ...]] = set()


class _GroupConn:
    """The connection as the plans of one PostgreSQL group commit see it
    (:meth:`PostgresStore._scripted`).

    The inserts that skip a row already there (:data:`_ROWS`: events, messages, calls, the
    links of recordings), those that replace it (:data:`_UPSERTS`: recordings, the steps'
    requests) and the updates of one row by its key (:data:`_UPDATES`: calls' results,
    chats' titles and states) are held, by statement, and sent together (:meth:`send`, in
    the order each statement first came, its rows in order, as one multi-row statement):
    the chats of a group write one statement per table instead of one per row (psycopg
    costs about 100 us of client CPU a statement, and the server parses and plans each).
    On SQLite a statement costs a few microseconds and a multi-row one of each size is
    parsed anew: measured, holding rows there cost more than it saved.

    Order: rows that refer to a held table's (``call_arguments`` to ``tool_calls``:
    :data:`_FIRST`) go after that table's, held or not; held updates go after their
    table's held inserts, and before any statement on their table sent at once (a call's
    claim), so each row sees the changes that came before it. Every other statement runs
    at once. A statement that depends on an insert held (a claim of a call inserted by the
    same group) changes nothing: its expectation fails, and the group is written again job
    by job, statement by statement.
    """

    def __init__(self, conn: Any):
        self.conn = conn
        self.held: dict[str, _Rows] = {}  # by statement

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._hold(sql, [params]) or self._now(sql).execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        rows = list(rows)
        return self._hold(sql, rows) or self._now(sql).executemany(sql, rows)

    def _hold(self, sql: str, rows: list[Sequence[Any]]) -> _Held | None:
        form = _shape(sql)[0]
        if form is None:
            return None
        if not form.update:
            self._after_updates(form, rows)
        held = self.held.get(sql)
        if form.key is not None:  # no key twice in one statement
            keys = {tuple(row[i] for i in form.key) for row in rows}
            if len(keys) < len(rows):  # sent as they come, row by row, after those held
                if held is not None:
                    self._send(sql)
                return None
            if held is not None and not keys.isdisjoint(held.keys):
                self._send(sql)
                held = None
            if held is None:
                held = self.held[sql] = _Rows(form)
            held.keys.update(keys)
        elif held is None:
            held = self.held[sql] = _Rows(form)
        stand_in = _Held(len(rows), [])
        held.rows.extend(rows)
        held.stand_ins.append(stand_in)
        return stand_in

    def _after_updates(self, form: _Form, rows: list[Sequence[Any]]) -> None:
        """Before holding an insert's ``rows``: send the updates held of a row among them
        (held updates go after their table's inserts; one that came before its row's insert
        must stay before it, and find no row, as alone)."""
        for sql, update in list(self.held.items()):
            if not update.form.update or update.form.table != form.table or sql not in self.held:
                continue
            at = form.at(update.form.names[i] for i in update.form.key or ())
            if at is None or any(tuple(row[i] for i in at) in update.keys for row in rows):
                self._send(sql)

    def _now(self, sql: str) -> Any:
        """The connection, once what a statement sent at once must follow is sent: the
        rows its table's rows refer to (:data:`_FIRST`), the updates held of its table."""
        table = _shape(sql)[1]
        if table is not None:
            first = _FIRST.get(table)
            if first is not None:
                self.send(first)
            self.send(table, updates=True)
        return self.conn

    def send(self, table: str | None = None, updates: bool | None = None) -> None:
        """Send the rows held (of ``table``, and only its updates or only its inserts if
        ``updates`` says; default: all of them), one statement per statement held (chunks
        of :data:`_MAX_ROWS` rows)."""
        for sql in list(self.held):
            held = self.held.get(sql)  # gone: sent first, for rows that refer to its own
            if held is None or (table is not None and held.form.table != table):
                continue
            if updates is None or held.form.update == updates:
                self._send(sql)

    def _send(self, sql: str) -> None:
        """Send the rows held for the statement ``sql``, after those of the table its rows
        refer to (:data:`_FIRST`) and, for an update, its table's inserts."""
        form = self.held[sql].form
        if form.first is not None:
            self.send(form.first)
        if form.update:
            self.send(form.table, updates=False)
        held = self.held.pop(sql)
        sent: list[tuple[Any, int]] = []
        for i in range(0, len(held.rows), _MAX_ROWS):
            chunk = held.rows[i : i + _MAX_ROWS]
            flat = [value for row in chunk for value in row]
            sent.append((self.conn.execute(form.text(len(chunk)), flat), len(chunk)))
        for stand_in in held.stand_ins:
            stand_in.sent = sent


def planned(group: list[_Job], conn: Any) -> list[tuple[Any, int]]:
    """Every job's statements of a group sent on ``conn``, and the rows each must change; a
    job whose own plan raises (text the database cannot take) is marked, then it propagates."""
    expect: list[tuple[Any, int]] = []
    for job in group:
        try:
            expect += job.plan(conn)
        except BaseException as exc:
            job.raised = exc
            raise
    return expect


def _failed(group: list[_Job], exc: BaseException) -> None:
    """A group's send raised ``exc``: a ``StoreError`` reaches each job (its own copy: one
    traceback per waiter), what a job's own plan raised (text the database cannot take)
    reaches that job, and the others are left unwritten (each writes alone)."""
    for job in group:
        if isinstance(exc, StoreError):
            job.error = StoreError(str(exc))
        elif job.raised is exc:
            job.error = exc


def _simple(entries: Sequence[Entry]) -> bool:
    """Whether every change among ``entries`` is one whose outcome a row count tells (a
    decision reads its call's row first: never sent at once)."""
    return all(
        e.change is None or isinstance(e.change, NewMessage | NewCall | CallFinal | CallReset)
        for e in entries
    )


CALL_ENDED = "the call ended"
"""An input with no answer when its call ended (in doubt, denied, cancelled): closed with
it, as the chat's record closes it (``cancel``)."""

NOT_APPLIED = "not applied: the call ended first"
"""An answer given in the store that no chat applied before its call ended."""


def _keys_hidden(si: StoredInput, stored: Any) -> Any:
    """An answer given through the store as it is written: every key-like token in it
    (``sk-...``, a ``Bearer`` token, URL credentials, ``password=...``) and a form's value
    under a secret's name (``"api_key"``, ``"password"``) as ``***``, as the screen shows
    them (``redacted``), so a key never rests in the store and the model never reads one.
    The chat applies what is stored (an MCP server's form receives the ``***`` too); an
    answer that, so redacted, no longer matches what was asked is refused here, before
    anything is written, rather than dropped with a warning when the chat applies it."""
    hidden = redacted(stored)
    if hidden == stored:
        return stored
    try:
        checked_answer(si.request, hidden)
    except InputError as exc:
        raise InputError(
            f"the answer to {si.id!r} holds what looks like a key, which is never stored "
            f"(a key-like token is kept as ***), and without it the answer does not match "
            f"what was asked ({redact_keys(str(exc))}); nothing was written"
        ) from None
    return hidden


def _is_automatic(decision: Mapping[str, Any]) -> bool:
    """Whether a stored decision names a chat's resolver or policy (``Decision.automatic``);
    :meth:`SQLStore._decision_change` also asks whether a chat made it."""
    return automatic_decider(str(decision.get("by", "")))


def _edited_arguments(arguments: Any) -> dict[str, Any]:
    """Edited arguments given to ``store.approve``, as ``chat.approve`` takes them: a dict of
    JSON, its text cleaned (a lone surrogate, pasted from a broken source, becomes U+FFFD).

    Raises:
        DecisionError: Not a dict, not JSON, or nested too deep.
    """
    if not isinstance(arguments, dict):
        raise DecisionError(f"edited arguments must be a dict, got {type(arguments).__name__}")
    try:
        arguments = clean_json(arguments)
        json.dumps(arguments, allow_nan=False)  # what the store and the wire will need
    except TooDeep as exc:
        raise DecisionError(f"edited arguments are {exc}") from None
    except (TypeError, ValueError) as exc:
        raise DecisionError(f"edited arguments are not JSON ({exc})") from None
    return dict(arguments)


def _same_decision(stored: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether two stored decisions (``decision_out``'s JSON) are one: the same verdict, decider,
    time, reason and edited arguments. A decision made elsewhere and one made here with the
    same verdict are two decisions (another decider, perhaps other arguments). The chat
    applying a decision made through the store hides its provider's key in the reason (the
    store cannot know it): a reason that is the stored one with parts as ``***`` is its."""
    if any(stored.get(k) != new.get(k) for k in ("verdict", "by", "arguments")):
        return False
    if stored.get("reason") != new.get("reason") and not hidden_from(
        new.get("reason"), stored.get("reason")
    ):
        return False
    try:
        return datetime.fromisoformat(stored["at"]) == datetime.fromisoformat(new["at"])
    except (KeyError, TypeError, ValueError):
        return False


RULE_CHANGES = (
    "SELECT ts, type, json FROM events WHERE chat_id = ? "
    "AND type IN ('rule_changed', 'always_allow_changed') ORDER BY seq"
)
"""A chat's rule changes, through migration 16's partial index (``rule_changes``)."""


class SQLStore:
    """The store's logic over a SQL connection; subclasses: ``SQLiteStore``, ``PostgresStore``."""

    location: str
    claim_timeout: float | None

    _UPDATED_AT: ClassVar[str] = updated_at_sql("MAX")
    _NEXT_SEQ: ClassVar[str] = next_seq_sql("MAX")
    _FOR_UPDATE: ClassVar[str] = ""
    _DECIDED_AS: ClassVar[str] = (
        "json_extract(decision, '$.by') = ? AND json_extract(decision, '$.at') = ?"
    )
    """A claim's check of the stored decision (:func:`_decided_as`'s two values)."""
    _TEXT_ERRORS: ClassVar[tuple[type[BaseException], ...]] = (UnicodeEncodeError,)

    # -- what a dialect brings ------------------------------------------------------
    def _tx(self, chat_id: str | None = None) -> AbstractContextManager[Any]:
        """One write transaction (any error rolls it back)."""
        raise NotImplementedError

    def _read(self) -> AbstractContextManager[Any]:
        """A consistent snapshot for several reads."""
        raise NotImplementedError

    def _insert_events(self, conn: Any, rows: list[tuple[str, int, str, str, str]]) -> int:
        """Insert event rows (``ON CONFLICT DO NOTHING``); return how many were written."""
        raise NotImplementedError

    def watch(self, chat_ids: Iterable[str] | None = None) -> DecisionWatch:
        """Follow the decisions recorded from now on, in these chats (``None``: every chat).

        A subscription on the store's follower (:func:`~nbagent.store.follow`:
        pushed by PostgreSQL's ``LISTEN``/``NOTIFY``, SQLite's ``decisions``
        table polled while someone follows). See :class:`~nbagent.store.DecisionWatch`.

        Raises:
            StoreError: The store is closed or cannot be read (or reached).
        """
        watch = DecisionWatch(chat_ids)
        sub = follow(self, chat_ids, watch.push, look=False, on_close=watch.close)
        watch._on_close = lambda _: sub.close()
        return watch

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError

    # -- the chat side ----------------------------------------------------------------
    def create_chat(
        self,
        info: ChatInfo,
        system: str | None,
        state: Mapping[str, Any],
        parent: Mapping[str, Any] | None = None,
    ) -> None:
        try:
            self._create_chat(info, system, state, parent)
        except self._TEXT_ERRORS:  # text the database cannot store (a lone surrogate): replaced
            info = dataclasses.replace(info, provider=clean(info.provider), model=clean(info.model))
            system = clean(system) if system else system
            self._create_chat(
                info, system, clean_json(state), clean_json(parent) if parent else parent
            )

    def _create_chat(
        self,
        info: ChatInfo,
        system: str | None,
        state: Mapping[str, Any],
        parent: Mapping[str, Any] | None,
    ) -> None:
        with self._tx() as conn:
            if self._insert_chat(conn, info, system, state, parent).rowcount == 1:
                return
            mine = {"created_at": info.created_at.isoformat(), "model": info.model}
            if not self._same_chat(conn, info.id, mine):
                raise StoreError(
                    f"chat {info.id!r} already exists in {self.location}; continue it with "
                    f"Chat.load({info.id!r}, store=...)"
                )

    @staticmethod
    def _same_chat(conn: Any, chat_id: str, expected: dict[str, Any]) -> bool:
        """Whether the chat row that made a creation a no-op is this very one (a creation
        retried after its commit's answer was lost: same id, same creation time)."""
        row = conn.execute(
            f"SELECT {', '.join(expected)} FROM chats WHERE id = ?", (chat_id,)
        ).fetchone()
        return row is not None and tuple(row) == tuple(expected.values())

    @staticmethod
    def _insert_chat(
        conn: Any,
        info: ChatInfo,
        system: str | None,
        state: Mapping[str, Any],
        parent: Mapping[str, Any] | None = None,
    ) -> Any:
        return conn.execute(
            "INSERT INTO chats (id, created_at, updated_at, provider, model, system, state, "
            "parent_id, fork) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (
                info.id,
                info.created_at.isoformat(),
                info.updated_at.isoformat(),
                info.provider,
                info.model,
                system,
                codec.dumps(state),
                parent["chat_id"] if parent else None,
                codec.dumps(dict(parent)) if parent else None,
            ),
        )

    def load(self, chat_id: str) -> ChatRecord:
        with self._read() as conn:
            row = conn.execute(
                f"SELECT c.id, c.created_at, {self._UPDATED_AT}, c.provider, c.model, c.system, "
                "c.title, c.state, c.parent_id, c.fork FROM chats c WHERE c.id = ?",
                (chat_id,),
            ).fetchone()
            if row is None:
                raise self._unknown_chat(conn, chat_id)
            messages = [
                _with_bytes(conn, codec.loads(r[0]))
                for r in conn.execute(
                    "SELECT json FROM messages WHERE chat_id = ? ORDER BY idx", (chat_id,)
                ).fetchall()
            ]
            calls = [
                _stored_call(r, conn)
                for r in conn.execute(
                    f"SELECT {_CALL_COLUMNS} FROM tool_calls WHERE chat_id = ? ORDER BY seq",
                    (chat_id,),
                )
            ]
            unapplied = frozenset(
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT call_id FROM decisions WHERE chat_id = ? AND applied = 0",
                    (chat_id,),
                )
            )
            next_seq = conn.execute(self._NEXT_SEQ, (chat_id, chat_id, chat_id)).fetchone()[0]
            state = codec.loads(row[7]) or {}
            state.update(_derived_state(conn, chat_id))
        pending = sum(1 for c in calls if c.status == "awaiting_approval")
        info = ChatInfo(
            row[0],
            datetime.fromisoformat(row[1]),
            datetime.fromisoformat(row[2]),
            row[3],
            row[4],
            row[6],
            len(messages),
            len(calls),
            pending,
            row[8],
        )
        parent = codec.loads(row[9]) if row[9] else None
        return ChatRecord(info, row[5], state, messages, calls, unapplied, int(next_seq), parent)

    def _unknown_chat(self, conn: Any, chat_id: str) -> StoreError:
        like = (
            [
                r[0]
                for r in conn.execute(
                    # its start, or its end: what reprs and labels show (short_id)
                    "SELECT id FROM chats WHERE id LIKE ? OR id LIKE ? ORDER BY created_at LIMIT 5",
                    (f"{chat_id[:8]}%", f"%{chat_id[-8:]}"),
                )
            ]
            if chat_id
            else []
        )
        hint = f" Did you mean {', '.join(map(repr, like))}?" if like else ""
        n = conn.execute("SELECT COUNT(*) FROM chats").fetchone()[0]
        return StoreError(
            f"no chat {chat_id!r} in store {self.location} ({n} chat(s) stored).{hint} "
            "List them with store.chats() (id, title, updated_at)."
        )

    def write(
        self,
        chat_id: str,
        entries: Sequence[Entry],
        state: Mapping[str, Any] | None = None,
        tools: Mapping[str, Any] | None = None,
        recorded: Sequence[tuple[Recording, str, int, bool]] = (),
    ) -> str | None:
        """Apply entries (and the chat's state and tool schemas) in one transaction.

        ``recorded``: model responses to keep in the same transaction, after the
        entries (:meth:`record_response`'s arguments; skipped if the entries
        conflict): a round's result and the response before it, one commit.

        Returns:
            ``None``, or a description of the conflict that stopped the batch: then
            nothing of it is written (the transaction is rolled back).
        """
        try:
            rows = [(self._recording_row(r, c, s), c, s, p) for r, c, s, p in recorded]
            conflict = self._write(chat_id, entries, state, tools, rows)
        except self._TEXT_ERRORS:  # text the database cannot store (a lone surrogate): replaced
            rows = [
                (tuple(clean_json(list(self._recording_row(r, c, s)))), clean(c), s, p)
                for r, c, s, p in recorded
            ]
            conflict = self._write(
                chat_id, codec.valid_text(entries), clean_json(state), clean_json(tools), rows
            )
        if conflict is None:
            self._links_written(row for row, *_ in rows)
        return conflict

    def _write(
        self,
        chat_id: str,
        entries: Sequence[Entry],
        state: Mapping[str, Any] | None,
        tools: Mapping[str, Any] | None,
        recorded: Sequence[tuple[tuple[Any, ...], str, int, bool]] = (),
    ) -> str | None:
        if self._write_at_once(chat_id, entries, state, tools, recorded):
            return None
        try:
            with self._tx(chat_id) as conn:
                conflict = self._apply(conn, chat_id, entries)
                if conflict is not None:
                    raise _Conflict(conflict)  # nothing of the batch is written
                self._touch(conn, chat_id, state, tools)
                for row, cid, step, replayed in recorded:
                    self._record_in(conn, row, cid, step, replayed)
        except _Conflict as exc:
            return exc.why
        return None

    def claim(
        self,
        chat_id: str,
        call_id: str,
        owner: str,
        entries: Sequence[Entry] = (),
        state: Mapping[str, Any] | None = None,
        decision: Decision | None = None,
    ) -> ClaimResult:
        try:
            return self._claim(chat_id, call_id, owner, entries, state, decision)
        except self._TEXT_ERRORS:  # text the database cannot store (a lone surrogate): replaced
            valid = codec.valid_text(entries)
            return self._claim(chat_id, call_id, owner, valid, clean_json(state), decision)

    def _claim(
        self,
        chat_id: str,
        call_id: str,
        owner: str,
        entries: Sequence[Entry],
        state: Mapping[str, Any] | None,
        decision: Decision | None,
    ) -> ClaimResult:
        if self._claim_at_once(chat_id, call_id, owner, entries, state, decision):
            return ClaimResult(True, "running", owner)
        try:
            with self._tx(chat_id) as conn:
                now = utcnow().isoformat()
                claim = _Claim(call_id, owner, now, decision)
                conflict = self._apply(conn, chat_id, entries, claim) if entries else None
                if conflict is not None:  # nothing of the batch is written, nor claimed
                    raise _Conflict(conflict)
                self._touch(conn, chat_id, state, None)
                if claim.done:
                    return ClaimResult(True, "running", owner)
                cur = self._claim_call(conn, chat_id, call_id, owner, now, decision)
                if cur.rowcount == 1:
                    return ClaimResult(True, "running", owner)
                row = conn.execute(
                    "SELECT status, claimed_by, decision FROM tool_calls "
                    f"WHERE chat_id = ? AND call_id = ?{self._FOR_UPDATE}",
                    (chat_id, call_id),
                ).fetchone()
                stored = None if row is None else codec.decision_in(codec.loads(row[2]))
                if (
                    row is not None
                    and decision is not None
                    and row[1] is None
                    and same_decider(decision, stored)
                ):  # the decision held, its time written in another form: checked here
                    cur = self._claim_call(conn, chat_id, call_id, owner, now)
                    if cur.rowcount == 1:
                        return ClaimResult(True, "running", owner)
        except _Conflict as exc:
            return ClaimResult(False, conflict=exc.why)
        if row is None:
            return ClaimResult(False, conflict=f"call {call_id!r} is not in the store")
        if tuple(row[:2]) == ("running", owner):  # this very claim, committed by a write retried
            return ClaimResult(True, "running", owner)
        if decision is not None and row[1] is None and not same_decider(decision, stored):
            return ClaimResult(False, row[0], None, decision=stored)  # decided anew elsewhere
        return ClaimResult(False, row[0], row[1])

    def _touch(
        self,
        conn: Any,
        chat_id: str,
        state: Mapping[str, Any] | None,
        tools: Mapping[str, Any] | None,
    ) -> None:
        if state is None and tools is None:
            return  # the events carry the rest (chats() reads their last timestamp)
        conn.execute(
            _TOUCH,
            (
                utcnow().isoformat(),
                None if state is None else codec.dumps(state),
                None if tools is None else codec.dumps(tools),
                chat_id,
            ),
        )

    def _apply(
        self,
        conn: Any,
        chat_id: str,
        entries: Sequence[Entry],
        claim: _Claim | None = None,
    ) -> str | None:
        """Apply entries in order; stop at the first conflict and return it.

        Events keep the chat's own ``seq`` unless another process already wrote
        that number (a race), in which case they go after the last one stored.
        The row of the call being claimed (``claim``), if it is among the
        entries and runnable, is written claimed.
        """
        rows: list[tuple[str, int, str, str, str]] = []
        conflict: str | None = None
        for e in entries:
            outcome = "ok" if e.change is None else self._change(conn, chat_id, e.change, claim)
            if outcome == "dup":
                continue
            if outcome != "ok":
                conflict = outcome
                break
            if e.data is not None:  # None: the change's row is the event
                rows.append((chat_id, e.seq, e.type, e.ts, e.data))
        if rows and self._insert_events(conn, rows) != len(rows):
            self._renumber(conn, chat_id, rows)
        return conflict

    @staticmethod
    def _same_row(
        conn: Any, table: str, key: str, chat_id: str, value: Any, expected: dict[str, Any]
    ) -> bool:
        """Whether the row that made an insert a no-op is this very row (``expected``: some of
        its columns, the event's ``seq`` and time among them: another process's row differs)."""
        row = conn.execute(
            f"SELECT {', '.join(expected)} FROM {table} WHERE chat_id = ? AND {key} = ?",
            (chat_id, value),
        ).fetchone()
        return row is not None and tuple(row) == tuple(expected.values())

    @staticmethod
    def _renumber(conn: Any, chat_id: str, rows: list[tuple[str, int, str, str, str]]) -> None:
        """Write the events whose ``seq`` was taken, after the last stored one."""
        for row in rows:
            stored = conn.execute(
                "SELECT type, ts, json FROM events WHERE chat_id = ? AND seq = ?",
                (chat_id, row[1]),
            ).fetchone()
            if stored is not None and tuple(stored) == row[2:]:
                continue  # this very event is stored
            conn.execute(
                "INSERT INTO events (chat_id, seq, type, ts, json) VALUES "
                "(?, (SELECT COALESCE(MAX(seq), -1) + 1 FROM events WHERE chat_id = ?), ?, ?, ?)",
                (chat_id, chat_id, *row[2:]),
            )

    def _change(self, conn: Any, chat_id: str, ch: Change, claim: _Claim | None = None) -> str:
        """Apply one change: ``"ok"``, ``"dup"`` (already there) or a conflict description."""
        if isinstance(ch, NewMessage | CallFinal) and ch.blobs:
            _put_blobs(conn, ch.blobs)
        if isinstance(ch, NewMessage):
            cur = self._insert_message(conn, chat_id, ch)
            if cur.rowcount != 1:
                mine = {"json": ch.data, "seq": ch.seq, "ts": ch.ts}
                if ch.ts is not None and self._same_row(
                    conn, "messages", "idx", chat_id, ch.idx, mine
                ):
                    return "dup"  # this very message (a write retried after a lost commit)
                return f"message {ch.idx} of the transcript was written by another process"
            self._titled(conn, chat_id, ch)
            return "ok"
        if isinstance(ch, NewCall):
            status, owner, at = ch.status, None, None
            if claim is not None and (claim.call_id, status) != (ch.call_id, "requested"):
                claim = None  # the call being claimed is another, or not runnable yet
            if claim is not None:
                status, owner, at = "running", claim.owner, claim.at  # claimed as written
            cur = self._insert_call(conn, chat_id, ch, status, owner, at)
            if cur.rowcount != 1:
                mine = {"seq": ch.seq, "requested_at": ch.requested_at, "name": ch.name}
                if self._same_row(conn, "tool_calls", "call_id", chat_id, ch.call_id, mine):
                    return "dup"  # this very call (a write retried after a lost commit)
                return f"call {ch.call_id!r} was already recorded by another process"
            self._call_arguments(conn, chat_id, ch)
            if claim is not None:
                claim.done = True
            return "ok"
        if isinstance(ch, DecisionChange):
            return self._decision_change(conn, chat_id, ch)
        if isinstance(ch, NewInput):
            cur = conn.execute(
                "INSERT INTO inputs (chat_id, input_id, call_id, kind, tool, server, prompt, "
                "content, schema, requested_at, resume) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                (
                    chat_id,
                    ch.input_id,
                    ch.call_id,
                    ch.kind,
                    ch.tool,
                    ch.server,
                    ch.prompt,
                    ch.content,
                    ch.schema,
                    ch.requested_at,
                    ch.resume,
                ),
            )
            if cur.rowcount != 1:
                return "dup"
            if ch.release is not None and ch.call_id is not None:  # the run ended parked
                conn.execute(
                    "UPDATE tool_calls SET status = CASE WHEN gated = 1 THEN 'approved' "
                    "ELSE 'requested' END, claimed_by = NULL, claimed_at = NULL, "
                    "started_at = NULL WHERE chat_id = ? AND call_id = ? AND status = 'running' "
                    "AND claimed_by = ?",
                    (chat_id, ch.call_id, ch.release),
                )
            return "ok"
        if isinstance(ch, InputAnswer):
            return self._input_answer(conn, chat_id, ch)
        if isinstance(ch, CallFinal):
            cur = self._final_call(conn, chat_id, ch)
            if cur.rowcount == 1:
                return "ok"
            row = conn.execute(
                "SELECT status, claimed_by FROM tool_calls WHERE chat_id = ? AND call_id = ?",
                (chat_id, ch.call_id),
            ).fetchone()
            if row is None:
                return f"call {ch.call_id!r} is not in the store"
            if row[0] == ch.status:
                return "dup"
            who = f" (claimed by {row[1]})" if row[1] else ""
            return f"call {ch.call_id!r} is {row[0]} in the store{who}"
        if isinstance(ch, CallReset):
            return "ok" if self._reset_call(conn, chat_id, ch).rowcount == 1 else "dup"
        raise TypeError(f"unknown change {type(ch).__name__}")

    # -- the statements of a change (the careful path above, and the one at once below) -----
    @staticmethod
    def _insert_message(conn: Any, chat_id: str, ch: NewMessage) -> Any:
        return conn.execute(
            "INSERT INTO messages (chat_id, idx, turn, role, json, seq, ts) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (chat_id, ch.idx, ch.turn, ch.role, ch.data, ch.seq, ch.ts),
        )

    @staticmethod
    def _titled(conn: Any, chat_id: str, ch: NewMessage) -> None:
        """A chat's title is its first user message (cut), set once."""
        if ch.role == "user":
            title = str(codec.loads(ch.data).get("content", ""))[:80]
            conn.execute(_TITLE, (title, chat_id))

    @staticmethod
    def _insert_call(
        conn: Any, chat_id: str, ch: NewCall, status: str, owner: str | None, at: str | None
    ) -> Any:
        apart = len(ch.arguments) > _INLINE_ARGUMENTS  # a row never rewritten (m006)
        return conn.execute(
            "INSERT INTO tool_calls (chat_id, call_id, seq, name, arguments, raw_arguments, "
            "parse_error, status, gated, approval, turn, step, requested_at, claimed_by, "
            "claimed_at, server, hosted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "?, ?) ON CONFLICT DO NOTHING",
            (
                chat_id,
                ch.call_id,
                ch.seq,
                ch.name,
                "" if apart else ch.arguments,
                ch.raw_arguments,
                ch.parse_error,
                status,
                int(ch.gated),
                ch.approval,
                ch.turn,
                ch.step,
                ch.requested_at,
                owner,
                at,
                ch.server,
                int(ch.hosted),
            ),
        )

    @staticmethod
    def _call_arguments(conn: Any, chat_id: str, ch: NewCall) -> None:
        """Long arguments go to their own row (written with the call's)."""
        if len(ch.arguments) > _INLINE_ARGUMENTS:
            conn.execute(
                "INSERT INTO call_arguments (chat_id, call_id, arguments) VALUES (?, ?, ?) "
                "ON CONFLICT (chat_id, call_id) DO UPDATE SET arguments = excluded.arguments",
                (chat_id, ch.call_id, ch.arguments),
            )

    @staticmethod
    def _final_call(conn: Any, chat_id: str, ch: CallFinal) -> Any:
        return conn.execute(
            _FINAL_CALL,
            (
                ch.status,
                ch.result,
                ch.started_at,
                ch.finished_at,
                chat_id,
                ch.call_id,
                ch.owner,
            ),
        )

    @staticmethod
    def _reset_call(conn: Any, chat_id: str, ch: CallReset) -> Any:
        return conn.execute(
            "UPDATE tool_calls SET status = ?, claimed_by = NULL, claimed_at = NULL, "
            "started_at = NULL WHERE chat_id = ? AND call_id = ? AND status = 'running' "
            "AND claimed_by IS ?",
            (ch.status, chat_id, ch.call_id, ch.owner),
        )

    def _claim_call(
        self,
        conn: Any,
        chat_id: str,
        call_id: str,
        owner: str,
        at: str,
        decision: Decision | None = None,
    ) -> Any:
        """The claim: the call's row made ``running`` for ``owner`` if it is runnable and,
        given the ``decision`` its claimant holds, still decided by it (the check is part
        of the one statement: a grouped claim costs no more round trips). A person's
        decision overruling the chat's own since makes it change nothing."""
        sql = (
            "UPDATE tool_calls SET status = 'running', claimed_by = ?, claimed_at = ? "
            "WHERE chat_id = ? AND call_id = ? "
            "AND (status = 'approved' OR (status = 'requested' AND gated = 0))"
        )
        if decision is None:
            return conn.execute(sql, (owner, at, chat_id, call_id))
        return conn.execute(
            f"{sql} AND {self._DECIDED_AS}", (owner, at, chat_id, call_id, *_decided_as(decision))
        )

    # -- group commit: the writes of many chats (a batch's) in one transaction -----------
    _GROUPS: ClassVar[bool] = False
    """Whether the dialect sends writes together (:meth:`_send_group`); both stores do."""
    _lock: Any  # serialises the connection's users (the dialect's)
    _queue_lock: Any  # guards ``_queue``
    _queue: list[_Job]  # writes waiting for the next group commit

    def _at_once(self, chat_id: str, plan: Callable[[Any], list[tuple[Any, int]]]) -> bool:
        """Group commit: ``plan(conn)`` joins the writes queued by other threads (other
        chats of a batch) and whichever thread takes the connection next runs them all in
        one write transaction (:meth:`_send_group`), committed if every statement changed
        the rows its plan expects (a list of ``(cursor, rowcount)``). Each caller returns
        only once that transaction ended, so a claim is never granted before it is
        durable. ``False``: nothing of it was written (not tried, an expectation failed,
        or an error); the caller writes it statement by statement, which decides (and
        reports) what happened.

        One commit for many chats is the point: a commit costs per page it writes (the
        events, messages and calls tables' last pages, which the chats of a group share),
        on SQLite as on PostgreSQL (where it also saves round trips).

        Raises:
            StoreError: The group could not be committed (nothing of it is written; a
                commit whose answer was lost may have been).
        """
        if not self._GROUPS:
            return False
        job = _Job(chat_id, plan)
        if not may_wait():  # the connection now, or WouldWait with the job never queued
            self._may_send()
            with held(self._lock):
                with self._queue_lock:
                    group, self._queue = [*self._queue, job], []
                self._write_group(group)
        else:
            with self._queue_lock:
                self._queue.append(job)
            with self._lock:  # the holder writes every job queued so far, its own among them
                if not job.settled:
                    with self._queue_lock:
                        group, self._queue = self._queue, []
                    self._write_group(group)
        if job.error is not None:
            raise job.error
        return job.written

    def _write_group(self, group: list[_Job]) -> None:
        """Send ``group`` (:meth:`_send_group`); if that fails, every writer learns it:
        a ``StoreError`` reaches each (its own copy: one traceback per thread), what a
        job's own plan raised (text the database cannot take) reaches that job, and the
        others write alone. Call with the connection's lock held."""
        try:
            self._send_group(group)
        except BaseException as exc:
            _failed(group, exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            for job in group:
                job.settled = True

    def _may_send(self) -> None:
        """Inside ``no_wait``: raise ``WouldWait`` if this dialect's writes always wait (a
        network round trip); SQLite's decide at ``BEGIN`` (``_begin_write``)."""

    def _send_group(self, group: list[_Job]) -> None:
        """One transaction with every job's statements, committed once each changed the
        rows its job expects (then each job is ``written``); if one did not (a change
        found done already, or taken by another process) or a statement failed, it is
        rolled back and nothing is written (each job then writes alone). The dialect's."""
        raise NotImplementedError

    def _apply_at_once(
        self,
        conn: Any,
        chat_id: str,
        entries: Sequence[Entry],
        claims: Mapping[str, _Claim] = _NO_CLAIMS,
    ) -> list[tuple[Any, int]]:
        """:meth:`_apply`'s statements as if every change were new (``"ok"``), and what
        each must change for that to be true: a change found done already (a retried write)
        or taken by another process makes the expectation fail, and the careful path
        decides. Only for entries :func:`_simple` accepts. A call among ``claims`` (by id)
        is written claimed when its row is among the entries."""
        expect: list[tuple[Any, int]] = []
        rows: list[tuple[str, int, str, str, str]] = []
        for e in entries:
            ch = e.change
            if isinstance(ch, NewMessage | CallFinal) and ch.blobs:
                _put_blobs(conn, ch.blobs)
            if isinstance(ch, NewMessage):
                expect.append((self._insert_message(conn, chat_id, ch), 1))
                self._titled(conn, chat_id, ch)
            elif isinstance(ch, NewCall):
                status, owner, at = ch.status, None, None
                claim = claims.get(ch.call_id) if status == "requested" else None
                if claim is not None:
                    status, owner, at = "running", claim.owner, claim.at
                    claim.done = True
                expect.append((self._insert_call(conn, chat_id, ch, status, owner, at), 1))
                self._call_arguments(conn, chat_id, ch)
            elif isinstance(ch, CallFinal):
                expect.append((self._final_call(conn, chat_id, ch), 1))
            elif isinstance(ch, CallReset):
                expect.append((self._reset_call(conn, chat_id, ch), 1))
            if e.data is not None:
                rows.append((chat_id, e.seq, e.type, e.ts, e.data))
        if rows:
            cur = conn.executemany(
                "INSERT INTO events (chat_id, seq, type, ts, json) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                rows,
            )
            expect.append((cur, len(rows)))
        return expect

    def _write_at_once(
        self,
        chat_id: str,
        entries: Sequence[Entry],
        state: Mapping[str, Any] | None,
        tools: Mapping[str, Any] | None,
        recorded: Sequence[tuple[tuple[Any, ...], str, int, bool]],
    ) -> bool:
        plan = self._plan(chat_id, entries, state, tools, recorded)
        return plan is not None and self._at_once(chat_id, plan)

    def _claim_at_once(
        self,
        chat_id: str,
        call_id: str,
        owner: str,
        entries: Sequence[Entry],
        state: Mapping[str, Any] | None,
        decision: Decision | None = None,
    ) -> bool:
        decisions = {call_id: decision} if decision is not None else None
        plan = self._plan(chat_id, entries, state, None, (), (call_id,), owner, decisions)
        return plan is not None and self._at_once(chat_id, plan)

    def _plan(
        self,
        chat_id: str,
        entries: Sequence[Entry],
        state: Mapping[str, Any] | None,
        tools: Mapping[str, Any] | None,
        recorded: Sequence[tuple[tuple[Any, ...], str, int, bool]] = (),
        claims: Sequence[str] = (),
        owner: str = "",
        decisions: Mapping[str, Decision] | None = None,
    ) -> Callable[[Any], list[tuple[Any, int]]] | None:
        """A group job's plan: write ``entries`` (with the chat's state and tools, then
        the ``recorded`` rows) and claim ``claims`` for ``owner``, each call's row claimed as
        it is written if it is among the entries, else by its own update, checked against
        the decision the claimant holds (``decisions``, by call id: a call decided anew
        elsewhere changes no row, and the careful path says so). ``None``: the entries need
        the careful path (:func:`_simple`)."""
        if not _simple(entries):
            return None
        held = decisions or {}

        def plan(conn: Any) -> list[tuple[Any, int]]:
            at = utcnow().isoformat()
            marks = {call_id: _Claim(call_id, owner, at, held.get(call_id)) for call_id in claims}
            expect = self._apply_at_once(conn, chat_id, entries, marks)
            self._touch(conn, chat_id, state, tools)
            for claim in marks.values():
                if not claim.done:
                    cur = self._claim_call(conn, chat_id, claim.call_id, owner, at, claim.held)
                    expect.append((cur, 1))
            for row, cid, step, replayed in recorded:
                self._record_in(conn, row, cid, step, replayed)
            return expect

        return plan

    def write_job(
        self,
        chat_id: str,
        entries: Sequence[Entry],
        state: Mapping[str, Any] | None = None,
        tools: Mapping[str, Any] | None = None,
        recorded: Sequence[tuple[Recording, str, int, bool]] = (),
        claims: Sequence[str] = (),
        owner: str = "",
        decisions: Mapping[str, Decision] | None = None,
    ) -> _Job | None:
        """:meth:`write` and the claims of ``claims`` (call ids, for ``owner``) as one job for
        a dialect that sends groups from an event loop (``send_async``: PostgreSQL's), or
        ``None`` if they need the careful path (the caller then writes and claims as usual).
        ``decisions``: the decision the claimant holds of each approved call it claims, as
        ``claim``'s ``decision`` (checked in the claim's own statement).

        Sent, the job is all or nothing: ``written`` once its group committed, every call of
        ``claims`` claimed by ``owner``; else nothing of it is written, and the careful path
        decides what happened (a change found done already, a call claimed elsewhere).
        """
        if not self._GROUPS:
            return None
        rows = [(self._recording_row(r, c, s), c, s, p) for r, c, s, p in recorded]
        plan = self._plan(chat_id, entries, state, tools, rows, claims, owner, decisions)
        return None if plan is None else _Job(chat_id, plan, [row for row, *_ in rows])

    def _decision_change(self, conn: Any, chat_id: str, ch: DecisionChange) -> str:
        row = conn.execute(
            "SELECT status, decision, claimed_by, started_at FROM tool_calls "
            f"WHERE chat_id = ? AND call_id = ?{self._FOR_UPDATE}",
            (chat_id, ch.call_id),
        ).fetchone()
        if row is None:
            return f"call {ch.call_id!r} is not in the store"
        status, decision, claimed_by, started_at = row
        now = utcnow().isoformat()
        if decision is not None:
            existing = codec.loads(decision)
            if _same_decision(existing, codec.loads(ch.data)):
                # the chat applying the decision made through the store (or a duplicate),
                # its reason as the chat has it (its provider's key hidden, unknown here)
                cur = conn.execute(
                    "UPDATE decisions SET applied = 1, applied_at = ?, reason = ? "
                    "WHERE chat_id = ? AND call_id = ? AND applied = 0",
                    (now, ch.reason, chat_id, ch.call_id),
                )
                if cur.rowcount and existing.get("reason") != ch.reason:
                    conn.execute(
                        "UPDATE tool_calls SET decision = ? WHERE chat_id = ? AND call_id = ?",
                        (ch.data, chat_id, ch.call_id),
                    )
                return "ok" if cur.rowcount else "dup"
            overridable = (
                ch.override
                and _is_automatic(existing)
                and claimed_by is None
                and started_at is None
                and status in ("approved", "denied")
                and self._made_by_chat(conn, chat_id, ch.call_id)
            )
            if not overridable:
                return (
                    f"call {ch.call_id!r} was already {existing['verdict']} by "
                    f"{existing['by']} in the store"
                )
        elif status not in ("awaiting_approval", "requested"):
            return f"call {ch.call_id!r} is {status} in the store; it cannot be decided"
        conn.execute(
            "UPDATE tool_calls SET decision = ?, status = ?, "
            "result = CASE WHEN ? = 'approved' THEN NULL ELSE result END, "
            "finished_at = CASE WHEN ? = 'approved' THEN NULL ELSE finished_at END "
            "WHERE chat_id = ? AND call_id = ?",
            (ch.data, ch.verdict, ch.verdict, ch.verdict, chat_id, ch.call_id),
        )
        conn.execute(
            "INSERT INTO decisions (chat_id, call_id, verdict, decided_by, at, reason, arguments, "
            "source, applied, applied_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'chat', 1, ?)",
            (chat_id, ch.call_id, ch.verdict, ch.by, ch.at, ch.reason, ch.arguments, now),
        )
        return "ok"

    def _made_by_chat(self, conn: Any, chat_id: str, call_id: str) -> bool:
        """Whether the call's standing decision was written by a chat (its resolver's or a
        policy's may be overruled), not made through ``store.approve``/``store.deny`` (a
        person's or an API's, whatever its ``by``; a store written before ``by`` names were
        reserved may hold ``by="policy:..."`` there)."""
        row = conn.execute(
            "SELECT source FROM decisions WHERE chat_id = ? AND call_id = ? "
            "ORDER BY id DESC LIMIT 1",
            (chat_id, call_id),
        ).fetchone()
        return row is not None and row[0] == "chat"

    def decisions(self, chat_id: str, call_ids: Iterable[str]) -> dict[str, Decision]:
        ids = list(call_ids)
        out: dict[str, Decision] = {}
        with self._read() as conn:
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                marks = ",".join("?" * len(chunk))
                for cid, d in conn.execute(
                    f"SELECT call_id, decision FROM tool_calls WHERE chat_id = ? "
                    f"AND decision IS NOT NULL AND call_id IN ({marks})",
                    (chat_id, *chunk),
                ):
                    decision = codec.decision_in(codec.loads(d))
                    if decision is not None:
                        out[cid] = decision
        return out

    def reject_decision(self, chat_id: str, call_id: str, error: str) -> None:
        error = clean(error)
        with self._tx(chat_id) as conn:
            conn.execute(
                "UPDATE decisions SET applied = -1, applied_at = ?, error = ? "
                "WHERE chat_id = ? AND call_id = ? AND applied = 0",
                (utcnow().isoformat(), error, chat_id, call_id),
            )
            conn.execute(
                "UPDATE tool_calls SET status = 'awaiting_approval', decision = NULL "
                "WHERE chat_id = ? AND call_id = ? AND status IN ('approved', 'denied') "
                "AND claimed_by IS NULL AND result IS NULL",
                (chat_id, call_id),
            )

    # -- inputs ----------------------------------------------------------------------
    def _input_answer(self, conn: Any, chat_id: str, ch: InputAnswer) -> str:
        """The chat's answer (its ``InputAnswered``): first answer wins. The same answer
        given in the store is marked applied (the event is the chat applying it);
        another answer already there leaves the store's standing (``"dup"``)."""
        now = utcnow().isoformat()
        cur = conn.execute(
            "INSERT INTO input_answers (chat_id, input_id, action, data, answered_by, at, "
            "reason, source, applied, applied_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'chat', 1, ?) "
            "ON CONFLICT DO NOTHING",
            (chat_id, ch.input_id, ch.action, ch.data, ch.by, ch.at, ch.reason, now),
        )
        if cur.rowcount == 1:
            return "ok"
        cur = conn.execute(
            "UPDATE input_answers SET applied = 1, applied_at = ? WHERE chat_id = ? "
            "AND input_id = ? AND action = ? AND applied = 0",
            (now, chat_id, ch.input_id, ch.action),
        )
        return "ok" if cur.rowcount == 1 else "dup"

    def record_answer(
        self,
        chat_id: str,
        request: PendingInput,
        action: str,
        data: Any,
        by: str,
        at: str,
        reason: str | None,
    ) -> StoredInput | None:
        """Write a chat's answer before the chat records it (its ``answer_input`` hook): the
        first answer wins. ``None``: written; else the answer the store already has."""
        with self._tx(chat_id) as conn:
            cur = conn.execute(
                "INSERT INTO input_answers (chat_id, input_id, action, data, answered_by, at, "
                "reason, source, applied, applied_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'chat', 1, ?) "
                "ON CONFLICT DO NOTHING",
                (chat_id, request.id, action, codec.dumps(data), by, at, reason, at),
            )
            if cur.rowcount == 1:
                return None
            found = self._inputs_where(
                conn, "i.chat_id = ? AND i.input_id = ?", (chat_id, request.id)
            )
        return found[0] if found else None

    def rule_changes(self, chat_id: str) -> list[tuple[str, str, str]]:
        """A chat's rule changes (``add_rule``/``remove_rule``, ``always_allow``/``revoke``,
        in any process), in order: each event's time, type and JSON, as stored."""
        with self._read() as conn:
            rows = conn.execute(RULE_CHANGES, (chat_id,)).fetchall()
        return [(str(ts), str(kind), str(data)) for ts, kind, data in rows]

    def input_answers(self, chat_id: str, input_ids: Iterable[str]) -> dict[str, StoredInput]:
        """The answers given to these inputs of a chat (the answered ones only), by id."""
        ids = list(input_ids)
        out: dict[str, StoredInput] = {}
        with self._read() as conn:
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                marks = ",".join("?" * len(chunk))
                for si in self._inputs_where(
                    conn,
                    f"i.chat_id = ? AND a.id IS NOT NULL AND i.input_id IN ({marks})",
                    (chat_id, *chunk),
                ):
                    out[si.id] = si
        return out

    def reject_answer(self, chat_id: str, input_id: str, error: str) -> None:
        """An answer given in the store that its chat cannot apply: removed (the input waits
        again; ``error`` says why in the warning the chat gives)."""
        with self._tx(chat_id) as conn:
            conn.execute(
                "DELETE FROM input_answers WHERE chat_id = ? AND input_id = ? AND applied = 0",
                (chat_id, input_id),
            )

    @staticmethod
    def _inputs_where(conn: Any, where: str, args: Sequence[Any]) -> list[StoredInput]:
        """The inputs ``where`` selects (``i``: the input, ``a``: its answer), each closed
        as its chat's record closes it once its call has a result (``ended``): with no
        answer, ``cancel`` "the call ended"; with an answer no chat applied, kept as given
        and ``closed`` "not applied: the call ended first" (its record has it cancelled).
        An answer the chat applies is marked applied in the transaction that writes the
        call's result, or before, so an ended call's unapplied answer was never applied."""
        rows = conn.execute(
            "SELECT i.chat_id, i.input_id, i.call_id, i.kind, i.tool, i.server, i.prompt, "
            "i.content, i.schema, i.requested_at, i.resume, a.action, a.data, a.answered_by, "
            "a.at, a.reason, a.applied, "
            "CASE WHEN tc.result IS NOT NULL THEN 1 ELSE 0 END, tc.finished_at "
            "FROM inputs i LEFT JOIN input_answers a "
            "ON a.chat_id = i.chat_id AND a.input_id = i.input_id "
            "LEFT JOIN tool_calls tc ON tc.chat_id = i.chat_id AND tc.call_id = i.call_id "
            f"WHERE {where} ORDER BY i.requested_at, i.input_id",
            tuple(args),
        ).fetchall()
        out = []
        for r in rows:
            ended = r[17] == 1
            closed = None
            status, answered_at, reason, applied = r[11], codec.dt_in(r[14]), r[15], r[16] == 1
            if status is None and ended:  # no answer before its call ended: closed with it
                status, answered_at, reason = "cancel", codec.dt_in(r[18]), CALL_ENDED
                closed, applied = CALL_ENDED, True
            elif status is not None and ended and not applied:
                closed = NOT_APPLIED
            out.append(
                StoredInput(
                    chat_id=r[0],
                    id=r[1],
                    kind=r[3],
                    call_id=r[2],
                    tool=r[4],
                    message=r[6],
                    content=codec.loads(r[7]) or {},
                    schema=codec.loads(r[8]),
                    server=r[5],
                    requested_at=codec.dt_in(r[9]),
                    resume=codec.loads(r[10]),
                    status=status or "pending",
                    data=codec.loads(r[12]) if r[11] else None,
                    answered_by=r[13],
                    answered_at=answered_at,
                    reason=reason,
                    applied=applied,
                    closed=closed,
                )
            )
        return out

    _OPEN_INPUT = (
        "a.id IS NULL AND NOT EXISTS (SELECT 1 FROM tool_calls t WHERE t.chat_id = i.chat_id "
        "AND t.call_id = i.call_id AND t.result IS NOT NULL)"
    )
    """An input still waiting: no answer, and its call has no result (an in-doubt call's
    inputs, asked in the middle of a call that is gone, wait for nothing)."""

    def pending_inputs(self, chat_id: str | None = None) -> list[StoredInput]:
        """Every input waiting for an answer (in one chat, or all), oldest first.

        An external tool's call, ``ask_user``'s question, a 2026-07-28 MCP server's
        request parked with its call; and a request an older server sent in the middle
        of a call still running in some process. Answer with :meth:`answer` or
        :meth:`decline` from any process.
        """
        where: str = self._OPEN_INPUT
        args: tuple[str, ...] = ()
        if chat_id is not None:
            where, args = f"i.chat_id = ? AND {where}", (chat_id,)
        with self._read() as conn:
            return self._inputs_where(conn, where, args)

    def inputs(self, chat_id: str | None = None) -> list[StoredInput]:
        """Every input asked for (answered or not; in one chat, or all), oldest first.

        An input whose call ended before an answer (in doubt, denied, cancelled) is
        ``cancel`` "the call ended", as its chat's record has it, and
        :meth:`pending_inputs` leaves it out; an answer given here that no chat applied
        before the call ended keeps its status, ``applied=False``, with ``closed`` saying
        ``"not applied: the call ended first"``."""
        where, args = ("i.chat_id = ?", (chat_id,)) if chat_id is not None else ("1 = 1", ())
        with self._read() as conn:
            return self._inputs_where(conn, where, args)

    def answer(
        self,
        input_id: str | StoredInput | PendingInput | ToolCall,
        data: Any = None,
        *,
        by: str = "store",
        chat_id: str | None = None,
    ) -> StoredInput:
        """Answer a pending input, from any process; its chat applies the answer at its
        next look (a step, ``refresh()``, ``Chat.load``; a live chat that follows the
        store, as a displayed card does, at once).

        The answer is checked exactly as ``chat.answer`` checks it (an elicitation's form
        against its schema, ``ask_user``'s choices). The first answer wins: an input
        answered already (here, in another process or in its chat) is refused.

        Args:
            input_id: The input's id, its call's id (an external tool's, ``ask_user``'s,
                or a call with one input waiting), or a ``StoredInput``/``PendingInput``.
            data: The answer (see ``chat.answer``). Stored as JSON: a value that is not
                JSON data (a DataFrame) is stored as the text the model reads. A key in it
                (``sk-...``, a ``Bearer`` token, URL credentials, a form's ``password``)
                is stored, and applied, as ``***``: keys in answers never reach the store
                or the model (an MCP server's form receives ``***`` where a key was).
            by: Who answered (kept in the record, the log and the store).
            chat_id: Needed only when several chats have an input with this id.

        Returns:
            The input as now stored (status ``accept``).

        Raises:
            InputError: No such input waits (unknown, answered already, its call ended,
                ambiguous), or ``data`` does not match what was asked (with its keys
                hidden, too); nothing is written.
        """
        return self._settle(input_id, "accept", data, None, by, chat_id)

    def decline(
        self,
        input_id: str | StoredInput | PendingInput | ToolCall,
        reason: str | None = None,
        *,
        by: str = "store",
        chat_id: str | None = None,
        cancel: bool = False,
    ) -> StoredInput:
        """Refuse a pending input, from any process (``cancel=True``: dismiss it); its chat
        tells the model (or the server) at its next look, as ``chat.decline`` would.

        Raises:
            InputError: As :meth:`answer`.
        """
        return self._settle(input_id, "cancel" if cancel else "decline", None, reason, by, chat_id)

    def _settle(
        self,
        ref: str | StoredInput | PendingInput | ToolCall,
        action: str,
        data: Any,
        reason: str | None,
        by: str,
        chat_id: str | None,
    ) -> StoredInput:
        if isinstance(ref, StoredInput):
            key, chat_id = ref.id, chat_id or ref.chat_id
        elif isinstance(ref, PendingInput | ToolCall):
            key = ref.id
        elif isinstance(ref, str):
            key = ref
        else:
            raise TypeError(
                f"answer an input id, a StoredInput or a PendingInput, not {type(ref).__name__}"
            )
        if not isinstance(by, str) or not by:
            raise TypeError("by must be a non-empty string naming who answered")
        if reason is not None and not isinstance(reason, str):
            raise TypeError("reason must be a string")
        assert action in INPUT_ACTIONS
        by, reason = clean(by), clean(reason) if reason is not None else None
        if reason is not None:
            reason = redact_keys(reason)
        si = self._one_input(key, chat_id)
        stored = None
        if action == "accept":  # the one check (chat.answer's), before anything is written
            try:
                value, text, _ = checked_answer(si.request, data)
            except InputError as exc:  # it may quote the answer or the choices: no key shown
                raise InputError(redact_keys(str(exc))) from None
            stored = _keys_hidden(si, answer_json(value, text))
        at = utcnow().isoformat()
        with self._tx(si.chat_id) as conn:
            if not self._inputs_where(
                conn,
                f"i.chat_id = ? AND i.input_id = ? AND {self._OPEN_INPUT}",
                (si.chat_id, si.id),
            ):
                raise self._answered(conn, si)
            cur = conn.execute(
                "INSERT INTO input_answers (chat_id, input_id, action, data, answered_by, at, "
                "reason, source, applied) VALUES (?, ?, ?, ?, ?, ?, ?, 'store', 0) "
                "ON CONFLICT DO NOTHING",
                (si.chat_id, si.id, action, codec.dumps(stored), by, at, reason),
            )
            if cur.rowcount != 1:  # another process answered between the read and the write
                raise self._answered(conn, si)
            conn.execute("UPDATE chats SET updated_at = ? WHERE id = ?", (at, si.chat_id))
            (now,) = self._inputs_where(
                conn, "i.chat_id = ? AND i.input_id = ?", (si.chat_id, si.id)
            )
        return now

    def _answered(self, conn: Any, si: StoredInput) -> InputError:
        """Why ``si`` takes no answer: answered already, or its call ended first."""
        found = self._inputs_where(conn, "i.chat_id = ? AND i.input_id = ?", (si.chat_id, si.id))
        now = found[0] if found else si
        if now.status == "pending" or now.closed == CALL_ENDED:  # no answer; its call ended
            row = conn.execute(
                "SELECT status FROM tool_calls WHERE chat_id = ? AND call_id = ?",
                (si.chat_id, si.call_id),
            ).fetchone()
            how = f" ({row[0]})" if row is not None else ""
            return InputError(
                f"input {si.id!r} of chat {si.chat_id} waits for nothing now: its call "
                f"{si.call_id!r} ended{how} before an answer; nothing was written "
                "(store.pending_inputs() lists the inputs waiting)"
            )
        when = f" at {now.answered_at.isoformat(timespec='seconds')}" if now.answered_at else ""
        ended = (
            "; its call ended before any chat applied it, so it waits for nothing now"
            if now.closed == NOT_APPLIED
            else "; an answer cannot be changed"
        )
        return InputError(
            f"input {si.id!r} of chat {si.chat_id} was already answered ({now.status} by "
            f"{now.answered_by}{when}){ended}"
        )

    def _one_input(self, key: str, chat_id: str | None) -> StoredInput:
        """The input ``key`` names (its id, or its call's id), pending ones first."""
        where = "(i.input_id = ? OR i.call_id = ?)"
        args: tuple[Any, ...] = (key, key)
        if chat_id is not None:
            where, args = f"i.chat_id = ? AND {where}", (chat_id, *args)
        with self._read() as conn:
            found = self._inputs_where(conn, where, args)
            if not found:
                in_chat = f"chat {chat_id!r} of " if chat_id else ""
                raise InputError(
                    f"no input {key!r} in {in_chat}store {self.location}; "
                    "store.pending_inputs() lists the inputs waiting for an answer"
                )
            exact = [si for si in found if si.id == key] or found
            open_ = self._inputs_where(
                conn,
                f"{where} AND {self._OPEN_INPUT}",
                args,
            )
        waiting = [si for si in open_ if si.id == key] or open_
        if len({(si.chat_id, si.id) for si in waiting}) == 1:
            return waiting[0]
        if len(waiting) > 1:
            if len({si.chat_id for si in waiting}) > 1:
                chats = ", ".join(sorted({repr(si.chat_id) for si in waiting}))
                raise InputError(
                    f"input {key!r} is in several chats ({chats}); pass chat_id= to choose"
                )
            ids = ", ".join(repr(si.id) for si in waiting)
            raise InputError(
                f"call {key!r} waits for several inputs ({ids}); answer each by its id"
            )
        return exact[0]  # answered already: _settle says so

    # -- the outside -------------------------------------------------------------------
    def approve(
        self,
        call_id: str | StoredCall | ToolCall,
        arguments: dict[str, Any] | None = None,
        reason: str | None = None,
        by: str = "store",
        *,
        chat_id: str | None = None,
        exclusive: bool = False,
    ) -> StoredCall:
        """Approve a pending call, from any process; the chat applies it at its next step.

        Args:
            call_id: The call's id (or a ``StoredCall``/``ToolCall``).
            arguments: Edited arguments to run with instead of the model's
                (checked against the tool's schema when the store knows it).
            reason: Why (kept with the decision).
            by: Who decided (recorded as the decider).
            chat_id: Needed only when several chats have a call with this id.
            exclusive: Refuse (``DecisionError``) a call decided already, even the
                same way, so the caller knows its decision is the one recorded (two
                inboxes approving alike: one wrote, the other is told; checked in the
                transaction that writes).

        Returns:
            The call as now stored. Approving an approved call again is a no-op
            (unless ``exclusive``).

        Raises:
            DecisionError: Unknown or ambiguous call id, a call that needs no
                approval or is not pending, invalid edited arguments, or a call
                already denied (or, ``exclusive``, decided). Nothing is written then.
        """
        return self._decide(call_id, "approved", arguments, reason, by, chat_id, exclusive)

    def deny(
        self,
        call_id: str | StoredCall | ToolCall,
        reason: str | None = None,
        by: str = "store",
        *,
        chat_id: str | None = None,
        exclusive: bool = False,
    ) -> StoredCall:
        """Deny a pending call, from any process; it never runs and the model is told why.

        Raises:
            DecisionError: As :meth:`approve` (denying a denied call is a no-op unless
                ``exclusive``).
        """
        return self._decide(call_id, "denied", None, reason, by, chat_id, exclusive)

    def _decide(
        self,
        call: str | StoredCall | ToolCall,
        verdict: str,
        arguments: dict[str, Any] | None,
        reason: str | None,
        by: str,
        chat_id: str | None,
        exclusive: bool = False,
    ) -> StoredCall:
        if isinstance(call, StoredCall):
            chat_id = chat_id or call.chat_id
            call_id = call.id
        elif isinstance(call, ToolCall):  # its chat's, when it came from one: ids repeat
            chat_id, call_id = chat_id or call.chat_id, call.id
        elif isinstance(call, str):
            call_id = call
        else:
            raise TypeError(f"expected a call id, got {type(call).__name__}")
        if not isinstance(by, str) or not by:
            raise TypeError("by must be a non-empty string")
        if reason is not None and not isinstance(reason, str):
            raise TypeError("reason must be a string")
        by, reason = clean(by), clean(reason) if reason is not None else None
        if reason is not None:  # read by the model with a denial, shown in every log: a
            reason = redact_keys(reason)  # key shape as *** (the chat hides its own key too)
        if by_machine(by):  # a policy's decision may be overruled; machinery's teach nothing
            raise DecisionError(
                f"by={by!r} names nbagent's own decider (a chat's resolver, rules or policy, "
                "the notebook's fallback, evaluate); name who decides (a person, a team, "
                "a service: by='ops')"
            )
        if arguments is not None:
            arguments = _edited_arguments(arguments)
        with self._tx() as conn:
            sc = self._find(conn, call_id, chat_id, lock=True)
            label = f"{sc.name}({sc.id}) in chat {sc.chat_id}"
            if sc.approval is None or not sc.approval.required:
                raise DecisionError(f"{label} does not need approval")
            # the call's own arguments: a plain approval, nothing edited (as chat.approve)
            if verdict == "approved" and same_arguments(arguments, sc.arguments):
                arguments = None
            if sc.decision is not None:
                stood = sc.decision
                at = stood.at.isoformat(timespec="seconds")
                if stood.verdict == verdict and arguments == stood.arguments:
                    if not exclusive:
                        return sc
                    # not a mismatch: the same decision, made first by someone else
                    raise DecisionError(
                        f"{label} was already {stood.verdict} by {stood.by} at {at}, the same "
                        "way: with exclusive=True, this decision is not the one recorded"
                    )
                edit = ""
                if stood.verdict == verdict:  # an approval, with other arguments
                    edit = (
                        " with the model's arguments"
                        if stood.arguments is None
                        else (" with edited arguments")
                    )
                raise DecisionError(
                    f"{label} was already {stood.verdict} by {stood.by}{edit} at {at}; a "
                    "decision cannot be changed"
                )
            if sc.status != "awaiting_approval":
                raise DecisionError(f"{label} is {sc.status}; it cannot be decided now")
            if arguments is not None:
                if verdict != "approved":
                    raise DecisionError("only an approval can carry edited arguments")
                if sc.hosted:
                    raise DecisionError(
                        f"{label} runs on the provider's side with the model's arguments; "
                        "they cannot be edited (approve or deny it)"
                    )
                self._check_arguments(conn, sc, arguments)
                refused = denied_edit(self._rules_in(conn, sc.chat_id), sc, arguments)
                if refused is not None:  # the chat would reject it: say so now, write nothing
                    raise DecisionError(refused)
            decision = Decision(
                verdict,  # type: ignore[arg-type]
                by,
                utcnow(),
                reason,
                dict(arguments) if arguments is not None else None,
            )
            data = codec.dumps(codec.decision_out(decision))
            conn.execute(
                "UPDATE tool_calls SET decision = ?, status = ? WHERE chat_id = ? AND call_id = ?",
                (data, verdict, sc.chat_id, sc.id),
            )
            conn.execute(
                "INSERT INTO decisions (chat_id, call_id, verdict, decided_by, at, reason, "
                "arguments, source, applied) VALUES (?, ?, ?, ?, ?, ?, ?, 'store', 0)",
                (
                    sc.chat_id,
                    sc.id,
                    verdict,
                    by,
                    decision.at.isoformat(),
                    reason,
                    None if arguments is None else codec.dumps(arguments),
                ),
            )
            conn.execute(
                "UPDATE chats SET updated_at = ? WHERE id = ?",
                (decision.at.isoformat(), sc.chat_id),
            )
            return self._find(conn, sc.id, sc.chat_id)

    def _rules_in(self, conn: Any, chat_id: str) -> list[Rule]:
        """The chat's rules as stored (its state's list, changed by every process's rule
        events since), read in ``conn``'s transaction; unreadable ones left out (the chat
        refuses to load with them)."""
        row = conn.execute("SELECT state FROM chats WHERE id = ?", (chat_id,)).fetchone()
        state = codec.loads(row[0]) if row and row[0] else {}
        rules: list[Rule] = []
        for data in state.get("rules") or () if isinstance(state, dict) else ():
            with suppress(ValueError, TypeError):
                rules.append(Rule.from_dict(data))
        for _, kind, text in conn.execute(RULE_CHANGES, (chat_id,)).fetchall():
            data = codec.loads(text) if kind == "rule_changed" else None
            if not isinstance(data, dict):
                continue
            try:
                rule = Rule.from_dict(data.get("rule"))
            except (ValueError, TypeError):
                continue
            if rule in rules:
                rules.remove(rule)
            if data.get("added", True):
                rules.append(rule)
        return rules

    def _check_arguments(self, conn: Any, sc: StoredCall, arguments: dict[str, Any]) -> None:
        row = conn.execute("SELECT tools FROM chats WHERE id = ?", (sc.chat_id,)).fetchone()
        schemas = codec.loads(row[0]) if row and row[0] else {}
        schema = schemas.get(sc.name) if isinstance(schemas, dict) else None
        if isinstance(schema, dict):
            problems = validate_json_schema(arguments, schema)
            if problems:
                raise DecisionError(
                    f"edited arguments for {sc.name} are invalid: {'; '.join(problems)}"
                )

    def _find(
        self, conn: Any, call_id: str, chat_id: str | None, *, lock: bool = False
    ) -> StoredCall:
        """The call ``call_id`` (of ``chat_id``); ``lock``: its row locked until the
        transaction ends (PostgreSQL; SQLite's write transaction excludes everyone)."""
        lock_sql = self._FOR_UPDATE if lock else ""
        if chat_id is None:  # a gated call (indexed) first: those are what is decided by id
            rows = conn.execute(
                f"SELECT {_CALL_COLUMNS} FROM tool_calls WHERE call_id = ? AND gated = 1 "
                f"LIMIT 6{lock_sql}",
                (call_id,),
            ).fetchall()
            if not rows:
                rows = conn.execute(
                    f"SELECT {_CALL_COLUMNS} FROM tool_calls WHERE call_id = ? LIMIT 6{lock_sql}",
                    (call_id,),
                ).fetchall()
        else:
            rows = conn.execute(
                f"SELECT {_CALL_COLUMNS} FROM tool_calls WHERE call_id = ? AND chat_id = ?"
                f"{lock_sql}",
                (call_id, chat_id),
            ).fetchall()
        if not rows:
            where = f"chat {chat_id!r} of " if chat_id else ""
            raise DecisionError(
                f"no tool call {call_id!r} in {where}store {self.location}; "
                "store.pending_approvals() lists the calls waiting for a decision"
            )
        if len(rows) > 1:
            chats = ", ".join(repr(r[0]) for r in rows)
            raise DecisionError(
                f"call id {call_id!r} is in several chats ({chats}); pass chat_id= to choose"
            )
        return _stored_call(rows[0], conn)

    def call(self, call_id: str, *, chat_id: str | None = None) -> StoredCall:
        """One stored call (its current status, decision and result)."""
        with self._read() as conn:
            return self._find(conn, call_id, chat_id)

    def calls(self, chat_id: str | None = None, *, status: str | None = None) -> list[StoredCall]:
        """Stored calls (of one chat, with one status), in request order."""
        where, args = [], []
        if chat_id is not None:
            where.append("chat_id = ?")
            args.append(chat_id)
        if status is not None:
            where.append("status = ?")
            args.append(status)
        sql = f"SELECT {_CALL_COLUMNS} FROM tool_calls"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._read() as conn:
            order = " ORDER BY seq" if chat_id is not None else " ORDER BY requested_at, seq"
            return [_stored_call(r, conn) for r in conn.execute(sql + order, args).fetchall()]

    def pending_approvals(self, chat_id: str | None = None) -> list[StoredCall]:
        """Every call waiting for a decision (in one chat, or all), oldest first."""
        return self.calls(chat_id, status="awaiting_approval")

    def chats(self) -> list[ChatInfo]:
        """Every stored chat, oldest first."""
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT c.id, c.created_at, {self._UPDATED_AT}, c.provider, c.model, c.title, "
                "(SELECT COUNT(*) FROM messages m WHERE m.chat_id = c.id), "
                "(SELECT COUNT(*) FROM tool_calls t WHERE t.chat_id = c.id), "
                "(SELECT COUNT(*) FROM tool_calls t WHERE t.chat_id = c.id "
                " AND t.status = 'awaiting_approval'), c.parent_id "
                "FROM chats c ORDER BY c.created_at, c.rowid"
            ).fetchall()
        return [
            ChatInfo(
                r[0],
                datetime.fromisoformat(r[1]),
                datetime.fromisoformat(r[2]),
                r[3],
                r[4],
                r[5],
                r[6],
                r[7],
                r[8],
                r[9],
            )
            for r in rows
        ]

    # -- record and replay (version 9) ---------------------------------------------
    def record_response(
        self, recording: Recording, chat_id: str, step: int, replayed: bool
    ) -> None:
        """Keep a model response by its request's key, and which key ``chat_id``'s ``step`` had.

        A live response (``replayed`` false) replaces an older recording of the
        same key; a replayed one is kept only if the key has none.
        """
        try:
            row = self._recording_row(recording, chat_id, step)
            self._record(row, chat_id, step, replayed)
        except self._TEXT_ERRORS:  # text the database cannot store (a lone surrogate): replaced
            row = tuple(clean_json(list(self._recording_row(recording, chat_id, step))))
            self._record(row, clean(chat_id), step, replayed)
        self._links_written([row])

    # the chains whose links this store has written lately (a chat's next request then
    # writes only its own link); bounded, and only a hint: a link written twice is ignored
    _LINKS_KEPT: ClassVar[int] = 2048

    def _written_chains(self) -> dict[str, None]:
        written: dict[str, None] | None = self.__dict__.get("_chains")
        if written is None:
            written = self.__dict__.setdefault("_chains", {})
        return written

    def _links_written(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Note the chains of rows just committed (see :meth:`_recording_row`)."""
        written = self._written_chains()
        for row in rows:
            for link in row[8]:
                written[link[0]] = None
        while len(written) > self._LINKS_KEPT:
            try:
                del written[next(iter(written))]  # the oldest (a dict keeps insertion order)
            except (StopIteration, KeyError, RuntimeError):  # another thread trimmed it
                break

    def _recording_row(self, recording: Recording, chat_id: str, step: int) -> tuple[Any, ...]:
        """The ``recordings`` row of a response ``chat_id`` is about to write (or has), and
        last the links of its request's digest chain the store lacks (O(new messages))."""
        response: dict[str, Any] = response_out(recording.response)
        deltas: Any = deltas_out(recording.deltas)
        origin, at = recording.chat_id, recording.step
        if _as_message(recording.response):
            # the response is the assistant message ``chat_id`` is about to write (live or
            # replayed): kept once, there (and in its calls' rows), and its fragments as
            # lengths cut from it; the row then names that chat and step
            response = {k: v for k, v in response.items() if k not in _IN_MESSAGE}
            response["message"] = len(recording.fingerprint.get("messages", ()))
            deltas = slim_deltas(recording.deltas, recording.response) or deltas
            origin, at = chat_id, step
        written = self._written_chains()
        links = digest_links(recording.fingerprint.get("messages", ()), written.__contains__)
        return (
            recording.key,
            origin,
            at,
            recording.model,
            codec.dumps(stored_fingerprint(recording.fingerprint)),
            codec.dumps(response),
            None if deltas is None else codec.dumps(deltas),
            recording.created_at.isoformat(),
            [[chain, parent, n, codec.dumps(items)] for chain, parent, n, items in links],
        )

    def _record(self, row: tuple[Any, ...], chat_id: str, step: int, replayed: bool) -> None:
        with self._tx() as conn:
            self._record_in(conn, row, chat_id, step, replayed)

    @staticmethod
    def _record_in(
        conn: Any, row: tuple[Any, ...], chat_id: str, step: int, replayed: bool
    ) -> None:
        conflict = (
            "DO NOTHING"
            if replayed
            else (
                "DO UPDATE SET chat_id = excluded.chat_id, step = excluded.step, "
                "model = excluded.model, fingerprint = excluded.fingerprint, "
                "response = excluded.response, deltas = excluded.deltas, "
                "created_at = excluded.created_at"
            )
        )
        for link in row[8]:  # the request's messages, each link of their chain once
            conn.execute(
                "INSERT INTO recording_links (chain, parent, n, digests) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (chain) DO NOTHING",
                tuple(link),
            )
        conn.execute(
            "INSERT INTO recordings (key, chat_id, step, model, fingerprint, response, "
            f"deltas, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) {conflict}",
            row[:8],
        )
        conn.execute(
            "INSERT INTO model_requests (chat_id, step, key, replayed) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (chat_id, step) DO UPDATE SET key = excluded.key, "
            "replayed = excluded.replayed",
            (chat_id, step, row[0], int(replayed)),
        )

    _RECORDING = "key, chat_id, step, fingerprint, response, deltas, created_at"

    def _digests_through(
        self, chain: str, links: dict[str, tuple[str, Any]]
    ) -> list[list[str]] | None:
        """The message digests of the request whose chain is ``chain``, from the stored
        links (``links``: those read already, shared by the recordings of one read)."""
        if chain and chain not in links:
            with self._read() as conn:
                rows = conn.execute(
                    "WITH RECURSIVE up(chain, parent, digests) AS ("
                    "SELECT chain, parent, digests FROM recording_links WHERE chain = ? "
                    "UNION SELECT l.chain, l.parent, l.digests FROM recording_links l "
                    "JOIN up ON l.chain = up.parent) SELECT chain, parent, digests FROM up",
                    (chain,),
                ).fetchall()
            for link, parent, digests in rows:
                links[link] = (parent, codec.loads(digests))
        return linked_digests(links, chain)

    def _recording(
        self, conn: Any, row: Sequence[Any], links: dict[str, tuple[str, Any]] | None = None
    ) -> Recording | None:
        """A recording row rebuilt (``None``: its message row is not written, or gone).

        Its message digests are read from ``recording_links`` only if asked for
        (a miss explained); ``links`` caches them across the rows of one read.
        """
        read: dict[str, tuple[str, Any]] = {} if links is None else links
        response = codec.loads(row[4])
        deltas: Any = codec.loads(row[5]) if row[5] is not None else None
        slim = bool(deltas) and isinstance(deltas[0], dict)
        rec = Recording(
            key=row[0],
            fingerprint=fingerprint_in(
                codec.loads(row[3]), lambda n, chain: self._digests_through(chain, read)
            ),
            response=response_in(response),
            deltas=None if slim else deltas_in(deltas),
            chat_id=row[1],
            step=int(row[2]),
            created_at=datetime.fromisoformat(row[6]) if row[6] else utcnow(),
        )
        if "message" in response:
            message = _message_at(conn, row[1], int(response["message"]))
            if message is None or isinstance(message, ToolResultMessage):
                return None
            calls = getattr(message, "tool_calls", ())
            rec = dataclasses.replace(
                rec,
                response=dataclasses.replace(
                    rec.response,
                    text=message.content or "",
                    tool_calls=tuple(c.copy_identity() for c in calls),
                    items=message.items,
                ),
            )
        if slim:
            rec = dataclasses.replace(rec, deltas=full_deltas(deltas, rec.response))
        return rec

    def recording(self, key: str) -> Recording | None:
        """The recorded response of the request with this key, if any."""
        with self._read() as conn:
            row = conn.execute(
                f"SELECT {self._RECORDING} FROM recordings WHERE key = ?", (key,)
            ).fetchone()
            return None if row is None else self._recording(conn, row)

    def recordings(self, *, model: str | None = None, limit: int = 500) -> list[Recording]:
        """The most recent recordings (of one ``provider/model``), newest first."""
        sql = f"SELECT {self._RECORDING} FROM recordings"
        args: list[Any] = []
        if model is not None:
            sql += " WHERE model = ?"
            args.append(model)
        with self._read() as conn:
            rows = conn.execute(
                sql + " ORDER BY created_at DESC LIMIT ?", [*args, limit]
            ).fetchall()
            links: dict[str, tuple[str, Any]] = {}
            found = [self._recording(conn, r, links) for r in rows]
        return [r for r in found if r is not None]

    def recorded_result(self, key: str, call_id: str) -> StoredCall | None:
        """The latest run of call ``call_id`` asked for by a response to the request ``key``.

        Read from the call records (``tool_calls``) of every chat whose step had
        that key; only a call that ran (``ok``, ``error``, ``timed_out``) counts.
        ``call_id`` may name the arguments too (a :func:`~nbagent._recording.result_slot`,
        what a chat looks up): then the latest run with those arguments (a person's or a
        fork's edit, else the model's), so a run with other arguments (an edited rerun, a
        fork) never stands for it; a fork's run of a call its parent's response asked for
        (a shared step, which has no request of the fork's) is found through the parent
        links (:meth:`_fork_runs`).
        """
        call_id, digest = split_slot(call_id)
        with self._read() as conn:
            rows = conn.execute(  # by the key's index, then each chat's call by its primary key
                f"SELECT {_CALL_COLUMNS} FROM tool_calls WHERE call_id = ? AND chat_id IN "
                "(SELECT r.chat_id FROM model_requests r WHERE r.key = ?) "
                "AND EXISTS (SELECT 1 FROM model_requests r WHERE r.key = ? "
                "AND r.chat_id = tool_calls.chat_id AND r.step = tool_calls.step) "
                "AND status IN ('ok', 'error', 'timed_out') ORDER BY finished_at DESC"
                + ("" if digest is not None else " LIMIT 1"),
                (call_id, key, key),
            ).fetchall()
            for row in rows:
                if digest is None or arguments_digest(_ran_with(row)) == digest:
                    return _stored_call(row, conn)
            if digest is None:
                return None
            for row in self._fork_runs(conn, key, call_id):
                if arguments_digest(_ran_with(row)) == digest:
                    return _stored_call(row, conn)
            return None

    _FORK_DEPTH = 32  # forks of forks followed (a fork's chain is rarely deeper)
    _CHUNK = 500  # ids per IN (...) list

    def _fork_runs(self, conn: Any, key: str, call_id: str) -> list[Any]:
        """The runs of ``call_id`` by forks at a step whose request had ``key`` (newest first).

        A fork shares its parent's steps up to its fork point (``chats.fork``'s ``step``)
        with no request of its own for them, so its run of a call of a shared response (a
        fork with other arguments) has no ``model_requests`` row with the key: found
        through the parent links (forks of forks too)."""
        frontier = set(
            conn.execute("SELECT chat_id, step FROM model_requests WHERE key = ?", (key,))
        )
        found: set[tuple[str, int]] = set()
        for _ in range(self._FORK_DEPTH):
            parents = sorted({chat for chat, _ in frontier})
            steps: dict[str, list[int]] = {}
            for chat, step in frontier:
                steps.setdefault(chat, []).append(int(step))
            reached: set[tuple[str, int]] = set()
            for i in range(0, len(parents), self._CHUNK):
                chunk = parents[i : i + self._CHUNK]
                for fork_id, parent_id, fork in conn.execute(
                    "SELECT id, parent_id, fork FROM chats WHERE parent_id IN "
                    f"({', '.join('?' * len(chunk))})",
                    chunk,
                ).fetchall():
                    point = (codec.loads(fork) or {}).get("step") if fork else None
                    if not isinstance(point, int):
                        continue
                    reached.update((fork_id, s) for s in steps[parent_id] if s <= point)
            frontier = reached - found
            if not frontier:
                break
            found |= frontier
        if not found:
            return []
        chats = sorted({chat for chat, _ in found})
        rows: list[Any] = []
        for i in range(0, len(chats), self._CHUNK):
            chunk = chats[i : i + self._CHUNK]
            rows += conn.execute(
                f"SELECT {_CALL_COLUMNS} FROM tool_calls WHERE call_id = ? AND chat_id IN "
                f"({', '.join('?' * len(chunk))}) "
                "AND status IN ('ok', 'error', 'timed_out')",
                [call_id, *chunk],
            ).fetchall()
        rows = [r for r in rows if (r[0], int(r[11])) in found]
        rows.sort(key=lambda r: (r[14] is not None, r[14] or ""), reverse=True)  # newest first
        return rows

    # -- batches (BatchStore) ----------------------------------------------------------
    def add_batch_chat(self, batch_id: str, key: str, chat_id: str) -> str:
        """Record that input ``key`` of batch ``batch_id`` is chat ``chat_id`` (first
        writer wins); returns the chat id recorded for the key."""
        with self._tx() as conn:
            self._insert_batch_chat(conn, batch_id, key, chat_id)
            row = conn.execute(
                "SELECT chat_id FROM batch_chats WHERE batch_id = ? AND key = ?",
                (batch_id, key),
            ).fetchone()
        return str(row[0])

    @staticmethod
    def _insert_batch_chat(conn: Any, batch_id: str, key: str, chat_id: str) -> Any:
        return conn.execute(
            "INSERT INTO batch_chats (batch_id, key, chat_id, created_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (batch_id, key) DO NOTHING",
            (batch_id, key, chat_id, utcnow().isoformat()),
        )

    def batch_chat_job(
        self, info: ChatInfo, system: str | None, state: Mapping[str, Any], batch_id: str, key: str
    ) -> _Job | None:
        """:meth:`create_chat` and :meth:`add_batch_chat` as one job for ``send_async`` (see
        :meth:`write_job`), or ``None``. All or nothing: a chat id or input already recorded
        (another process started this input first) leaves it unwritten, and the caller
        creates and records the chat as usual, which says so."""
        if not self._GROUPS:
            return None

        def plan(conn: Any) -> list[tuple[Any, int]]:
            return [
                (self._insert_chat(conn, info, system, state), 1),
                (self._insert_batch_chat(conn, batch_id, key, info.id), 1),
            ]

        return _Job(info.id, plan)

    def batch_chats(self, batch_id: str) -> dict[str, str]:
        """Every input of batch ``batch_id`` recorded so far: key -> chat id."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT key, chat_id FROM batch_chats WHERE batch_id = ?", (batch_id,)
            ).fetchall()
        return {str(k): str(c) for k, c in rows}

    def iter_events(
        self,
        chat_id: str | None = None,
        *,
        calls: dict[str, ToolCall] | None = None,
        untaken: bool = False,
        running: bool = False,
    ) -> Iterator[Event]:
        """Stored events, rebuilt, per chat in ``seq`` order (``nbagent.read_log(store)``).

        Events stored by the rows they refer to (see the module docstring) come
        back equal to the events the chat emitted.

        Args:
            chat_id: One chat (``StoreError`` if unknown), else every chat, oldest first.
            calls: Existing ``ToolCall`` objects of ``chat_id`` for the events to refer to.
            untaken: Also a decision made through the store (``store.approve``, the inbox)
                that no chat has taken yet, as the ``ApprovalDecided`` (``elsewhere``) its
                chat will emit when it does, after the chat's own events (what
                ``read_log`` reads: the decision is made, whether or not the chat ran on).
            running: Also the calls claimed and not finished (their rows ``running``),
                whose start event is written only with their finish (:meth:`_claims`):
                a ``ToolCallStarted`` at the claim's time, and for a claim whose owner is
                gone (``abandoned``: what ``Chat.load`` reports in doubt) the in-doubt
                ``ToolCallFinished`` its next load records (what ``read_log`` reads: the
                call runs now, or its outcome is unknown). The store is not changed.
        """
        if chat_id is None:
            ids = [c.id for c in self.chats()]
        else:
            with self._read() as conn:
                if conn.execute("SELECT 1 FROM chats WHERE id = ?", (chat_id,)).fetchone() is None:
                    raise self._unknown_chat(conn, chat_id)
            ids = [chat_id]
        for cid in ids:
            with self._read() as conn:
                rows = conn.execute(
                    "SELECT seq, type, ts, json FROM events WHERE chat_id = ? ORDER BY seq",
                    (cid,),
                ).fetchall()
                call_rows = conn.execute(
                    f"SELECT seq, {_CALL_COLUMNS} FROM tool_calls WHERE chat_id = ? ORDER BY seq",
                    (cid,),
                ).fetchall()
                messages = conn.execute(
                    "SELECT idx, turn, json, seq, ts FROM messages WHERE chat_id = ?", (cid,)
                ).fetchall()
                stored = [(r[0], _stored_call(r[1:], conn), r[1 + _RESULT]) for r in call_rows]
                known = calls if calls is not None and chat_id is not None else None
                events = codec.decode_events(
                    cid, rows, messages, stored, known, lambda d: _with_bytes(conn, d)
                )
                if untaken:
                    events += self._untaken(conn, cid, events)
                if running:
                    events += self._claims(cid, events, [sc for _seq, sc, _r in stored])
            yield from events

    def _untaken(self, conn: Any, chat_id: str, events: list[Event]) -> list[Event]:
        """The store's decisions on ``chat_id``'s calls that no chat has taken yet, as the
        events taking them would be (``iter_events(untaken=True)``)."""
        rows = conn.execute(
            "SELECT c.call_id, c.decision FROM tool_calls c WHERE c.chat_id = ? "
            "AND c.decision IS NOT NULL AND EXISTS (SELECT 1 FROM decisions d "
            "WHERE d.chat_id = c.chat_id AND d.call_id = c.call_id AND d.applied = 0)",
            (chat_id,),
        ).fetchall()
        if not rows:
            return []
        decided = {e.call.id for e in events if isinstance(e, ApprovalDecided)}
        requested = {e.call.id: e for e in events if isinstance(e, ToolCallRequested)}
        seq = max((e.seq for e in events), default=0)
        out: list[Event] = []
        for call_id, data in rows:
            decision = codec.decision_in(codec.loads(data))
            asked = requested.get(call_id)
            if decision is None or asked is None or call_id in decided:
                continue
            seq += 1
            out.append(
                ApprovalDecided(
                    chat_id=chat_id,
                    seq=seq,
                    ts=decision.at,
                    call=asked.call,
                    decision=decision,
                    turn=asked.turn,
                    elsewhere=True,
                )
            )
        return out

    def _claims(self, chat_id: str, events: list[Event], stored: list[StoredCall]) -> list[Event]:
        """``chat_id``'s calls claimed and not finished, as events after the chat's own
        (``iter_events(running=True)``): a ``ToolCallStarted`` at the claim's time unless
        the stored events have the start already (its run step and mode are not stored
        before its finish: unknown), then, for a claim whose owner is gone (the check
        ``Chat.load`` makes: :func:`~nbagent.store._process.abandoned`), the
        ``ToolCallFinished`` with status ``in_doubt`` the next load records, at the time
        it was found so. A call rerun after such a load (``idempotent``) reads as it is."""
        claimed = [sc for sc in stored if sc.status == "running" and sc.claimed_by is not None]
        if not claimed:
            return []
        requested = {e.call.id: e for e in events if isinstance(e, ToolCallRequested)}
        last: dict[str, Event] = {}  # each call's latest start, finish or doubt
        for e in events:
            if isinstance(e, ToolCallStarted | ToolCallFinished | CallInDoubt):
                last[e.call.id] = e
        seq = max((e.seq for e in events), default=0)
        now = utcnow()
        out: list[Event] = []
        for sc in claimed:
            asked = requested.get(sc.id)
            if asked is None:
                continue
            call, at = asked.call, sc.claimed_at or now
            if not isinstance(last.get(sc.id), ToolCallStarted):
                seq += 1
                out.append(
                    ToolCallStarted(
                        chat_id=chat_id,
                        seq=seq,
                        ts=at,
                        call=call,
                        step=None,  # type: ignore[arg-type]  # unknown before its finish
                        turn=asked.turn,
                        mode=None,  # type: ignore[arg-type]
                        arguments=call.effective_arguments,
                    )
                )
            if not abandoned(sc, self.claim_timeout):
                continue
            content = in_doubt_content(call, sc)
            seq += 1
            out.append(
                ToolCallFinished(
                    chat_id=chat_id,
                    seq=seq,
                    ts=now,
                    call=call,
                    step=asked.step,
                    turn=asked.turn,
                    status="in_doubt",
                    result=ToolResultMessage(
                        call.id, content, True, "in_doubt", call.name, turn=asked.turn
                    ),
                    error="outcome unknown: the process running it stopped",
                    duration_ms=None,
                    started_at=at,
                    mode=None,
                )
            )
        return out


def in_doubt_content(call: ToolCall, stored: StoredCall) -> str:
    """What the model is told about a call whose outcome is unknown."""
    when = f" at {stored.claimed_at.isoformat()}" if stored.claimed_at else ""
    return codec.dumps(
        {
            "status": "in_doubt",
            "tool": call.name,
            "message": (
                f"The outcome of {call.name} is unknown: it was started{when}, but the process "
                "running it stopped before recording a result. It may or may not have taken effect."
            ),
            "instruction": "Do not assume it succeeded or failed; check its effect before calling "
            "it again, or ask the user.",
        }
    )


__all__ = ["SQLStore", "in_doubt_content"]
