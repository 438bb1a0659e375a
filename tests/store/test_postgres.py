"""What only PostgreSQL has: a DSN with a password, a server that can go away, and races
between connections that SQLite would serialise by locking the whole file.

The protocol-level behaviour (round trips, decisions, processes racing, crashes)
is the conformance suite's, run on both stores; here a real server
(``tests/_postgres.py``) is cut off mid-write (``pg_terminate_backend``) or
restarted, and the password is looked for everywhere it must not be.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from _postgres import PASSWORD
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import Chat, StoreError, tool
from nbagent.store import PostgresStore, Store, open_store
from nbagent.testing import ScriptedProvider, reply

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import Refund, count  # noqa: E402
from _helpers import store_ext  # noqa: E402


@pytest.fixture
def counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(path))
    return path


# ------------------------------------------------------------------ the password
def test_the_password_never_shows(
    postgres_dsn: str, postgres_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    with PostgresStore(postgres_dsn) as store:
        assert isinstance(store, Store)
        texts += [repr(store), str(store), store.location, repr(vars(store))]
        assert store.location.startswith("postgresql://nbagent@127.0.0.1:")
        chat = Chat(model="demo", store=store).with_tools(Refund)
        chat.ask("Refund order 42")
        texts += [repr(chat), repr(store.pending_approvals()), repr(store.watch())]
        chat.close()
    wrong = postgres_dsn.replace(PASSWORD, PASSWORD + "x")
    for dsn, match in [
        (wrong, "password authentication failed"),
        (postgres_dsn.replace(f":{postgres_server.port}/", ":1/"), "cannot connect"),
        (postgres_dsn.replace(f":{postgres_server.port}/", ":notaport/"), "port"),
        (f"host=127.0.0.1 password={PASSWORD} port=notaport", "port"),
        (f"host=127.0.0.1 password='{PASSWORD}' nonsense", "cannot open"),
        (f"postgresql://nbagent:{PASSWORD}@[::1", r'cannot open.*in URI: "<the DSN>"'),
    ]:
        with pytest.raises(StoreError, match=match) as info:
            PostgresStore(dsn, connect_timeout=2)
        texts.append(str(info.value))
        assert info.value.__cause__ is None and info.value.__context__ is None
        with pytest.raises(StoreError) as again:
            Chat(model="demo", store=dsn)
        texts.append(str(again.value))
    texts.append(caplog.text)
    for text in texts:
        assert PASSWORD not in text, text


@pytest.mark.parametrize("password", ["my/Secret99", "p@ssWord77", "a@b/c@dW0rd"])
def test_a_password_with_an_unencoded_at_or_slash_is_refused_unseen(
    password: str, postgres_server: Any
) -> None:
    """libpq read part of such a password as the host, port or database: the error and the
    store's location showed it (all of ``my/Secret99``; ``ssWord77`` of ``p@ssWord77``)."""
    from urllib.parse import quote

    dsn = f"postgresql://nbagent:{password}@127.0.0.1:{postgres_server.port}/postgres"
    fragments = [f for f in re.split("[@/]", password) if len(f) >= 4]
    for opening in (PostgresStore, open_store, lambda d: Chat(model="demo", store=d)):
        with pytest.raises(StoreError, match="percent-encoded") as info:
            opening(dsn)
        assert not any(f in str(info.value) for f in fragments), info.value
    encoded = dsn.replace(password, quote(password, safe=""))
    with pytest.raises(StoreError, match="password authentication failed") as wrong:
        PostgresStore(encoded, connect_timeout=2)  # parsed right: only the server says no
    assert not any(f in str(wrong.value) for f in fragments), wrong.value


def test_a_timeout_while_opening_says_so_not_a_lost_connection(
    postgres_dsn: str, postgres_server: Any
) -> None:
    """Another process migrating (holding the migration lock) past this one's lock_timeout:
    it said "lost the connection ... The next operation connects again", of a store that
    was never opened; a refused connection's message also spread over two lines."""
    from nbagent.store._pg_migrations import MIGRATION_LOCK

    db = postgres_dsn.rsplit("/", 1)[1]
    holder = postgres_server.admin(db)
    holder.autocommit = False
    holder.execute(MIGRATION_LOCK)
    try:
        with pytest.raises(StoreError) as info:
            PostgresStore(postgres_dsn + "?options=-c%20lock_timeout%3D200")
    finally:
        holder.rollback()
        holder.close()
    text = str(info.value)
    assert text.startswith("cannot open PostgreSQL store") and "lock timeout" in text
    assert "lost the connection" not in text and "connects again" not in text
    with PostgresStore(postgres_dsn) as store:  # nothing was changed: it opens now
        assert store.chats() == []
    down = postgres_dsn.replace(f":{postgres_server.port}/", ":1/")
    with pytest.raises(StoreError) as refused:
        PostgresStore(down, connect_timeout=2)
    assert "\n" not in str(refused.value) and "\t" not in str(refused.value)


def test_a_server_restarting_under_a_chat_is_waited_for_and_one_gone_fails_fast(
    postgres_dsn: str, postgres_server: Any, counter: Path
) -> None:
    """A restart of the server (a second or so) failed every write that came meanwhile: a
    batch lost most of its rows to "cannot connect" (84-100 of 100 in the probe). A store
    that had its server waits for it to come back (up to RECONNECT_WINDOW); a server gone
    for good fails the writes, and then fails them at once, until it answers again."""
    from nbagent.store import _postgres

    script = [reply("one"), reply("two"), reply("three"), reply("four")]
    chat = Chat(provider=ScriptedProvider(script), store=postgres_dsn, display=False)
    assert chat.ask("first").content == "one"  # type: ignore[union-attr]
    postgres_server.pause()
    back = threading.Timer(1.0, postgres_server.resume)
    back.start()
    try:
        assert chat.ask("second").content == "two"  # type: ignore[union-attr]
    finally:
        back.join()
    postgres_server.pause()
    try:
        with pytest.raises(StoreError, match="cannot connect"):
            chat.ask("third")
        started = time.monotonic()
        with pytest.raises(StoreError, match="cannot connect"):
            chat.complete()
        assert time.monotonic() - started < _postgres.RECONNECT_WINDOW  # no second wait
    finally:
        postgres_server.resume()
    assert chat.complete().content == "three"  # type: ignore[union-attr]
    chat.close()
    with PostgresStore(postgres_dsn) as store:
        loaded = Chat.load(chat.id, store=store, provider=ScriptedProvider([]))
        assert [m.content for m in loaded.transcript] == [
            "first",
            "one",
            "second",
            "two",
            "third",
            "three",
        ]
        loaded.close()


def test_a_dsn_opens_the_store_everywhere_a_path_does(postgres_dsn: str, counter: Path) -> None:
    chat = Chat(model="demo", store=postgres_dsn).with_tools(Refund)
    chat.ask("Refund order 42")
    call_id = chat.pending_approvals[0].id
    chat.close()
    with open_store(postgres_dsn) as store:
        assert isinstance(store, PostgresStore)
        store.approve(call_id)
    alias = "postgres://" + postgres_dsn.split("://", 1)[1]  # the other scheme libpq knows
    loaded = Chat.load(chat.id, store=alias, tools=[Refund])
    loaded.complete()
    assert loaded.status == "complete" and count(counter) == 1
    loaded.close()


# ------------------------------------------------------------- at most once, in SQL
def test_connections_racing_for_one_claim_give_it_to_exactly_one(postgres_dsn: str) -> None:
    """Many connections claim the same approved calls at the same instant: for every call,
    exactly one claim succeeds (row locks; no whole-database lock as in SQLite)."""
    setup = PostgresStore(postgres_dsn)
    chats = []
    for _ in range(5):
        chat = Chat(model="demo", store=setup).with_tools(Refund)
        chat.ask("Refund order 42")
        setup.approve(chat.pending_approvals[0].id, chat_id=chat.id)
        chats.append((chat.id, chat.pending_approvals[0].id))
        chat.close()
    stores = [PostgresStore(postgres_dsn) for _ in range(6)]
    try:
        for chat_id, call_id in chats:
            barrier = threading.Barrier(len(stores))
            won: list[str] = []

            def claim(
                s: PostgresStore,
                owner: str,
                chat_id: str = chat_id,
                call_id: str = call_id,
                barrier: threading.Barrier = barrier,
                won: list[str] = won,
            ) -> None:
                barrier.wait()
                if s.claim(chat_id, call_id, owner).claimed:
                    won.append(owner)

            threads = [
                threading.Thread(target=claim, args=(s, f"h:{i}:0:t{i}"))
                for i, s in enumerate(stores)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len(won) == 1, won
            assert setup.call(call_id, chat_id=chat_id).claimed_by == won[0]
    finally:
        for s in [setup, *stores]:
            s.close()


def test_connections_racing_to_decide_one_call_record_one_decision(postgres_dsn: str) -> None:
    with PostgresStore(postgres_dsn) as setup:
        chat = Chat(model="demo", store=setup).with_tools(Refund)
        chat.ask("Refund order 42")
        call_id = chat.pending_approvals[0].id
        chat.close()
    stores = [PostgresStore(postgres_dsn) for _ in range(6)]
    barrier = threading.Barrier(len(stores))
    outcomes: list[str] = []

    def decide(i: int, s: PostgresStore) -> None:
        barrier.wait()
        try:
            if i % 2:
                s.approve(call_id, by=f"approver{i}")
            else:
                s.deny(call_id, by=f"denier{i}")
            outcomes.append("ok")
        except Exception as exc:  # DecisionError: already decided the other way
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=decide, args=(i, s)) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored = stores[0].call(call_id)
    with PostgresStore(postgres_dsn) as s, s._read() as conn:
        decisions = conn.execute("SELECT verdict, decided_by FROM decisions").fetchall()
    for s in stores:
        s.close()
    assert len(decisions) == 1  # first decision wins; the others were refused or no-ops
    verdict, by = decisions[0]
    assert stored.status == verdict and stored.decision is not None and stored.decision.by == by
    same = [i for i in range(6) if (i % 2 == 1) == (verdict == "approved")]
    assert outcomes.count("ok") == len(same) and outcomes.count("DecisionError") == 6 - len(same)


# ------------------------------------------------------------- the database goes away
def test_a_connection_the_server_ended_while_idle_is_replaced_at_the_next_operation(
    postgres_dsn: str, postgres_server: Any, counter: Path
) -> None:
    chat = Chat(model="demo", store=postgres_dsn).with_tools(Refund)
    chat.ask("Refund order 42")
    call = chat.pending_approvals[0]
    assert postgres_server.terminate(postgres_dsn) >= 1  # the database "goes away"
    chat.approve(call)  # nothing of it had been sent: it connects again and goes on
    chat.complete()
    assert chat.status == "complete" and count(counter) == 1
    chat.close()
    with open_store(postgres_dsn) as store:
        assert store.call(call.id).status == "ok"


class _CutOff(PostgresStore):
    """A store whose connection the server ends in the middle of its next ``arm``ed writes."""

    server: Any = None
    armed = 0
    cuts = 0
    only: str | None = None  # cut only a write holding an event of this type

    def _cut(self, entries: Any) -> None:
        if self.armed and (self.only is None or any(e.type == self.only for e in entries)):
            self.armed -= 1
            self.cuts += 1
            self.server.terminate(self.url)

    def _apply(self, conn: Any, chat_id: str, entries: Any, claim: Any = None) -> Any:
        self._cut(entries)
        return super()._apply(conn, chat_id, entries, claim)

    def _apply_at_once(self, conn: Any, chat_id: str, entries: Any, claim: Any = None) -> Any:
        self._cut(entries)  # the write sent at once (pipelined), cut off the same way
        return super()._apply_at_once(conn, chat_id, entries, claim)


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    _cut["lookups"] = _cut.get("lookups", 0) + 1
    return f"value of {key}"


def test_a_write_cut_off_mid_transaction_is_a_clear_error_and_loses_nothing(
    postgres_dsn: str, postgres_server: Any
) -> None:
    """The server ends the connection inside the claim's transaction: the claim raises a
    StoreError saying what happened, nothing of it is written, the tool does not run; the
    next step connects again, claims, runs it once, and the stored chat equals the live one."""
    _cut.clear()
    store = _CutOff(postgres_dsn)
    store.server, store.url = postgres_server, postgres_dsn
    chat = Chat(model="demo", store=store).with_tools(lookup)
    store.armed, store.only = 1, "tool_call_requested"  # the claim's (the question's goes first)
    with pytest.raises(StoreError, match=r"lost the connection.*rolled back.*connects again") as e:
        chat.ask("lookup the key alpha")
    assert PASSWORD not in str(e.value)
    assert store.cuts == 1 and _cut.get("lookups", 0) == 0  # not run: its claim was not written
    with PostgresStore(postgres_dsn) as other:
        assert other.calls(chat.id) == []  # nothing of the cut transaction is stored
    chat.complete()  # connects again
    assert chat.status == "complete" and _cut["lookups"] == 1
    # a result whose write is cut off: kept, retried, written (a warning says so)
    ext = store_ext(chat)
    deadline = time.monotonic() + 10
    while ext._retry is not None and time.monotonic() < deadline:  # the first cut's retry ends
        time.sleep(0.01)
    store.armed, store.only = 1, "tool_call_finished"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat.ask("lookup the key beta")
    assert chat.status == "complete" and _cut["lookups"] == 2 and store.cuts == 2
    assert caught and all("could not be written" in str(w.message) for w in caught)
    chat.close()
    with PostgresStore(postgres_dsn) as other:
        loaded = Chat.load(chat.id, store=other, tools=[lookup])
        assert loaded.transcript == chat.transcript
        assert [(c.id, c.status) for c in loaded.tool_calls] == [
            (c.id, c.status) for c in chat.tool_calls
        ]
        loaded.close()
    store.close()


_cut: dict[str, Any] = {}


@tool
def cut_off(order_id: int) -> str:
    """Refund, while the database goes away (the server ends every connection).

    Args:
        order_id: The order.
    """
    _cut["server"].terminate(_cut["dsn"])
    _cut["runs"] = _cut.get("runs", 0) + 1
    return f"refunded {order_id}"


def test_results_written_while_the_database_is_away_are_written_once_it_is_back(
    postgres_dsn: str, postgres_server: Any
) -> None:
    """The server ends the store's connection while a tool runs: its result cannot be
    written, nothing is lost (a warning; kept and retried), the next step reconnects, and the
    stored chat equals the live one; the tool ran once."""
    _cut.clear()
    _cut.update(server=postgres_server, dsn=postgres_dsn)
    chat = Chat(model="demo", store=postgres_dsn).with_tools(cut_off)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat.ask("cut off order 1")
        chat.ask("cut off order 2")
    assert chat.status == "complete" and _cut["runs"] == 2
    assert not [w for w in caught if "could not be written" not in str(w.message)]
    chat.close()
    loaded = Chat.load(chat.id, store=postgres_dsn, tools=[cut_off])
    assert loaded.transcript == chat.transcript
    assert [(c.id, c.status) for c in loaded.tool_calls] == [
        (c.id, c.status) for c in chat.tool_calls
    ]
    loaded.close()


def test_a_watch_survives_a_server_restart(postgres_dsn: str, postgres_server: Any) -> None:
    with PostgresStore(postgres_dsn) as store:
        chat = Chat(model="demo", store=store).with_tools(Refund)
        chat.ask("Refund order 42")
        call_id = chat.pending_approvals[0].id
        watch = store.watch([chat.id])
        postgres_server.restart()  # every connection is cut
        with PostgresStore(postgres_dsn) as other:
            other.approve(call_id)
        assert watch.wait(30) == {chat.id}  # caught up after reconnecting
        assert [c.id for c in chat.refresh()] == [call_id]  # the store reconnects too
        chat.close()


def test_text_postgres_cannot_hold_is_stored_replaced(postgres_dsn: str) -> None:
    with PostgresStore(postgres_dsn) as store:
        chat = Chat(model="demo", store=store)
        chat.ask("hello\x00world \udcff")  # a NUL (and a lone surrogate the chat cleans)
        chat.close()
        [info] = store.chats()
        assert info.title is not None and "\x00" not in info.title
        loaded = Chat.load(chat.id, store=store)
        assert loaded.transcript == chat.transcript  # the JSON keeps the NUL escaped
        loaded.close()


def test_a_store_dropped_without_closing_lets_its_connections_go(
    postgres_dsn: str, postgres_server: Any
) -> None:
    import gc
    import time

    dbname = postgres_dsn.rsplit("/", 1)[1]

    def backends() -> int:
        with postgres_server.admin() as conn:
            return int(
                conn.execute(
                    "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = %s", (dbname,)
                ).fetchone()[0]
            )

    store = PostgresStore(postgres_dsn)
    watch = store.watch()
    assert backends() == 2  # the store's connection and its listener
    listening = store._listener._task  # type: ignore[union-attr]
    del store
    gc.collect()
    deadline = time.monotonic() + 10
    while (backends() or not listening.done()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert backends() == 0 and listening.done()  # the listener's task ended too
    assert watch.closed


def test_close_returns_with_no_connection_of_the_store_open(postgres_dsn: str) -> None:
    """``store.close()`` returns once every connection of the store is closed, its listener's
    included, which nbagent's background loop closes (busy here when ``close()`` is called):
    a connection count, a ``DROP DATABASE`` or a process exit right after it finds none."""
    from urllib.parse import urlsplit

    from nbagent._aio import spawn

    port = urlsplit(postgres_dsn).port

    def sockets() -> set[int]:  # this process's open connections to the server (inodes)
        mine = set()
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/self/fd/{fd}")
                if target.startswith("socket:["):
                    mine.add(int(target[8:-1]))
        found = set()
        for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
            with contextlib.suppress(OSError), open(table) as lines:
                for line in list(lines)[1:]:
                    fields = line.split()  # remote address, state ("01": established), inode
                    remote, state, inode = fields[2], fields[3], int(fields[9])
                    if int(remote.rsplit(":", 1)[1], 16) == port and state == "01":
                        found.add(inode)
        return found & mine

    others = sockets()  # what earlier tests in this process left open is not ours
    store = PostgresStore(postgres_dsn)
    watch = store.watch()  # it listens: a connection of its own on the background loop
    assert len(sockets() - others) == 2
    busy = threading.Event()

    async def hold() -> None:
        busy.set()
        time.sleep(0.3)  # the loop that closes the listener's connection is busy meanwhile

    spawn(hold())
    assert busy.wait(10)
    store.close()
    assert sockets() - others == set()
    assert watch.closed


def test_writers_of_one_chat_take_turns_and_lose_no_event(postgres_dsn: str) -> None:
    """Two drivers of one chat (a stale copy, another process) write events whose numbers
    collide: each write holds the chat's lock, so every event is stored, those whose number
    was taken after the last one, as SQLite does under its whole-file lock."""
    from datetime import UTC, datetime

    from nbagent.store import ChatInfo
    from nbagent.store._protocol import Entry

    now = datetime.now(UTC)
    stores = [PostgresStore(postgres_dsn) for _ in range(6)]
    stores[0].create_chat(ChatInfo("c1", now, now, "demo", "demo"), None, {})
    barrier = threading.Barrier(len(stores))
    errors: list[BaseException] = []

    def write(i: int, s: PostgresStore) -> None:
        entries = [
            Entry(seq, "step_finished", now.isoformat(), f'{{"w": {i}, "n": {seq}}}')
            for seq in range(20)
        ]
        barrier.wait()
        try:
            for k in range(0, 20, 5):
                assert s.write("c1", entries[k : k + 5]) is None
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i, s)) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with stores[0]._read() as conn:
        seqs = [r[0] for r in conn.execute("SELECT seq FROM events ORDER BY seq").fetchall()]
    for s in stores:
        s.close()
    assert errors == []
    assert seqs == list(range(6 * 20))


def test_a_store_travels_to_a_worker_as_the_way_to_open_it(postgres_dsn: str) -> None:
    """Pickled (Ray, multiprocessing), a store is opened again with its own connections;
    ``reveal_dsn()`` says the DSN explicitly (nothing else shows the password)."""
    import pickle

    with PostgresStore(postgres_dsn, claim_timeout=30.0) as store:
        chat = Chat(model="demo", store=store)
        chat.ask("hello")
        chat.close()
        copy = pickle.loads(pickle.dumps(store))
        try:
            assert copy is not store and copy._conn is not store._conn
            assert copy.location == store.location and copy.claim_timeout == 30.0
            assert [c.id for c in copy.chats()] == [chat.id]
            assert copy.reveal_dsn() == postgres_dsn
        finally:
            copy.close()


# ------------------------------------------------------------------ binding a group's values
@pytest.fixture
def raw_connection(postgres_dsn: str) -> Any:
    import psycopg

    conn = psycopg.connect(postgres_dsn, autocommit=True)
    yield conn
    conn.close()


_SQL_TEXT = st.text(st.sampled_from(list("'\\\"$%?;-Ee()\n\x00")) | st.characters())


@given(value=_SQL_TEXT | st.binary() | st.integers(-(2**63), 2**63 - 1) | st.none())
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_value_bound_into_a_group_script_reads_back_as_itself(
    raw_connection: Any, value: Any
) -> None:
    """A group's statements are bound client-side into one simple query (``_literal``):
    whatever text (quotes, backslashes, ``E'``, ``$$``, ``%s``, ``?``, ``--``, any code
    point but NUL, which PostgreSQL text cannot hold), bytes or integer goes in comes back
    unchanged, whichever way ``standard_conforming_strings`` is set: nothing in a value is
    ever read as SQL."""
    from nbagent.store._postgres import _literal

    client = psycopg_client(raw_connection)
    expected = value.replace("\x00", "\ufffd") if isinstance(value, str) else value
    try:
        value.encode("utf-8") if isinstance(value, str) else None
    except UnicodeEncodeError:
        return  # a lone surrogate: the store repairs it before (test_group_commit)
    for conforming in ("on", "off"):
        raw_connection.execute(f"SET standard_conforming_strings = {conforming}")
        got = raw_connection.execute(f"SELECT {_literal(value, client)}; SELECT 1").fetchone()
        assert (bytes(got[0]) if isinstance(value, bytes) else got[0]) == expected
    raw_connection.execute("SET standard_conforming_strings = on")


def psycopg_client(conn: Any) -> Any:
    import psycopg

    return psycopg.ClientCursor(conn)
