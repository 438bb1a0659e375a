"""Secrets never reach an exception, a reason, a batch's error or a display.

Each surface is fed a key of the chat's provider (a shape no pattern knows), a key-shaped
token and URL credentials, and must show ``***`` where each was: the raised
``ToolExecutionError`` (``on_tool_error="raise"``), a resolver's failure in the approval
reason (the log, the store's events), a batch row's ``error`` (a factory that raises, a
provider raising a plain exception), and the displays of ``chat.log``, ``inbox.pending``,
and the ``DecisionError`` that names a call. Also: an extension whose
``claim()`` declines every call of a round ends the step (``busy``), not the turn's budget.
"""

from __future__ import annotations

import pickle
import sqlite3
import traceback
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import (
    Chat,
    ToolCall,
    ToolExecutionError,
    tool,
)
from nbagent.testing import ScriptedProvider, call_tools, reply

OWN_KEY = "corpkey_ZZZ999yyy"  # the provider's key: no known shape, found by value only
TOKEN = "sk-proj-abc123def456ghi789"
DSN = "postgresql://app:hunter2@db.internal/approvals"
SECRETS = (OWN_KEY, "hunter2", "abc123def456")


def leaked(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


class KeyedProvider(ScriptedProvider):
    """A scripted provider that names its key, as the SDK providers do (``secrets()``)."""

    def secrets(self) -> tuple[str, ...]:
        return (OWN_KEY,)


def store_rows_with_secrets(path: Path) -> list[str]:
    con = sqlite3.connect(path)
    try:
        found = []
        for (name,) in con.execute("select name from sqlite_master where type='table'"):
            for row in con.execute(f'select * from "{name}"'):
                if leaked(str(row)):
                    found.append(name)
                    break
        return found
    finally:
        con.close()


# --------------------------------------------------------- ToolExecutionError
@tool
def fetch(x: int) -> str:
    """Fetch."""
    raise RuntimeError(f"401 for key {OWN_KEY} ({TOKEN}) at {DSN}")


def test_tool_execution_error_hides_the_chats_key_and_url_credentials() -> None:
    provider = KeyedProvider([call_tools(("fetch", {"x": 1})), reply("ok")])
    chat = Chat(provider=provider, on_tool_error="raise", display=False).with_tools(fetch)
    with pytest.raises(ToolExecutionError) as info:
        chat.ask("go")
    error = info.value
    shown = "".join(traceback.format_exception(error))  # what a cell's traceback prints
    assert leaked(str(error)) == [] and leaked(shown) == []
    assert "RuntimeError: 401 for key *** (sk-***) at postgresql://***@db.internal" in str(error)
    # the same text as the call's error in the log; the tool's own exception is kept, unchained
    assert chat.log["error"].tolist() == [str(error).split(" raised ", 1)[1]]
    assert isinstance(error.error, RuntimeError) and OWN_KEY in str(error.error)
    assert error.__cause__ is None and error.__context__ is None
    again = pickle.loads(pickle.dumps(error))  # a batch worker sends it back as it is
    assert leaked(str(again)) == []


def test_several_tool_errors_raise_a_group_with_every_message_hidden() -> None:
    provider = KeyedProvider([call_tools(("fetch", {"x": 1}), ("fetch", {"x": 2})), reply("ok")])
    chat = Chat(provider=provider, on_tool_error="raise", display=False).with_tools(fetch)
    with pytest.raises(ExceptionGroup) as info:
        chat.ask("go")
    assert len(info.value.exceptions) == 2
    assert leaked("".join(traceback.format_exception(info.value))) == []


@settings(max_examples=100, deadline=None)
@given(
    before=st.text(alphabet="abc :=/-_.", max_size=30),
    body=st.text(alphabet="abcdefghijkXYZ0123456789", min_size=12, max_size=40).filter(
        lambda b: any(c.isdigit() for c in b)
    ),
)
def test_a_tool_execution_error_made_by_hand_hides_key_shaped_text(before: str, body: str) -> None:
    secret = "sk-" + body
    call = ToolCall("c1", "t", {})
    error = ToolExecutionError(call, ValueError(f"{before} {secret} end"))
    assert body not in str(error)


# ------------------------------------------------------------ resolver reason
def _gated(x: int) -> str:
    """Gated."""
    return "ran"


def _failing_resolver(call: ToolCall) -> bool:
    raise ConnectionError(f"cannot connect {DSN} (token {TOKEN}, key {OWN_KEY})")


def test_a_resolver_that_raises_leaves_a_reason_without_secrets(tmp_path: Path) -> None:
    g = tool(requires_approval=_failing_resolver, name="g")(_gated)
    path = tmp_path / "r.db"
    provider = KeyedProvider([call_tools(("g", {"x": 1})), reply("done")])
    chat = Chat(provider=provider, store=str(path), display=False).with_tools(g)
    chat.ask("go")
    call = chat.pending_approvals[0]
    assert call.approval is not None
    reason = call.approval.reason
    assert "approval rule raised ConnectionError: cannot connect postgresql://***@" in reason
    assert leaked(reason) == []
    assert leaked(str(chat.log["approval_reason"].tolist())) == []
    chat.close()
    assert store_rows_with_secrets(path) == []


# ------------------------------------------------------------------- batch
def _factory_that_fails() -> Chat:
    raise ConnectionError(f"could not connect to {DSN} with token {TOKEN}")


def _chat_whose_provider_fails() -> Chat:
    return Chat(provider=KeyedProvider([RuntimeError(f"gateway refused {OWN_KEY} / {TOKEN}")]))


@pytest.mark.parametrize("factory", [_factory_that_fails, _chat_whose_provider_fails])
def test_a_batch_rows_error_has_no_secrets(tmp_path: Path, factory: Any) -> None:
    path = tmp_path / "b.db"
    result = nbagent.batch(["hi"], factory, store=str(path), progress=False)
    error = result["error"].iloc[0]
    assert result["status"].iloc[0] == "failed"
    assert "***" in error and leaked(error) == []
    assert store_rows_with_secrets(path) == []


def test_one_line_cut_after_hiding_leaves_no_part_of_a_key() -> None:
    from nbagent.batch._local import one_line

    text = one_line(RuntimeError("x" * 20 + " " + TOKEN), limit=45)
    assert "abc1" not in text
