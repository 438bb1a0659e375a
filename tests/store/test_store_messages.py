"""What the store says when it refuses or cannot write, in words that match what happened.

- ``store.approve(..., exclusive=True)`` on a call approved the same way already read like
  an argument mismatch ("already approved by inbox with the model's arguments ... a
  decision cannot be changed"): it says the decision was the same, and not the one recorded;
- a process that only loaded a chat warned at exit "closed without writing its last 0
  event(s) ... SQLITE_FULL" on a full disk: nothing of its own was unwritten, so it says
  nothing (a setting changed there is still reported).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, DecisionError
from nbagent.store import open_store

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import Refund  # noqa: E402


def test_an_exclusive_decision_alike_says_it_was_the_same(backend: Any) -> None:
    with open_store(backend.url) as store:
        chat = Chat(model="demo", store=store).with_tools(Refund)
        chat.ask("Refund order 42")
        call_id = chat.pending_approvals[0].id
        chat.close()
        store.approve(call_id, by="inbox", exclusive=True)
        with pytest.raises(DecisionError) as info:
            store.approve(call_id, by="inbox", exclusive=True)
        text = str(info.value)
        assert "already approved by inbox" in text and "the same way" in text, text
        assert "arguments" not in text and "cannot be changed" not in text, text
        with pytest.raises(DecisionError, match=r"already approved by inbox with the model's"):
            store.approve(call_id, {"order_id": 43}, by="inbox")  # a real mismatch


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MB tmpfs (root only: skipped where it cannot be mounted)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        pytest.skip("cannot mount a tmpfs here")
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root?)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


LOADER = textwrap.dedent(
    """
    import sys
    from nbagent import Chat
    from nbagent.testing import ScriptedProvider
    chat = Chat.load(sys.argv[1], store=sys.argv[2], provider=ScriptedProvider([]), display=False)
    print(len(chat.transcript))
    if sys.argv[3] == "raise":
        chat.max_steps = 77  # a setting of its own, left unwritten by the full disk
    """
)


def _fill(path: Path) -> None:
    with open(path, "ab", buffering=0) as f:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    f.write(b"x" * size)
            except OSError:
                continue


@pytest.mark.parametrize("what", ["load", "raise"])
def test_a_process_that_only_loaded_a_chat_says_nothing_at_exit(
    small_disk: Path, what: str
) -> None:
    db = str(small_disk / "agent.db")
    with open_store(db) as store:  # open meanwhile: its -shm file stays (a kernel's)
        chat = Chat(model="demo", store=store).with_tools(Refund)
        chat.ask("Refund order 42")
        chat_id = chat.id
        chat.close()
        _fill(small_disk / "filler")
        root = str(HERE.parent.parent)
        done = subprocess.run(
            [sys.executable, "-W", "always", "-c", LOADER, chat_id, db, what],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=root,
            env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"},
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"
    if what == "load":
        assert "closed without writing" not in done.stderr, done.stderr
    else:
        assert "closed without writing its settings" in done.stderr, done.stderr
        assert "0 event(s)" not in done.stderr
