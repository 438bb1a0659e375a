"""The PostgreSQL store's schema: the stores' one list of migrations, in PostgreSQL's words.

Migration ``n`` here is migration ``n`` of :mod:`nbagent.store._migrations`
(same function, same tables, columns and indexes), run through
:class:`_Postgres`, a connection that says the few words PostgreSQL spells
differently: ``bytea`` for ``BLOB``, an identity column for ``INTEGER PRIMARY
KEY AUTOINCREMENT``, no ``WITHOUT ROWID``, ``%s`` placeholders. JSON columns
hold exactly the codec's text and timestamps are ISO 8601 text in UTC, as in
SQLite, so the shared statements of :mod:`nbagent.store._sql` read and compare
them alike. What only PostgreSQL has is written in the migration, behind
:func:`~nbagent.store._migrations.postgres`: ``chats.rowid`` made explicit
(m001), and a trigger that sends ``NOTIFY nbagent_decisions`` for every
decision recorded (m002: how ``store.watch`` learns of decisions without
polling).

:func:`migrate` applies the pending ones in one transaction (PostgreSQL's DDL
is transactional) under a per-schema advisory lock, re-reading the version
once it holds it: two processes opening a fresh database at once apply each
migration once, the second waits and finds nothing to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _migrations as shared
from ._migrations import CHANNEL

_LOCK_SPACE = 0x6E62  # 'nb': the first key of nbagent's advisory locks
MIGRATION_LOCK = (
    f"SELECT pg_advisory_xact_lock({_LOCK_SPACE}, hashtext('migrations ' || current_schema()))"
)
"""Held by the transaction that migrates (one schema at a time, every process)."""

_WORDS = (
    ("INTEGER PRIMARY KEY AUTOINCREMENT", "bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY"),
    (" WITHOUT ROWID", ""),
    ("BLOB", "bytea"),
    ("?", "%s"),
)
"""SQLite's words in the migrations -> PostgreSQL's."""


def chat_lock(key: int) -> str:
    """The statement locking one chat's writes until the transaction ends (``key``: 32 bits)."""
    return f"SELECT pg_advisory_xact_lock({_LOCK_SPACE + 1}, {int(key)})"


def chat_locks(keys: Sequence[int]) -> str:
    """One statement locking several chats' writes until the transaction ends, in the order
    of ``keys`` (``unnest`` gives an array's elements in order, one lock a row): a group
    commit's, its keys sorted so that two transactions never wait on each other in a
    cycle. One statement, not one per chat: each costs the server a parse and a plan."""
    if len(keys) == 1:
        return chat_lock(keys[0])
    listed = ", ".join(str(int(k)) for k in keys)
    return f"SELECT pg_advisory_xact_lock({_LOCK_SPACE + 1}, k) FROM unnest(ARRAY[{listed}]) k"


class _Postgres:
    """A psycopg connection running the migrations' statements in PostgreSQL's words."""

    postgres = True

    def __init__(self, raw: Any):
        self.raw = raw

    def execute(self, sql: str, params: Any = None) -> Any:
        for sqlite, pg in _WORDS:
            sql = sql.replace(sqlite, pg)
        return self.raw.execute(sql, params)


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
    with conn.transaction():
        conn.execute(MIGRATION_LOCK)
        current = schema_version(conn)
        if current < 0:
            raise ValueError("not an nbagent store")
        if current > shared.SCHEMA_VERSION:
            raise ValueError(f"schema version {current}")
        return shared.apply(_Postgres(conn), upto)


__all__ = ["CHANNEL", "chat_lock", "migrate", "schema_version"]
