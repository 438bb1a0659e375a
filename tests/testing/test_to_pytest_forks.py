"""``to_pytest`` of a fork: exported when its test can pass, refused (saying why) otherwise.

A fork with ``system=`` or ``model=`` after step 0 shares its parent's requests,
made with the parent's system prompt or model; its test asks every request with the
fork's, so it could never pass (``ReplayMissError``). Refused with a ``ValueError``;
a fork at step 0 (every request its own) exports a test that passes, run as its user
would (pytest in a subprocess, in a clean directory).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _exported import run_exported

from nbagent import Chat
from nbagent._replay import PROCESS
from nbagent.testing import ScriptedProvider, reply, to_pytest


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    PROCESS.clear()
    yield
    PROCESS.clear()


def _chat() -> Chat:
    provider = ScriptedProvider([reply("hello"), reply("and again")], repeat_last=True)
    chat = Chat(provider=provider, display=False, system="old prompt")
    chat.ask("hi")
    chat.ask("once more")
    return chat


OTHER = ScriptedProvider([reply("other model")], model="other", repeat_last=True)


@pytest.mark.parametrize(
    ("change", "mixed"),
    [({"system": "new prompt"}, "2 system prompts"), ({"model": OTHER}, "2 models")],
)
def test_a_fork_with_a_new_system_prompt_or_model_after_step_0_is_refused(
    change: dict[str, Any], mixed: str, tmp_path: Path
) -> None:
    fork = _chat().fork(step=1, **change)
    fork.complete()
    which = next(iter(change))
    with pytest.raises(ValueError, match=f"made with {mixed} \\(a fork with {which}= at step 1"):
        to_pytest(fork, tmp_path / "test_fork.py")
    assert not (tmp_path / "test_fork.py").exists()
    again = fork.fork()  # its fork (no change) mixes them too
    with pytest.raises(ValueError, match=mixed):
        to_pytest(again, tmp_path / "test_again.py")


def test_a_chat_whose_system_prompt_changed_between_turns_is_refused(tmp_path: Path) -> None:
    chat = Chat(provider=ScriptedProvider([reply("a"), reply("b")]), display=False, system="one")
    chat.ask("hi")
    chat.system = "two"
    chat.ask("again")
    with pytest.raises(ValueError, match=r"2 system prompts \(its system prompt or model changed"):
        to_pytest(chat, tmp_path / "test_chat.py")


@pytest.mark.parametrize("change", [{"system": "new prompt"}, {"model": OTHER}, {}])
def test_a_fork_whose_requests_are_all_its_own_exports_a_passing_test(
    change: dict[str, Any], tmp_path: Path
) -> None:
    step = 0 if change else 1
    fork = _chat().fork(step=step, **change)
    fork.complete()
    test = to_pytest(fork, tmp_path / "test_fork.py")
    PROCESS.clear()
    ran = run_exported(test)
    assert ran.returncode == 0, ran.stdout[-2000:]
