"""``to_pytest`` of a fork with a given result or new tool options writes a test that passes,
run as its user would (pytest in a subprocess), and fails when a tool that runs in it changes.

- ``fork(call, result=...)``: the call never ran (the fork gave its result); the test replays
  that one call's result, and the tool's other calls run for real;
- ``fork(step=N, tool_options=...)``: the shared steps were asked with the parent's options;
  the test asks them with those and sets the fork's once step ``N`` has finished (as does a
  chat whose options changed between turns).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _exported import ROOT

from nbagent import Chat
from nbagent._replay import PROCESS
from nbagent.testing import ScriptedProvider, call_tools, reply, to_pytest

TOOLS = '''
from nbagent import tool


@tool
def lookup(order_id: int) -> str:
    """Look an order up.

    Args:
        order_id: The order.
    """
    return f"order {order_id}: STATE"
'''


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    PROCESS.clear()
    yield
    PROCESS.clear()


@pytest.fixture
def lookup(tmp_path: Path) -> Iterator[Any]:
    (tmp_path / "shop_tools.py").write_text(TOOLS.replace("STATE", "paid"), encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        yield __import__("shop_tools").lookup
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("shop_tools", None)


def _answer(request: Any) -> Any:
    """Two lookups in one response, then one more, then what the results said."""
    asked = sum(1 for m in request.messages if getattr(m, "role", "") == "assistant")
    results = [str(m.content) for m in request.messages if getattr(m, "role", "") == "tool"]
    if getattr(request.messages[-1], "role", "") == "user":
        return call_tools(("lookup", {"order_id": 2}, "c2"), ("lookup", {"order_id": 3}, "c3"))
    if asked == 1:
        return call_tools(("lookup", {"order_id": 4}, "c4"))
    return reply("saw: " + " | ".join(results))


def _chat(lookup: Any) -> Chat:
    chat = Chat(provider=ScriptedProvider([_answer], repeat_last=True), display=False)
    chat.with_tools(lookup).ask("check the orders")
    return chat


def _result_fork(chat: Chat) -> Chat:
    fork = chat.fork("c2", result="order 2: unpaid")
    fork.complete()
    return fork


def _result_fork_forked(chat: Chat) -> Chat:
    return _result_fork(chat).fork()  # the given result is in its shared history


def _options_fork(chat: Chat) -> Chat:
    fork = chat.fork(step=1, tool_options={"calls": 1})
    fork.complete()
    return fork


def _options_between_turns(chat: Chat) -> Chat:
    chat.with_tool_options(calls="one")
    chat.ask("and again")
    return chat


CASES: dict[str, Callable[[Chat], Chat]] = {
    "result": _result_fork,
    "result_forked": _result_fork_forked,
    "tool_options": _options_fork,
    "options_between_turns": _options_between_turns,
}


def _run(test: Path) -> str:
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(test.parent)])
    env["NO_PROXY"] = "*"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test.name],
        cwd=test.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout + done.stderr


@pytest.mark.parametrize("case", list(CASES))
def test_the_export_passes_and_fails_when_the_tool_changes(
    case: str, lookup: Any, tmp_path: Path
) -> None:
    chat = CASES[case](_chat(lookup))
    answer = chat.last_assistant_message
    assert answer is not None and answer.content.startswith("saw: ")
    if case.startswith("result"):
        assert "order 2: unpaid" in answer.content and "order 3: paid" in answer.content
    test = to_pytest(chat, tmp_path / f"test_{case}.py")
    folder = {f.name: f.read_bytes() for f in (tmp_path / f"test_{case}_recordings").iterdir()}
    PROCESS.clear()
    ran = _run(test)
    assert "1 passed" in ran, ran
    # the tool's other calls run for real: what they return now is checked
    (tmp_path / "shop_tools.py").write_text(TOOLS.replace("STATE", "lost"), encoding="utf-8")
    ran = _run(test)
    assert "1 failed" in ran and "ReplayMissError" in ran, ran
    if case.startswith("result"):  # c2's given result is replayed, c3 ran and changed
        assert "order 3: lost" in ran and "order 2: lost" not in ran, ran
    else:
        assert "order 2: lost" in ran, ran
    after = {f.name: f.read_bytes() for f in (tmp_path / f"test_{case}_recordings").iterdir()}
    assert after == folder


def test_a_fork_giving_ask_user_its_answer_exports_a_passing_test(tmp_path: Path) -> None:
    from nbagent import ask_user

    def answer(request: Any) -> Any:
        results = [str(m.content) for m in request.messages if getattr(m, "role", "") == "tool"]
        if not results:
            return call_tools(("ask_user", {"question": "Which colour?"}, "q1"))
        return reply("got " + results[0])

    chat = Chat(provider=ScriptedProvider([answer], repeat_last=True), display=False)
    chat.with_tools(ask_user).ask("pick a colour")
    chat.answer(chat.pending_inputs[0], "green")
    chat.complete()
    fork = chat.fork("q1", result="blue")  # its question closed, answered blue
    fork.complete()
    assert fork.last_assistant_message is not None
    assert "blue" in fork.last_assistant_message.content
    test = to_pytest(fork, tmp_path / "test_ask_fork.py")
    PROCESS.clear()
    ran = _run(test)
    assert "1 passed" in ran, ran
