"""A chat driven on PostgreSQL reads its rules only when one changed elsewhere (m017).

Each step of a stored chat applies the rules another process changed (``apply_rules``).
SQLite tells whether anything was committed elsewhere without a read (``data_version``);
PostgreSQL now announces each rule change (a trigger NOTIFYs it on the decisions' channel)
and the store's listener counts them (``PostgresStore.rules_token``). A step whose token
is unchanged reads nothing, so under the async driver it needs no worker thread either;
a lost announcement is made up for within a second.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from nbagent import Chat, Rule, tool
from nbagent._aio import spawn
from nbagent.store import PostgresStore, _extension
from nbagent.store._extension import StoreExtension
from nbagent.testing import ScriptedProvider, call_tools, reply

sys.path.insert(0, str(Path(__file__).parent))
from _agent import Refund

DENY_BIG = Rule.deny("refund", ("order_id", ">", 100))


@tool
def lookup(item: str) -> str:
    """Look an item up.

    Args:
        item: The item.
    """
    return f"{item}: found"


def _listening(store: PostgresStore) -> None:
    """Wait until the store's listener (started by the first token asked) listens."""
    store.rules_token()
    deadline = time.monotonic() + 10
    while not (store._listener and store._listener.listening.is_set()):
        assert time.monotonic() < deadline, "the listener never listened"
        time.sleep(0.01)


def test_a_step_reads_the_rules_only_when_one_changed_and_hands_nothing_off(
    postgres_dsn: str,
) -> None:
    """Four steps of a three-round chat under the async driver read the rules only when the
    token's second ticked (no rule changed), and only such a step runs its step hook on a
    worker thread; before, every step read them, on a worker.

    A read is one that happened: on a tick the step first tries on the loop, where the store
    refuses before sending anything (``WouldWait``), then reads on the worker. Counting the
    refused try as a read made this fail whenever the chat's 50 ms crossed a second.

    Two step hooks run on a worker whatever the token says: the question's step and the
    answer's, which write them before their steps go on (a PostgreSQL write waits: never on
    the loop), so that a stale copy stops ``busy`` there."""
    store = PostgresStore(postgres_dsn)
    _listening(store)
    reads: list[str] = []
    hooks: list[bool] = []  # per step hook run: whether on the loop's thread
    loop_thread: list[threading.Thread] = []
    rule_changes = store.rule_changes

    def counted(chat_id: str) -> Any:
        rows = rule_changes(chat_id)  # a refused try raises WouldWait: it read nothing
        reads.append(chat_id)
        return rows

    store.rule_changes = counted  # type: ignore[method-assign]
    real_hook = StoreExtension._before_step

    def spied(ext: StoreExtension) -> Any:
        hooks.append(threading.current_thread() is loop_thread[0])
        return real_hook(ext)

    StoreExtension._before_step = spied  # type: ignore[method-assign]
    try:

        async def drive() -> Chat:
            loop_thread.append(threading.current_thread())
            script = [call_tools(("lookup", {"item": f"x{i}"})) for i in range(3)]
            chat = Chat(provider=ScriptedProvider([*script, reply("done")]), store=store)
            chat.with_tools(lookup)
            await chat.ask_async("look things up")
            return chat

        began = int(time.monotonic())  # the clock of the token's second
        chat = asyncio.run(drive())
        ticks = int(time.monotonic()) - began
    finally:
        StoreExtension._before_step = real_hook  # type: ignore[method-assign]
    assert chat.status == "complete"
    assert len(reads) <= ticks, (reads, ticks)
    assert hooks.count(True) >= 4 and hooks.count(False) <= ticks + 2, (hooks, ticks)
    chat.close()
    store.close()


def test_a_rule_change_committed_elsewhere_is_announced(postgres_dsn: str) -> None:
    """Another store object (another process's view) adds a rule to a stored chat: the
    listener's count moves, so the next step of the chat here reads and applies it."""
    store = PostgresStore(postgres_dsn)
    chat = Chat(model="demo", store=store).with_tools(Refund)
    chat.ask("hello")
    _listening(store)
    before = store._listener.rules  # type: ignore[union-attr]
    with PostgresStore(postgres_dsn) as other:
        elsewhere = Chat.load(chat.id, store=other, tools=[Refund])
        elsewhere.add_rule(DENY_BIG)
        elsewhere.close()
    deadline = time.monotonic() + 10
    while store._listener.rules == before:  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the rule change was never announced"
        time.sleep(0.01)
    chat.ask("Refund order 420")
    assert chat.rules == (DENY_BIG,)
    assert chat.tool_calls[-1].status == "denied"
    chat.close()
    store.close()


def test_an_announcement_lost_is_made_up_for_within_a_second(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the trigger off (as if the announcement were lost), a rule added elsewhere is
    still applied by the chat here once its token's second has ticked."""
    # the change is made as another process would: this process's own count stays put
    monkeypatch.setattr(_extension._RULE_WRITES, "bump", lambda: None)
    store = PostgresStore(postgres_dsn)
    chat = Chat(model="demo", store=store).with_tools(Refund)
    chat.ask("hello")
    _listening(store)
    chat.refresh()  # looked at the rules with the listener's token
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE events DISABLE TRIGGER events_rule_notify")
    with PostgresStore(postgres_dsn) as other:
        elsewhere = Chat.load(chat.id, store=other, tools=[Refund])
        elsewhere.add_rule(DENY_BIG)
        elsewhere.close()
    time.sleep(1.1)
    chat.refresh()
    assert chat.rules == (DENY_BIG,)
    chat.close()
    store.close()


def test_a_watch_of_a_store_that_listens_already_reports_nothing_decided_before_it(
    postgres_dsn: str,
) -> None:
    """The listener a driven chat started (its rules token) may still hold the announcement
    of a decision made before a watch began; the watch is not told of it. The listener's
    loop is held while the decision is made and the watch begins, so the announcement is
    processed after the watch joined."""
    store = PostgresStore(postgres_dsn)
    chat = Chat(model="demo", store=store).with_tools(Refund)
    chat.ask("Refund order 7")
    _listening(store)
    held, holding = threading.Event(), threading.Event()

    async def hold() -> None:  # blocks nbagent's background loop (the listener's)
        holding.set()
        held.wait(10)

    spawn(hold())
    assert holding.wait(10)
    try:
        with PostgresStore(postgres_dsn) as other:
            other.approve(chat.pending_approvals[0].id, chat_id=chat.id)  # before the watch
        watch = store.watch()
    finally:
        held.set()
    with watch:
        assert watch.wait(0.5) == set()
    chat.close()
    store.close()
