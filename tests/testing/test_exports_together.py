"""Two exported tests of the same question, answered differently (two samples of one
prompt), pass when pytest runs them in one session: each replays its own folder's answer,
not the one the other put in the process's recordings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _exported import ROOT

from nbagent import Chat
from nbagent._replay import PROCESS
from nbagent.testing import ScriptedProvider, reply, to_pytest

TESTS = ["test_sample_0.py", "test_sample_1.py"]


def test_two_exports_of_one_question_each_replay_their_own_answer(tmp_path: Path) -> None:
    PROCESS.clear()
    for n, answer in enumerate(["Answer A", "Answer B"]):
        chat = Chat(provider=ScriptedProvider([reply(answer)]), display=False)
        assert chat.ask("What is the capital?").content == answer
        to_pytest(chat, tmp_path / f"test_sample_{n}.py")
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env["PYTHONPATH"] = str(ROOT)
    env["NO_PROXY"] = "*"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
