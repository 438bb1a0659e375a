"""An exported test whose folder lacks a request's recording fails saying so, and how to mend
it (export the test again from a chat that ran); it does not tell its user to run with
replay='auto', which an exported test's OfflineProvider cannot do. A chat with a real
provider missing under replay='only' still gets that hint."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _exported import run_exported

from nbagent import Chat, ReplayMissError, tool
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
    return f"order {order_id}: paid"
'''


@tool
def lookup(order_id: int) -> str:
    """Look an order up.

    Args:
        order_id: The order.
    """
    return f"order {order_id}: paid"


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


def test_an_exported_test_missing_a_recording_says_to_export_again(tmp_path: Path) -> None:
    (tmp_path / "miss_tools.py").write_text(TOOL, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        from miss_tools import lookup as exported_lookup  # type: ignore[import-not-found]

        chat = Chat(provider=ScriptedProvider([_answer], repeat_last=True), display=False)
        chat.with_tools(exported_lookup).ask("Is order 7 paid?")
        test = to_pytest(chat, tmp_path / "test_miss.py")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("miss_tools", None)
    # the first request's recording (only the user's message) is gone from the folder
    for f in sorted((tmp_path / "test_miss_recordings").iterdir()):
        if len(json.loads(f.read_text(encoding="utf-8"))["fingerprint"]["messages"]) == 1:
            f.unlink()
    out = run_exported(test)
    text = out.stdout + out.stderr
    assert "1 failed" in text and "ReplayMissError" in text, text
    assert "replay='auto'" not in text, text
    assert "recordings folder has no recording of this request" in text, text
    assert "nbagent.testing.to_pytest(chat, path)" in text, text


def test_a_chat_that_can_ask_a_model_still_hears_of_replay_auto(tmp_path: Path) -> None:
    folder = tmp_path / "recordings"
    chat = Chat(
        provider=ScriptedProvider([_answer], repeat_last=True), recordings=folder, display=False
    )
    chat.with_tools(lookup).ask("Is order 7 paid?")
    again = Chat(
        provider=ScriptedProvider([_answer], repeat_last=True),
        replay="only",
        recordings=folder,
        display=False,
    )
    again.with_tools(lookup)
    with pytest.raises(ReplayMissError) as caught:
        again.ask("Is order 8 paid?")
    assert "Run with replay='auto' to ask the model and record." in str(caught.value)
