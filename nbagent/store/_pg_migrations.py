"""The PostgreSQL store's schema, as the same ordered migrations as SQLite's.

Migration ``n`` here means what migration ``n`` of
:mod:`nbagent.store._migrations` means (same name, same tables, columns and
indexes), written for PostgreSQL: ``text`` where SQLite has ``TEXT`` (JSON
columns hold exactly the codec's text, timestamps ISO 8601 in UTC, as in
SQLite: the shared statements of :mod:`nbagent.store._sql` read and compare
them alike), ``integer``/``bigint`` for integers and flags, ``bytea`` for blob
bytes, an identity column where SQLite has a ``rowid`` (``chats.rowid``: the
order chats were created in). Two additions only PostgreSQL has: a trigger
that sends ``NOTIFY nbagent_decisions`` for every decision recorded (how
``store.watch`` learns of decisions without polling; m002, with the table),
and a per-schema advisory lock held while migrating.

:func:`migrate` applies the pending ones in one transaction (PostgreSQL's DDL
is transactional) under a transaction-scoped advisory lock, re-reading the
version once it holds it: two processes opening a fresh database at once
apply each migration once, the second waits and finds nothing to do.

**Adding a migration** (say ``m009_recordings``): append the SQLite function
to ``_migrations.MIGRATIONS`` and a ``("m009_recordings", (statements...))``
pair here; ``tests/store/test_postgres_schema.py`` checks both lists name the same
migrations in the same order, so one without the other fails the suite.
"""

from __future__ import annotations

from typing import Any

from .._events import utcnow

CHANNEL = "nbagent_decisions"
"""The ``NOTIFY`` channel announcing every recorded decision (JSON ``{id, chat, call}``)."""

_LOCK_SPACE = 0x6E62  # 'nb': the first key of nbagent's advisory locks
MIGRATION_LOCK = (
    f"SELECT pg_advisory_xact_lock({_LOCK_SPACE}, hashtext('migrations ' || current_schema()))"
)
"""Held by the transaction that migrates (one schema at a time, every process)."""


def chat_lock(key: int) -> str:
    """The statement locking one chat's writes until the transaction ends (``key``: 32 bits)."""
    return f"SELECT pg_advisory_xact_lock({_LOCK_SPACE + 1}, {int(key)})"


MIGRATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "m001_initial",
        (
            """CREATE TABLE chats (
                id text PRIMARY KEY,
                created_at text NOT NULL,
                updated_at text NOT NULL,
                provider text NOT NULL,
                model text NOT NULL,
                system text,
                title text,
                state text NOT NULL DEFAULT '{}',
                rowid bigint GENERATED ALWAYS AS IDENTITY
            )""",
            """CREATE TABLE messages (
                chat_id text NOT NULL REFERENCES chats(id),
                idx integer NOT NULL,
                turn integer NOT NULL,
                role text NOT NULL,
                json text NOT NULL,
                PRIMARY KEY (chat_id, idx)
            )""",
            """CREATE TABLE tool_calls (
                chat_id text NOT NULL REFERENCES chats(id),
                call_id text NOT NULL,
                seq integer NOT NULL,
                name text NOT NULL,
                arguments text NOT NULL,
                raw_arguments text,
                parse_error text,
                status text NOT NULL,
                approval text,
                decision text,
                result text,
                turn integer NOT NULL,
                step integer NOT NULL,
                requested_at text,
                started_at text,
                finished_at text,
                PRIMARY KEY (chat_id, call_id)
            )""",
            """CREATE TABLE events (
                chat_id text NOT NULL REFERENCES chats(id),
                seq integer NOT NULL,
                type text NOT NULL,
                ts text NOT NULL,
                json text NOT NULL,
                PRIMARY KEY (chat_id, seq)
            )""",
        ),
    ),
    (
        "m002_claims_and_decisions",
        (
            "ALTER TABLE tool_calls ADD COLUMN gated integer NOT NULL DEFAULT 0",
            "UPDATE tool_calls SET gated = 1 WHERE (approval::jsonb ->> 'required')::boolean",
            "ALTER TABLE tool_calls ADD COLUMN claimed_by text",
            "ALTER TABLE tool_calls ADD COLUMN claimed_at text",
            """CREATE TABLE decisions (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                chat_id text NOT NULL,
                call_id text NOT NULL,
                verdict text NOT NULL CHECK (verdict IN ('approved', 'denied')),
                decided_by text NOT NULL,
                at text NOT NULL,
                reason text,
                arguments text,
                source text NOT NULL,
                applied integer NOT NULL DEFAULT 0,
                applied_at text,
                error text,
                FOREIGN KEY (chat_id, call_id) REFERENCES tool_calls(chat_id, call_id)
            )""",
            """INSERT INTO decisions (chat_id, call_id, verdict, decided_by, at, reason, arguments,
                                     source, applied, applied_at)
               SELECT chat_id, call_id, decision::jsonb ->> 'verdict', decision::jsonb ->> 'by',
                      decision::jsonb ->> 'at', decision::jsonb ->> 'reason',
                      (decision::jsonb -> 'arguments')::text, 'chat', 1, decision::jsonb ->> 'at'
               FROM tool_calls WHERE decision IS NOT NULL""",
            f"""CREATE FUNCTION nbagent_decision_notify() RETURNS trigger
                LANGUAGE plpgsql AS $$
                BEGIN
                    PERFORM pg_notify('{CHANNEL}', json_build_object(
                        'id', NEW.id, 'chat', NEW.chat_id, 'call', NEW.call_id)::text);
                    RETURN NULL;
                END $$""",
            """CREATE TRIGGER decisions_notify AFTER INSERT ON decisions
                FOR EACH ROW EXECUTE FUNCTION nbagent_decision_notify()""",
        ),
    ),
    (
        "m003_tools_and_indexes",
        (
            "ALTER TABLE chats ADD COLUMN tools text",
            "CREATE INDEX tool_calls_pending ON tool_calls(chat_id) "
            "WHERE status = 'awaiting_approval'",
            "CREATE INDEX tool_calls_call_id ON tool_calls(call_id)",
            "CREATE INDEX decisions_call ON decisions(chat_id, call_id)",
        ),
    ),
    ("m004_calls_are_their_requested_events", ()),  # a change of format only (see SQLite's)
    (
        "m005_messages_are_their_events",
        (
            "ALTER TABLE messages ADD COLUMN seq integer",
            "ALTER TABLE messages ADD COLUMN ts text",
            "DROP INDEX tool_calls_call_id",
            "CREATE INDEX tool_calls_gated_call_id ON tool_calls(call_id) WHERE gated = 1",
        ),
    ),
    (
        "m006_arguments_stored_once",
        (
            """CREATE TABLE call_arguments (
                chat_id text NOT NULL,
                call_id text NOT NULL,
                arguments text NOT NULL,
                PRIMARY KEY (chat_id, call_id),
                FOREIGN KEY (chat_id, call_id) REFERENCES tool_calls(chat_id, call_id)
            )""",
        ),
    ),
    (
        "m007_call_server",
        (
            "ALTER TABLE tool_calls ADD COLUMN server text",
            "ALTER TABLE tool_calls ADD COLUMN hosted integer NOT NULL DEFAULT 0",
        ),
    ),
    (
        "m008_blobs",
        (
            """CREATE TABLE blobs (
                sha256 text PRIMARY KEY,
                media_type text NOT NULL,
                size bigint NOT NULL,
                data bytea NOT NULL,
                created_at text NOT NULL
            )""",
        ),
    ),
    (
        "m009_recordings",
        (
            """CREATE TABLE recordings (
                key text PRIMARY KEY,
                chat_id text NOT NULL,
                step integer NOT NULL,
                model text NOT NULL,
                fingerprint text NOT NULL,
                response text NOT NULL,
                deltas text,
                created_at text NOT NULL
            )""",
            "CREATE INDEX recordings_created ON recordings (created_at)",
            """CREATE TABLE model_requests (
                chat_id text NOT NULL,
                step integer NOT NULL,
                key text NOT NULL,
                replayed integer NOT NULL,
                PRIMARY KEY (chat_id, step)
            )""",
            "CREATE INDEX model_requests_key ON model_requests (key)",
        ),
    ),
    (
        "m010_fork_parents",
        (
            "ALTER TABLE chats ADD COLUMN parent_id text",
            "ALTER TABLE chats ADD COLUMN fork text",
            "CREATE INDEX chats_parent ON chats (parent_id) WHERE parent_id IS NOT NULL",
        ),
    ),
    (
        "m011_batch_chats",
        (
            """CREATE TABLE batch_chats (
                batch_id text NOT NULL,
                key text NOT NULL,
                chat_id text NOT NULL,
                created_at text NOT NULL,
                PRIMARY KEY (batch_id, key)
            )""",
        ),
    ),
    ("m012_always_allow_rules", ()),  # a change of format only (see SQLite's)
)
"""Ordered; migration ``n`` (1-based) brings the schema to version ``n``. Append only."""

SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(conn: Any) -> int:
    """The schema version in the connection's current schema (0: empty, -1: not a store).

    ``conn`` is a psycopg connection. Only reads.
    """
    tables = {
        r[0]
        for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
    }
    if "schema_migrations" not in tables:
        return 0 if not tables else -1
    row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
    return int(row[0])


def migrate(conn: Any, upto: int | None = None) -> list[int]:
    """Apply the pending migrations (up to version ``upto``) in one transaction, under the
    migration lock; returns the versions applied (none when another process was first).

    ``conn`` is a psycopg connection in autocommit mode.

    Raises:
        ValueError: The schema has tables and is not an nbagent store (nothing
            is changed), or was written by a newer nbagent.
    """
    target = SCHEMA_VERSION if upto is None else upto
    applied: list[int] = []
    with conn.transaction():
        conn.execute(MIGRATION_LOCK)
        current = schema_version(conn)
        if current < 0:
            raise ValueError("not an nbagent store")
        if current > SCHEMA_VERSION:
            raise ValueError(f"schema version {current}")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            "version integer PRIMARY KEY, name text NOT NULL, applied_at text NOT NULL)"
        )
        for version in range(current + 1, target + 1):
            name, statements = MIGRATIONS[version - 1]
            for sql in statements:
                conn.execute(sql)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (%s, %s, %s)",
                (version, name, utcnow().isoformat()),
            )
            applied.append(version)
    return applied


__all__ = ["CHANNEL", "MIGRATIONS", "SCHEMA_VERSION", "chat_lock", "migrate", "schema_version"]
