"""Durable chats across real processes: restart, decide elsewhere, race, crash.

Every "other process" here is a real ``python`` subprocess running
``tests/store/_agent.py``; the tools count their executions in a file, so
"ran exactly once" is observed, not assumed. Every test runs on SQLite and on
PostgreSQL (``db`` is the file's path or the database's DSN).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import CallInDoubt, Chat, ToolResultMessage
from nbagent.store import StoreConflictWarning, open_store

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import IdempotentRefund, Refund, count  # noqa: E402
from _helpers import store_ext  # noqa: E402


def _env(counter: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBAGENT_TEST_")}
    env["NBAGENT_TEST_COUNTER"] = str(counter)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def run_agent(*args: str, env: dict[str, str], check: bool = True) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(HERE / "_agent.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"agent {args} failed ({proc.returncode}):\n{proc.stderr}")
    out = proc.stdout.strip().splitlines()
    return {"returncode": proc.returncode, **(json.loads(out[-1]) if out else {})}


@pytest.fixture
def db(backend: Any) -> str:
    return str(backend.url)


@pytest.fixture
def counter(tmp_path: Path) -> Path:
    return tmp_path / "runs.txt"


def park(db: str) -> tuple[str, str]:
    """A chat parked on an approval, created and left by this process."""
    with open_store(db) as store:
        chat = Chat(model="demo", store=store).with_tools(Refund)
        chat.ask("Refund order 42")
        assert chat.status == "awaiting_approval"
        ids = chat.id, chat.pending_approvals[0].id
        chat.close()
    return ids


def test_park_restart_load_approve_complete(
    db: str, counter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(counter))
    made = run_agent("new", str(db), env=_env(counter))  # process 1 parks and exits
    assert made["status"] == "awaiting_approval"

    chat = Chat.load(made["chat_id"], store=db, tools=[Refund])  # "after the restart"
    assert chat.status == "awaiting_approval"
    assert [c.id for c in chat.pending_approvals] == [made["call_id"]]
    assert chat.transcript[0].content == "Refund order 42"
    chat.approve(made["call_id"])
    chat.complete()
    assert chat.status == "complete"
    assert count(counter) == 1
    with open_store(db) as store:
        stored = store.call(made["call_id"])
        assert stored.status == "ok" and stored.decision is not None
        assert stored.decision.by == "user"
    chat.close()


def test_decision_from_another_process_is_picked_up(db: str, counter: Path) -> None:
    with open_store(db) as store:
        chat = Chat(model="demo", store=store).with_tools(Refund)
        chat.ask("Refund order 42")
        call_id = chat.pending_approvals[0].id

        assert run_agent("approve", str(db), call_id, env=_env(counter))["status"] == "approved"
        assert chat.pending_approvals  # nothing changes here until the chat looks
        assert [c.id for c in chat.refresh()] == [call_id]  # what a view does when it refreshes
        assert chat.tool_calls[0].decision.by == "script"
        chat.complete()
        assert chat.status == "complete"
        assert chat.tool_calls[0].status == "ok"
        decided = [e for e in store.iter_events(chat.id) if e.type == "approval_decided"]
        assert len(decided) == 1 and decided[0].decision.by == "script"


def test_denial_from_another_process_reaches_the_model(db: str, counter: Path) -> None:
    chat_id, call_id = park(db)
    run_agent("approve", str(db), call_id, "--deny", "over the limit", env=_env(counter))
    chat = Chat.load(chat_id, store=db, tools=[Refund])
    assert chat.tool_calls[0].status == "denied"
    chat.complete()
    result = next(m for m in chat.transcript if isinstance(m, ToolResultMessage))
    assert result.status == "denied" and "over the limit" in result.content
    assert count(counter) == 0
    chat.close()


def test_approved_elsewhere_completes_in_a_third_process(db: str, counter: Path) -> None:
    chat_id, call_id = park(db)
    run_agent("approve", str(db), call_id, env=_env(counter))  # chat loaded nowhere
    done = run_agent("complete", str(db), chat_id, env=_env(counter))
    assert done["status"] == "complete"
    assert count(counter) == 1
    with open_store(db) as store:
        assert store.call(call_id).status == "ok"
        assert store.pending_approvals() == []


def test_two_processes_racing_run_the_tool_once(db: str, counter: Path, tmp_path: Path) -> None:
    chat_id, call_id = park(db)
    with open_store(db) as store:
        store.approve(call_id)
    env = _env(counter, NBAGENT_TEST_SLEEP="0.3")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "_agent.py"),
                "complete",
                str(db),
                chat_id,
                "--barrier",
                str(tmp_path),
                "--name",
                str(n),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready-{n}").exists() for n in range(2)):
        assert time.monotonic() < deadline, "workers did not start"
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.01)
    (tmp_path / "go").touch()
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr
        outs.append(json.loads(stdout.strip().splitlines()[-1]))

    assert count(counter) == 1  # exactly one execution
    assert sorted(o["kind"] for o in outs) == ["busy", "complete"]
    loser = next(o for o in outs if o["kind"] == "busy")
    assert loser["conflict"]  # told, with a StoreConflictWarning

    chat = Chat.load(chat_id, store=db, tools=[Refund])
    assert chat.status == "complete"
    results = [m for m in chat.transcript if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == [call_id]
    stored = store_ext(chat).store.iter_events(chat_id)
    started = [e for e in stored if e.type == "tool_call_started"]
    assert len(started) == 1
    chat.close()


def test_crash_between_claim_and_result_is_in_doubt(db: str, counter: Path) -> None:
    chat_id, call_id = park(db)
    with open_store(db) as store:
        store.approve(call_id)
    crashed = run_agent(
        "complete", str(db), chat_id, env=_env(counter, NBAGENT_TEST_CRASH="1"), check=False
    )
    assert crashed["returncode"] == 3
    assert count(counter) == 1  # the effect happened; its result was never recorded
    with open_store(db) as store:
        assert store.call(call_id).status == "running"

    seen: list[nbagent.Event] = []
    chat = Chat.load(chat_id, store=db, tools=[Refund])
    call = chat.get_call(call_id)
    assert call.status == "in_doubt"
    assert call.result is not None and "unknown" in call.result.content
    chat.on(None, seen.append)
    chat.complete()
    assert chat.status == "complete"
    assert count(counter) == 1  # not rerun
    assert "in_doubt" in chat.transcript[-1].content  # the demo model reports the outcome

    with open_store(db) as store:
        assert store.call(call_id).status == "in_doubt"
        doubts = [e for e in store.iter_events(chat_id) if isinstance(e, CallInDoubt)]
        assert len(doubts) == 1 and not doubts[0].rerun
        assert doubts[0].claimed_by is not None
        log = nbagent.read_log(store)
        assert log.set_index("call_id").loc[call_id, "status"] == "in_doubt"
    assert chat.log.set_index("call_id").loc[call_id, "status"] == "in_doubt"
    chat.close()


def test_crash_with_an_idempotent_tool_reruns_it(db: str, counter: Path) -> None:
    chat_id, call_id = park(db)
    with open_store(db) as store:
        store.approve(call_id)
    crashed = run_agent(
        "complete",
        str(db),
        chat_id,
        "--idempotent",
        env=_env(counter, NBAGENT_TEST_CRASH="1"),
        check=False,
    )
    assert crashed["returncode"] == 3
    done = run_agent("complete", str(db), chat_id, "--idempotent", env=_env(counter))
    assert done["status"] == "complete"
    assert count(counter) == 2  # rerun, by design, because the tool said it is safe
    with open_store(db) as store:
        assert store.call(call_id).status == "ok"
        doubts = [e for e in store.iter_events(chat_id) if isinstance(e, CallInDoubt)]
        assert len(doubts) == 1 and doubts[0].rerun


def test_a_call_running_in_a_live_process_is_left_alone(db: str, counter: Path) -> None:
    chat_id, call_id = park(db)
    with open_store(db) as store:
        store.approve(call_id)
    slow = subprocess.Popen(
        [sys.executable, str(HERE / "_agent.py"), "complete", str(db), chat_id],
        env=_env(counter, NBAGENT_TEST_SLEEP="2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with open_store(db) as store:
            deadline = time.monotonic() + 60
            while store.call(call_id).status != "running":
                assert time.monotonic() < deadline and slow.poll() is None
                time.sleep(0.01)
        with pytest.warns(StoreConflictWarning, match="running"):
            chat = Chat.load(chat_id, store=db, tools=[IdempotentRefund])
            assert chat.step().kind == "busy"  # not in doubt: its process is alive
        assert chat.get_call(call_id).status == "running"
        chat.close()
    finally:
        _, stderr = slow.communicate(timeout=120)
    assert slow.returncode == 0, stderr
    assert count(counter) == 1
