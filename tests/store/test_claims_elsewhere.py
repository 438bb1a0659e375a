"""A call claimed by a process on another machine: its owner cannot be checked, so it is left
alone (the copy that finds it stops), until ``claim_timeout`` says the claim is abandoned;
then it is in doubt, never rerun by guess. On SQLite and on PostgreSQL."""

from __future__ import annotations

import sys
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat
from nbagent.store import StoreConflictWarning

sys.path.insert(0, str(Path(__file__).parent))
from _agent import Refund, count


def _claimed_elsewhere(store: Any, backend: Any, minutes_ago: float) -> tuple[str, str]:
    chat = Chat(model="demo", store=store).with_tools(Refund)
    chat.ask("Refund order 42")
    call_id = chat.pending_approvals[0].id
    chat.approve(call_id)
    chat.close()
    at = (datetime.now(UTC) - timedelta(minutes=minutes_ago)).isoformat()
    backend.sql(  # what a worker on another machine wrote before it vanished
        "UPDATE tool_calls SET status = 'running', claimed_by = ?, claimed_at = ? "
        "WHERE call_id = ?",
        ("worker-7.example:4242:1700000000:tok", at, call_id),
    )
    return chat.id, call_id


def test_a_claim_from_another_machine_is_left_alone(
    store: Any, backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(counter))
    chat_id, _ = _claimed_elsewhere(store, backend, minutes_ago=120)
    with pytest.warns(StoreConflictWarning, match="running in worker-7.example"):
        chat = Chat.load(chat_id, store=store, tools=[Refund])
    assert chat.step().kind == "busy" and count(counter) == 0
    chat.close()


def test_an_abandoned_claim_from_another_machine_is_in_doubt(
    backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(counter))
    with backend.open(claim_timeout=600) as store:
        chat_id, call_id = _claimed_elsewhere(store, backend, minutes_ago=11)
        with warnings.catch_warnings():
            warnings.simplefilter("error", StoreConflictWarning)
            chat = Chat.load(chat_id, store=store, tools=[Refund])
        call = chat.get_call(call_id)
        assert call.status == "in_doubt" and "unknown" in call.result.content
        chat.complete()
        assert chat.status == "complete" and count(counter) == 0  # not rerun
        assert store.call(call_id).status == "in_doubt"
        chat.close()
