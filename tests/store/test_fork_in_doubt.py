"""A call in doubt (its process stopped while running it) is never run again by a fork.

A call loaded in doubt had no start time (the store had its claim, not a start), so
``fork(call, decision="approved")`` took it for an approval whose call never ran (a
change) and the fork ran the refund a second time. The call now starts when it was
claimed, and a fork refuses to approve again a call in doubt. A real process runs the
tool and dies before its result is written (``_agent.py``); the tool counts its runs
in a file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat
from nbagent.store import open_store

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import Refund, count  # noqa: E402


def _crashed_in_doubt(db: str, counter: Path) -> tuple[str, str]:
    """A chat whose approved refund ran in a process that died before recording it."""
    with open_store(db) as store:
        chat = Chat(model="demo", store=store).with_tools(Refund)
        chat.ask("Refund order 42")
        chat_id, call_id = chat.id, chat.pending_approvals[0].id
        chat.close()
        store.approve(call_id)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBAGENT_TEST_")}
    env["NBAGENT_TEST_COUNTER"], env["NBAGENT_TEST_CRASH"] = str(counter), "1"
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run(
        [sys.executable, str(HERE / "_agent.py"), "complete", db, chat_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    assert count(counter) == 1  # the refund went through; its result was never recorded
    return chat_id, call_id


def test_a_fork_never_approves_a_call_in_doubt_again(
    backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(counter))
    chat_id, call_id = _crashed_in_doubt(str(backend.url), counter)
    chat = Chat.load(chat_id, store=str(backend.url), tools=[Refund])
    call = chat.get_call(call_id)
    assert call.status == "in_doubt"
    assert call.started_at is not None  # it started when it was claimed
    with pytest.raises(ValueError, match="in doubt"):
        chat.fork(call_id, decision="approved")
    denied = chat.fork(call_id, decision="denied")  # the other branch stays open
    denied.complete()
    assert denied.get_call(call_id).status == "denied"
    again = Chat.load(chat_id, store=str(backend.url), tools=[Refund])
    assert again.get_call(call_id).started_at == call.started_at  # stored with its start
    with pytest.raises(ValueError, match="in doubt"):
        again.fork(call_id, decision="approved")
    assert count(counter) == 1
    chat.close()
    again.close()
    denied.close()
