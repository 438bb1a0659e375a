"""How events are stored: never twice, and rebuilt equal (schema version 6 and before)."""

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

from nbagent import (
    Chat,
    Event,
    MessageAdded,
    ModelRequestFinished,
    ModelRequestStarted,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    tool,
)
from nbagent.store import SQLiteStore
from nbagent.store import _codec as codec
from nbagent.store import _migrations as migrations

sys.path.insert(0, str(Path(__file__).parent))
from _agent import Refund
from _helpers import store_ext


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
    store_ext(chat).flush()
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
        chat.close()
    assert _rows(path, "SELECT COUNT(*) FROM events WHERE type = 'tool_call_requested'") == [(0,)]
    finished = {
        json.loads(data)["status"]: "result" in json.loads(data)
        for (data,) in _rows(path, "SELECT json FROM events WHERE type = 'tool_call_finished'")
    }
    assert finished == {"ok": False, "denied": True}  # a denial may be overruled: kept


def test_messages_are_their_events_and_started_events_ride_with_their_finish(
    tmp_path: Path, counter: Path
) -> None:
    path = tmp_path / "a.db"
    live: list[Event] = []
    with SQLiteStore(path) as store:
        chat = _chat(store, live)
        chat.close()
    types = dict(_rows(path, "SELECT type, COUNT(*) FROM events GROUP BY type"))
    assert "message_added" not in types
    assert "model_request_started" not in types and "tool_call_started" not in types
    added = {e.index: (e.seq, e.ts.isoformat()) for e in live if isinstance(e, MessageAdded)}
    assert (
        dict((r[0], (r[1], r[2])) for r in _rows(path, "SELECT idx, seq, ts FROM messages"))
        == added
    )
    started = {e.seq for e in live if isinstance(e, (ModelRequestStarted, ToolCallStarted))}
    carried = set()
    for type_, data in _rows(path, "SELECT type, json FROM events"):
        inner = json.loads(data).get("started")
        if inner is not None:
            assert type_ in ("model_request_finished", "tool_call_finished")
            assert "call" not in inner and "model" not in inner  # only what differs
            carried.add(inner["seq"])
    assert carried == started
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM events")  # the last stored events are message rows now
    conn.commit()
    conn.close()
    with SQLiteStore(path) as store:
        record = store.load(chat.id)
        assert record.next_seq == max(seq for seq, _ in added.values()) + 1
        last = max(ts for _, ts in added.values())
        assert record.info.updated_at.isoformat() == last
        assert [i.updated_at.isoformat() for i in store.chats()] == [last]


def test_a_started_event_written_without_its_finish_has_its_own_row(tmp_path: Path) -> None:
    """What is queued is written at once on an options change: a start, alone."""
    from nbagent import LLMToolResponse, ToolCall

    chat: Chat

    class Provider:
        name, model = "script", "script-1"

        def __init__(self) -> None:
            self.responses = [
                LLMToolResponse("", (ToolCall("c1", "tweak", {}),), stop_reason="tool_use"),
                LLMToolResponse("done"),
            ]

        def complete(self, request: Any) -> Any:
            chat.with_tool_options(max_concurrency=3)  # during the request
            return self.responses.pop(0)

    @tool
    def tweak() -> str:
        """Change an option while running."""
        chat.with_tool_options(max_concurrency=2)
        return "ok"

    path = tmp_path / "a.db"
    live: list[Event] = []
    with SQLiteStore(path) as store:
        chat = Chat(provider=Provider(), store=store).with_tools(tweak)
        chat.on(
            None, lambda e: None if isinstance(e, (TextDelta, ToolCallDelta)) else live.append(e)
        )
        chat.ask("go")
        store_ext(chat).flush()
        types = [t for (t,) in _rows(path, "SELECT type FROM events ORDER BY seq")]
        assert types.count("model_request_started") == 2 and "tool_call_started" in types
        assert [_fields(e) for e in store.iter_events(chat.id)] == [_fields(e) for e in live]
        chat.close()


def test_events_stored_in_full_by_an_older_version_read_the_same(
    tmp_path: Path, counter: Path
) -> None:
    """Rows in the forms of versions 1 to 4 read as the events the chat emitted.

    Before version 6 a message row held its calls' arguments, and a started
    event its arguments. Before version 5 a ``MessageAdded`` had an ``events`` row (referring to the
    message row, or holding the message) and started events had their own
    rows; before version 4 so had a ``ToolCallRequested``, and a
    ``ToolCallFinished`` held its result. A chat may have rows of every form.
    """
    path = tmp_path / "old.db"
    live: list[Event] = []
    with SQLiteStore(path) as store:
        chat = _chat(store, live)
        chat.close()

    def insert(e: Event, data: str) -> None:
        conn.execute(
            "INSERT INTO events (chat_id, seq, type, ts, json) VALUES (?, ?, ?, ?, ?)",
            (chat.id, e.seq, e.type, e.ts.isoformat(), data),
        )

    folded = """SELECT COUNT(*) FROM events WHERE json LIKE '%"started":{%'"""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute(folded).fetchone()[0] > 0
        requested = [e for e in live if type(e).__name__ == "ToolCallRequested"]
        for e in requested[:2]:  # the older form for some calls only
            insert(e, codec.event_json(e))
        added = [e for e in live if isinstance(e, MessageAdded)]
        for i, e in enumerate(added):
            conn.execute(  # before version 6 a message held its calls' arguments too
                "UPDATE messages SET seq = NULL, ts = NULL, json = ? WHERE chat_id = ? AND idx = ?",
                (codec.dumps(codec.message_out(e.message)), chat.id, e.index),
            )
            insert(
                e, codec.event_json(e) if i % 2 else json.dumps({"index": e.index, "turn": e.turn})
            )
        for e in live:
            if isinstance(e, (ModelRequestStarted, ToolCallStarted)):
                insert(e, codec.event_json(e))  # with its arguments, as before version 6
            elif isinstance(e, (ModelRequestFinished, ToolCallFinished)):
                conn.execute(
                    "UPDATE events SET json = ? WHERE chat_id = ? AND seq = ?",
                    (codec.event_json(e), chat.id, e.seq),
                )
        conn.commit()
        assert conn.execute(folded).fetchone() == (0,)
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
        chat.close()
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
        loaded.close()


def test_the_version_4_migration_keeps_older_rows(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        migrations.migrate(conn, upto=3)
        assert migrations.schema_version(conn) == 3
    finally:
        conn.close()
    with SQLiteStore(path) as store:
        assert store.schema_version == migrations.SCHEMA_VERSION >= 4


def test_the_version_5_migration_indexes_gated_call_ids_only(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        migrations.migrate(conn, upto=4)
    finally:
        conn.close()
    indexes = "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tool_calls'"
    assert "tool_calls_call_id" in dict(_rows(path, indexes))
    with SQLiteStore(path) as store:
        assert store.schema_version == migrations.SCHEMA_VERSION >= 5
        chat = Chat(model="demo", store=store).with_tools(get_weather, Refund)
        chat.ask("Weather in Paris")
        chat.ask("Refund order 9")
        gated, free = chat.pending_approvals[0], chat.tool_calls[0]
        found = dict(_rows(path, indexes))
        assert "tool_calls_call_id" not in found
        assert "WHERE gated = 1" in found["tool_calls_gated_call_id"]
        plan = _rows(
            path,
            "EXPLAIN QUERY PLAN SELECT * FROM tool_calls WHERE call_id = ? AND gated = 1",
            gated.id,
        )
        assert "tool_calls_gated_call_id" in str(plan)
        assert store.call(free.id).status == "ok"  # ungated calls are still found by id
        assert store.approve(gated.id).status == "approved"
        chat.close()
    columns = [r[1] for r in _rows(path, "PRAGMA table_info(messages)")]
    assert columns[-2:] == ["seq", "ts"]


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
        assert codec.dumps(value) == standard.encode(value)
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises((ValueError, RecursionError)):
        codec.dumps(cycle)


# ------------------------------------------------------------- arguments stored once
@tool
def save(text: str) -> str:
    """Save a text.

    Args:
        text: The text.
    """
    return f"saved {len(text)} characters"


def _stored_size(path: Path, text: str, edited: str | None = None) -> tuple[int, Chat]:
    """The file's size after a chat saved ``text`` (through an approval when ``edited``)."""
    from nbagent import Tool
    from nbagent.testing import ScriptedProvider, call_tools, reply

    class GatedSave(Tool):
        """Save a text, once a person agrees."""

        name = "gated_save"
        requires_approval = True

        def execute(self, text: str) -> str:
            """Save.

            Args:
                text: The text.
            """
            return f"saved {len(text)} characters"

    script = [call_tools(("save", {"text": text}), ("gated_save", {"text": text})), reply("ok")]
    live: list[Event] = []
    with SQLiteStore(path) as store:
        chat = Chat(provider=ScriptedProvider(script), store=store).with_tools(save, GatedSave)
        chat.on(
            None, lambda e: None if isinstance(e, (TextDelta, ToolCallDelta)) else live.append(e)
        )
        chat.ask("Save it twice")
        chat.approve(chat.pending_approvals[0], {"text": edited} if edited is not None else None)
        chat.complete()
        assert chat.status == "complete"
        assert [_fields(e) for e in store.iter_events(chat.id)] == [_fields(e) for e in live]
        loaded = Chat.load(
            chat.id, store=store, tools=[save, GatedSave], provider=ScriptedProvider([])
        )
        assert loaded.transcript == chat.transcript
        assert [c.effective_arguments for c in loaded.tool_calls] == [
            c.effective_arguments for c in chat.tool_calls
        ]
        loaded.close()
        chat.close()
    return path.stat().st_size, chat  # closing checkpointed the WAL into the file


def test_a_calls_arguments_are_stored_once(tmp_path: Path) -> None:
    """A call's arguments are in its row only: not again in the assistant message's row, nor
    in its ``ToolCallStarted`` event (the 1 MB argument below used to take 3 MB per call)."""
    big = "x" * 1_000_000
    small_size, _ = _stored_size(tmp_path / "small.db", "x")
    big_size, chat = _stored_size(tmp_path / "big.db", big)
    grown = big_size - small_size
    assert 1.9 * len(big) < grown < 2.2 * len(big), grown  # two calls, each stored once
    apart = _rows(tmp_path / "big.db", "SELECT call_id, length(arguments) FROM call_arguments")
    assert sorted(apart) == sorted((c.id, len(big) + 11) for c in chat.tool_calls)
    inline = _rows(tmp_path / "big.db", "SELECT DISTINCT arguments FROM tool_calls")
    assert inline == [("",)]  # the rows updated by decisions, claims, results stay small
    messages = _rows(tmp_path / "big.db", "SELECT json FROM messages")
    assert all(big not in text for (text,) in messages)
    events = _rows(tmp_path / "big.db", "SELECT json FROM events")
    assert all(big not in text for (text,) in events)


def test_edited_arguments_are_not_stored_again_with_the_start(tmp_path: Path) -> None:
    """A call run with edited arguments: its start refers to the decision that holds them."""
    edited = "y" * 200_000
    _, chat = _stored_size(tmp_path / "edited.db", "x", edited=edited)
    gated = chat.tool_calls[1]
    assert gated.effective_arguments == {"text": edited}
    started = _rows(
        tmp_path / "edited.db", "SELECT json FROM events WHERE type = 'tool_call_finished'"
    )
    assert all(edited not in text for (text,) in started)


def test_the_version_6_migration_adds_call_arguments_and_keeps_inline_ones(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        migrations.migrate(conn, upto=5)
    finally:
        conn.close()
    tables = "SELECT name FROM sqlite_master WHERE type = 'table'"
    assert ("call_arguments",) not in _rows(path, tables)
    with SQLiteStore(path) as store:
        assert store.schema_version == migrations.SCHEMA_VERSION >= 6
        assert ("call_arguments",) in _rows(path, tables)
        _, chat = _stored_size(path, "z" * 5000)
    with SQLiteStore(path) as store:
        conn = sqlite3.connect(path)  # a call written inline, as before version 6
        conn.execute(
            "UPDATE tool_calls SET arguments = (SELECT arguments FROM call_arguments a "
            "WHERE a.call_id = tool_calls.call_id)"
        )
        conn.execute("DELETE FROM call_arguments")
        conn.commit()
        conn.close()
        assert [c.arguments for c in store.calls(chat.id)] == [{"text": "z" * 5000}] * 2
