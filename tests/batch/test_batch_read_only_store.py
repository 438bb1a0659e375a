"""A batch given a store opened ``read_only`` refuses at once, running nothing.

Every row failed instead, each with the store's "opened read_only" error after its chat was
made: the batch ran ``make_chat`` for every input and returned a frame of failures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import nbagent
from nbagent import Chat, StoreError
from nbagent.store import SQLiteStore


def test_a_read_only_store_is_refused_before_any_row_runs(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    first = nbagent.batch(["hi"], lambda: Chat(model="demo"), store=db, progress=False)
    assert list(first["status"]) == ["done"]
    made: list[int] = []

    def make_chat() -> Chat:
        made.append(1)
        return Chat(model="demo")

    with SQLiteStore(db, read_only=True) as store:
        with pytest.raises(StoreError, match=r"opened read_only.*nothing was run"):
            nbagent.batch(["hi", "yo"], make_chat, store=store, progress=False)
        assert made == []
        assert not store.closed  # the user's object: left open for them
        messages = nbagent.read_log(store, kind="messages")  # what it is for still works
    assert "hi" in set(messages["content"])
    with SQLiteStore(db) as store:  # nothing was written
        assert len(store.chats()) == 1
