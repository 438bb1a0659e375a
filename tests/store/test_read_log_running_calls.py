"""``nbagent.read_log(store)`` shows a call that is running as ``running``, and one whose
claim's owner is gone as ``in_doubt``, on SQLite and PostgreSQL.

A call's start event is written only with its finish, so the store's events of a call
that runs now end at its request (or its approval): read_log folded only those and said
``approved`` (``requested`` if ungated) with ``started_at`` NaT while its ``tool_calls`` row
said ``running`` and who claimed it; after a ``kill -9`` of the driver it still said
``approved``, until some process loaded the chat. An operator read a running refund as not
started, and a lost one as still to run. The claim is read now: ``running`` from its claim
time, and ``in_doubt`` when its owner can be judged gone (the check ``Chat.load`` makes
before it reports the call in doubt); the store is left as it is.
"""

from __future__ import annotations

import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import nbagent
from nbagent import Chat, Tool
from nbagent.store import open_store
from nbagent.testing import ScriptedProvider, call_tools, reply

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import Refund, count  # noqa: E402
from test_processes import _env, park, run_agent  # noqa: E402

started = threading.Event()
release = threading.Event()


class SlowRefund(Tool):
    """Refund an order (gated); runs until the test lets it end."""

    name = "refund"
    requires_approval = True

    def execute(self, order_id: int) -> str:
        started.set()
        assert release.wait(60)
        return f"refunded order {order_id}"


class SlowLookup(SlowRefund):
    """Look an order up (ungated); runs until the test lets it end."""

    name = "lookup"
    requires_approval = False


def _row(store: Any, chat_id: str) -> pd.Series:
    calls = nbagent.read_log(store, chat_id=chat_id)
    assert len(calls) == 1
    return calls.iloc[0]


@pytest.mark.parametrize("tool", [SlowRefund, SlowLookup])
def test_a_running_call_reads_running_from_its_claim(backend: Any, tool: type[Tool]) -> None:
    started.clear()
    release.clear()
    provider = ScriptedProvider([call_tools((tool.name, {"order_id": 1}, "c1")), reply("done")])
    chat = Chat(provider=provider, store=backend.url, display=False).with_tools(tool)
    if tool.requires_approval:
        chat.ask("go")
        chat.approve("c1")
        driver = threading.Thread(target=chat.complete)
    else:
        driver = threading.Thread(target=chat.ask, args=("go",))
    driver.start()
    try:
        assert started.wait(60)
        with open_store(backend.url) as store:
            stored = store.call("c1", chat_id=chat.id)
            assert stored.status == "running" and stored.claimed_at is not None
            row = _row(store, chat.id)
            assert row["status"] == "running"
            assert row["started_at"] == pd.Timestamp(stored.claimed_at)
            assert pd.isna(row["finished_at"])
            assert store.call("c1", chat_id=chat.id).status == "running"  # read, not changed
            every = nbagent.read_log(store)  # every chat: the same
            assert every.set_index("call_id").loc["c1", "status"] == "running"
            assert pd.isna(row["run_step"]) and pd.isna(row["concurrency"])  # not stored yet
            assert len(nbagent.read_log(store, "steps", chat_id=chat.id)) == 1
            assert nbagent.log.summary(every).loc[tool.name, "calls"] == 1
    finally:
        release.set()
        driver.join(60)
    assert chat.status == "complete"
    with open_store(backend.url) as store:
        row = _row(store, chat.id)
        assert row["status"] == "ok" and not pd.isna(row["started_at"])
        assert not pd.isna(row["finished_at"])
    chat.close()


def test_a_call_whose_driver_was_killed_reads_in_doubt(backend: Any, tmp_path: Path) -> None:
    counter = tmp_path / "runs.txt"
    chat_id, call_id = park(backend.url)
    with open_store(backend.url) as store:
        store.approve(call_id)
    crashed = run_agent(
        "complete", backend.url, chat_id, env=_env(counter, NBAGENT_TEST_CRASH="1"), check=False
    )
    assert crashed["returncode"] == 3 and count(counter) == 1  # ran, its result never recorded
    with open_store(backend.url) as store:
        stored = store.call(call_id)
        assert stored.status == "running"
        row = _row(store, chat_id)
        assert row["status"] == "in_doubt"
        assert row["started_at"] == pd.Timestamp(stored.claimed_at)
        assert "unknown" in row["error"]
        assert store.call(call_id).status == "running"  # the load settles it, not the read
    chat = Chat.load(chat_id, store=backend.url, tools=[Refund])
    assert chat.get_call(call_id).status == "in_doubt" and count(counter) == 1
    chat.close()
    with open_store(backend.url) as store:
        row = _row(store, chat_id)
        assert row["status"] == "in_doubt" and row["started_at"] == pd.Timestamp(stored.claimed_at)


@pytest.mark.parametrize(("minutes_ago", "status"), [(1, "running"), (30, "in_doubt")])
def test_a_claim_from_another_host_is_judged_by_claim_timeout(
    backend: Any, minutes_ago: float, status: str
) -> None:
    """A claim made on another machine cannot be checked from here: running, until it is
    older than ``claim_timeout`` (then abandoned, as ``Chat.load`` judges it)."""
    chat_id, call_id = park(backend.url)
    with open_store(backend.url) as store:
        store.approve(call_id)
    at = datetime.now(UTC) - timedelta(minutes=minutes_ago)
    backend.sql(
        "UPDATE tool_calls SET status = 'running', claimed_by = ?, claimed_at = ? "
        "WHERE call_id = ?",
        ("worker-7.example:4242:1700000000:tok", at.isoformat(), call_id),
    )
    with backend.open(claim_timeout=600) as store:
        row = _row(store, chat_id)
        assert row["status"] == status
        assert row["started_at"] == pd.Timestamp(at)
    with backend.open() as store:  # no claim_timeout: another host's claim is never judged
        assert _row(store, chat_id)["status"] == "running"
