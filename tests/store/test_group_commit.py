"""Group commit, on SQLite and PostgreSQL: the writes and claims of many chats (a batch's)
waiting for the store's one connection go together, in one transaction, and each caller
returns only once that transaction committed (``SQLStore._at_once``).

What is checked here is what a user relies on: nobody is told "written" (a claim is not
granted) before the commit; a conflict in one chat of a group loses nothing of the others
and is reported to its own writer; a claim of a group is granted once. The batch killed
mid-flight and resumed is ``tests/batch/test_batch_resume.py``'s, on both stores.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

from nbagent.store import ChatInfo, PostgresStore, SQLiteStore
from nbagent.store._postgres import _Script
from nbagent.store._protocol import CallFinal, Entry, NewCall, NewMessage
from nbagent.store._sql import SQLStore

if TYPE_CHECKING:  # at run time "conftest" is whichever the session imported first
    from conftest import Backend  # tests/store's


class _Counted(PostgresStore):
    """Counts the transactions its group commits send (and how many writes each held), and
    the statements sent."""

    def __init__(self, dsn: str):
        super().__init__(dsn)
        self.groups: list[int] = []
        self.committed: list[bool] = []  # whether each group committed (not job by job)
        self.statements: list[str] = []

    def _send_group(self, group: list[Any]) -> None:
        self.groups.append(len(group))
        super()._send_group(group)
        self.committed.append(all(job.written for job in group))

    def _scripted(self, group: list[Any], client: Any) -> tuple[_Script, Any]:
        script, expect = super()._scripted(group, client)
        self.statements.extend(script.parts)  # the statements of the group's round trip
        return script, expect


class _CountedSQLite(SQLiteStore):
    """The same count on SQLite."""

    def __init__(self, path: str):
        super().__init__(path)
        self.groups: list[int] = []

    def _send_group(self, group: list[Any]) -> None:
        self.groups.append(len(group))
        super()._send_group(group)


def _counted(backend: Backend) -> Any:
    return _CountedSQLite(backend.url) if backend.kind == "sqlite" else _Counted(backend.url)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _chat(store: SQLStore, chat_id: str) -> None:
    now = datetime.now(UTC)
    store.create_chat(ChatInfo(chat_id, now, now, "demo", "demo"), None, {})


def _chats(store: Any, ids: Any) -> None:
    """Create each chat of ``ids``, then forget the groups that took (only the test's count)."""
    for chat_id in ids:
        _chat(store, chat_id)
    store.groups.clear()


def _message(idx: int, text: str, seq: int) -> Entry:
    data = f'{{"role": "user", "content": "{text}"}}'
    return Entry(seq, "message_added", _now(), None, NewMessage(idx, 0, "user", data, seq, _now()))


def _call(call_id: str, seq: int) -> Entry:
    change = NewCall(
        call_id, seq, "look", "{}", None, None, "requested", False, "null", 0, 1, _now()
    )
    return Entry(seq, "tool_call_requested", _now(), None, change)


def _queued_together(store: SQLStore, calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` on threads while the store's connection is taken, so that all of them
    wait in its queue; then let go: the next holder sends them as one group. Returns each
    call's result (or what it raised), after checking none returned before the release."""
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            results[i] = calls[i]()
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    with store._lock:
        for t in threads:
            t.start()
        while len(store._queue) < len(calls):  # every write waits for the connection
            time.sleep(0.001)
            assert all(t.is_alive() for t in threads)
        assert all(t.is_alive() for t in threads)  # none was told "written" yet
    for t in threads:
        t.join(timeout=60)
    return results


def test_many_chats_writes_go_in_one_commit_and_each_returns_only_once_it_is_stored(
    backend: Backend,
) -> None:
    store = _counted(backend)
    ids = [f"c{i}" for i in range(8)]
    _chats(store, ids)

    def write(chat_id: str) -> Callable[[], Any]:
        return lambda: store.write(
            chat_id,
            [
                _message(0, f"hello from {chat_id}", 0),
                Entry(1, "step_finished", _now(), f'{{"chat": "{chat_id}"}}'),
            ],
        )

    assert _queued_together(store, [write(c) for c in ids]) == [None] * 8
    assert store.groups == [8]  # one transaction, one commit, for the eight chats
    with backend.open() as other:  # what another process reads: all of it
        for chat_id in ids:
            record = other.load(chat_id)
            assert [m["content"] for m in record.messages] == [f"hello from {chat_id}"]
            with other._read() as conn:
                rows = conn.execute("SELECT type FROM events WHERE chat_id = ?", (chat_id,))
                assert [r[0] for r in rows.fetchall()] == ["step_finished"]
    store.close()


def test_a_conflict_in_one_chat_of_a_group_is_its_writers_and_loses_nothing_of_the_others(
    backend: Backend,
) -> None:
    """Chat "a"'s first message was written by another process: its write in the group
    reports the conflict (as alone), and chat "b"'s write of the same group is stored."""
    store = _counted(backend)
    for chat_id in ("a", "b"):
        _chat(store, chat_id)
    with backend.open() as other:
        assert other.write("a", [_message(0, "the other process", 0)]) is None
    store.groups.clear()
    got = _queued_together(
        store,
        [
            lambda: store.write("a", [_message(0, "this process", 0)]),
            lambda: store.write("b", [_message(0, "this process", 0)]),
        ],
    )
    assert got[0] == "message 0 of the transcript was written by another process"
    assert got[1] is None
    assert store.groups == [2]  # tried together, then each alone (statement by statement)
    assert [m["content"] for m in store.load("a").messages] == ["the other process"]
    assert [m["content"] for m in store.load("b").messages] == ["this process"]
    store.close()


def test_claims_of_one_call_in_two_processes_groups_grant_it_once(backend: Backend) -> None:
    """Two stores (two processes) each claim the same calls inside their own groups:
    every call is granted to exactly one of them, and its row names that one."""
    stores = [_counted(backend) for _ in range(2)]
    ids = [f"k{i}" for i in range(6)]
    for chat_id in ids:
        _chat(stores[0], chat_id)
        assert stores[0].write(chat_id, [_call(f"{chat_id}-call", 0)]) is None
    barrier = threading.Barrier(2 * len(ids))
    granted: dict[tuple[int, str], bool] = {}

    def claim(s: int, chat_id: str) -> None:
        barrier.wait()
        result = stores[s].claim(chat_id, f"{chat_id}-call", f"owner-{s}")
        granted[(s, chat_id)] = result.claimed

    threads = [threading.Thread(target=claim, args=(s, c)) for s in range(2) for c in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for chat_id in ids:
        winners = [s for s in range(2) if granted[(s, chat_id)]]
        assert len(winners) == 1, (chat_id, granted)
        stored = stores[0].call(f"{chat_id}-call", chat_id=chat_id)
        assert (stored.status, stored.claimed_by) == ("running", f"owner-{winners[0]}")
    for s in stores:
        s.close()


@pytest.mark.parametrize("fail", ["statement", "commit"])
def test_a_group_that_cannot_commit_tells_every_writer_and_writes_none(
    postgres_dsn: str, postgres_server: Any, fail: str
) -> None:
    """The connection is cut before the group's commit: every writer of the group gets a
    StoreError (none is told "written"), and nothing of any of them is stored."""

    class _Cut(_Counted):
        cut = False

        def _apply_at_once(self, *args: Any) -> Any:
            if fail == "statement" and not self.cut:  # the group's transaction has begun
                self.cut = True
                postgres_server.terminate(postgres_dsn)
            return super()._apply_at_once(*args)

    store = _Cut(postgres_dsn)
    for chat_id in ("x", "y", "z"):
        _chat(store, chat_id)
    if fail == "commit":  # the server ends the backend while the group's statements wait
        real = store._idle

        def idle() -> Any:
            conn = real()
            raw_execute = conn.raw.execute

            def execute(sql: Any, *a: Any, **k: Any) -> Any:
                if sql == "COMMIT":
                    postgres_server.terminate(postgres_dsn)
                return raw_execute(sql, *a, **k)

            conn.raw.execute = execute  # type: ignore[method-assign]
            return conn

        store._idle = idle  # type: ignore[method-assign]
    got = _queued_together(
        store, [lambda c=c: store.write(c, [_message(0, f"to {c}", 0)]) for c in ("x", "y", "z")]
    )
    assert all(type(r).__name__ == "StoreError" for r in got), got
    assert all("lost the connection" in str(r) for r in got)
    with PostgresStore(postgres_dsn) as other:
        for chat_id in ("x", "y", "z"):
            assert other.load(chat_id).messages == []


def test_text_the_database_cannot_take_in_one_write_of_a_group_loses_nothing(
    backend: Backend,
) -> None:
    """One chat's message holds a lone surrogate (the database cannot store it): its own
    write is retried with the text repaired, and the other chat's write of the same group
    is stored as it was."""
    store = _counted(backend)
    _chats(store, ("a", "b"))
    got = _queued_together(
        store,
        [
            lambda: store.write("a", [_message(0, "bad \ud800 text", 0)]),
            lambda: store.write("b", [_message(0, "fine", 0)]),
        ],
    )
    assert got == [None, None]
    assert store.groups[0] == 2  # tried together first
    assert [m["content"] for m in store.load("a").messages] == ["bad \ufffd text"]
    assert [m["content"] for m in store.load("b").messages] == ["fine"]
    store.close()


def test_a_postgres_group_sends_each_tables_rows_in_one_statement(postgres_dsn: str) -> None:
    """Eight chats' messages, calls (one with arguments long enough for their own row,
    which refers to its call's) and events: one statement per table (the arguments' after
    the calls'), one commit, every row stored as written alone."""
    store = _Counted(postgres_dsn)
    ids = [f"m{i}" for i in range(8)]
    _chats(store, ids)
    long_args = '{"text": "' + "x" * 5000 + '"}'

    def write(i: int, chat_id: str) -> Callable[[], Any]:
        call = _call(f"{chat_id}-call", 1)
        if i == 3:  # its arguments go to call_arguments, after the calls' rows
            change = dataclasses.replace(call.change, arguments=long_args)
            call = dataclasses.replace(call, change=change)
        return lambda: store.write(
            chat_id,
            [
                _message(0, f"hello from {chat_id}", 0),
                call,
                Entry(2, "step_finished", _now(), f'{{"chat": "{chat_id}"}}'),
            ],
        )

    assert _queued_together(store, [write(i, c) for i, c in enumerate(ids)]) == [None] * 8
    assert store.groups == [8] and store.committed == [True]
    inserts = [q.split()[2] for q in store.statements if q.startswith("INSERT INTO ")]
    assert sorted(inserts) == ["call_arguments", "events", "messages", "tool_calls"]
    # m3's long arguments go after the calls (their row refers to its call's)
    assert inserts.index("tool_calls") < inserts.index("call_arguments")
    with PostgresStore(postgres_dsn) as other:
        for chat_id in ids:
            assert [m["content"] for m in other.load(chat_id).messages] == [f"hello from {chat_id}"]
            (call,) = other.calls(chat_id)
            assert call.arguments == ({"text": "x" * 5000} if chat_id == "m3" else {})
            with other._read() as conn:
                rows = conn.execute("SELECT type FROM events WHERE chat_id = ?", (chat_id,))
                assert [r[0] for r in rows.fetchall()] == ["step_finished"]
    store.close()


def test_a_postgres_group_sends_its_recordings_and_locks_in_one_statement_each(
    postgres_dsn: str,
) -> None:
    """Six chats' recordings (each a response and the step that asked for it), two of them
    recording the same request: one lock statement for the group, one statement for the
    responses and one for the steps, except the second recording of the shared key, which
    follows in a statement of its own (PostgreSQL refuses to change a row twice in one).
    Every step points to its key, and the shared key holds the later response, as written
    one by one."""
    from nbagent._recording import Digests, Recording
    from nbagent.testing import reply

    store = _Counted(postgres_dsn)
    ids = [f"r{i}" for i in range(6)]
    _chats(store, ids)

    def write(chat_id: str) -> Callable[[], Any]:
        key = "shared" if chat_id in ("r1", "r4") else f"key-{chat_id}"
        asked = {"model": "demo", "messages": Digests([("user", key)]), "tools": []}
        rec = Recording(key, asked, reply(f"from {chat_id}"))
        return lambda: store.write(
            chat_id, [_message(0, f"hello from {chat_id}", 0)], recorded=[(rec, chat_id, 1, False)]
        )

    assert _queued_together(store, [write(c) for c in ids]) == [None] * 6
    assert store.groups == [6] and store.committed == [True]

    def sent(head: str) -> int:
        return len([q for q in store.statements if q.startswith(head)])

    assert sent("SELECT pg_advisory_xact_lock") == 1
    assert sent("INSERT INTO recordings ") == 2  # r4's shared key waits for the next one
    assert sent("INSERT INTO model_requests ") == 1
    with PostgresStore(postgres_dsn) as other, other._read() as conn:
        rows = conn.execute("SELECT key, chat_id FROM recordings ORDER BY key").fetchall()
        # the shared key names its later writer (the response is in that chat's message)
        assert sorted(tuple(r) for r in rows) == sorted(
            [("shared", "r4"), *((f"key-{c}", c) for c in ids if c not in ("r1", "r4"))]
        )
        rows = conn.execute("SELECT chat_id, step, key FROM model_requests").fetchall()
        assert sorted(tuple(r) for r in rows) == sorted(
            (c, 1, "shared" if c in ("r1", "r4") else f"key-{c}") for c in ids
        )
    store.close()


def _final(call_id: str, seq: int, text: str, owner: str | None = None) -> Entry:
    result = json.dumps(
        {"role": "tool", "tool_call_id": call_id, "content": text, "is_error": False}
        | {"status": "ok", "name": "look"}
    )
    change = CallFinal(call_id, "ok", result, _now(), _now(), owner)
    return Entry(seq, "tool_call_finished", _now(), None, change)


def test_a_postgres_group_sends_its_calls_results_and_chats_updates_in_one_statement_each(
    postgres_dsn: str,
) -> None:
    """Six chats' results: four of calls written before (one of them claimed by this
    process), two of calls the same group writes (inserted, then finished), each chat
    titled by its first message: one statement for the results, after the calls'
    inserts, one for the titles; one commit; every call stored with its own result, the
    claimed one's kept only for its owner."""
    store = _Counted(postgres_dsn)
    ids = [f"f{i}" for i in range(6)]
    _chats(store, ids)
    for chat_id in ids[:4]:
        assert store.write(chat_id, [_call(f"{chat_id}-call", 0)]) is None
    assert store.claim("f0", "f0-call", "me").claimed
    store.statements.clear()
    store.groups.clear()
    store.committed.clear()

    def write(chat_id: str) -> Callable[[], Any]:
        entries = [_message(0, f"title of {chat_id}", 1)]
        if chat_id in ("f4", "f5"):  # the call and its result in one write
            entries.append(_call(f"{chat_id}-call", 0))
        owner = "me" if chat_id == "f0" else None
        entries.append(_final(f"{chat_id}-call", 2, f"found by {chat_id}", owner))
        return lambda: store.write(chat_id, entries)

    assert _queued_together(store, [write(c) for c in ids]) == [None] * 6
    assert store.groups == [6] and store.committed == [True]
    heads = [" ".join(q.split()[: 3 if q.startswith("INSERT") else 2]) for q in store.statements]
    assert heads.count("UPDATE tool_calls") == 1 and heads.count("UPDATE chats") == 1
    assert heads.index("INSERT INTO tool_calls") < heads.index("UPDATE tool_calls")
    with PostgresStore(postgres_dsn) as other:
        for chat_id in ids:
            (call,) = other.calls(chat_id)
            assert call.status == "ok"
            assert call.result is not None and f"found by {chat_id}" in str(call.result)
        titles = {info.id: info.title for info in other.chats()}
        assert all(titles[c] == f"title of {c}" for c in ids)
    store.close()


def test_a_result_for_a_call_another_process_claimed_writes_none_of_its_group_by_mistake(
    postgres_dsn: str,
) -> None:
    """A result written as one row of the group's one statement is held to what it is
    alone: a call running under another process's claim keeps running (its writer is told
    so), and the other chats' results of the group are stored."""
    store = _Counted(postgres_dsn)
    _chats(store, ("a", "b"))
    for chat_id in ("a", "b"):
        assert store.write(chat_id, [_call(f"{chat_id}-call", 0)]) is None
    with PostgresStore(postgres_dsn) as other:
        assert other.claim("a", "a-call", "another process").claimed
    store.groups.clear()
    store.committed.clear()
    got = _queued_together(
        store,
        [
            lambda: store.write("a", [_final("a-call", 1, "mine")]),
            lambda: store.write("b", [_final("b-call", 1, "mine")]),
        ],
    )
    assert isinstance(got[0], str) and "running" in got[0], got
    assert got[1] is None
    assert store.groups == [2] and store.committed == [False]  # then each alone
    a, b = store.calls("a")[0], store.calls("b")[0]
    assert (a.status, a.claimed_by, a.result) == ("running", "another process", None)
    assert b.status == "ok"
    store.close()


def test_text_that_means_something_to_sql_or_psycopg_is_stored_as_written(
    backend: Backend,
) -> None:
    """A group's values are bound client-side into one query on PostgreSQL: quotes,
    backslashes, semicolons, placeholders and a NUL (escaped in the message's JSON) come
    back as written, in every chat of the group."""
    store = _counted(backend)
    for chat_id in ("q1", "q2"):
        _chat(store, chat_id)
    text = "it's 100%s; %(x)s %% \\ DROP TABLE chats; -- \x00 é \u2028"
    got = _queued_together(
        store,
        [
            lambda: store.write(
                "q1", [dataclasses.replace(_message(0, "x", 0), change=_said(text))]
            ),
            lambda: store.write(
                "q2", [dataclasses.replace(_message(0, "x", 0), change=_said(text[::-1]))]
            ),
        ],
    )
    assert got == [None, None]
    assert store.groups[-1] == 2
    if backend.kind == "postgres":
        assert store.committed[-1] is True  # as one group, not written again one by one
    assert [m["content"] for m in store.load("q1").messages] == [text]
    assert [m["content"] for m in store.load("q2").messages] == [text[::-1]]
    store.close()


def _said(text: str) -> NewMessage:
    data = json.dumps({"role": "user", "content": text})
    return NewMessage(0, 0, "user", data, 0, _now())


def test_a_loops_group_with_one_conflicting_write_writes_none_and_each_writes_alone(
    postgres_dsn: str,
) -> None:
    """The async sender's group (one round trip: every statement checked server-side, then
    COMMIT): a message another process wrote first makes its write change no row, so the
    whole transaction aborts before its COMMIT: neither job is written, and each then
    writes alone (the conflicting one is refused, the other is stored)."""
    import asyncio

    store = _Counted(postgres_dsn)
    for chat_id in ("a", "b"):
        _chat(store, chat_id)
    with PostgresStore(postgres_dsn) as other:
        assert other.write("b", [_message(0, "first, elsewhere", 0)]) is None
    jobs = [store.write_job(c, [_message(0, f"to {c}", 0)]) for c in ("a", "b")]
    assert all(job is not None for job in jobs)

    async def send_together() -> list[bool]:
        return list(await asyncio.gather(*(store.send_async(job) for job in jobs if job)))

    assert asyncio.run(send_together()) == [False, False]  # one group, rolled back
    assert store.load("a").messages == []  # nothing of the group was written
    assert store.write("a", [_message(0, "to a", 0)]) is None  # alone: written
    assert "written by another process" in str(store.write("b", [_message(0, "to b", 0)]))
    assert [m["content"] for m in store.load("a").messages] == ["to a"]
    assert [m["content"] for m in store.load("b").messages] == ["first, elsewhere"]
    store.close()


def test_a_loops_group_with_text_the_server_refuses_writes_none_and_each_writes_alone(
    postgres_dsn: str,
) -> None:
    """One job of a loop's group holds a lone surrogate (PostgreSQL cannot take it): the
    group writes nothing, then each writes alone: the other job as it was, that one with
    its text repaired."""
    import asyncio

    store = _Counted(postgres_dsn)
    for chat_id in ("a", "b"):
        _chat(store, chat_id)
    texts = {"a": "fine", "b": "bad \ud800 text"}
    jobs = [store.write_job(c, [_message(0, texts[c], 0)]) for c in ("a", "b")]
    assert all(job is not None for job in jobs)

    async def send_together() -> list[bool]:
        return list(await asyncio.gather(*(store.send_async(job) for job in jobs if job)))

    assert asyncio.run(send_together()) == [False, False]  # one group: nothing written
    assert store.load("a").messages == [] and store.load("b").messages == []
    for chat_id in ("a", "b"):
        assert store.write(chat_id, [_message(0, texts[chat_id], 0)]) is None
    assert [m["content"] for m in store.load("a").messages] == ["fine"]
    assert [m["content"] for m in store.load("b").messages] == ["bad \ufffd text"]
    store.close()


def test_a_group_keeps_the_order_of_upserts_of_one_key() -> None:
    """An upsert's rows are held for one multi-row statement, but PostgreSQL refuses to
    change a row twice in one statement: a row whose key is held already sends those held
    first, and rows repeating a key among themselves go one by one after them, so the last
    written wins, as when each row went alone."""
    from nbagent.store._sql import _GroupConn

    class Conn:
        def __init__(self) -> None:
            self.sent: list[tuple[str, list[Any]]] = []

        def execute(self, sql: str, params: Any = ()) -> Any:
            self.sent.append((len(params) // 4 * "r", list(params)))  # a row: 4 values

        def executemany(self, sql: str, rows: Any) -> Any:
            for row in rows:
                self.execute(sql, row)

    upsert = (
        "INSERT INTO model_requests (chat_id, step, key, replayed) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (chat_id, step) DO UPDATE SET key = excluded.key"
    )
    conn = Conn()
    grouped = _GroupConn(conn)
    grouped.execute(upsert, ("a", 1, "k1", 0))
    grouped.execute(upsert, ("b", 1, "k2", 0))
    assert conn.sent == []  # held
    grouped.execute(upsert, ("a", 1, "k3", 0))  # a's step 1 again: the two held go first
    assert conn.sent == [("rr", ["a", 1, "k1", 0, "b", 1, "k2", 0])]
    grouped.executemany(upsert, [("c", 1, "k4", 0), ("c", 1, "k5", 0)])  # c twice: alone
    grouped.send()
    assert conn.sent == [
        ("rr", ["a", 1, "k1", 0, "b", 1, "k2", 0]),
        ("r", ["a", 1, "k3", 0]),
        ("r", ["c", 1, "k4", 0]),
        ("r", ["c", 1, "k5", 0]),
    ]
    grouped.execute(upsert + " RETURNING key", ("d", 1, "k6", 0))  # its caller reads rows:
    assert conn.sent[-1] == ("r", ["d", 1, "k6", 0])  # sent at once, never held


def test_a_groups_updates_keep_their_order_with_the_statements_of_their_table() -> None:
    """A group holds the updates of rows by key (calls' results) for one statement, sent
    after its table's inserts (a call the group inserts can be finished by it); but an
    update held goes before an insert of its own row that came after it, and before any
    statement on its table sent at once (a claim), so each sees what came before it."""
    from nbagent.store._sql import _FINAL_CALL, _GroupConn

    sent: list[tuple[str, list[Any]]] = []

    class Conn:
        def execute(self, sql: str, params: Any = ()) -> Any:
            sent.append((" ".join(sql.split()[:2]), list(params)))

    calls = "INSERT INTO tool_calls (chat_id, call_id) VALUES (?, ?) ON CONFLICT DO NOTHING"
    claim = "UPDATE tool_calls SET status = 'running' WHERE chat_id = ? AND call_id = ?"

    def final(chat: str, call: str) -> tuple[Any, ...]:
        return ("ok", "{}", None, "t", chat, call, None)

    grouped = _GroupConn(Conn())
    grouped.execute(_FINAL_CALL, final("a", "c1"))
    grouped.execute(calls, ("b", "c2"))  # another row: the update waits for it
    grouped.execute(_FINAL_CALL, final("b", "c2"))
    assert sent == []
    grouped.send()
    assert [s[0] for s in sent] == ["INSERT INTO", "UPDATE tool_calls"]
    assert sent[1][1] == [*final("a", "c1"), *final("b", "c2")]  # one statement, in order

    sent.clear()
    grouped.execute(_FINAL_CALL, final("a", "c3"))
    grouped.execute(calls, ("a", "c3"))  # its own row, after its update: the update first
    assert sent == [("UPDATE tool_calls", list(final("a", "c3")))]
    grouped.execute(_FINAL_CALL, final("a", "c4"))
    grouped.execute(claim, ("a", "c5"))  # at once: what is held of its table goes first
    assert [s[0] for s in sent[1:]] == ["INSERT INTO", "UPDATE tool_calls", "UPDATE tool_calls"]
    assert sent[-1] == ("UPDATE tool_calls", ["a", "c5"])
    grouped.execute(_FINAL_CALL, final("a", "c6"))
    grouped.execute(_FINAL_CALL, final("a", "c6"))  # one row twice: two statements
    grouped.send()
    assert sent[-2:] == [("UPDATE tool_calls", list(final("a", "c6")))] * 2


def test_a_group_sends_rows_after_the_rows_they_refer_to_whatever_came_first() -> None:
    """A call's long arguments (their own table, referring to the call's row) held before
    the calls' statement (the calls' rows sent once, then held again): sending all of
    them sends the calls first, once each."""
    from nbagent.store._sql import _GroupConn

    sent: list[str] = []

    class Conn:
        def execute(self, sql: str, params: Any = ()) -> Any:
            sent.append(sql.split()[2])

    calls = "INSERT INTO tool_calls (chat_id, call_id) VALUES (?, ?) ON CONFLICT DO NOTHING"
    arguments = (
        "INSERT INTO call_arguments (chat_id, call_id, arguments) VALUES (?, ?, ?) "
        "ON CONFLICT (chat_id, call_id) DO UPDATE SET arguments = excluded.arguments"
    )
    grouped = _GroupConn(Conn())
    grouped.execute(calls, ("a", "c1"))
    grouped.send("tool_calls")
    grouped.execute(arguments, ("a", "c1", "{}"))
    grouped.execute(calls, ("a", "c2"))
    grouped.execute(arguments, ("a", "c2", "{}"))
    grouped.send()
    assert sent == ["tool_calls", "tool_calls", "call_arguments"]
