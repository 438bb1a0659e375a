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

import asyncio
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
    ApprovalDecided,
    Chat,
    DecisionError,
    Extension,
    Tool,
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


def store_rows_with_secrets(path: Path, secrets: tuple[str, ...] = SECRETS) -> list[str]:
    con = sqlite3.connect(path)
    try:
        found = []
        for (name,) in con.execute("select name from sqlite_master where type='table'"):
            for row in con.execute(f'select * from "{name}"'):
                if any(s in str(row) for s in secrets):
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


# ------------------------------------------------------------ decision reasons
WHY = f"ask ops, key {OWN_KEY} / {TOKEN} at {DSN}"
WHY_SHOWN = "ask ops, key *** / sk-*** at postgresql://***@db.internal/approvals"


@tool(requires_approval=True)
def refund(order_id: int) -> str:
    """Refund an order."""
    return "refunded"


def _refunds(path: Path) -> tuple[Chat, KeyedProvider]:
    script = [call_tools(("refund", {"order_id": n}, f"r{n}")) for n in (7, 8)]
    provider = KeyedProvider([script[0], reply("ok"), script[1], reply("ok")])
    return Chat(provider=provider, store=str(path), display=False).with_tools(refund), provider


def _read_by_model(provider: ScriptedProvider) -> str:
    return "\n".join(str(getattr(m, "content", "")) for r in provider.requests for m in r.messages)


def test_a_decisions_reason_reaches_nothing_with_a_secret(tmp_path: Path) -> None:
    """``chat.deny(call, reason=...)`` sent the reason as typed to the model (in the
    denial), and wrote it to the call's decision, ``chat.log`` and the store, while every
    other text a person writes (an answer, a decline's reason) is scrubbed of the chat's
    provider's key and of key shapes; ``approve(..., reason=)`` too."""
    path = tmp_path / "d.db"
    chat, provider = _refunds(path)
    decided: list[ApprovalDecided] = []
    chat.on(ApprovalDecided, decided.append)  # type: ignore[arg-type]
    chat.ask("refund 7")
    chat.deny("r7", reason=WHY)
    chat.complete()
    chat.ask("refund 8")
    chat.approve("r8", reason=WHY)
    chat.complete()
    read = _read_by_model(provider)
    assert leaked(read) == [] and WHY_SHOWN in read  # the denial says why, hidden
    assert [c.decision.reason for c in chat.tool_calls if c.decision] == [WHY_SHOWN] * 2
    assert [e.decision.reason for e in decided] == [WHY_SHOWN] * 2
    assert chat.log["reason"].tolist() == [WHY_SHOWN] * 2
    chat.close()
    assert store_rows_with_secrets(path) == []


def test_a_reason_given_through_the_store_is_stored_and_applied_hidden(tmp_path: Path) -> None:
    """``store.deny``/``store.approve`` (another process, an inbox) wrote the reason as typed:
    the store cannot know a chat's provider's key, but hides key shapes and URL credentials,
    as ``store.decline`` does; the chat applying the decision hides its own key too."""
    path = tmp_path / "d.db"
    chat, provider = _refunds(path)
    store = nbagent.SQLiteStore(str(path))  # as another process would open it
    chat.ask("refund 7")
    store.deny("r7", reason=WHY, by="ops")
    stored = store.decisions(chat.id, ["r7"])["r7"].reason  # the store cannot know OWN_KEY
    assert stored == WHY_SHOWN.replace("key ***", f"key {OWN_KEY}")
    assert store_rows_with_secrets(path, ("hunter2", "abc123def456")) == []
    chat.complete()  # applies it
    chat.ask("refund 8")
    store.approve("r8", reason=WHY, by="ops")
    chat.complete()
    read = _read_by_model(provider)
    assert leaked(read) == [] and WHY_SHOWN in read
    assert [c.decision.reason for c in chat.tool_calls if c.decision] == [WHY_SHOWN] * 2
    assert chat.log["reason"].tolist() == [WHY_SHOWN] * 2
    assert [c.status for c in chat.tool_calls] == ["denied", "ok"]
    chat.close()
    store.close()
    # applied, the store's rows hold the reason as the chat does: its key hidden too
    assert store_rows_with_secrets(path) == []


@settings(max_examples=500, deadline=None)
@given(
    text=st.text(alphabet="ab*", max_size=12),
    shown=st.text(alphabet="ab*", max_size=12),
)
def test_a_reason_the_chat_hid_parts_of_is_the_stored_ones(text: str, shown: str) -> None:
    """The store knows a decision applied by its chat by its reason too: the chat's is the
    store's with parts (its provider's key) as ``***``; read as a pattern would read it."""
    import re

    from nbagent._secrets import hidden_from

    pattern = ".+".join(re.escape(part) for part in shown.split("***"))
    expected = "***" in shown and re.fullmatch(pattern, text, re.DOTALL) is not None
    assert hidden_from(shown, text) == expected


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


# ---------------------------------------------------------------- displays
class Connect(Tool):
    """Connect."""

    requires_approval = True

    def execute(self, dsn: str) -> str:
        return "connected"


ARGS = {"dsn": f"postgresql://app:hunter2@db/x?key={TOKEN}"}


def _parked() -> Chat:
    provider = ScriptedProvider([call_tools(("connect", ARGS, "c1")), reply("done")])
    chat = Chat(provider=provider, display=False).with_tools(Connect)
    chat.ask("go")
    return chat


def test_chat_log_displays_arguments_hidden_and_keeps_them_whole() -> None:
    chat = _parked()
    log = chat.log
    bundle = log._repr_mimebundle_()
    assert leaked(bundle["text/html"]) == [] and "postgresql://***@db" in bundle["text/html"]
    assert leaked(bundle["text/plain"]) == []
    assert leaked(log._repr_html_()) == []
    whole = log.frame()
    assert leaked(whole._repr_mimebundle_()["text/html"]) == []
    assert leaked(whole._repr_html_()) == []
    # the frame's values are the call's own: the analysis and the call see the real ones
    assert log["arguments"].iloc[0] == ARGS
    assert "hunter2" in log["arguments_json"].iloc[0]
    assert chat.tool_calls[0].arguments == ARGS


def test_display_safe_reads_only_the_rows_pandas_shows_and_keeps_dtypes() -> None:
    import pandas as pd

    from nbagent.log._projection import display_safe

    n = 1000
    frame = pd.DataFrame(
        {
            "s": pd.array([f"{DSN} {i}" for i in range(n)], dtype="string"),
            "o": [{"k": [TOKEN]} for _ in range(n)],
            "n": range(n),
        }
    )
    with pd.option_context("display.max_rows", 10, "display.min_rows", 4):
        shown = display_safe(frame)
        assert leaked(shown._repr_html_()) == [] and leaked(repr(shown)) == []
    assert list(shown.dtypes) == list(frame.dtypes)
    assert shown["s"].iloc[0].startswith("postgresql://***@") and shown["o"].iloc[0] == {
        "k": ["sk-***"]
    }
    assert frame["s"].iloc[0] == f"{DSN} 0"  # the frame itself is untouched


def test_inbox_pending_displays_arguments_hidden() -> None:
    chat = _parked()
    pending = nbagent.inbox([chat], continue_chats=False).pending
    assert leaked(pending._repr_html_()) == []
    bundle = pending._repr_mimebundle_()
    assert leaked(bundle["text/html"]) == [] and leaked(bundle["text/plain"]) == []
    assert pending["arguments"].iloc[0] == ARGS


def test_a_decision_error_naming_calls_hides_their_arguments_secrets() -> None:
    a, b = _parked(), _parked()
    with pytest.raises(DecisionError) as info:
        a.approve(b.pending_approvals[0])  # b's call, not a's
    message = str(info.value)
    assert leaked(message) == [] and "postgresql://***@db" in message


@settings(max_examples=100, deadline=None)
@given(pad=st.integers(0, 120), body=st.sampled_from(["abc123def456ghi789", "Q1w2e3r4t5y6u7"]))
def test_a_calls_repr_never_shows_part_of_a_key(pad: int, body: str) -> None:
    # hidden before the 80-character cut: a key the cut falls inside shows no start (the
    # repr is what a cell shows of chat.pending_approvals, and what errors name calls by)
    call = ToolCall("c1", "t", {"a": "x" * pad + " sk-" + body, "dsn": "pg://u:pw@h/db"})
    shown = repr(call)
    assert body[:6] not in shown and "pw@" not in shown
    assert shown.startswith("ToolCall(id='c1', name='t', arguments=")
    assert call.arguments["a"] == "x" * pad + " sk-" + body  # the call itself is untouched


# ---------------------------------------------------- claim() says "not here"
runs: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Weather."""
    runs.append(city)
    return f"{city}: 18 C"


class Elsewhere(Extension):
    """Says each call is another process's while ``declining``."""

    def __init__(self) -> None:
        self.declining = True
        self.asked: list[str] = []

    def claim(self, call: ToolCall) -> bool:
        self.asked.append(call.id)
        return not self.declining


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_round_every_claim_declines_ends_the_step_busy(driver: str) -> None:
    runs.clear()
    provider = ScriptedProvider([call_tools(("get_weather", {"city": "Quito"})), reply("ok")])
    chat = Chat(provider=provider, display=False).with_tools(get_weather)
    ext = Elsewhere()
    chat.extend(ext)
    kinds: list[str] = []
    chat.on("step_finished", lambda e: kinds.append(e.kind))
    if driver == "sync":
        chat.ask("go")
    else:
        asyncio.run(chat.ask_async("go"))
    assert kinds == ["generated", "busy"]  # not 24 empty tool rounds, then the step budget
    assert chat.exhausted_budget is None and chat.status == "ready"
    assert ext.asked == [chat.tool_calls[0].id] and runs == []
    assert chat.tool_calls[0].status == "requested"
    assert chat.last_step is not None and chat.last_step.kind == "busy"
    ext.declining = False  # the other process let it go: it runs here, once
    chat.complete()
    assert runs == ["Quito"] and chat.status == "complete"
    assert len(provider.requests) == 2


def test_a_round_some_claims_decline_runs_the_rest_then_stops_busy() -> None:
    runs.clear()
    provider = ScriptedProvider(
        [call_tools(("get_weather", {"city": "Quito"}), ("get_weather", {"city": "Lima"}))]
    )
    chat = Chat(provider=provider, display=False).with_tools(get_weather)

    class NotQuito(Extension):
        def claim(self, call: ToolCall) -> bool:
            return call.arguments["city"] != "Quito"

    chat.extend(NotQuito())
    kinds: list[str] = []
    chat.on("step_finished", lambda e: kinds.append(e.kind))
    chat.ask("go")
    assert runs == ["Lima"]
    assert kinds == ["generated", "ran_tools", "busy"]
    assert [c.status for c in chat.tool_calls] == ["requested", "ok"]
    assert len(provider.requests) == 1
