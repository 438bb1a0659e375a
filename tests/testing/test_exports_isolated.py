"""An exported test replays its own folder only: in one pytest session, a test run after
another never takes the other's recordings from the process, nor writes them into its
folder. A tool whose behaviour changed fails its test the same way alone and after
another test (the miss that says which message differs), and the committed folder is
left as it was written."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _exported import ROOT

from nbagent import Chat
from nbagent._replay import PROCESS
from nbagent.testing import ScriptedProvider, call_tools, reply, to_pytest

TOOL = '''
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


def _answer(request: Any) -> Any:
    results = [str(m.content) for m in request.messages if getattr(m, "role", "") == "tool"]
    if not results:
        return call_tools(("lookup", {"order_id": 7}, "c1"))
    return reply("saw " + results[0])


def _export(tmp_path: Path, module: str, state: str) -> Path:
    (tmp_path / f"{module}.py").write_text(TOOL.replace("STATE", state), encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        lookup = __import__(module).lookup
        chat = Chat(provider=ScriptedProvider([_answer], repeat_last=True), display=False)
        chat.with_tools(lookup).ask("Is order 7 paid?")
        return to_pytest(chat, tmp_path / f"test_{module}.py")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(module, None)


def _pytest(tmp_path: Path, *tests: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(tmp_path)])
    env["NO_PROXY"] = "*"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout + done.stderr


def _folder(tmp_path: Path, name: str) -> dict[str, str]:
    folder = tmp_path / f"test_{name}_recordings"
    return {f.name: f.read_text(encoding="utf-8") for f in sorted(folder.iterdir())}


def test_an_exported_test_replays_its_own_folder_whatever_ran_before(tmp_path: Path) -> None:
    _export(tmp_path, "paid_tools", "paid")
    _export(tmp_path, "changed_tools", "unpaid")  # recorded when its tool said unpaid
    (tmp_path / "changed_tools.py").write_text(TOOL.replace("STATE", "paid"), encoding="utf-8")
    written = _folder(tmp_path, "changed_tools")

    alone = _pytest(tmp_path, "test_changed_tools.py")
    assert "1 failed" in alone and "ReplayMissError" in alone, alone
    assert "message 3 (tool)" in alone, alone
    after = _pytest(tmp_path, "test_paid_tools.py", "test_changed_tools.py")
    assert "1 failed, 1 passed" in after, after
    assert "ReplayMissError" in after and "message 3 (tool)" in after, after
    assert _folder(tmp_path, "changed_tools") == written  # nothing written into it
    assert _pytest(tmp_path, "test_paid_tools.py").count("1 passed") == 1
