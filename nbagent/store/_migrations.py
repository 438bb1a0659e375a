"""The stores' schema, as ordered migrations: how each version of a store came to be.

Each migration is a function (``m001_initial``, ``m002_...``) that brings the
schema from the version before it to its own; :data:`MIGRATIONS` lists them in
order and only ever grows. They are written once, for both stores, in
SQLite's words: the PostgreSQL store runs them through a connection that says
the few words PostgreSQL spells differently (:mod:`nbagent.store._pg_migrations`,
which also adds what only PostgreSQL has: :func:`postgres` tells a migration
where it runs). :func:`migrate` applies the pending ones in one transaction
and records each in ``schema_migrations``; the store calls it when it opens a
file written by an older version, and refuses a file whose version is above
:data:`SCHEMA_VERSION` (a newer nbagent wrote it).

The schema each version reaches is described in :mod:`nbagent.store._sqlite`;
what the rows hold (the storage format) in :mod:`nbagent.store._codec`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from .._events import utcnow

CHANNEL = "nbagent_decisions"
"""PostgreSQL's ``NOTIFY`` channel for every recorded decision (JSON ``{id, chat, call}``)."""


def postgres(conn: Any) -> bool:
    """Whether a migration runs on PostgreSQL (its connection says so), not SQLite."""
    return bool(getattr(conn, "postgres", False))


def _announce(conn: Any, trigger: str, table: str, fields: str, name: str, when: str = "") -> None:
    """PostgreSQL: ``trigger`` on ``table``, which NOTIFYs each row inserted (``when``: those
    matching) on :data:`CHANNEL`, with ``fields`` (``'key', NEW.column, ...``) as JSON, through
    the function ``nbagent_<name>_notify``."""
    conn.execute(
        f"""CREATE FUNCTION nbagent_{name}_notify() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM pg_notify('{CHANNEL}', json_build_object({fields})::text);
                RETURN NULL;
            END $$"""
    )
    condition = f" WHEN ({when})" if when else ""
    conn.execute(
        f"""CREATE TRIGGER {trigger} AFTER INSERT ON {table} FOR EACH ROW{condition}
            EXECUTE FUNCTION nbagent_{name}_notify()"""
    )


def m001_initial(conn: Any) -> None:
    """Chats, their transcripts, their tool calls and their events."""
    for sql in (
        """CREATE TABLE chats (
            id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            system TEXT,
            title TEXT,
            state TEXT NOT NULL DEFAULT '{}'
        )""",
        """CREATE TABLE messages (
            chat_id TEXT NOT NULL REFERENCES chats(id),
            idx INTEGER NOT NULL,
            turn INTEGER NOT NULL,
            role TEXT NOT NULL,
            json TEXT NOT NULL,
            PRIMARY KEY (chat_id, idx)
        ) WITHOUT ROWID""",
        """CREATE TABLE tool_calls (
            chat_id TEXT NOT NULL REFERENCES chats(id),
            call_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            name TEXT NOT NULL,
            arguments TEXT NOT NULL,
            raw_arguments TEXT,
            parse_error TEXT,
            status TEXT NOT NULL,
            approval TEXT,
            decision TEXT,
            result TEXT,
            turn INTEGER NOT NULL,
            step INTEGER NOT NULL,
            requested_at TEXT,
            started_at TEXT,
            finished_at TEXT,
            PRIMARY KEY (chat_id, call_id)
        ) WITHOUT ROWID""",
        """CREATE TABLE events (
            chat_id TEXT NOT NULL REFERENCES chats(id),
            seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            ts TEXT NOT NULL,
            json TEXT NOT NULL,
            PRIMARY KEY (chat_id, seq)
        ) WITHOUT ROWID""",
    ):
        conn.execute(sql)
    if postgres(conn):  # SQLite's implicit rowid (the order chats were created in), explicit
        conn.execute("ALTER TABLE chats ADD COLUMN rowid bigint GENERATED ALWAYS AS IDENTITY")


def m002_claims_and_decisions(conn: Any) -> None:
    """Claims (who runs a call) and the decisions table (decisions made outside a chat)."""
    conn.execute("ALTER TABLE tool_calls ADD COLUMN gated INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE tool_calls ADD COLUMN claimed_by TEXT")
    conn.execute("ALTER TABLE tool_calls ADD COLUMN claimed_at TEXT")
    conn.execute(
        """CREATE TABLE decisions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            chat_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            verdict TEXT NOT NULL CHECK (verdict IN ('approved', 'denied')),
            decided_by TEXT NOT NULL,
            at TEXT NOT NULL,
            reason TEXT,
            arguments TEXT,
            source TEXT NOT NULL,
            applied INTEGER NOT NULL DEFAULT 0,
            applied_at TEXT,
            error TEXT,
            FOREIGN KEY (chat_id, call_id) REFERENCES tool_calls(chat_id, call_id)
        )"""
    )
    if postgres(conn):  # every decision recorded is announced (LISTEN/NOTIFY: store.watch)
        _announce(
            conn,
            "decisions_notify",
            "decisions",
            "'id', NEW.id, 'chat', NEW.chat_id, 'call', NEW.call_id",
            "decision",
        )
        return  # every PostgreSQL store began at version 8 or later: no older rows to carry
    # Calls an older version recorded: gated ones are marked, their decisions applied ones.
    conn.execute("UPDATE tool_calls SET gated = 1 WHERE json_extract(approval, '$.required') = 1")
    conn.execute(
        """INSERT INTO decisions (chat_id, call_id, verdict, decided_by, at, reason, arguments,
                                  source, applied, applied_at)
           SELECT chat_id, call_id, json_extract(decision, '$.verdict'),
                  json_extract(decision, '$.by'), json_extract(decision, '$.at'),
                  json_extract(decision, '$.reason'), json(json_extract(decision, '$.arguments')),
                  'chat', 1, json_extract(decision, '$.at')
           FROM tool_calls WHERE decision IS NOT NULL"""
    )


def m003_tools_and_indexes(conn: Any) -> None:
    """Tool schemas per chat (to check edited arguments), and indexes for cross-chat queries."""
    conn.execute("ALTER TABLE chats ADD COLUMN tools TEXT")
    conn.execute(
        "CREATE INDEX tool_calls_pending ON tool_calls(chat_id) WHERE status = 'awaiting_approval'"
    )
    conn.execute("CREATE INDEX tool_calls_call_id ON tool_calls(call_id)")
    conn.execute("CREATE INDEX decisions_call ON decisions(chat_id, call_id)")


def m004_calls_are_their_requested_events(conn: Any) -> None:
    """From version 4 some events are stored by the rows that already hold them.

    A ``ToolCallRequested`` has no ``events`` row: its ``tool_calls`` row (whose
    ``seq`` and ``requested_at`` are the event's) is rebuilt into it; and a
    ``ToolCallFinished`` (other than a denial) leaves out the result that its
    call's ``result`` column holds. Rows written before stay valid as they are
    (both forms are read). No data changes: the version changes so that an
    older nbagent, which would miss those events, refuses the file.
    """


def m005_messages_are_their_events(conn: Any) -> None:
    """Messages hold their ``MessageAdded`` events; the call-id index covers gated calls.

    From version 5 a message row written with its event has that event's
    ``seq`` and ``ts`` (and no ``events`` row), and started events may ride in
    their finishing event's row (``"started"``). Older rows keep their form
    (``seq`` NULL: the ``events`` row is there) and are read as before.
    """
    conn.execute("ALTER TABLE messages ADD COLUMN seq INTEGER")
    conn.execute("ALTER TABLE messages ADD COLUMN ts TEXT")
    conn.execute("DROP INDEX tool_calls_call_id")
    conn.execute("CREATE INDEX tool_calls_gated_call_id ON tool_calls(call_id) WHERE gated = 1")


def m006_arguments_stored_once(conn: Any) -> None:
    """A call's arguments are stored once, and a large one is never rewritten.

    From version 6 a message row names its calls (id and name) without their
    arguments, and a ``ToolCallStarted`` leaves out the arguments its call
    runs with (its row or its decision holds them); both come back from the
    call when read. Arguments longer than a page's worth go to
    ``call_arguments``, a row written once, with ``tool_calls.arguments`` left
    empty: a call's row is updated three or four times (decision, claim,
    result), and SQLite rewrites all of a row's pages on each update. Older
    rows keep their form (arguments inline, and again in the message) and are
    read as before; an older nbagent would miss the arguments, so it refuses
    the file.
    """
    conn.execute(
        """CREATE TABLE call_arguments (
            chat_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            arguments TEXT NOT NULL,
            PRIMARY KEY (chat_id, call_id),
            FOREIGN KEY (chat_id, call_id) REFERENCES tool_calls(chat_id, call_id)
        )"""
    )


def m007_call_server(conn: Any) -> None:
    """A call's MCP server label and whether the provider runs it (a hosted call).

    ``server`` is ``NULL`` and ``hosted`` 0 for every call written before: local
    tools. A hosted call (an OpenAI ``mcp_approval_request``) is decided like
    any gated call but never claimed or run by a process; an older nbagent
    would try to run it, so it refuses the file.
    """
    conn.execute("ALTER TABLE tool_calls ADD COLUMN server TEXT")
    conn.execute("ALTER TABLE tool_calls ADD COLUMN hosted INTEGER NOT NULL DEFAULT 0")


def m008_blobs(conn: Any) -> None:
    """Images and files: their bytes once per SHA-256, messages and results refer to them.

    A message or result with ``parts`` names each part by hash; an older
    nbagent would drop the images, so it refuses the file. A rowid table: a
    blob is large, and SQLite keeps large rows out of a ``WITHOUT ROWID`` b-tree badly.
    """
    conn.execute(
        """CREATE TABLE blobs (
            sha256 TEXT PRIMARY KEY,
            media_type TEXT NOT NULL,
            size BIGINT NOT NULL,
            data BLOB NOT NULL,
            created_at TEXT NOT NULL
        )"""
    )


def m009_recordings(conn: Any) -> None:
    """Record and replay: every model response with its request's key, and each chat's requests.

    ``recordings`` holds one response per request key (``nbagent._recording``:
    the SHA-256 of the request's fingerprint), found by any chat (a rerun cell
    is a new chat). ``model_requests`` says which key each step of each chat
    had, so a call's recorded result is found from the store's call records
    (``tool_calls`` of any chat whose step had that key, same call id).
    """
    for sql in (
        """CREATE TABLE recordings (
            key TEXT PRIMARY KEY,
            chat_id TEXT NOT NULL,
            step INTEGER NOT NULL,
            model TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            response TEXT NOT NULL,
            deltas TEXT,
            created_at TEXT NOT NULL
        )""",
        "CREATE INDEX recordings_created ON recordings (created_at)",
        """CREATE TABLE model_requests (
            chat_id TEXT NOT NULL,
            step INTEGER NOT NULL,
            key TEXT NOT NULL,
            replayed INTEGER NOT NULL,
            PRIMARY KEY (chat_id, step)
        ) WITHOUT ROWID""",
        "CREATE INDEX model_requests_key ON model_requests (key)",
    ):
        conn.execute(sql)


def m010_fork_parents(conn: Any) -> None:
    """A fork's parent link: the chat it was forked from, and where and what it changed.

    ``parent_id`` is the parent chat's id (``NULL`` for a chat that is no fork;
    no foreign key: a parent may live in another store, or be deleted), and
    ``fork`` the :class:`~nbagent.ForkParent` as JSON (step, call, change,
    value). An older nbagent would load a fork without its parent, so it refuses
    the file.
    """
    conn.execute("ALTER TABLE chats ADD COLUMN parent_id TEXT")
    conn.execute("ALTER TABLE chats ADD COLUMN fork TEXT")
    conn.execute("CREATE INDEX chats_parent ON chats(parent_id) WHERE parent_id IS NOT NULL")


def m011_batch_chats(conn: Any) -> None:
    """Batches: which chat runs which input (``nbagent.batch(store=...)`` resumes from it).

    One row per input, written before its chat runs (first writer wins). No
    foreign key to ``chats``: the row names a chat, and a batch that finds the
    chat gone starts the input again.
    """
    conn.execute(
        """CREATE TABLE batch_chats (
            batch_id TEXT NOT NULL,
            key TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (batch_id, key)
        ) WITHOUT ROWID"""
    )


def m012_always_allow_rules(conn: Any) -> None:
    """A chat's ``always_allow`` rules are kept with it (``Chat.load`` restores them).

    From version 12 a chat's ``state`` lists its rules (``"always_allow"``: the tool, and
    ``"when": true`` for a rule that had a predicate, which is code and is not stored), and
    its events may include ``always_allow_changed`` (a rule added or revoked). No data
    changes (a chat written before has no rules stored: it had none that survived a
    reload); an older nbagent cannot read those events and would drop the rules, so it
    refuses the file.
    """


def m013_rules(conn: Any) -> None:
    """A chat's rules (``chat.add_rule``: a tool, a verdict, argument conditions) are kept
    with it (``Chat.load`` applies them again).

    From version 13 a chat's ``state`` lists them (``"rules"``: ``Rule.as_dict()`` each),
    and its events may include ``rule_changed`` (a rule added or removed). No data changes
    (a chat written before has no rules); an older nbagent would drop the rules (and let a
    call a deny rule matches run after a load), so it refuses the file.
    """


def m014_recording_links(conn: Any) -> None:
    """A recorded request's messages by their digest chain, each link stored once.

    Until version 13 every ``recordings`` row listed the digest of every message
    of its request (its ``fingerprint``), so a long chat wrote its whole history
    again with each request. From version 14 a new row's fingerprint names its
    messages by count and chain (``{"n", "chain"}``: all its key needs), and
    ``recording_links`` holds each link of the chain once: the digests of the
    messages a request added (``digests``, JSON ``[[role, digest], ...]``) after
    the request whose chain is ``parent`` (``''``: none), ``n`` messages in all.
    They are read only to say what differs from the nearest recording on a miss.
    Rows written before keep their listed digests and replay as they did; an
    older nbagent could not read the new rows, so it refuses the file.
    """
    conn.execute(
        """CREATE TABLE recording_links (
            chain TEXT PRIMARY KEY,
            parent TEXT NOT NULL,
            n INTEGER NOT NULL,
            digests TEXT NOT NULL
        ) WITHOUT ROWID"""
    )


def m015_inputs(conn: Any) -> None:
    """Pending inputs are rows too: listed, answered and followed from any process.

    ``inputs`` holds one row per input a chat asked for (written with its
    ``input_requested`` event; ``resume``: what a parked 2026-07-28 call is retried
    with, its server's ``request_state`` and the input's key); ``input_answers`` the
    answer each got, first writer wins (one row per input, ``source`` ``chat`` or
    ``store``, ``applied`` as for decisions). On PostgreSQL an answer is announced
    on the decisions' channel (``{"answer": id, "chat": ...}``). The inputs of chats
    written before are carried over from their events.
    """
    conn.execute(
        """CREATE TABLE inputs (
            chat_id TEXT NOT NULL,
            input_id TEXT NOT NULL,
            call_id TEXT,
            kind TEXT NOT NULL,
            tool TEXT,
            server TEXT,
            prompt TEXT NOT NULL,
            content TEXT,
            schema TEXT,
            requested_at TEXT NOT NULL,
            resume TEXT,
            PRIMARY KEY (chat_id, input_id)
        )"""
    )
    conn.execute("CREATE INDEX inputs_input_id ON inputs(input_id)")
    conn.execute(
        """CREATE TABLE input_answers (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            chat_id TEXT NOT NULL,
            input_id TEXT NOT NULL,
            action TEXT NOT NULL CHECK (action IN ('accept', 'decline', 'cancel')),
            data TEXT,
            answered_by TEXT NOT NULL,
            at TEXT NOT NULL,
            reason TEXT,
            source TEXT NOT NULL,
            applied INTEGER NOT NULL DEFAULT 0,
            applied_at TEXT,
            error TEXT
        )"""
    )
    conn.execute(  # one answer per input: the first writer wins (ON CONFLICT DO NOTHING)
        "CREATE UNIQUE INDEX input_answers_one ON input_answers(chat_id, input_id)"
    )
    pg = postgres(conn)
    if pg:
        _announce(
            conn,
            "input_answers_notify",
            "input_answers",
            "'answer', NEW.id, 'chat', NEW.chat_id",
            "input_answer",
        )

    # The inputs (and answers) of chats written before, from their events.
    def text(path: str) -> str:  # a JSON text field of the event row
        keys = path.split(".")
        if pg:
            return "(json::jsonb" + "".join(f" -> '{k}'" for k in keys[:-1]) + f" ->> '{keys[-1]}')"
        return f"json_extract(json, '$.{path}')"

    def obj(key: str) -> str:  # a JSON object field, as JSON text
        if pg:
            return f"(json::jsonb -> '{key}')::text"
        at = f"json, '$.{key}'"
        return (
            f"CASE json_type({at}) WHEN 'text' THEN json_quote(json_extract({at})) "
            f"WHEN 'null' THEN 'null' WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' "
            f"ELSE json_extract({at}) END"
        )

    conn.execute(
        f"""INSERT INTO inputs (chat_id, input_id, call_id, kind, tool, server, prompt, content,
                                schema, requested_at)
            SELECT chat_id, {text("input_id")}, {text("call.id")}, {text("kind")},
                   {text("call.name")}, {text("server")}, COALESCE({text("prompt")}, ''),
                   {obj("content")}, {obj("schema")}, ts
            FROM events WHERE type = 'input_requested' ON CONFLICT DO NOTHING"""
    )
    conn.execute(
        f"""INSERT INTO input_answers (chat_id, input_id, action, data, answered_by, at, reason,
                                       source, applied, applied_at)
            SELECT chat_id, {text("input_id")}, {text("action")}, {obj("data")},
                   COALESCE({text("by")}, 'user'), ts, {text("reason")}, 'chat', 1, ts
            FROM events WHERE type = 'input_answered' ON CONFLICT DO NOTHING"""
    )


def m016_rule_changes_index(conn: Any) -> None:
    """The rule changes of a chat are found without reading its other events.

    A chat driven in one process applies the rules another process added to the
    stored chat meanwhile (``StoreExtension.apply_rules``, at each step), and
    ``Chat.load`` folds them over the chat's state; both read a chat's
    ``rule_changed`` and ``always_allow_changed`` events through this index. No data
    changes.
    """
    conn.execute(
        "CREATE INDEX events_rule_changes ON events(chat_id, seq) "
        "WHERE type IN ('rule_changed', 'always_allow_changed')"
    )


def m017_rule_changes_announced(conn: Any) -> None:
    """PostgreSQL announces each rule change on the decisions' channel (``{"rule": seq,
    "chat": ...}``), so a driven chat reads its rules only when one changed.

    A chat applies the rules another process changed at each step
    (``StoreExtension.apply_rules``); on SQLite ``data_version`` tells whether anything
    was committed elsewhere, without a read. PostgreSQL has no such number: each step
    read the chat's rule changes, a round trip. Now the store's listener counts the
    announcements. Nothing changes on SQLite, nor in any table.
    """
    if postgres(conn):
        when = "NEW.type IN ('rule_changed', 'always_allow_changed')"
        _announce(
            conn,
            "events_rule_notify",
            "events",
            "'rule', NEW.seq, 'chat', NEW.chat_id",
            "rule",
            when,
        )


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    m001_initial,
    m002_claims_and_decisions,
    m003_tools_and_indexes,
    m004_calls_are_their_requested_events,
    m005_messages_are_their_events,
    m006_arguments_stored_once,
    m007_call_server,
    m008_blobs,
    m009_recordings,
    m010_fork_parents,
    m011_batch_chats,
    m012_always_allow_rules,
    m013_rules,
    m014_recording_links,
    m015_inputs,
    m016_rule_changes_index,
    m017_rule_changes_announced,
)
"""Ordered; migration ``n`` (1-based) brings the schema to version ``n``. Append only."""

SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(conn: sqlite3.Connection) -> int:
    """The schema version of an open database (0 for an empty one, -1 for one that is not a store).

    Only reads: a damaged or foreign file is not touched.
    """
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "schema_migrations" not in tables:
        return 0 if not tables else -1
    row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
    return int(row[0])


def migrate(conn: sqlite3.Connection, upto: int | None = None) -> list[int]:
    """Apply the pending migrations (up to version ``upto``) in one transaction.

    ``conn`` must be in autocommit mode (``isolation_level=None``). Returns the
    versions applied.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        applied = apply(conn, upto)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # SQLite ends it itself when the disk is full
            conn.execute("ROLLBACK")
        raise
    return applied


def apply(conn: Any, upto: int | None = None) -> list[int]:
    """Apply the pending migrations (up to version ``upto``) and record each, in the
    transaction ``conn`` is in (either store's); returns the versions applied."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    current = int(
        conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]
    )
    applied = []
    for version in range(current + 1, (SCHEMA_VERSION if upto is None else upto) + 1):
        fn = MIGRATIONS[version - 1]
        fn(conn)
        conn.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
            (version, fn.__name__, utcnow().isoformat()),
        )
        applied.append(version)
    return applied


__all__ = [
    "CHANNEL",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "apply",
    "migrate",
    "postgres",
    "schema_version",
]
