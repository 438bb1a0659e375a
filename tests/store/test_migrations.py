"""Schema versions: a store written by an older version opens in this one."""

from __future__ import annotations

import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, StoreError
from nbagent.store import SCHEMA_VERSION, SQLiteStore
from nbagent.store import _migrations as migrations

sys.path.insert(0, str(Path(__file__).parent))
from _agent import Refund, count

# the columns version 1 had
V1 = {
    "chats": "id, created_at, updated_at, provider, model, system, title, state",
    "messages": "chat_id, idx, turn, role, json",
    "tool_calls": "chat_id, call_id, seq, name, arguments, raw_arguments, parse_error, status, "
    "approval, decision, result, turn, step, requested_at, started_at, finished_at",
    "events": "chat_id, seq, type, ts, json",
}


def _v1_copy(current: Path, old: Path) -> None:
    """What version 1 of nbagent would have written: the same chat in the v1 schema."""
    conn = sqlite3.connect(old, isolation_level=None)
    try:
        migrations.migrate(conn, upto=1)
        conn.execute("ATTACH DATABASE ? AS cur", (str(current),))
        for table, cols in V1.items():
            conn.execute(f"INSERT INTO main.{table} ({cols}) SELECT {cols} FROM cur.{table}")
        conn.execute("DETACH DATABASE cur")
    finally:
        conn.close()


@pytest.fixture
def counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(path))
    return path


def _chats(tmp_path: Path) -> tuple[Path, str, str]:
    """Two parked chats written by the current version; one already approved in-chat."""
    current = tmp_path / "current.db"
    with SQLiteStore(current) as store:
        a = Chat(model="demo", store=store).with_tools(Refund)
        a.ask("Refund order 42")
        b = Chat(model="demo", store=store).with_tools(Refund)
        b.ask("Refund order 7")
        b.approve(b.pending_approvals[0])  # decided, not run yet
        ids = a.id, b.id
        a.close()
        b.close()
    return current, *ids


def test_migrations_are_ordered_functions() -> None:
    assert SCHEMA_VERSION == len(migrations.MIGRATIONS) >= 3
    for n, fn in enumerate(migrations.MIGRATIONS, start=1):
        assert fn.__name__.startswith(f"m{n:03d}_")


def test_a_version_1_store_opens_and_its_chats_continue(tmp_path: Path, counter: Path) -> None:
    current, parked_id, approved_id = _chats(tmp_path)
    old = tmp_path / "old.db"
    _v1_copy(current, old)

    with SQLiteStore(old) as store:
        assert store.schema_version == SCHEMA_VERSION
        conn = sqlite3.connect(old)
        try:
            rows = conn.execute("SELECT version, name FROM schema_migrations ORDER BY version")
            assert [r[1] for r in rows] == [fn.__name__ for fn in migrations.MIGRATIONS]
        finally:
            conn.close()
        [pending] = store.pending_approvals()
        assert pending.chat_id == parked_id
        store.approve(pending.id, chat_id=parked_id)  # decided from outside: needs v2+

        for chat_id in (parked_id, approved_id):
            chat = Chat.load(chat_id, store=store, tools=[Refund])
            chat.complete()
            assert chat.status == "complete"
            assert chat.tool_calls[0].status == "ok"
            chat.close()
    assert count(counter) == 2


def test_migration_backfills_gates_and_decisions(tmp_path: Path) -> None:
    current, _, approved_id = _chats(tmp_path)
    old = tmp_path / "old.db"
    _v1_copy(current, old)
    SQLiteStore(old).close()
    conn = sqlite3.connect(old)
    try:
        gated = conn.execute("SELECT DISTINCT gated FROM tool_calls").fetchall()
        assert gated == [(1,)]  # a v1 gated call can never be claimed ungated
        decided = conn.execute(
            "SELECT chat_id, verdict, decided_by, applied FROM decisions"
        ).fetchall()
        assert decided == [(approved_id, "approved", "user", 1)]
    finally:
        conn.close()


def test_a_newer_store_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_migrations VALUES (99, 'm099_future', 'x')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match=r"newer nbagent.*schema version 99.*not changed"):
        SQLiteStore(path)
    assert path.read_bytes() == before


def test_a_failing_migration_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.db"
    SQLiteStore(path).close()

    def m004_broken(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE chats ADD COLUMN extra TEXT")
        conn.execute("THIS IS NOT SQL")

    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, m004_broken))
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", len(migrations.MIGRATIONS))
    with pytest.raises(StoreError):
        SQLiteStore(path)
    monkeypatch.undo()
    with SQLiteStore(path) as store:
        assert store.schema_version == SCHEMA_VERSION
    conn = sqlite3.connect(path)
    try:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(chats)")]
    finally:
        conn.close()
    assert "extra" not in cols


def test_concurrent_first_opens_migrate_once(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    errors: list[BaseException] = []
    stores: list[Any] = []
    barrier = threading.Barrier(4)

    def open_it() -> None:
        barrier.wait()
        try:
            stores.append(SQLiteStore(path))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    assert errors == []
    conn = sqlite3.connect(path)
    try:
        versions = conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0]
        assert versions == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()
