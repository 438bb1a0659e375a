"""PostgreSQL's group commit from the event loop (``nbagent/store/_pg_sender.py``): the writes
and claims of the chats one loop drives (``await chat.ask_async()``, a batch) go to that
loop's sender, which sends them as one transaction in one round trip on its own async
connection, with no worker thread.

What a user relies on, checked here on a real server: everything is in the store when the
drive returns; a call is claimed (committed, ``running``) before its tool runs; a batch's
chats share commits; a group that does not commit, or whose commit's answer is lost, loses
nothing and runs no tool twice; one chat's conflict or text the database cannot take costs
the other chats of its group nothing; the sender's connection goes with ``store.close()``,
with its loop, and with a store dropped unclosed; a drive cancelled while its group is in
flight leaves the store consistent (a claimed call runs at most once, or is reported in
doubt). The thread path's group commit is ``test_group_commit.py``'s, the thread handoff
of both stores ``test_off_loop.py``'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

import nbagent
from nbagent import Chat, LLMToolResponse, ModelRequestFinished, tool
from nbagent.providers import ModelRequest
from nbagent.store import ChatInfo, PostgresStore
from nbagent.testing import ScriptedProvider, call_tools, reply

RAN: list[str] = []
_ran_lock = threading.Lock()


@tool
def lookup(item: str) -> str:
    """Look an item up.

    Args:
        item: The item.
    """
    with _ran_lock:
        RAN.append(item)
    return f"{item}: found"


def _prompt(request: ModelRequest) -> str:
    return next(str(m.content) for m in request.messages if m.role == "user")


def _rounds(n: int) -> Callable[[ModelRequest], LLMToolResponse]:
    """A model that asks for ``lookup`` ``n`` times (one call a round), then answers; it
    reads the transcript, so a chat continued elsewhere (loaded, a batch rerun) goes on."""

    def respond(request: ModelRequest) -> LLMToolResponse:
        prompt = _prompt(request)
        done = sum(1 for m in request.messages if m.role == "tool")
        if done < n:
            return call_tools(("lookup", {"item": f"{prompt}#{done}"}))
        return reply(f"answer to {prompt}")

    return respond


def _maker(n: int) -> Callable[[], Chat]:
    """A batch's ``make_chat``: ``n`` rounds of ``lookup`` per chat."""
    return lambda: Chat(provider=ScriptedProvider([_rounds(n)], repeat_last=True)).with_tools(
        lookup
    )


def _expected_runs(prompts: Sequence[str], n: int) -> Counter[str]:
    return Counter(f"{p}#{i}" for p in prompts for i in range(n))


class _Spied(PostgresStore):
    """Notes how its writes travel: the jobs made for the loop's sender (``"chat"``: a batch
    row's creation, ``"claims"``: a write with claims, ``"write"``: one without), each group
    the sender sent (its jobs, whether it committed, on which thread), the groups of the
    thread path (``_send_group``), and every call of the careful path's methods."""

    def __init__(self, dsn: str, **kwargs: Any) -> None:
        super().__init__(dsn, **kwargs)
        self.dsn = dsn
        self.jobs: list[tuple[str, Any]] = []
        self.rows: dict[str, Any] = {}  # a batch row's creation job, by its input's key
        self.groups: list[list[Any]] = []
        self.committed: list[bool] = []
        self.threads: set[threading.Thread] = set()
        self.pids: set[int] = set()  # the sender's connections' server processes
        self.thread_groups: list[int] = []
        self.careful: list[str] = []

    def kind(self, job: Any) -> str:
        return next(k for k, j in self.jobs if j is job)

    def kinds(self, group: Sequence[Any]) -> list[str]:
        return [self.kind(job) for job in group]

    # the sender's path
    def write_job(
        self,
        chat_id: str,
        entries: Sequence[Any],
        state: Mapping[str, Any] | None = None,
        tools: Mapping[str, Any] | None = None,
        recorded: Sequence[Any] = (),
        claims: Sequence[str] = (),
        owner: str = "",
        decisions: Any = None,
    ) -> Any:
        job = super().write_job(chat_id, entries, state, tools, recorded, claims, owner, decisions)
        if job is not None:
            self.jobs.append(("claims" if claims else "write", job))
        return job

    def batch_chat_job(
        self, info: ChatInfo, system: str | None, state: Mapping[str, Any], batch_id: str, key: str
    ) -> Any:
        job = super().batch_chat_job(info, system, state, batch_id, key)
        if job is not None:
            self.jobs.append(("chat", job))
            self.rows[key] = job
        return job

    async def _send_group_async(self, conn: Any, group: list[Any]) -> None:
        self.groups.append(list(group))
        self.threads.add(threading.current_thread())
        self.pids.add(conn.info.backend_pid)
        try:
            await self._before_group(conn, group)
            await super()._send_group_async(conn, group)
        finally:
            self.committed.append(all(job.written for job in group))

    async def _before_group(self, conn: Any, group: list[Any]) -> None:
        """What a test does while a group is under way, before it is sent."""

    # the thread path
    def _send_group(self, group: list[Any]) -> None:
        self.thread_groups.append(len(group))
        super()._send_group(group)

    def write(
        self,
        chat_id: str,
        entries: Sequence[Any],
        state: Mapping[str, Any] | None = None,
        tools: Mapping[str, Any] | None = None,
        recorded: Sequence[Any] = (),
    ) -> str | None:
        self.careful.append("write")
        return super().write(chat_id, entries, state, tools, recorded)

    def claim(
        self,
        chat_id: str,
        call_id: str,
        owner: str,
        entries: Sequence[Any] = (),
        state: Mapping[str, Any] | None = None,
        decision: Any = None,
    ) -> Any:
        self.careful.append("claim")
        return super().claim(chat_id, call_id, owner, entries, state, decision)

    def record_response(self, recording: Any, chat_id: str, step: int, replayed: bool) -> None:
        self.careful.append("record_response")
        super().record_response(recording, chat_id, step, replayed)

    def create_chat(
        self,
        info: ChatInfo,
        system: str | None,
        state: Mapping[str, Any],
        parent: Mapping[str, Any] | None = None,
    ) -> None:
        self.careful.append("create_chat")
        super().create_chat(info, system, state, parent)

    def add_batch_chat(self, batch_id: str, key: str, chat_id: str) -> str:
        self.careful.append("add_batch_chat")
        return super().add_batch_chat(batch_id, key, chat_id)


def _story(store: _Spied) -> str:
    """What a store's writes did, for an assertion's message: each sender group's kinds and
    whether it committed, the thread path's groups, the careful path's calls."""
    groups = [
        f"{i}:{'+'.join(store.kinds(g))}:{'ok' if ok else 'not written'}"
        for i, (g, ok) in enumerate(zip(store.groups, store.committed, strict=False))
    ]
    return (
        f"groups {groups}; thread groups {store.thread_groups}; "
        f"careful {Counter(store.careful)}; ran {sorted(Counter(RAN).items())}"
    )


def _statuses(store: PostgresStore) -> Counter[str]:
    """Every stored call's status, counted (read on another connection)."""
    with PostgresStore(store.reveal_dsn()) as other, other._read() as conn:
        rows = conn.execute("SELECT status FROM tool_calls").fetchall()
    return Counter(str(r[0]) for r in rows)


def _check_rows(store: PostgresStore, result: Any, prompts: Sequence[str], n: int) -> None:
    """Every row done with its answer; its stored chat holds the prompt once, each round's
    result once, the answer last (another connection reads it)."""
    assert list(result["status"]) == ["done"] * len(prompts), result[["status", "error"]]
    assert list(result["reply"]) == [f"answer to {p}" for p in prompts]
    with PostgresStore(store.reveal_dsn()) as other:
        for prompt, chat_id in zip(prompts, result["chat_id"], strict=True):
            contents = [m["content"] for m in other.load(chat_id).messages]
            rounds = [x for i in range(n) for x in (None, f"{prompt}#{i}: found")]
            assert contents == [prompt, *rounds, f"answer to {prompt}"], (chat_id, contents)


# ------------------------------------------------------------------ the path itself
def test_an_async_drive_writes_and_claims_through_its_loops_sender_not_a_thread(
    postgres_dsn: str,
) -> None:
    """Three rounds of ``ask_async``: every round's write and claim is a job the loop's
    sender commits (no ``claim`` on a worker thread, no thread group), and all of it is
    in the store, read by another connection, when ``ask_async`` returns. The question and
    the answer are each written by a step hook before its step goes on (on a worker
    thread: a step hook cannot await the sender), so that a copy another process moved
    on stops ``busy`` before the model is asked, or before it reports an answer."""
    RAN.clear()
    store = _Spied(postgres_dsn)
    script = [*(call_tools(("lookup", {"item": f"x{i}"})) for i in range(3)), reply("done")]
    chat = Chat(provider=ScriptedProvider(script), store=store).with_tools(lookup)
    store.careful.clear()  # Chat(store=...) created its row: before any loop
    driving: list[threading.Thread] = []

    async def drive() -> None:
        driving.append(threading.current_thread())
        await chat.ask_async("look three things up")

    asyncio.run(drive())
    assert chat.status == "complete" and RAN == ["x0", "x1", "x2"]
    assert store.careful == ["write", "write"]  # the question, the answer: nothing else
    assert store.thread_groups == [1, 1]  # those two alone: no round's write on a thread
    assert store.threads == {driving[0]}  # every group sent from the driving loop
    assert [k for k, _ in store.jobs].count("claims") == 3  # one per round, before it ran
    assert all(store.committed) and sum(map(len, store.groups)) == len(store.jobs)
    with PostgresStore(postgres_dsn) as other:  # all of it on disk when ask_async returned
        stored = other.load(chat.id)
        assert [c.status for c in stored.calls] == ["ok"] * 3
        assert stored.messages[-1]["role"] == "assistant"
        assert stored.messages[-1]["content"] == "done"
        assert len(other.recordings()) == 4
    store.close()


def test_each_call_of_a_batch_is_claimed_before_its_tool_runs(postgres_dsn: str) -> None:
    """Eight chats run at once: when each tool runs, another store object (another
    connection) reads its own call as ``running``, claimed by that chat alone."""
    seen: dict[str, tuple[str, str | None]] = {}
    other = PostgresStore(postgres_dsn)

    @tool
    def probe(item: str) -> str:
        """Read my own row from another connection.

        Args:
            item: The item.
        """
        call = nbagent.current_tool_call()
        assert call is not None
        row = other.call(call.id)
        seen[item] = (row.status, row.claimed_by)
        return f"{item}: found"

    def respond(request: ModelRequest) -> LLMToolResponse:
        if any(m.role == "tool" for m in request.messages):
            return reply(f"answer to {_prompt(request)}")
        return call_tools(("probe", {"item": _prompt(request)}))

    store = _Spied(postgres_dsn)
    prompts = [f"task {i}" for i in range(8)]
    result = nbagent.batch(
        prompts,
        lambda: Chat(provider=ScriptedProvider([respond], repeat_last=True)).with_tools(probe),
        store=store,
        concurrency=8,
        progress=False,
    )
    assert list(result["status"]) == ["done"] * 8, result[["status", "error"]]
    assert sorted(seen) == prompts
    assert {status for status, _ in seen.values()} == {"running"}
    owners = [owner for _, owner in seen.values()]
    assert None not in owners and len(set(owners)) == 8  # each chat's own claim
    assert store.careful == []  # claimed by the sender's groups
    assert [k for k, _ in store.jobs].count("claims") == 8
    other.close()
    store.close()


def test_a_batch_sends_its_chats_writes_in_fewer_groups_than_jobs(postgres_dsn: str) -> None:
    """20 chats x 2 rounds at concurrency 10: the rows are created, written and claimed as
    jobs the sender groups across chats (fewer commits than writes), none through the
    thread path; every call runs once and is stored ``ok``."""
    RAN.clear()
    store = _Spied(postgres_dsn)
    prompts = [f"task {i}" for i in range(20)]
    result = nbagent.batch(
        prompts, _maker(2), store=store, concurrency=10, progress=False, name="grouped"
    )
    _check_rows(store, result, prompts, 2)
    assert Counter(RAN) == _expected_runs(prompts, 2)  # each call ran exactly once
    assert _statuses(store) == Counter({"ok": 40})
    assert store.careful == [] and store.thread_groups == []  # no create_chat, add_batch_chat
    kinds = Counter(k for k, _ in store.jobs)
    assert kinds["chat"] == 20 and kinds["claims"] == 40
    sent = sum(map(len, store.groups))
    assert sent == len(store.jobs)  # every job sent once
    assert len(store.groups) < sent and max(map(len, store.groups)) > 1
    assert all(store.committed)
    recorded = store.batch_chats("grouped")
    assert [recorded[str(i)] for i in range(20)] == list(result["chat_id"])
    store.close()


# ------------------------------------------------------------ a group that fails
def _first(kinds: list[str], where: str) -> bool:
    """Whether a group of jobs of ``kinds`` is the one a test interferes with: ``"chat"``,
    the rows' creation; ``"claims"``, one with claims; ``"results"``, writes alone (no
    claim, no creation). Of any size: how many chats' jobs share a group is the loop's
    timing. Asking for two or more, the results' tests never found their group in 2 of 65
    loaded runs (each write went alone or beside a claim), and failed without testing."""
    if where == "chat":
        return "chat" in kinds
    if where == "claims":
        return "claims" in kinds
    return set(kinds) == {"write"}


class _CutStore(_Spied):
    """Ends its connections on the server (the database "goes away" under it) while the
    first group of the kind ``where`` is under way, before its statements are sent."""

    def __init__(self, dsn: str, server: Any, where: str) -> None:
        super().__init__(dsn)
        self.server, self.where = server, where
        self.cut: int | None = None  # the index of the group cut
        self.ended = 0  # the connections the server ended then

    async def _before_group(self, conn: Any, group: list[Any]) -> None:
        if self.cut is None and _first(self.kinds(group), self.where):
            self.cut = len(self.groups) - 1
            self.ended = self.server.terminate(self.dsn)


@pytest.mark.parametrize("where", ["chat", "claims", "results"])
def test_a_group_cut_off_loses_nothing_and_the_sender_connects_again(
    postgres_dsn: str, postgres_server: Any, where: str
) -> None:
    """The sender's connection is cut while a group is under way: nothing of it is written,
    its chats write it again the careful way (on a worker thread), the rows complete, each
    call runs once, and the next groups go through the sender on a new connection."""
    RAN.clear()
    store = _CutStore(postgres_dsn, postgres_server, where)
    prompts = [f"task {i}" for i in range(8)]
    result = nbagent.batch(prompts, _maker(2), store=store, concurrency=8, progress=False)
    story = _story(store)
    assert store.cut is not None and store.ended >= 2, (store.ended, story)
    assert store.committed[store.cut] is False, story
    assert all(store.committed[store.cut + 1 :]), story
    assert len(store.committed) > store.cut + 2, story
    cut = store.kinds(store.groups[store.cut])
    if where == "chat":  # created and recorded the usual way instead
        assert store.careful.count("create_chat") == store.careful.count("add_batch_chat")
        assert store.careful.count("create_chat") == cut.count("chat")
    elif where == "claims":
        assert store.careful.count("claim") >= cut.count("claims")
    else:
        assert store.careful.count("write") >= cut.count("write")
    _check_rows(store, result, prompts, 2)
    assert Counter(RAN) == _expected_runs(prompts, 2)
    assert _statuses(store) == Counter({"ok": 16})
    store.close()


class _LostAnswerStore(_Spied):
    """The first group of the kind ``where`` commits, then its connection is cut before
    the answer is read: the sender sees the commit fail (a real ``OperationalError`` of the
    broken connection), though the server wrote every job of the group."""

    def __init__(self, dsn: str, server: Any, where: str) -> None:
        super().__init__(dsn)
        self.server, self.where = server, where
        self.lost: int | None = None
        self.ended = 0

    async def _send_group_async(self, conn: Any, group: list[Any]) -> None:
        if self.lost is not None or not _first(self.kinds(group), self.where):
            return await super()._send_group_async(conn, group)
        self.lost = len(self.groups)
        execute = conn.execute

        async def committing(query: Any, *args: Any, **kwargs: Any) -> Any:
            if not (isinstance(query, str) and query.rstrip().endswith("COMMIT")):
                return await execute(query, *args, **kwargs)
            await execute(query, *args, **kwargs)  # committed (alone, or ending a script)
            self.ended = self.server.terminate(self.dsn)  # and the answer never read
            return await execute("SELECT 1")  # raises: the connection is gone

        conn.execute = committing
        try:
            await super()._send_group_async(conn, group)
        finally:
            del conn.execute


@pytest.mark.parametrize("where", ["claims", "results"])
def test_a_group_whose_commit_answer_is_lost_runs_no_call_twice(
    postgres_dsn: str, postgres_server: Any, where: str
) -> None:
    """A group committed, its answer lost: its chats are told "not written" and write it
    again the careful way, which finds its rows (and its own claims) there: no call runs
    twice, no row is written twice, every row completes."""
    RAN.clear()
    store = _LostAnswerStore(postgres_dsn, postgres_server, where)
    prompts = [f"task {i}" for i in range(8)]
    result = nbagent.batch(prompts, _maker(2), store=store, concurrency=8, progress=False)
    story = _story(store)
    assert store.lost is not None and store.ended >= 2, (store.ended, story)  # the answer lost
    assert store.committed[store.lost] is False, story
    assert all(store.committed[store.lost + 1 :]), story
    _check_rows(store, result, prompts, 2)  # no message twice
    assert Counter(RAN) == _expected_runs(prompts, 2), story
    assert _statuses(store) == Counter({"ok": 16}), story
    store.close()


def test_a_lost_commit_answer_of_the_rows_creation_fails_no_row(
    postgres_dsn: str, postgres_server: Any
) -> None:
    """The group creating the rows' chats (and recording them as the inputs' chats)
    commits, its answer lost: the fallback (``create_chat`` + ``add_batch_chat``) should
    find each row's chat recorded for its input, as the write fallback finds its rows,
    and the rows go on."""
    RAN.clear()
    store = _LostAnswerStore(postgres_dsn, postgres_server, "chat")
    prompts = [f"task {i}" for i in range(6)]
    result = nbagent.batch(
        prompts, _maker(1), store=store, concurrency=6, progress=False, name="lost"
    )
    assert store.lost is not None and store.ended >= 2  # the answer lost
    assert store.committed[store.lost] is False
    recorded = store.batch_chats("lost")
    assert sorted(recorded) == [str(i) for i in range(6)]
    _check_rows(store, result, prompts, 1)
    assert [recorded[str(i)] for i in range(6)] == list(result["chat_id"])
    assert Counter(RAN) == _expected_runs(prompts, 1)
    store.close()


# ------------------------------------------------------- one chat of a group
def test_an_input_another_process_started_first_fails_only_its_row(postgres_dsn: str) -> None:
    """Input "3" is recorded by another process (another store object) just before the
    batch records it: the group holding its creation does not commit, its row reports the
    conflict as a batch does (``BatchConflict``, the other chat named), and every other row
    of that group is created the usual way and completes."""
    RAN.clear()
    store = _Spied(postgres_dsn)
    other = PostgresStore(postgres_dsn)
    prompts = [f"task {i}" for i in range(8)]
    respond = _rounds(1)

    def make(row: str) -> Chat:
        if row == "task 3":  # after the batch read what it did before, before it records
            assert other.add_batch_chat("raced", "3", "elsewhere") == "elsewhere"
        return Chat(provider=ScriptedProvider([respond], repeat_last=True)).with_tools(lookup)

    result = nbagent.batch(prompts, make, store=store, concurrency=8, progress=False, name="raced")
    (raced,) = [i for i, g in enumerate(store.groups) if any(j is store.rows["3"] for j in g)]
    assert len(store.groups[raced]) > 1  # with other rows' creation
    assert store.committed[raced] is False  # none of it written: they were created alone
    assert store.careful.count("create_chat") >= len(store.groups[raced])
    row = result.iloc[3]
    assert (row["status"], row["error_type"]) == ("failed", "BatchConflict")
    assert "another process started this input first (chat elsewhere)" in row["error"]
    others = [p for p in prompts if p != "task 3"]
    done = result.drop(index=3)
    assert list(done["status"]) == ["done"] * 7, done[["status", "error"]]
    assert list(done["reply"]) == [f"answer to {p}" for p in others]
    assert Counter(RAN) == _expected_runs(others, 1)
    recorded = store.batch_chats("raced")
    assert recorded["3"] == "elsewhere"
    assert [recorded[str(i)] for i in range(8) if i != 3] == list(done["chat_id"])
    for chat_id in done["chat_id"]:
        assert [c.status for c in other.load(chat_id).calls] == ["ok"]
    other.close()
    store.close()


def test_text_postgres_cannot_take_in_one_chat_of_a_batch_is_stored_repaired(
    postgres_dsn: str,
) -> None:
    """Row 2's model reports a name with a lone surrogate (the chat cleans prompts and
    results where they enter; this one reaches the events): each group holding its
    write does not commit, its text is stored repaired, and the other chats are stored as
    they were. Whether another chat's write shares such a group is the loop's timing (under
    load each may go alone); ``test_group_commit``'s loop-group test makes them share one."""
    RAN.clear()
    respond = _rounds(1)

    def odd(request: ModelRequest) -> LLMToolResponse:
        response = respond(request)
        if _prompt(request) == "task 2":
            return dataclasses.replace(response, model="m\ud800")
        return response

    store = _Spied(postgres_dsn)
    prompts = [f"task {i}" for i in range(5)]
    result = nbagent.batch(
        prompts,
        lambda: Chat(provider=ScriptedProvider([odd], repeat_last=True)).with_tools(lookup),
        store=store,
        concurrency=5,
        progress=False,
    )
    _check_rows(store, result, prompts, 1)
    odd_chat = result["chat_id"][2]
    failed = [g for g, ok in zip(store.groups, store.committed, strict=True) if not ok]
    assert failed
    assert all(odd_chat in {job.chat_id for job in g} for g in failed)  # only for its text
    assert Counter(RAN) == _expected_runs(prompts, 1)
    with PostgresStore(postgres_dsn) as other:
        for prompt, chat_id in zip(prompts, result["chat_id"], strict=True):
            events = other.iter_events(chat_id)
            models = [e.model for e in events if isinstance(e, ModelRequestFinished)]
            assert models == (["m\ufffd"] * 2 if prompt == "task 2" else ["scripted"] * 2)
            assert [c.status for c in other.load(chat_id).calls] == ["ok"]
    store.close()


# ------------------------------------------------------------------ closing
def _backends(server: Any, app: str) -> set[int]:
    """The server processes of the connections opened under ``application_name`` ``app``."""
    with server.admin() as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (app,)
        ).fetchall()
    return {int(r[0]) for r in rows}


def _settled(server: Any, app: str, gone: set[int]) -> set[int]:
    """``app``'s connections once none of ``gone`` is among them (a backend leaves the
    server's view shortly after its client let it go), or as they are after 5 s."""
    deadline = time.monotonic() + 5
    while (now := _backends(server, app)) & gone and time.monotonic() < deadline:
        time.sleep(0.02)
        gc.collect()  # a chat's store extension is a cycle: the collector lets it go
    return now


def _one_round(store: PostgresStore) -> Chat:
    provider = ScriptedProvider([call_tools(("lookup", {"item": "a"})), reply("ok")])
    return Chat(provider=provider, store=store).with_tools(lookup)


def _drive_on(loop: asyncio.AbstractEventLoop, store: PostgresStore) -> None:
    """A one-round chat driven on ``loop`` (left open: a notebook kernel's, a thread's)."""
    chat = _one_round(store)
    loop.run_until_complete(chat.ask_async("go"))
    assert chat.status == "complete"
    chat.close()


def _resource_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


def test_closing_the_store_closes_its_senders_connection(
    postgres_dsn: str, postgres_server: Any
) -> None:
    """``store.close()`` while the loop its chats were driven on lives on: the sender's
    connection goes with the store's own, and nothing warns when the loop goes later."""
    store = _Spied(postgres_dsn, application_name="sender-close")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loop = asyncio.new_event_loop()
        try:
            _drive_on(loop, store)
            (sender,) = store.pids  # one connection for every group of the loop
            before = _backends(postgres_server, "sender-close")  # its listener's too
            assert sender in before  # open, loop alive
            store.close()
            assert _settled(postgres_server, "sender-close", before) == set()
        finally:
            loop.close()
            del loop
            gc.collect()
    assert _resource_warnings(caught) == []


def test_a_loop_that_ended_closes_its_senders_connection_when_collected(
    postgres_dsn: str, postgres_server: Any
) -> None:
    """A loop that drove chats ends (closed, then collected): its sender's connection is
    closed with it, without a ``ResourceWarning``; the store goes on, and the next loop
    gets a sender of its own."""
    store = _Spied(postgres_dsn, application_name="sender-loop")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loop = asyncio.new_event_loop()
        _drive_on(loop, store)
        loop.close()
        (sender,) = store.pids
        assert sender in _backends(postgres_server, "sender-loop")  # ended, not collected
        del loop
        gc.collect()
        left = _settled(postgres_server, "sender-loop", {sender})
        assert sender not in left and left  # the store's own connections stay
    assert _resource_warnings(caught) == []
    chat = _one_round(store)  # another loop: a sender (and a connection) of its own
    asyncio.run(chat.ask_async("again"))
    assert [c.status for c in store.load(chat.id).calls] == ["ok"]
    assert len(store.pids) == 2
    store.close()
    assert _settled(postgres_server, "sender-loop", store.pids | left) == set()


def test_a_store_dropped_without_closing_lets_its_connections_go_while_its_loop_lives(
    postgres_dsn: str, postgres_server: Any
) -> None:
    """As ``test_postgres``'s store dropped unclosed, after an async drive on a loop that
    lives on (a notebook's kernel loop; the thread's loop ``nbagent.batch()`` runs on): the
    store's connections, its sender's among them, are let go when it is collected."""
    store = PostgresStore(postgres_dsn, application_name="sender-drop")
    loop = asyncio.new_event_loop()
    try:
        _drive_on(loop, store)
        opened = _backends(postgres_server, "sender-drop")
        assert len(opened) >= 2  # the store's own, its sender's (and its listener's)
        del store
        gc.collect()
        assert _settled(postgres_server, "sender-drop", opened) == set()
    finally:
        loop.close()
        del loop
        gc.collect()


# ------------------------------------------------------------------ cancellation
class _HeldStore(_Spied):
    """Holds the first group holding claims (of ``chats`` chats or more) under way until
    ``go`` is set: a cancellation lands while it is in flight."""

    def __init__(self, dsn: str, chats: int = 1) -> None:
        super().__init__(dsn)
        self.min_chats = chats
        self.held: int | None = None
        self.entered = threading.Event()
        self.go: asyncio.Event | None = None

    async def _before_group(self, conn: Any, group: list[Any]) -> None:
        if self.held is None and self.kinds(group).count("claims") >= self.min_chats:
            self.held = len(self.groups) - 1
            self.go = asyncio.Event()
            self.entered.set()
            await self.go.wait()


async def _cancel_while_held(store: _HeldStore, task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` while ``store``'s held group is under way; it ends only once that
    group ended (a job sent cannot be taken back), then raises ``CancelledError``."""
    while not (store.entered.is_set() or task.done()):
        await asyncio.sleep(0.005)
    assert store.entered.is_set(), "no group held claims: the sender was not used"
    task.cancel()
    for _ in range(200):  # every loop turn the cancellation needs, and many more
        await asyncio.sleep(0)
    assert not task.done()  # it waits for its group's end
    assert store.go is not None
    store.go.set()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("then", ["continue", "load"])
def test_an_ask_cancelled_while_its_claim_is_in_flight_runs_the_call_at_most_once(
    postgres_dsn: str, then: str
) -> None:
    """``ask_async`` cancelled while the group claiming its first call is in flight: the
    group commits all the same, the call is stored claimed and its tool has not run.
    Continued by the same chat object it runs once; closed, the chat lets go of the claim it
    knows never ran (before, it stayed ``running`` and a load in another process reported in
    doubt a call that never ran, so it never did), and loaded again it runs once. No call is
    left running."""
    RAN.clear()
    store = _HeldStore(postgres_dsn)
    script = [*(call_tools(("lookup", {"item": f"x{i}"})) for i in range(2)), reply("done")]
    chat = Chat(provider=ScriptedProvider(script), store=store).with_tools(lookup)

    async def cancelled() -> None:
        await _cancel_while_held(store, asyncio.ensure_future(chat.ask_async("look")))

    asyncio.run(cancelled())
    assert store.held is not None and store.committed[store.held] is True
    (claimed,) = store.load(chat.id).calls
    assert (claimed.status, claimed.arguments) == ("running", {"item": "x0"})
    assert claimed.claimed_by is not None and RAN == []
    if then == "continue":
        asyncio.run(chat.complete_async())
        assert chat.status == "complete" and RAN == ["x0", "x1"]
        assert [c.status for c in store.load(chat.id).calls] == ["ok", "ok"]
    else:
        chat.close()
        again = Chat.load(
            chat.id, store=store, tools=[lookup], provider=ScriptedProvider(script[1:])
        )
        (let_go,) = store.load(chat.id).calls
        assert let_go.status != "running" and let_go.claimed_by is None and RAN == []
        asyncio.run(again.complete_async())
        assert again.status == "complete" and RAN == ["x0", "x1"]  # each once
        stored = store.load(chat.id).calls
        assert [c.status for c in stored] == ["ok", "ok"]
        kinds = [e.type for e in store.iter_events(chat.id)]
        assert "call_in_doubt" not in kinds
        again.close()
    store.close()


def test_a_batch_cancelled_while_a_group_is_in_flight_runs_no_call_twice(
    postgres_dsn: str,
) -> None:
    """A batch cancelled while a group claiming calls of several chats is in flight: it
    returns once that group ended; every stored call is either done (its tool ran once) or
    not run (claimed by that group; let go if its chat closed); run again, every row
    completes and every call has run once."""
    RAN.clear()
    store = _HeldStore(postgres_dsn, chats=2)
    prompts = [f"task {i}" for i in range(8)]

    async def scenario() -> Any:
        task = asyncio.ensure_future(
            nbagent.batch_async(
                prompts, _maker(2), store=store, concurrency=8, progress=False, name="cut"
            )
        )
        await _cancel_while_held(store, task)
        assert store.held is not None and store.committed[store.held] is True
        ran = Counter(RAN)
        claimed = 0
        with PostgresStore(postgres_dsn) as other:
            for chat_id in other.batch_chats("cut").values():
                for call in other.load(chat_id).calls:
                    item = call.arguments["item"]
                    if call.status == "ok":
                        assert ran[item] == 1
                    else:  # claimed by the held group, never run: still claimed by its
                        # open chat, or let go by it as it closed (not left to be in doubt)
                        held = call.status == "running" and bool(call.claimed_by)
                        assert held or call.status in ("approved", "requested")
                        assert ran[item] == 0
                        claimed += 1
        assert claimed >= 2  # the held group's claims, committed, their tools not run
        return await nbagent.batch_async(
            prompts, _maker(2), store=store, concurrency=8, progress=False, name="cut"
        )

    result = asyncio.run(scenario())
    _check_rows(store, result, prompts, 2)
    assert Counter(RAN) == _expected_runs(prompts, 2)
    assert _statuses(store) == Counter({"ok": 16})
    store.close()
