"""A store write that fails loses nothing (issue 13, item 2).

The file can be locked past the busy timeout (a DB browser or a backup holding a write
transaction: here a second ``sqlite3`` connection that runs ``BEGIN IMMEDIATE`` and
keeps it), the disk can fail, a string can be one SQLite cannot encode. What was queued
stays queued until a commit succeeds: a step end that cannot be written is retried (in
the background, and before the next step, which raises ``StoreError`` if it still
fails), and a claim that cannot be committed raises: its tool never runs.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, StoreError, ToolCall, tool
from nbagent.store import SQLiteStore, StoreConflictWarning
from nbagent.testing import ScriptedProvider, call_tools, reply

sys.path.insert(0, str(Path(__file__).parent))
from _agent import Refund, count

ran: list[str] = []
FAILED = r"is locked|disk I/O error"


@tool
def lookup(city: str) -> str:
    """Look a city up (no side effect worth gating; counted).

    Args:
        city: The city.
    """
    ran.append(city)
    return f"{city}: found"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


@pytest.fixture
def counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(path))
    return path


class Lock:
    """Another connection holding a write transaction on the file (a DB browser, a backup)."""

    def __init__(self, path: Path):
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.held = False

    def take(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.held = True

    def release(self) -> None:
        if self.held:
            self.conn.execute("ROLLBACK")
            self.held = False

    def close(self) -> None:
        self.release()
        self.conn.close()


class FailingStore(SQLiteStore):
    """A store whose writes fail (an I/O error) while ``failing`` is set."""

    failing = False

    def write(self, *args: Any, **kwargs: Any) -> Any:
        if self.failing:
            raise StoreError(f"store {self.location}: disk I/O error")
        return super().write(*args, **kwargs)

    def claim(self, *args: Any, **kwargs: Any) -> Any:
        if self.failing:
            raise StoreError(f"store {self.location}: disk I/O error")
        return super().claim(*args, **kwargs)


@pytest.fixture(params=["locked", "io"])
def failure(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """``(store, fail, recover)``: a store (short busy timeout) and how to make its writes
    fail and work again."""
    db = tmp_path / "agent.db"
    store = FailingStore(db, timeout=0.2)
    lock = Lock(db)
    if request.param == "locked":
        fail, recover = lock.take, lock.release
    else:

        def fail() -> None:
            store.failing = True

        def recover() -> None:
            store.failing = False

    yield store, fail, recover
    lock.close()
    store.close()


def _lifecycle(chat: Chat) -> list[tuple[Any, ...]]:
    return [
        (c.id, c.name, c.arguments, c.status, c.approval, c.decision, c.result)
        for c in chat.tool_calls
    ]


def same_as_stored(chat: Chat, path: Path | str, tools: list[Any]) -> None:
    """``Chat.load`` in a fresh connection gives back the in-memory chat."""
    with SQLiteStore(path) as other:
        loaded = Chat.load(chat.id, store=other, tools=tools, provider=ScriptedProvider([]))
        try:
            assert loaded.transcript == chat.transcript
            assert _lifecycle(loaded) == _lifecycle(chat)
            assert loaded.status == chat.status
        finally:
            loaded.close()


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not written in time"
        time.sleep(0.02)


def _store_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    assert not [w for w in caught if issubclass(w.category, StoreConflictWarning)], [
        str(w.message) for w in caught
    ]  # a lock or a failing disk is never "another process drives this chat"
    return [str(w.message) for w in caught]


# ------------------------------------------------------------ a turn that parks
def test_a_turn_that_parks_while_writes_fail_is_written_once_they_work(
    failure: Any, counter: Path
) -> None:
    """The user message, the response and the parked call were dropped from the queue
    before the write that failed: the panel never saw the call, and the next step
    stopped as "driven by another process". Now they stay queued and are written (in the
    background) as soon as the file can be written again."""
    store, fail, recover = failure

    def model(request: Any) -> Any:  # the question is on disk: the writes fail from here
        fail()
        return call_tools(("refund", {"order_id": 42}))

    chat = Chat(provider=ScriptedProvider([model, reply("refunded")]), store=store)
    chat = chat.with_tools(Refund)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat.ask("Refund order 42")
    assert chat.status == "awaiting_approval"
    messages = _store_warnings(caught)
    assert messages and all("nothing is lost" in m.lower() for m in messages), messages
    assert len(messages) == 1  # once, not at every boundary that could not write
    with SQLiteStore(store.path) as panel:
        assert panel.pending_approvals() == []  # not written yet
        recover()
        eventually(lambda: len(panel.pending_approvals()) == 1)
        (pending,) = panel.pending_approvals()
        assert pending.id == chat.pending_approvals[0].id
        assert pending.chat_id == chat.id
        record = panel.load(chat.id)
        assert [m["role"] for m in record.messages] == ["user", "assistant"]
    same_as_stored(chat, store.path, [Refund])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat.approve(chat.pending_approvals[0])
        chat.complete()
    assert _store_warnings(caught) == []
    assert chat.status == "complete" and count(counter) == 1
    same_as_stored(chat, store.path, [Refund])
    chat.close()


# ---------------------------------------------------------------- the claim
def test_a_claim_that_cannot_be_committed_never_runs_the_tool(failure: Any, counter: Path) -> None:
    store, fail, recover = failure
    chat = Chat(model="demo", store=store).with_tools(Refund)
    chat.ask("Refund order 42")
    call = chat.pending_approvals[0]
    chat.approve(call)
    fail()
    with pytest.raises(StoreError, match=FAILED):
        chat.complete()
    assert count(counter) == 0  # not run: its claim is not on disk
    assert call.status == "approved"
    recover()
    chat.complete()
    assert count(counter) == 1 and call.status == "ok"
    assert chat.status == "complete"
    same_as_stored(chat, store.path, [Refund])
    chat.close()


def test_a_failed_claim_says_which_call_and_why(failure: Any, counter: Path) -> None:
    """The error of a claim that cannot be committed names the call and the store's error,
    and counts queued events only when there are some (it said "0 event(s) could not be
    written", which told nothing about what failed)."""
    store, fail, recover = failure
    chat = Chat(model="demo", store=store).with_tools(Refund)
    chat.ask("Refund order 42")
    call = chat.pending_approvals[0]
    chat.approve(call)  # written at once: nothing is queued for the claim
    fail()
    with pytest.raises(StoreError) as raised:
        chat.complete()
    text = str(raised.value)
    assert f"the claim of refund({call.id}) could not be written to {store.location}" in text
    assert "StoreError: " in text or "OperationalError: " in text
    assert re.search(FAILED, text)  # the underlying cause
    assert f"refund({call.id}) was not run, and runs at the next step" in text
    assert "0 event(s)" not in text and "event(s)" not in text
    assert count(counter) == 0
    recover()
    chat.complete()
    assert count(counter) == 1 and chat.status == "complete"
    chat.close()


def test_a_response_and_its_claim_that_cannot_be_written_never_run_the_tool(
    failure: Any,
) -> None:
    """An ungated call is claimed in the transaction that writes the response asking for
    it: neither reaches the file, the tool does not run, and both are written later."""
    store, fail, recover = failure

    def model(request: Any) -> Any:  # the question is on disk: the writes fail from here
        fail()
        return call_tools(("lookup", {"city": "Oslo"}))

    chat = Chat(provider=ScriptedProvider([model, reply("done")]), store=store)
    chat = chat.with_tools(lookup)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(StoreError, match=FAILED):
            chat.ask("Find Oslo")
    _store_warnings(caught)
    assert ran == []
    assert chat.tool_calls[0].status == "requested"
    recover()
    chat.complete()
    assert ran == ["Oslo"] and chat.status == "complete"
    same_as_stored(chat, store.path, [lookup])
    chat.close()


# ---------------------------------------------------- a step end, then the next step
def test_results_that_cannot_be_written_stop_the_chat_before_the_next_request(
    failure: Any,
) -> None:
    """A tool round's results are on disk before the next model request: if the round's
    write fails, it is retried before the next step, and that step raises if it still
    cannot write (the model is not asked again)."""
    store, fail, recover = failure

    @tool
    def breaks_the_store(city: str) -> str:
        """Look a city up while the store stops working.

        Args:
            city: The city.
        """
        fail()
        ran.append(city)
        return "found"

    provider = ScriptedProvider([call_tools(("breaks_the_store", {"city": "Lima"})), reply("done")])
    chat = Chat(provider=provider, store=store).with_tools(breaks_the_store)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(StoreError, match=FAILED) as raised:
            chat.ask("Find Lima")
    assert "nothing is lost" in str(raised.value).lower()
    assert _store_warnings(caught)
    assert ran == ["Lima"]
    assert len(provider.requests) == 1  # not asked again with results that are not on disk
    recover()
    chat.complete()
    assert ran == ["Lima"] and chat.status == "complete"
    same_as_stored(chat, store.path, [breaks_the_store])
    chat.close()


def test_closing_a_chat_whose_writes_fail_raises_and_can_be_retried(failure: Any) -> None:
    store, fail, recover = failure

    def model(request: Any) -> Any:  # the question is on disk: the writes fail from here
        fail()
        return reply("hello")

    chat = Chat(provider=ScriptedProvider([model]), store=store)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        chat.ask("hi")
    with pytest.raises(StoreError, match=FAILED):
        chat.close()
    recover()
    chat.close()
    same_as_stored(chat, store.path, [])


# ------------------------------------------------------------ unencodable text
def test_text_sqlite_cannot_encode_is_stored_cleaned(backend: Any) -> None:
    """A lone surrogate that reached an event (here the model name a server reported, and a
    resolver's error, e.g. about a file name read with ``surrogateescape``) made every write
    of the batch fail; it is stored with the surrogate replaced, and nothing else changes.
    On SQLite and PostgreSQL (neither can encode it)."""

    def rule(call: ToolCall) -> bool | None:
        raise ValueError("cannot read /data/r\udcffsum\u00e9.txt")

    @tool(approval=rule)
    def read(path: str) -> str:
        """Read a file.

        Args:
            path: The file.
        """
        return "contents"

    response = call_tools(("read", {"path": "/data/x"}))
    odd = dataclasses.replace(response, model="m\ud800")
    with backend.open() as store:
        chat = Chat(provider=ScriptedProvider([odd]), store=store).with_tools(read)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            chat.ask("Read it")
        assert [str(w.message) for w in caught] == []
        assert chat.status == "awaiting_approval"
        (pending,) = store.pending_approvals()
        assert pending.id == chat.pending_approvals[0].id
        stored = list(store.iter_events(chat.id))
        asked = [e.reason for e in stored if e.type == "approval_requested"]
        assert len(asked) == 1 and "/data/r\ufffdsum\u00e9.txt" in asked[0]
        assert [e.model for e in stored if e.type == "model_request_finished"] == ["m\ufffd"]
        chat.close()


def test_a_claim_that_fails_mid_round_keeps_the_results_before_it(failure: Any) -> None:
    """The second call's claim fails after the first call ran: the first result is kept
    (and written later, never rerun), the second runs once the store can be written."""
    store, fail, recover = failure

    @tool
    def first(city: str) -> str:
        """Look a city up, then the store stops working.

        Args:
            city: The city.
        """
        ran.append(f"first {city}")
        fail()
        return "found"

    provider = ScriptedProvider(
        [call_tools(("first", {"city": "Rome"}), ("lookup", {"city": "Kyiv"})), reply("done")]
    )
    chat = Chat(provider=provider, store=store).with_tools(first, lookup)
    with pytest.raises(StoreError, match=FAILED):
        chat.ask("Find both")
    assert ran == ["first Rome"]
    assert [c.status for c in chat.tool_calls] == ["ok", "requested"]
    recover()
    chat.complete()
    assert ran == ["first Rome", "Kyiv"]
    assert chat.status == "complete" and len(provider.requests) == 2
    same_as_stored(chat, store.path, [first, lookup])
    chat.close()
