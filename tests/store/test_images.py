"""Version 8: images and files are stored once per content hash and come back with ``Chat.load``."""

from __future__ import annotations

import sqlite3
import struct
import zlib
from pathlib import Path
from typing import Any

import nbagent
from nbagent import Chat, ImagePart, ToolResultMessage
from nbagent.store import SCHEMA_VERSION, SQLiteStore
from nbagent.store import _migrations as migrations
from nbagent.testing import ScriptedProvider, call_tools, reply


def png(rgb: tuple[int, int, int]) -> bytes:
    raw = b"\x00" + bytes(rgb) * 2

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 1, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


RED, BLUE = png((255, 0, 0)), png((0, 0, 255))
PDF = b"%PDF-1.4\n%%EOF\n"


@nbagent.tool
def snapshot() -> list[object]:
    """Take a snapshot."""
    return ["the screen", RED]


def test_parts_round_trip_and_identical_bytes_are_one_blob(backend: Any) -> None:
    script = [reply("Two reds."), call_tools(("snapshot", {})), reply("Red again.")]
    with backend.open() as store:
        chat = Chat(provider=ScriptedProvider(script), store=store, display=False)
        chat = chat.with_tools(snapshot)
        chat.ask("Compare", images=[RED, nbagent.image(RED, detail="low"), PDF])
        chat.ask("Snap it")
        loaded = Chat.load(
            chat.id, store=store, tools=[snapshot], provider=ScriptedProvider([]), display=False
        )
        assert loaded.transcript == chat.transcript
        first = loaded.transcript[0]
        assert isinstance(first, nbagent.ChatMessage)
        assert [(p.media_type, p.data) for p in first.parts] == [
            ("image/png", RED),
            ("image/png", RED),
            ("application/pdf", PDF),
        ]
        assert isinstance(first.parts[1], ImagePart) and first.parts[1].detail == "low"
        result = loaded.transcript[4]
        assert isinstance(result, ToolResultMessage) and result.parts[0].data == RED
        call = loaded.transcript[3].tool_calls[0]  # type: ignore[union-attr]
        assert call.result is not None and call.result.parts[0].data == RED
        # events rebuilt from the store (the log, a loaded chat's view) carry the bytes too
        added = [e for e in store.iter_events(chat.id) if isinstance(e, nbagent.MessageAdded)]
        assert added[0].message == chat.transcript[0]
        finished = [
            e for e in store.iter_events(chat.id) if isinstance(e, nbagent.ToolCallFinished)
        ]
        assert finished[0].result.parts[0].data == RED
        [stored] = store.calls(chat.id)
        assert stored.result is not None and stored.result.parts[0].data == RED
        log = nbagent.read_log(store)
        assert log["result_type"].tolist() == ["text+image"]
    rows = backend.sql("SELECT sha256, media_type, size FROM blobs ORDER BY size")
    messages = [r[0] for r in backend.sql("SELECT json FROM messages")]
    assert sorted(r[1] for r in rows) == ["application/pdf", "image/png"]  # RED once, PDF once
    assert {r[0] for r in rows} == {ImagePart(RED, "image/png").sha256, nbagent.image(PDF).sha256}
    assert not any("base64" in m or "iVBOR" in m for m in messages)  # bytes only in blobs


def test_a_version_7_store_gains_the_blobs_table(tmp_path: Path) -> None:
    old = tmp_path / "v7.db"
    conn = sqlite3.connect(old, isolation_level=None)
    try:
        migrations.migrate(conn, upto=7)
    finally:
        conn.close()
    with SQLiteStore(old) as store:
        assert store.schema_version == SCHEMA_VERSION >= 8
        chat = Chat(provider=ScriptedProvider([reply("Blue.")]), store=store, display=False)
        chat.ask("Colour?", images=BLUE)
        loaded = Chat.load(chat.id, store=store, provider=ScriptedProvider([]), display=False)
        assert loaded.transcript[0].parts[0].data == BLUE  # type: ignore[union-attr]


WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(32)


@nbagent.tool
def chirp() -> list[object]:
    """Record a chirp."""
    return ["a chirp", nbagent.AudioPart(WAV)]


def test_a_tools_sound_round_trips_as_audio(backend: Any) -> None:
    script = [call_tools(("chirp", {})), reply("Heard.")]
    with backend.open() as store:
        chat = Chat(provider=ScriptedProvider(script), store=store, display=False)
        chat.with_tools(chirp).ask("Record")
        loaded = Chat.load(
            chat.id, store=store, tools=[chirp], provider=ScriptedProvider([]), display=False
        )
        assert loaded.transcript == chat.transcript
        result = loaded.transcript[2]
        assert isinstance(result, ToolResultMessage)
        assert result.content == "a chirp\n[audio 1: audio/wav, 0 KB]"
        assert result.parts == (nbagent.AudioPart(WAV, "audio/wav"),)
        assert nbagent.read_log(store)["result_type"].tolist() == ["text+audio"]
    rows = backend.sql("SELECT media_type FROM blobs")
    assert [r[0] for r in rows] == ["audio/wav"]
