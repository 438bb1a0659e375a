"""The store conformance suite's fixtures: every protocol-level test runs on SQLite and PostgreSQL.

* ``backend`` (parametrized: ``sqlite``, ``postgres``) -> :class:`Backend`: ``url``
  (a file path or a DSN with its password: what ``Chat(store=)``, ``Chat.load``,
  ``open_store`` and ``_agent.py`` take), ``open()``, ``sql(statement, params)``
  (raw access with ``?`` placeholders, committed: to change rows as a hand edit,
  a newer nbagent or a crash would).
* ``store``: ``backend.open()``, closed after the test.

SQLite-only matters (WAL, the file, locks held by another connection, SQLite's
migrations from older files) keep their own ``tmp_path`` fixtures; PostgreSQL's
own (the DSN's password, a server that goes away) are in ``test_postgres.py``.
The PostgreSQL server is the session's (``tests/_postgres.py``): a fresh database
per test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent.store import Store, open_store


class Backend:
    """One kind of store, as a test reaches it."""

    def __init__(self, kind: str, url: str, server: Any = None):
        self.kind = kind
        self.url = url
        self.server = server

    def open(self, **kwargs: Any) -> Store:
        if kwargs:
            from nbagent.store import PostgresStore, SQLiteStore

            cls: Any = SQLiteStore if self.kind == "sqlite" else PostgresStore
            return cls(self.url, **kwargs)  # type: ignore[no-any-return]
        return open_store(self.url)

    def sql(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement outside any store object; its rows (committed)."""
        if self.kind == "sqlite":
            import sqlite3

            conn = sqlite3.connect(self.url)
            try:
                rows = conn.execute(statement, params).fetchall()
                conn.commit()
            finally:
                conn.close()
            return rows
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            cur = conn.execute(statement.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []

    def __repr__(self) -> str:
        return f"Backend({self.kind})"


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", str(tmp_path / "agent.db"))
    server = request.getfixturevalue("postgres_server")
    return Backend("postgres", server.new_database(), server)


@pytest.fixture
def store(backend: Backend) -> Iterator[Store]:
    s = backend.open()
    try:
        yield s
    finally:
        s.close()
