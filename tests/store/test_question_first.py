"""A question is on disk before the model is asked it (docs/store.md), whatever the driver.

When the question cannot be written (the file locked by another connection past the busy
timeout, a full disk), ``ask()`` raises ``StoreError`` before the provider is called: the
question stays in the chat (and queued), and ``complete()`` asks it once the store can be
written. Before, the sync driver warned once, asked the model anyway and returned an
answer that another process never saw (the async driver already stopped).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, ChatMessage, StoreError
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, reply


class Model:
    """A model that notes, for each question it is asked, whether another connection
    finds it in the store at that moment."""

    def __init__(self, path: Path):
        self.path = path
        self.seen: list[tuple[str, bool]] = []

    def __call__(self, request: Any) -> Any:
        users = [m for m in request.messages if isinstance(m, ChatMessage) and m.role == "user"]
        question = str(users[-1].content)
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        try:
            stored = [r[0] for r in conn.execute("SELECT json FROM messages")]
        finally:
            conn.close()
        self.seen.append((question[:20], any(question[:20] in s for s in stored)))
        return reply(f"answer to {question[:20]}")


def _ask(chat: Chat, question: str, drive: str) -> Any:
    if drive == "sync":
        return chat.ask(question)
    return asyncio.run(chat.ask_async(question))


@pytest.mark.parametrize("drive", ["sync", "async"])
def test_a_question_the_locked_file_cannot_take_is_not_asked(tmp_path: Path, drive: str) -> None:
    db = tmp_path / "agent.db"
    model = Model(db)
    chat = Chat(
        provider=ScriptedProvider([model], repeat_last=True),
        store=SQLiteStore(db, timeout=0.3),
        display=False,
    )
    chat.ask("hello")
    browser = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    browser.execute("BEGIN IMMEDIATE")  # a DB browser's write transaction
    try:
        with warnings.catch_warnings(record=True), pytest.raises(StoreError, match="locked"):
            warnings.simplefilter("always")
            _ask(chat, "second question", drive)
        assert model.seen == [("hello", True)]  # the model was not asked
        assert [m.content for m in chat.transcript][-1] == "second question"  # kept
    finally:
        browser.execute("ROLLBACK")
        browser.close()
    if drive == "sync":
        chat.complete()
    else:
        asyncio.run(chat.complete_async())
    assert model.seen == [("hello", True), ("second question", True)]
    chat.close()
    with SQLiteStore(db) as other:
        contents = [m["content"] for m in other.load(chat.id).messages]
    assert contents == ["hello", "answer to hello", "second question", "answer to second question"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MB tmpfs (root only: skipped where it cannot be mounted)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        pytest.skip("cannot mount a tmpfs here")
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root?)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


def _fill(path: Path) -> None:
    """Fill the disk ``path`` is on (its last bytes as well: a buffered close fails too)."""
    with open(path, "ab", buffering=0) as f:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    f.write(b"x" * size)
            except OSError:
                continue


@pytest.mark.parametrize("drive", ["sync", "async"])
def test_a_question_a_full_disk_cannot_take_is_not_asked(small_disk: Path, drive: str) -> None:
    db = small_disk / "agent.db"
    model = Model(db)
    chat = Chat(provider=ScriptedProvider([model], repeat_last=True), store=db, display=False)
    chat.ask("hello")
    filler = small_disk / "filler"
    _fill(filler)
    question = "second question " + "y" * 20000  # more than the room left
    with warnings.catch_warnings(record=True), pytest.raises(StoreError, match="full"):
        warnings.simplefilter("always")
        _ask(chat, question, drive)
    assert model.seen == [("hello", True)]  # the model was not asked
    assert chat.transcript[-1].content == question
    os.remove(filler)
    chat.complete()
    assert model.seen == [("hello", True), (question[:20], True)]
    chat.close()
    with SQLiteStore(db) as other:
        contents = [m["content"] for m in other.load(chat.id).messages]
    assert contents[2] == question and len(contents) == 4
