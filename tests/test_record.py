"""chat.record: the one fold of a chat's events, built by the core as it emits.

The record is a pure function of the events: folding ``chat.events`` from
scratch gives a record equal to the chat's own, whatever the chat did (property,
over generated scripted chats), for a chat loaded from a store too; every event
type has a rule in the fold (a new type without one fails here).
"""

from __future__ import annotations

import inspect
import tempfile
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbagent
import nbagent._events as events_module
from nbagent import (
    Approval,
    Chat,
    ModelRequest,
    ToolCall,
    report_progress,
    tool,
)
from nbagent._events import (
    CallInDoubt,
    Event,
    SamplingFinished,
    ToolCallRequested,
    ToolCallStarted,
)
from nbagent._record import _RULES, FRAGMENTS, ChatRecord, RecordChange, fold
from nbagent._tools import call_reporter
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool
def safe(x: int) -> str:
    """A tool that runs without asking (and reports its progress, and a log line as an MCP
    server's would arrive)."""
    report_progress(x, 4, f"at {x}")
    reporter = call_reporter()
    assert reporter is not None
    reporter.log("info", f"safe {x} ran", "test")
    if x == 3:
        raise ValueError("three is unlucky")
    return f"safe {x}"


@tool(requires_approval=True)
def risky(x: int) -> str:
    """A tool that asks first."""
    return f"risky {x}"


@tool(external=True)
def outside(x: int) -> str:
    """Work done by a person: its calls park until chat.answer gives the result."""


def scripted(rounds: list[list[str]], fail_first: bool) -> ScriptedProvider:
    def answer(request: ModelRequest) -> Any:
        k = sum(1 for m in request.messages if getattr(m, "role", "") == "assistant")
        if k < len(rounds):
            return call_tools(*[(name, {"x": i}, f"c{k}_{i}") for i, name in enumerate(rounds[k])])
        return reply(f"done after {k} rounds")

    script: list[Any] = [RuntimeError("the network blinked")] if fail_first else []
    return ScriptedProvider([*script, answer], repeat_last=True)


def event_types() -> set[type[Event]]:
    return {
        cls
        for _, cls in inspect.getmembers(events_module, inspect.isclass)
        if issubclass(cls, Event) and cls is not Event
    }


def test_every_event_type_has_a_rule_in_the_fold() -> None:
    missing = event_types() - set(_RULES)
    assert not missing, f"the chat record has no rule for {sorted(c.__name__ for c in missing)}"
    assert set(FRAGMENTS) <= set(_RULES)


def test_an_event_type_without_a_rule_is_refused() -> None:
    class Unknown(Event):
        type = "unknown"

    with pytest.raises(TypeError, match="no rule for Unknown"):
        fold([Unknown(chat_id="x")])


rounds_st = st.lists(
    st.lists(st.sampled_from(["safe", "risky", "nope", "outside"]), min_size=1, max_size=3),
    max_size=3,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rounds=rounds_st,
    verdicts=st.lists(st.booleans(), min_size=12, max_size=12),
    fail_first=st.booleans(),
    allow_risky=st.booleans(),
)
def test_folding_the_events_from_scratch_gives_the_chats_record(
    rounds: list[list[str]], verdicts: list[bool], fail_first: bool, allow_risky: bool
) -> None:
    chat = Chat(provider=scripted(rounds, fail_first), display=False)
    chat.with_tools(safe, risky, outside).with_tool_options(calls=2)
    if allow_risky:
        chat.always_allow(risky)
    if fail_first:
        with pytest.raises(RuntimeError):
            chat.ask("go")
        chat.complete()
    else:
        chat.ask("go")
    n = 0
    for _ in range(10):
        pending = chat.pending_approvals
        inputs = chat.pending_inputs
        if not pending and not inputs:
            break
        for c in pending:
            (chat.approve if verdicts[n % len(verdicts)] else chat.deny)(c)
            n += 1
            assert fold(chat.events) == chat.record  # at every point, not only at the end
        for i in inputs:
            if verdicts[n % len(verdicts)]:
                chat.answer(i, {"done": n})
            else:
                chat.decline(i, "not today")
            n += 1
            assert fold(chat.events) == chat.record
        chat.complete()
    assert fold(chat.events) == chat.record
    record = chat.record
    assert [r.call_id for r in record.calls] == [c.id for c in chat.tool_calls]
    for r, c in zip(record.calls, chat.tool_calls, strict=True):
        assert (r.status, r.decided, r.result) == (c.status, c.decision, c.result)
        assert r.call is c
    assert len(record.messages) == len(chat.transcript)
    assert [m.message for m in record.messages] == list(chat.transcript)
    finished = [s for s in record.steps if s.usage is not None]
    assert record.usage.total_tokens == sum(s.usage.total_tokens for s in finished)  # type: ignore[union-attr]


def test_every_event_type_a_chat_emits_is_folded_the_same_from_scratch() -> None:
    """One chat that emits every kind of event but the in-doubt one (next test) and a
    sampling request's (an MCP server's; tests/test_inputs.py folds one)."""
    chat = Chat(
        provider=scripted([["safe", "risky", "risky", "nope", "outside"]], True), display=False
    )
    chat.with_tools(safe, risky, outside).with_tool_options(calls=5).always_allow(safe)
    chat.add_rule(nbagent.Rule.deny("no_such_tool"))  # a RuleChanged (it decides nothing)
    with pytest.raises(RuntimeError):
        chat.ask("go")
    chat.complete()
    a, b = chat.pending_approvals
    chat.approve(a)
    chat.deny(b, reason="no")
    chat.revoke(safe)
    chat.complete()
    (waiting,) = chat.pending_inputs
    chat.answer(waiting, "done by hand")
    chat.complete()
    seen = {type(e) for e in chat.events}
    assert event_types() - set(FRAGMENTS) - seen == {CallInDoubt, SamplingFinished}
    assert fold(chat.events) == chat.record
    by_id = {r.call_id: r for r in chat.record.calls}
    assert (by_id[a.id].decision, by_id[a.id].status) == ("approved", "ok")
    assert (by_id[b.id].decision, by_id[b.id].status, by_id[b.id].reason) == (
        "denied",
        "denied",
        "no",
    )
    assert chat.record.steps[0].error_type == "RuntimeError"
    assert chat.record.last_step == "complete"


def test_a_call_in_doubt_that_may_rerun_is_runnable_again_in_the_record() -> None:
    call = ToolCall("c1", "risky", {"x": 1})
    now = datetime.now(UTC)
    history: list[Event] = [
        ToolCallRequested(chat_id="x", call=call, step=1, turn=1, approval=Approval(False)),
        ToolCallStarted(chat_id="x", call=call, step=2, turn=1, mode="sequential", arguments={}),
        CallInDoubt(
            chat_id="x", call=call, step=2, turn=1, claimed_by="h:1", claimed_at=now, rerun=True
        ),
    ]
    record = fold(history)
    assert (record.call("c1").status, record.call("c1").started_at) == ("requested", None)
    assert fold(history[:2]).call("c1").status == "running"


def test_a_loaded_chat_gets_its_record_from_its_stored_events() -> None:
    from nbagent import SQLiteStore

    with tempfile.TemporaryDirectory() as d:
        store = SQLiteStore(Path(d) / "chats.db")
        try:
            chat = Chat(provider=scripted([["safe", "risky"]], False), store=store, display=False)
            chat.with_tools(safe, risky)
            chat.ask("go")
            chat.approve(chat.pending_approvals[0])
            chat.complete()
            loaded = Chat.load(
                chat.id, store=store, tools=[safe, risky], provider=scripted([], False)
            )
            assert len(loaded.record.calls) == 2
            assert fold(loaded.events) == loaded.record
            assert [(r.call_id, r.status, r.decision) for r in loaded.record.calls] == [
                (r.call_id, r.status, r.decision) for r in chat.record.calls
            ]
            assert loaded.record.usage == chat.record.usage
        finally:
            store.close()


def test_the_record_says_what_changed() -> None:
    chat = Chat(provider=scripted([["risky"]], False), display=False).with_tools(risky)
    changes: list[RecordChange] = []
    chat.record.subscribe(changes.append)
    chat.ask("go")
    (r,) = chat.record.calls
    assert isinstance(chat.record.calls, tuple)  # a copy: the record's own list stays its own
    assert r.status == "awaiting_approval" and r.decision == "pending"
    assert ("call", r.call_id) in [(c.kind, c.key) for c in changes]
    changes.clear()
    chat.approve(r.call_id)
    assert r.status == "approved"  # one object per call, updated as events land
    assert [(c.kind, c.key) for c in changes] == [("call", r.call_id)]
    assert chat.record.unsubscribe(changes.append)

    def broken(change: RecordChange) -> None:
        raise RuntimeError("a subscriber's bug")

    chat.record.subscribe(broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat.complete()
    assert chat.record.call(r.call_id).status == "ok"  # the chat carried on
    assert any("a subscriber's bug" in str(w.message) for w in caught)
    assert isinstance(chat.record, ChatRecord) and chat.record.title == "go"
