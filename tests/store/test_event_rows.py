"""How events are stored: never twice, and rebuilt equal (schema version 4 and before)."""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, Event, TextDelta, ToolCallDelta, ToolCallFinished, tool
from nbagent import _serde as serde
from nbagent import _sqlite_store as sq
from nbagent.store import SQLiteStore

sys.path.insert(0, str(Path(__file__).parent))
from _agent import Refund


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Get the weather for a city.

    Args:
        city: City name.
    """
    return {"city": city, "temp": 21}


@pytest.fixture
def counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(path))
    return path


def _fields(e: Event) -> tuple[str, dict[str, Any]]:
    out = {}
    for f in dataclasses.fields(e):
        v = getattr(e, f.name)
        out[f.name] = v.id if f.name == "call" else v
    return type(e).__name__, out


def _chat(store: SQLiteStore, live: list[Event]) -> Chat:
    """Parallel calls, a denial, an approval: every kind of call event."""
    chat = Chat(model="demo", store=store).with_tools(get_weather, Refund)
    chat.on(None, lambda e: None if isinstance(e, (TextDelta, ToolCallDelta)) else live.append(e))
    chat.ask("Weather in Paris and in Tokyo")
    chat.ask("Refund order 7")
    chat.deny(chat.pending_approvals[0], reason="no")
    chat.complete()
    chat.ask("Refund order 8")
    chat.approve(chat.pending_approvals[0])
    chat.complete()
    chat._store.flush()
    return chat


def _rows(path: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def test_a_call_row_is_its_requested_event_and_holds_its_result(
    tmp_path: Path, counter: Path
) -> None:
    path = tmp_path / "a.db"
    live: list[Event] = []
    with SQLiteStore(path) as store:
        chat = _chat(store, live)
        assert [_fields(e) for e in store.iter_events(chat.id)] == [_fields(e) for e in live]
        chat._store.close()
    assert _rows(path, "SELECT COUNT(*) FROM events WHERE type = 'tool_call_requested'") == [(0,)]
    finished = {
        json.loads(data)["status"]: "result" in json.loads(data)
        for (data,) in _rows(path, "SELECT json FROM events WHERE type = 'tool_call_finished'")
    }
    assert finished == {"ok": False, "denied": True}  # a denial may be overruled: kept


def test_events_stored_in_full_by_an_older_version_read_the_same(
    tmp_path: Path, counter: Path
) -> None:
    """Before version 4 every event had its own row; a chat may have both forms."""
    path = tmp_path / "old.db"
    live: list[Event] = []
    with SQLiteStore(path) as store:
        chat = _chat(store, live)
        chat._store.close()
    conn = sqlite3.connect(path)
    try:
        requested = [e for e in live if type(e).__name__ == "ToolCallRequested"]
        for e in requested[:2]:  # the older form for some calls only
            conn.execute(
                "INSERT INTO events (chat_id, seq, type, ts, json) VALUES (?, ?, ?, ?, ?)",
                (chat.id, e.seq, e.type, e.ts.isoformat(), serde.event_json(e)),
            )
        for e in live:
            if isinstance(e, ToolCallFinished):
                conn.execute(
                    "UPDATE events SET json = ? WHERE chat_id = ? AND seq = ?",
                    (serde.event_json(e), chat.id, e.seq),
                )
        conn.commit()
    finally:
        conn.close()
    with SQLiteStore(path) as store:
        assert [_fields(e) for e in store.iter_events(chat.id)] == [_fields(e) for e in live]
        assert [_fields(e) for e in store.iter_events()] == [_fields(e) for e in live]


def test_a_loaded_chat_numbers_its_events_after_its_calls(tmp_path: Path, counter: Path) -> None:
    path = tmp_path / "a.db"
    with SQLiteStore(path) as store:
        chat = Chat(model="demo", store=store).with_tools(Refund)
        chat.ask("Refund order 42")  # parks: the call's row is the last but one event
        chat._store.close()
    [(call_seq,)] = _rows(path, "SELECT seq FROM tool_calls")
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM events WHERE seq > ?", (call_seq,))  # as if cut off there
    conn.commit()
    conn.close()
    with SQLiteStore(path) as store:
        assert store.load(chat.id).next_seq == call_seq + 1
        loaded = Chat.load(chat.id, store=store, tools=[Refund])
        loaded.approve(loaded.pending_approvals[0])
        loaded.complete()
        seqs = [e.seq for e in store.iter_events(chat.id)]
        assert seqs == sorted(set(seqs))  # no number used twice
        loaded._store.close()


def test_the_version_4_migration_keeps_older_rows(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        sq.migrate(conn, upto=3)
        assert sq.schema_version(conn) == 3
    finally:
        conn.close()
    with SQLiteStore(path) as store:
        assert store.schema_version == sq.SCHEMA_VERSION >= 4


def test_the_fast_json_encoder_writes_what_the_standard_one_does() -> None:
    standard = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
    values: list[Any] = [
        "plain",
        'quo"te\\ and \n newline \u2028 ☀ \x00',
        {"a": [1, -2, 2.5, 1e300, -0.0, None, True, False], "é": {"nested": ()}},
        [math.inf, -math.inf, math.nan, 10**30],
        {1: "int key", 2.5: "float key", None: "none key", False: "bool key"},
        {"when": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), "set": {1}, "obj": object},
        (1, (2, [3, {"x": ""}])),
    ]
    for value in values:
        assert serde.dumps(value) == standard.encode(value)
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises((ValueError, RecursionError)):
        serde.dumps(cycle)
