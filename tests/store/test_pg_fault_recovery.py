"""The PostgreSQL store under real faults: what a follower, a claim and a cancelled write
promise when the server is cut, a lock is held, a task is cancelled.

Each test makes the fault for real (``pg_terminate_backend``, a row or table lock held
by another session, a database refusing connections for a while); nothing of the store
is mocked.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat
from nbagent.store import PostgresStore, follow

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import Refund  # noqa: E402


def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _db(dsn: str) -> str:
    return dsn.rsplit("/", 1)[1].split("?")[0]


@pytest.fixture
def dsn(postgres_server: Any) -> str:
    url: str = postgres_server.new_database()
    PostgresStore(url).close()  # the schema
    return url


def parked(dsn: str) -> tuple[Chat, str]:
    chat = Chat(model="demo", store=dsn, display=False).with_tools(Refund)
    chat.ask("Refund order 42")
    assert chat.status == "awaiting_approval"
    return chat, chat.pending_approvals[0].id


# -- a follower's callback that fails is called again ------------------------------------
def test_a_callback_that_raises_is_called_again_with_its_chats_until_it_returns(
    dsn: str,
) -> None:
    store = PostgresStore(dsn)
    calls: list[set[str]] = []
    failing = [2]

    def flaky(ids: set[str]) -> None:
        calls.append(set(ids))
        if failing[0]:
            failing[0] -= 1
            raise RuntimeError("the store cannot be read now")

    try:
        sub = follow(store, ["c1"], flaky)  # looks once at c1, which fails twice
        until(lambda: len(calls) >= 3)
        time.sleep(1.0)
        assert calls[:3] == [{"c1"}, {"c1"}, {"c1"}]
        assert len(calls) == 3  # once it returned, no more calls without news
        sub.close()
    finally:
        store.close()


# -- the listener's catch-up after a reconnection ----------------------------------------
@pytest.fixture
def refused(postgres_server: Any, dsn: str) -> Iterator[Callable[[bool], None]]:
    """``refused(True)``: the database takes no new connection until ``refused(False)``."""

    def set_(refuse: bool) -> None:
        with postgres_server.admin() as conn:
            conn.execute(f"ALTER DATABASE {_db(dsn)} ALLOW_CONNECTIONS {not refuse!s}")

    yield set_
    set_(False)


def test_a_decision_committed_out_of_id_order_while_the_listener_reconnects_is_reported(
    postgres_server: Any, dsn: str, refused: Callable[[bool], None]
) -> None:
    """X's decision takes its id first and commits last (its transaction waits on a row
    lock), after Y's was announced and while the listener is cut: the catch-up (ids above
    the last announced) skipped it, and a watch waited for ever."""
    (x, x_call), (y, y_call) = parked(dsn), parked(dsn)
    watcher = PostgresStore(dsn, application_name="watcher")
    deciders = [PostgresStore(dsn, application_name=f"decider{i}") for i in (1, 2)]
    watch = watcher.watch([x.id, y.id])
    every = watcher.watch(None)
    blocker = postgres_server.admin(_db(dsn))
    try:
        blocker.execute("BEGIN")
        blocker.execute("SELECT 1 FROM chats WHERE id = %s FOR UPDATE", (x.id,))
        first = threading.Thread(
            target=deciders[0].approve, args=(x_call,), kwargs={"chat_id": x.id}
        )
        first.start()  # takes its decision id, then waits on X's chat row

        def waiting() -> bool:
            row = blocker.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'decider1' "
                "AND wait_event_type = 'Lock'"
            ).fetchone()
            return bool(row and row[0])

        until(waiting)
        deciders[1].approve(y_call, chat_id=y.id)  # a higher id, announced
        assert watch.wait(10) == {y.id}
        assert every.wait(10) == {y.id}
        refused(True)  # the listener cannot come back until X's decision is in
        with postgres_server.admin() as adm:
            adm.execute(
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
                "WHERE datname = %s AND application_name = 'watcher'",
                (_db(dsn),),
            )
        blocker.execute("COMMIT")
        first.join(10)
        ids = [r[0] for r in blocker.execute("SELECT id FROM decisions ORDER BY id").fetchall()]
        x_id = blocker.execute("SELECT id FROM decisions WHERE chat_id = %s", (x.id,)).fetchone()
        assert x_id is not None and x_id[0] == min(ids)  # committed last, numbered first
        refused(False)
        assert x.id in watch.wait(10)
        assert x.id in every.wait(10)  # every chat: the holes below the last id are read
    finally:
        blocker.close()
        watch.close()
        every.close()
        for s in (watcher, *deciders):
            s.close()
        x.close()
        y.close()


# -- cancelling an async chat whose write waits on a row lock ----------------------------
RUNS: list[int] = []


class Counted(Refund):
    """Refund, counting its runs here."""

    def execute(self, order_id: int) -> str:
        RUNS.append(order_id)
        return f"refunded {order_id}"


def approved_chat(dsn: str) -> tuple[Chat, str]:
    chat = Chat(model="demo", store=dsn, display=False).with_tools(Counted)
    chat.ask("Refund order 42")
    call = chat.pending_approvals[0]
    chat.approve(call)
    return chat, call.id


def row_locked(postgres_server: Any, dsn: str, call_id: str) -> Any:
    blocker = postgres_server.admin(_db(dsn))
    blocker.execute("BEGIN")
    blocker.execute("SELECT 1 FROM tool_calls WHERE call_id = %s FOR UPDATE", (call_id,))
    return blocker


@pytest.mark.parametrize("trial", range(3))
def test_cancelling_an_async_chat_whose_claim_waits_on_a_row_lock_is_prompt_and_true(
    postgres_server: Any, dsn: str, trial: int
) -> None:
    """``asyncio.wait_for`` ended the chat only once the lock was released (for ever if
    never): its claim's group was waited for, unbounded. The group is cancelled on the
    server: rolled back, known unwritten, so the claim is not in the store, nothing ran,
    and the chat goes on once the lock is gone."""
    import asyncio

    RUNS.clear()
    chat, call_id = approved_chat(dsn)
    blocker = row_locked(postgres_server, dsn, call_id)
    released = threading.Timer(8, lambda: blocker.execute("COMMIT"))  # the old hang, bounded
    released.start()
    try:

        async def main() -> None:
            await asyncio.wait_for(chat.complete_async(), 0.5)

        started = time.monotonic()
        with pytest.raises(TimeoutError):
            asyncio.run(main())
        assert time.monotonic() - started < 5  # the lock is still held
        assert RUNS == []
        with postgres_server.admin(_db(dsn)) as adm:
            waiting = adm.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                "AND wait_event_type = 'Lock'",
                (_db(dsn),),
            ).fetchone()
        assert waiting == (0,)  # nothing of the chat's is left waiting on the server
    finally:
        released.cancel()
        released.join()
        blocker.execute("COMMIT")
        blocker.close()
    with postgres_server.admin(_db(dsn)) as adm:
        status = adm.execute(
            "SELECT status FROM tool_calls WHERE call_id = %s", (call_id,)
        ).fetchone()
    assert status == ("approved",)  # the claim was rolled back: what the chat holds
    chat.complete()
    assert RUNS == [42] and chat.status == "complete"
    chat.close()


# -- a claim committed but never acted on ------------------------------------------------
@pytest.mark.parametrize("trial", range(3))
def test_a_claim_committed_for_a_round_that_was_cancelled_is_let_go_at_close(
    postgres_server: Any, dsn: str, trial: int
) -> None:
    """``wait_for`` cancels the chat while its claim waits on a row lock; the lock goes
    within the sender's grace, so the claim commits, and the round never starts. The chat
    is closed: the claim stayed ``running`` under its owner, and the next process to load
    the chat found the call in doubt ("it was started at ...") for a tool that never ran.
    Closing lets it go; loaded again, it runs, once."""
    import asyncio

    from nbagent.testing import ScriptedProvider, reply

    RUNS.clear()
    chat, call_id = approved_chat(dsn)
    blocker = row_locked(postgres_server, dsn, call_id)
    released = threading.Timer(0.6, lambda: blocker.execute("COMMIT"))
    released.start()
    try:

        async def main() -> None:
            await asyncio.wait_for(chat.complete_async(), 0.2)

        with pytest.raises(TimeoutError):
            asyncio.run(main())
    finally:
        released.join()
        blocker.close()
    with postgres_server.admin(_db(dsn)) as adm:
        status = adm.execute(
            "SELECT status FROM tool_calls WHERE call_id = %s", (call_id,)
        ).fetchone()
    assert status == ("running",)  # claimed (committed within the grace), never started
    assert RUNS == []
    chat.close()
    with postgres_server.admin(_db(dsn)) as adm:
        status = adm.execute(
            "SELECT status, claimed_by FROM tool_calls WHERE call_id = %s", (call_id,)
        ).fetchone()
    assert status == ("approved", None)
    again = Chat.load(
        chat.id, store=dsn, tools=[Counted], provider=ScriptedProvider([reply("done")])
    )
    again.display = False
    again.complete()
    assert RUNS == [42]
    assert [(c.id, c.status) for c in again.tool_calls] == [(call_id, "ok")]
    again.close()


def test_a_collected_chat_with_a_claim_it_remembers_still_writes_its_last_events(
    tmp_path: Path,
) -> None:
    """A chat garbage-collected while it remembered a claim that may have committed (its
    answer lost): letting go of it read the gone chat's calls and raised, which skipped the
    last write too ("closed without writing its last 0 event(s)"). The claim stays (the next
    load reports it in doubt, as before), and what was queued is written."""
    import gc
    import warnings

    from nbagent.store import open_store
    from nbagent.testing import ScriptedProvider, call_tools

    db = str(tmp_path / "c.db")
    chat = Chat(
        provider=ScriptedProvider([call_tools(("refund", {"order_id": 42}, "c1"))]),
        store=db,
        display=False,
    ).with_tools(Refund)
    chat.ask("refund 42")
    chat_id = chat.id
    (ext,) = [e for e in chat.extensions if hasattr(e, "_maybe_claimed")]
    ext._maybe_claimed.add("c1")  # as a claim whose commit's answer was lost leaves it
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        del chat, ext
        gc.collect()
    assert not [w for w in seen if "without writing" in str(w.message)]
    with open_store(db) as store:
        assert store.call("c1").status == "awaiting_approval"
        assert [m["role"] for m in store.load(chat_id).messages][:1] == ["user"]
