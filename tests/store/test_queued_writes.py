"""Queued writes are retried until written, whatever fails and in what order (issue 23, N6).

A model response whose calls will run is not written at once: it goes with its calls'
claim (one transaction). When the step that would claim them fails first, on a *read*
(the decisions of the pending approvals, the server cut off in between), nothing
retried the queued response: a call waiting for approval stayed in this process only
(``pending_approvals()`` elsewhere empty, ``store.approve`` "no tool call"), until the
chat itself stepped again, and a process dying then lost the turn. Found by a fault
storm on PostgreSQL (threads driving chats, backends terminated every 0.2-0.6 s, one
restart); the targeted tests inject exactly that order of failures.
"""

from __future__ import annotations

import random
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, DecisionError, StoreError, tool
from nbagent.store import PostgresStore, SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

sys.path.insert(0, str(Path(__file__).parent))
from _agent import Refund, count

ran: list[str] = []


@tool
def lookup(city: str) -> str:
    """Look a city up (ungated).

    Args:
        city: The city.
    """
    ran.append(city)
    return f"{city}: found"


@pytest.fixture
def counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(path))
    return path


class _ReadCutSQLite(SQLiteStore):
    """SQLite whose next ``armed`` decision reads fail (a disk error)."""

    armed = 0

    def decisions(self, chat_id: str, call_ids: Any) -> Any:
        if self.armed:
            self.armed -= 1
            raise StoreError(f"store {self.location}: disk I/O error")
        return super().decisions(chat_id, call_ids)


class _ReadCutPostgres(PostgresStore):
    """PostgreSQL whose next ``armed`` decision reads lose the server: every backend of the
    database is terminated inside the read's transaction (a real lost connection)."""

    armed = 0
    server: Any = None
    dsn = ""
    _cut = False

    def decisions(self, chat_id: str, call_ids: Any) -> Any:
        if self.armed:
            self.armed -= 1
            self._cut = True
        return super().decisions(chat_id, call_ids)

    @contextmanager
    def _read(self) -> Iterator[Any]:
        with super()._read() as conn:
            if self._cut:
                self._cut = False
                self.server.terminate(self.dsn)
            yield conn


def _cut_store(backend: Any) -> Any:
    if backend.kind == "sqlite":
        return _ReadCutSQLite(backend.url)
    store = _ReadCutPostgres(backend.url)
    store.server, store.dsn = backend.server, backend.url
    return store


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not written in time"
        time.sleep(0.02)


def test_a_response_queued_when_a_read_fails_is_written_without_another_step(
    backend: Any, counter: Path
) -> None:
    """The response asks for an ungated call and a gated one; the next step's read of the
    pending approval's decisions fails. The response (and its pending call) reaches the
    store in the background, so another process sees the call and can approve it, with no
    further step of this chat; then the chat runs each call once."""
    ran.clear()
    store = _cut_store(backend)
    provider = ScriptedProvider(
        [call_tools(("lookup", {"city": "Oslo"}), ("refund", {"order_id": 9})), reply("done")]
    )
    chat = Chat(provider=provider, store=store).with_tools(lookup, Refund)
    store.armed = 1
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with pytest.raises(StoreError):
            chat.ask("Find Oslo and refund order 9")
    refund = chat.pending_approvals[0]
    assert ran == [] and count(counter) == 0
    with backend.open() as panel:  # another store object: what another process sees
        eventually(lambda: [c.id for c in panel.pending_approvals()] == [refund.id])
        assert panel.approve(refund.id).status == "approved"
    chat.complete()
    assert chat.status == "complete" and ran == ["Oslo"] and count(counter) == 1
    chat.close()
    store.close()
    with backend.open() as other:
        loaded = Chat.load(
            chat.id, store=other, tools=[lookup, Refund], provider=ScriptedProvider([])
        )
        assert loaded.transcript == chat.transcript
        assert [(c.id, c.status) for c in loaded.tool_calls] == [
            (c.id, c.status) for c in chat.tool_calls
        ]
        loaded.close()


def test_a_refresh_whose_write_fails_is_retried_in_the_background(backend: Any) -> None:
    """``chat.refresh()`` raising on a failed write leaves the write to the background retry
    (it was kept, but nothing retried it until the next write)."""
    store = _cut_store(backend)
    chat = Chat(provider=ScriptedProvider([reply("hello")]), store=store)
    chat.ask_later("hi")  # queued, not written: no boundary yet
    real = store.write
    fails = [1]

    def failing(*args: Any, **kwargs: Any) -> Any:
        if fails[0]:
            fails[0] -= 1
            raise StoreError(f"store {store.location}: disk I/O error")
        return real(*args, **kwargs)

    store.write = failing  # type: ignore[method-assign]
    with pytest.raises(StoreError, match="disk I/O error"):
        chat.refresh()
    with backend.open() as panel:
        eventually(lambda: len(panel.load(chat.id).messages) == 1)
    chat.close()
    store.close()


def test_the_stores_background_work_starts_no_thread_of_its_own(backend: Any) -> None:
    """A write retried in the background, the WAL checkpoints (SQLite) and the decisions
    listener (PostgreSQL) are tasks on nbagent's one background loop, their blocking calls
    on its worker pool: no thread of their own (there were three), and the retry still
    writes everything once the store can be written again."""

    def own_threads() -> set[str]:
        return {t.name for t in threading.enumerate() if t.name.startswith("nbagent-")}

    before = own_threads()
    store = _cut_store(backend)
    chat = Chat(provider=ScriptedProvider([reply("hello")]), store=store)
    watch = store.watch([chat.id])  # PostgreSQL: its listener runs
    chat.ask_later("hi")
    real, broken, tries = store.write, threading.Event(), [0]
    broken.set()

    def failing(*args: Any, **kwargs: Any) -> Any:
        if broken.is_set():
            tries[0] += 1
            raise StoreError(f"store {store.location}: disk I/O error")
        return real(*args, **kwargs)

    store.write = failing  # type: ignore[method-assign]
    with pytest.raises(StoreError, match="disk I/O error"):
        chat.refresh()
    eventually(lambda: tries[0] >= 3)  # retried in the background, failing still
    if backend.kind == "sqlite":
        store._checkpointer.poke()
    assert own_threads() - before <= {"nbagent-loop"}
    broken.clear()
    with backend.open() as panel:
        eventually(lambda: len(panel.load(chat.id).messages) == 1)
    watch.close()
    chat.close()
    store.close()


# ------------------------------------------------------------- a bounded storm
def test_a_fault_storm_leaves_every_pending_call_visible(
    postgres_dsn: str, postgres_server: Any
) -> None:
    """Four threads drive chats (an ungated and a gated call per request, or one of them)
    while every backend is terminated every 0.2-0.6 s and the server restarts once. A few
    seconds after the storm every call a chat holds as awaiting approval is pending in the
    store, and another store object can decide it."""
    PostgresStore(postgres_dsn).close()  # the schema, before the storm
    prompts = [
        "lookup the city Oslo and refund order 9",
        "Refund order 7",
        "lookup the city Paris",
        "refund order 1 and order 2",
    ]
    chats: list[Chat] = []
    lock = threading.Lock()
    stop = threading.Event()

    def drive(k: int) -> None:
        rng = random.Random(k)
        store: PostgresStore | None = None
        while not stop.is_set():
            try:
                if store is None:
                    store = PostgresStore(postgres_dsn)
                chat = Chat(model="demo", store=store).with_tools(Refund, lookup)
            except StoreError:
                time.sleep(0.05)
                continue
            with lock:
                chats.append(chat)
            for attempt in range(rng.randint(1, 3)):
                try:
                    if attempt == 0:
                        chat.ask(rng.choice(prompts))
                    elif chat.awaiting_approval and rng.random() < 0.5:
                        chat.approve(chat.pending_approvals[0])
                        chat.complete()
                    else:
                        chat.complete()
                except (StoreError, DecisionError):
                    pass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        threads = [threading.Thread(target=drive, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        rng = random.Random(0)
        start = time.monotonic()
        restarted = False
        try:
            while time.monotonic() - start < 10:
                time.sleep(rng.uniform(0.2, 0.6))
                if not restarted and time.monotonic() - start > 5:
                    postgres_server.restart()
                    restarted = True
                else:
                    postgres_server.terminate(postgres_dsn)
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        with PostgresStore(postgres_dsn) as panel:

            def missing() -> list[tuple[str, str]]:
                stored = {(c.chat_id, c.id) for c in panel.pending_approvals()}
                return [
                    (chat.id, c.id)
                    for chat in chats
                    for c in chat.pending_approvals
                    if (chat.id, c.id) not in stored
                ]

            deadline = time.monotonic() + 10
            while missing() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert missing() == []
            parked = [(chat, chat.pending_approvals[0]) for chat in chats if chat.pending_approvals]
            assert parked, "the storm parked no chat"
            chat, call = parked[0]
            assert panel.approve(call.id, chat_id=chat.id).status == "approved"
        for chat in chats:
            chat.close()
