"""A parked batch row whose one refresh for news fails still wakes (PostgreSQL, real locks).

One decision made elsewhere is one piece of news: the store's follower calls the row's
``refresh()`` once. If that refresh fails (here: another session holds ``tool_calls`` in
ACCESS EXCLUSIVE mode, the batch's DSN has ``lock_timeout``), nothing else would ever
call it again, and the row waited for ever for a decision the store holds. The follower
calls again, with a backoff, until a refresh works.

Deterministic: the decision is written with the ``decisions`` trigger disabled (no
NOTIFY), the table is locked, and only then is the announcement sent by hand, so the
one look it causes is sure to fail.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from typing import Any

import psycopg

import nbagent
from nbagent import Chat, Tool
from nbagent.store import PostgresStore
from nbagent.testing import ScriptedProvider, call_tools, reply

RAN: list[int] = []


class Refund(Tool):
    """Refund an order."""

    requires_approval = True

    def execute(self, n: int) -> str:
        RAN.append(n)
        return "ok"


def _entry(request: Any) -> Any:
    if any(getattr(m, "role", "") == "tool" for m in request.messages):
        return reply("done")
    return call_tools(("refund", {"n": 1}))


def _make() -> Chat:
    provider = ScriptedProvider([_entry], repeat_last=True)
    return Chat(provider=provider, display=False).with_tools(Refund)


def _decide_while_the_refresh_fails(dsn: str, done: threading.Event) -> None:
    """Approve the parked call unannounced, lock ``tool_calls``, announce it, release."""
    store = PostgresStore(dsn, application_name="decider")
    try:
        deadline = time.monotonic() + 30
        while not store.pending_approvals():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.5)  # the row's first look (as it parks) is over
        call = store.pending_approvals()[0]
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("ALTER TABLE decisions DISABLE TRIGGER USER")
            store.approve(call.id, chat_id=call.chat_id, by="ops")  # no NOTIFY
            admin.execute("ALTER TABLE decisions ENABLE TRIGGER USER")
            row = admin.execute("SELECT max(id) FROM decisions").fetchone()
        assert row is not None
        with psycopg.connect(dsn) as blocker:  # a transaction: the lock is held until commit
            blocker.execute("LOCK TABLE tool_calls IN ACCESS EXCLUSIVE MODE")
            payload = json.dumps({"id": row[0], "chat": call.chat_id, "call": call.id})
            with psycopg.connect(dsn, autocommit=True) as announcer:
                announcer.execute("SELECT pg_notify('nbagent_decisions', %s)", (payload,))
            time.sleep(1.5)  # the one look this announcement causes fails (lock_timeout)
            blocker.commit()
    finally:
        store.close()
        done.set()


def test_a_parked_row_wakes_although_its_one_refresh_failed(postgres_server: Any) -> None:
    RAN.clear()
    dsn = postgres_server.new_database()
    PostgresStore(dsn).close()  # the schema
    batch_dsn = dsn + "?options=" + urllib.parse.quote("-c lock_timeout=300")
    done = threading.Event()
    decider = threading.Thread(target=_decide_while_the_refresh_fails, args=(dsn, done))
    decider.start()
    try:
        started = time.monotonic()
        result = nbagent.batch(
            ["Refund order 1"], _make, store=batch_dsn, wait_for_decisions=12, progress=False
        )
    finally:
        decider.join(30)
    assert done.is_set()
    rows = result[["status", "pending", "reply"]].to_dict("records")
    assert rows == [{"status": "done", "pending": 0, "reply": "done"}], rows
    assert RAN == [1]  # approved once, run once
    assert time.monotonic() - started < 12  # woken by the retried look, not the deadline
