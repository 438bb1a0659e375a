"""PostgreSQL's schema: the stores' migrations in PostgreSQL's words, applied once, even by racers.

The schema each store builds from the one list of migrations has the same
tables, columns and indexes. A fresh database is migrated once
under an advisory lock, however many processes open it at the same moment; a
database that is not a store, or was written by a newer nbagent, is refused and
left as it is.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, StoreError
from nbagent.store import PostgresStore, SQLiteStore
from nbagent.store import _migrations as migrations
from nbagent.store import _pg_migrations as pg_migrations


def _rows(dsn: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(sql, params or None)
        return cur.fetchall() if cur.description else []


def test_the_postgres_schema_has_sqlites_tables_columns_and_indexes(
    postgres_dsn: str, tmp_path: Path
) -> None:
    PostgresStore(postgres_dsn).close()
    SQLiteStore(tmp_path / "a.db").close()
    conn = sqlite3.connect(tmp_path / "a.db")
    try:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        sqlite_columns = {
            t: sorted(r[1] for r in conn.execute(f"PRAGMA table_info({t})")) for t in tables
        }
        sqlite_indexes = {
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
            )
        }
    finally:
        conn.close()
    pg_columns: dict[str, list[str]] = {}
    for table, column in _rows(
        postgres_dsn,
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema()",
    ):
        pg_columns.setdefault(table, []).append(column)
    pg_columns = {t: sorted(c) for t, c in pg_columns.items()}
    pg_columns["chats"].remove("rowid")  # SQLite's is implicit
    assert pg_columns == sqlite_columns
    pg_indexes = {
        r[0]
        for r in _rows(
            postgres_dsn,
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND indexname NOT LIKE '%_pkey'",
        )
    }
    assert pg_indexes == sqlite_indexes
    # and both record the same versions, by the same names
    assert _rows(postgres_dsn, "SELECT version, name FROM schema_migrations ORDER BY version") == [
        (i + 1, fn.__name__) for i, fn in enumerate(migrations.MIGRATIONS)
    ]


_OPEN = """
import sys, time
from nbagent.store import PostgresStore
while time.time() < float(sys.argv[2]):
    pass
s = PostgresStore(sys.argv[1])
print(s.schema_version)
s.close()
"""


def test_processes_opening_a_fresh_database_at_once_migrate_it_once(postgres_dsn: str) -> None:
    import time

    start = time.time() + 1.5  # every process starts its open at the same moment
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _OPEN, postgres_dsn, str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [o[1] for o in outs]
    assert [o[0].strip() for o in outs] == [str(migrations.SCHEMA_VERSION)] * 4
    versions = _rows(postgres_dsn, "SELECT version FROM schema_migrations ORDER BY version")
    assert versions == [(v,) for v in range(1, migrations.SCHEMA_VERSION + 1)]  # once each
    # a second open applies nothing, and the store works
    with PostgresStore(postgres_dsn) as store:
        chat = Chat(model="demo", store=store)
        chat.ask("hello")
        assert [c.id for c in store.chats()] == [chat.id]
        chat.close()
    assert len(_rows(postgres_dsn, "SELECT * FROM schema_migrations")) == migrations.SCHEMA_VERSION


def test_an_empty_database_migrates_step_by_step(postgres_dsn: str) -> None:
    """Each version applies on top of the one before (as a store of an older nbagent would be)."""
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        assert pg_migrations.schema_version(conn) == 0
        for version in range(1, migrations.SCHEMA_VERSION + 1):
            assert pg_migrations.migrate(conn, upto=version) == [version]
            assert pg_migrations.schema_version(conn) == version
        assert pg_migrations.migrate(conn) == []
    with PostgresStore(postgres_dsn) as store:
        assert store.schema_version == migrations.SCHEMA_VERSION


def test_a_failing_migration_changes_nothing(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def m004_broken(conn: Any) -> None:
        conn.execute("SELECT no_such_column")

    broken = (*migrations.MIGRATIONS[:3], m004_broken)
    monkeypatch.setattr(migrations, "MIGRATIONS", broken)
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", 4)
    with pytest.raises(StoreError, match="no_such_column"):
        PostgresStore(postgres_dsn)
    tables = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    assert _rows(postgres_dsn, tables) == []  # one transaction: not even version 1


def test_a_database_that_is_not_a_store_is_refused_untouched(postgres_dsn: str) -> None:
    _rows(postgres_dsn, "CREATE TABLE customers (id integer PRIMARY KEY)")
    with pytest.raises(StoreError, match=r"not an nbagent store.*search_path"):
        PostgresStore(postgres_dsn)
    tables = _rows(
        postgres_dsn,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()",
    )
    assert tables == [("customers",)]


def test_another_schema_of_the_same_database_is_a_store_of_its_own(postgres_dsn: str) -> None:
    _rows(postgres_dsn, "CREATE TABLE customers (id integer PRIMARY KEY)")
    _rows(postgres_dsn, "CREATE SCHEMA agents")
    dsn = postgres_dsn + "?options=-csearch_path%3Dagents"
    with PostgresStore(dsn) as store:
        chat = Chat(model="demo", store=store)
        chat.ask("hi")
        chat.close()
        assert len(store.chats()) == 1
    assert _rows(postgres_dsn, "SELECT COUNT(*) FROM agents.chats") == [(1,)]


def test_a_newer_store_is_refused_untouched(postgres_dsn: str) -> None:
    PostgresStore(postgres_dsn).close()
    _rows(
        postgres_dsn,
        "INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'm099', 'x')",
    )
    with pytest.raises(StoreError, match=r"newer nbagent \(schema version 99"):
        PostgresStore(postgres_dsn)
    assert _rows(postgres_dsn, "SELECT MAX(version) FROM schema_migrations") == [(99,)]


def test_connections_opening_fresh_databases_at_the_same_instant_migrate_each_once(
    postgres_server: Any,
) -> None:
    """Threads meet at a barrier, then open the same fresh database (more exactly at once
    than processes can): every open succeeds and each migration is applied once."""
    import threading

    def open_it(
        dsn: str, barrier: threading.Barrier, stores: list[Any], errors: list[BaseException]
    ) -> None:
        barrier.wait()
        try:
            stores.append(PostgresStore(dsn))
        except BaseException as exc:
            errors.append(exc)

    for _ in range(3):
        dsn = postgres_server.new_database()
        barrier = threading.Barrier(8)
        errors: list[BaseException] = []
        stores: list[PostgresStore] = []
        threads = [
            threading.Thread(target=open_it, args=(dsn, barrier, stores, errors)) for _ in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s in stores:
            s.close()
        assert errors == []
        versions = _rows(dsn, "SELECT version FROM schema_migrations ORDER BY version")
        assert versions == [(v,) for v in range(1, migrations.SCHEMA_VERSION + 1)]


def test_a_role_that_cannot_create_tables_is_told_what_to_grant(
    postgres_dsn: str, postgres_server: Any
) -> None:
    with postgres_server.admin() as conn:
        conn.execute("CREATE ROLE reader LOGIN PASSWORD 'reader-pw'")
    dsn = postgres_dsn.replace("nbagent:", "reader:").replace(
        postgres_dsn.split(":")[2].split("@")[0], "reader-pw"
    )
    try:
        with pytest.raises(StoreError, match=r"cannot create nbagent's tables.*Grant it CREATE"):
            PostgresStore(dsn)
    finally:
        with postgres_server.admin() as conn:
            conn.execute("DROP ROLE reader")


@pytest.mark.parametrize("schema", ["nbagent", "MyAgents"])
def test_a_search_path_naming_a_missing_schema_creates_it(postgres_dsn: str, schema: str) -> None:
    """The 'not an nbagent store' error's advice (``?options=-csearch_path%3Dnbagent``) on a
    database with other tables: the schema did not exist, so every ``CREATE TABLE`` failed
    with "no schema has been selected to create in". It is created (once, by racers too)."""
    from urllib.parse import quote

    _rows(postgres_dsn, "CREATE TABLE customers (id integer PRIMARY KEY)")
    with pytest.raises(StoreError, match="created if missing"):
        PostgresStore(postgres_dsn)
    path = schema if schema.islower() else f'"{schema}"'
    dsn = postgres_dsn + "?options=" + quote(f"-csearch_path={path}", safe="")
    import threading

    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def open_it() -> None:
        barrier.wait()
        try:
            PostgresStore(dsn).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with PostgresStore(dsn) as store:
        chat = Chat(model="demo", store=store)
        chat.ask("hi")
        chat.close()
        assert len(store.chats()) == 1
    rows = _rows(
        postgres_dsn,
        "SELECT table_schema, COUNT(*) FROM information_schema.tables "
        "WHERE table_name IN ('chats', 'customers') GROUP BY table_schema ORDER BY 1",
    )
    assert sorted(rows) == sorted([(schema, 1), ("public", 1)])


def test_a_role_that_cannot_create_the_missing_schema_is_told_to_create_it(
    postgres_dsn: str, postgres_server: Any
) -> None:
    with postgres_server.admin() as conn:
        conn.execute("CREATE ROLE reader LOGIN PASSWORD 'reader-pw'")
    dsn = postgres_dsn.replace("nbagent:", "reader:").replace(
        postgres_dsn.split(":")[2].split("@")[0], "reader-pw"
    )
    try:
        with pytest.raises(StoreError, match=r"'agents', which does not exist.*Create it first"):
            PostgresStore(dsn + "?options=-csearch_path%3Dagents")
    finally:
        with postgres_server.admin() as conn:
            conn.execute("DROP ROLE reader")
