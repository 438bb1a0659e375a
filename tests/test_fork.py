"""chat.fork: a fork changes only what it was asked to, and the promise holds in it.

The property runs generated scripted chats (rounds of gated and ungated calls,
each gated call approved or denied), forks them at a generated point with a
generated change, drives the fork to the end, and checks: the fork's history
equals the original's up to the point, with exactly the asked change; the
original is untouched (transcript, calls, events); a denied call never runs,
an approved one runs exactly once, in the original and in the fork (a call of
the shared history is never run again by the fork); every call is answered once
in each event stream; and, with a store, both come back from it as they are.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import (
    ApprovalDecided,
    AssistantToolCallMessage,
    Chat,
    DecisionError,
    ForkParent,
    ModelRequest,
    StepFinished,
    ToolCallFinished,
    ToolResultMessage,
    current_tool_call,
    tool,
)
from nbagent._base_chat import BaseChat
from nbagent.testing import ScriptedProvider, call_tools, reply


class Runs:
    """Which call object ran (identity: each chat has its own calls), and with what."""

    def __init__(self) -> None:
        self.ran: list[tuple[int, dict[str, Any]]] = []

    def count(self, call: Any) -> int:
        return sum(1 for ident, _ in self.ran if ident == id(call))

    def tools(self) -> list[Any]:
        @tool
        def safe(x: int) -> str:
            """A tool that runs without asking."""
            self.ran.append((id(current_tool_call()), {"x": x}))
            return f"safe {x}"

        @tool(requires_approval=True)
        def risky(x: int) -> str:
            """A tool that asks first."""
            self.ran.append((id(current_tool_call()), {"x": x}))
            return f"risky {x}"

        return [safe, risky]


def scripted(rounds: list[list[str]]) -> ScriptedProvider:
    """Answers by the number of responses so far: round k's calls, then a text answer."""

    def answer(request: ModelRequest) -> Any:
        k = sum(1 for m in request.messages if getattr(m, "role", "") == "assistant")
        if k < len(rounds):
            return call_tools(*[(name, {"x": i}, f"c{k}_{i}") for i, name in enumerate(rounds[k])])
        return reply(f"done after {k} rounds (system: {request.system})")

    return ScriptedProvider([answer], repeat_last=True)


def drive(chat: Chat, verdicts: dict[str, bool]) -> None:
    """Run to the end, deciding each pending call by ``verdicts`` (by call id)."""
    chat.complete()
    for _ in range(20):
        if chat.status != "awaiting_approval":
            return
        for c in chat.pending_approvals:
            if verdicts.get(c.id, True):
                chat.approve(c)
            else:
                chat.deny(c, reason="no")
        chat.complete()
    raise AssertionError("did not finish")


def lifecycle(chat: Chat) -> list[tuple[Any, ...]]:
    return [
        (
            c.id,
            c.name,
            dict(c.arguments),
            c.status,
            c.decision.verdict if c.decision else None,
            c.decision.arguments if c.decision else None,
            c.result.content if c.result else None,
        )
        for c in chat.tool_calls
    ]


def check_promise(chat: Chat, runs: Runs, settled: frozenset[str] = frozenset()) -> None:
    """Each call of ``chat`` ran once if it was approved (or ungated) and ran, else never.

    ``settled``: calls a fork got already answered (its shared history, or the
    result it was forked with): never run by the fork.
    """
    for c in chat.tool_calls:
        n = runs.count(c)
        if c.id in settled or c.status == "denied":
            assert n == 0, f"{c.id} ({c.status}) ran {n} times"
        else:
            assert c.status == "ok", c
            assert n == 1, f"{c.id} ran {n} times"


rounds_st = st.lists(
    st.lists(st.sampled_from(["safe", "risky"]), min_size=1, max_size=3), min_size=1, max_size=3
)
verdicts_st = st.lists(st.booleans(), min_size=9, max_size=9)
"""Approve (True) or deny each gated call, by position: round k, call i (see :func:`by_call`)."""


def by_call(verdicts: list[bool]) -> dict[str, bool]:
    """``verdicts`` by the call ids :func:`scripted` gives (``c{round}_{call}``)."""
    return {f"c{k}_{i}": verdicts[3 * k + i] for k in range(3) for i in range(3)}


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rounds=rounds_st,
    verdicts=verdicts_st,
    point=st.integers(0, 50),
    change=st.sampled_from(["none", "system", "tool_options", "decision", "result", "arguments"]),
    stored=st.booleans(),
)
def test_a_fork_changes_only_what_it_was_asked_to(
    rounds: list[list[str]], verdicts: list[bool], point: int, change: str, stored: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _fork_and_check(rounds, verdicts, point, change, Path(tmp) / "s.db" if stored else None)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rounds=rounds_st,
    verdicts=verdicts_st,
    steps=st.integers(0, 8),
)
def test_a_fork_made_mid_way_runs_each_approval_once_where_it_was_given(
    rounds: list[list[str]], verdicts: list[bool], steps: int
) -> None:
    """Forked at any moment (calls decided but not run yet among them), then both driven to
    the end: in each chat, a gated call runs once and only on an approval given in that chat
    (one approval, one run); a call the fork got already answered never runs there; a denied
    one never runs."""
    runs = Runs()
    original = Chat(provider=scripted(rounds)).with_tools(*runs.tools())
    by_id = by_call(verdicts)
    original.ask_later("go")
    for _ in range(steps):
        if original.step().kind == "complete":
            break
        for c in original.pending_approvals:  # decided, not driven: approved calls wait to run
            if by_id.get(c.id, True):
                original.approve(c)
            else:
                original.deny(c, reason="no")
    fork = original.fork()
    copied = len(fork.events)  # the history it shares: approvals given in the original
    settled = frozenset(c.id for c in fork.tool_calls if c.is_final)
    drive(fork, by_id)
    drive(original, by_id)
    check_promise(original, runs)
    check_promise(fork, runs, settled)
    for chat, its_own in ((original, original.events), (fork, fork.events[copied:])):
        approvals = Counter(
            e.call.id
            for e in its_own
            if isinstance(e, ApprovalDecided) and e.decision.verdict == "approved"
        )
        for c in chat.tool_calls:
            if c.approval is not None and c.approval.required and runs.count(c):
                assert approvals[c.id] == 1, ("fork" if chat is fork else "original", c.id)


def _fork_and_check(
    rounds: list[list[str]], verdicts: list[bool], point: int, change: str, db: Path | None
) -> None:
    runs = Runs()
    original = Chat(provider=scripted(rounds), system="sys", store=db).with_tools(*runs.tools())
    by_id = by_call(verdicts)
    original.ask("go")
    drive(original, by_id)
    assert original.status == "complete"
    check_promise(original, runs)

    transcript, calls, events = original.transcript, lifecycle(original), original.events
    ran_before = list(runs.ran)

    if change in ("decision", "result", "arguments"):
        candidates = [
            c
            for c in original.tool_calls
            if (change != "decision" or c.name == "risky")
            and (change != "result" or c.status == "ok")
        ]
        if not candidates:
            return
        target = candidates[point % len(candidates)]
        value: Any = {
            "decision": "denied" if target.status == "ok" else "approved",
            "result": "what if",
            "arguments": {"x": 99},
        }[change]
        fork = original.fork(target, **{change: value})
    else:
        model_steps = [0, *original.steps["step"].tolist()]
        step = model_steps[point % len(model_steps)]
        target = None
        kwargs: dict[str, Any] = {
            "none": {},
            "system": {"system": "another"},
            "tool_options": {"tool_options": {"timeout": 7.0}},
        }[change]
        fork = original.fork(step=step, **kwargs)

    # the original is untouched by making the fork
    assert original.transcript == transcript and all(
        a is b for a, b in zip(original.transcript, transcript, strict=True)
    )
    assert lifecycle(original) == calls
    assert original.events == events
    assert runs.ran == ran_before

    # the fork: the history up to the point, and exactly the asked change
    parent = fork.parent
    assert isinstance(parent, ForkParent) and parent.chat_id == original.id
    assert fork.id != original.id
    assert parent.change == change
    assert fork.system == ("another" if change == "system" else "sys")
    assert fork.tool_options.timeout == (7.0 if change == "tool_options" else None)
    if target is None:
        assert parent.step == step and parent.call_id is None
        if step == 0:
            n = 1
        else:
            row = original.steps.set_index("step").loc[step]
            n = int(row["n_messages"]) + 1  # the request's messages, then its response
        assert fork.transcript == original.transcript[:n]
        asked_here = {c.id for c in getattr(fork.transcript[-1], "tool_calls", ())}
        originals = {c.id: c for c in original.tool_calls}
        for c in fork.tool_calls:
            o = originals[c.id]
            if c.id in asked_here:  # the response of step N: decisions and results not in
                assert c.decision is None and c.result is None
                expected = "awaiting_approval" if c.name == "risky" else "requested"
                assert c.status == expected
            else:
                assert (c.status, c.decision, c.result) == (o.status, o.decision, o.result)
    else:
        assert parent.call_id == target.id
        message = next(
            m
            for m in original.transcript
            if isinstance(m, AssistantToolCallMessage) and target in m.tool_calls
        )
        n = original.transcript.index(message) + 1
        assert fork.transcript == original.transcript[:n]  # the round's results not in yet
        forked = {c.id: c for c in fork.tool_calls}
        for o in message.tool_calls:  # the other calls of the round exactly as they were
            if o.id != target.id:
                c = forked[o.id]
                assert (c.status, c.decision, c.result) == (o.status, o.decision, o.result)
        changed = forked[target.id]
        if change == "decision":
            assert changed.decision is not None and changed.decision.verdict == value
            assert changed.status == value
        elif change == "result":
            assert changed.status == "ok" and changed.result is not None
            assert changed.result.content == "what if"
        else:
            assert changed.decision is not None and changed.decision.arguments == {"x": 99}
            assert changed.status == "approved"
        asked = {c.id for m in original.transcript[:n] for c in getattr(m, "tool_calls", ())}
        assert set(forked) == asked

    # the fork runs on; the promise holds in it, and the original stays as it was
    settled = frozenset(c.id for c in fork.tool_calls if c.is_final)
    drive(fork, by_id)
    assert fork.status == "complete"
    check_promise(fork, runs, settled)
    for chat in (original, fork):  # every call answered exactly once in each event stream
        finished = Counter(e.call.id for e in chat.events if isinstance(e, ToolCallFinished))
        assert set(finished.values()) <= {1} and set(finished) == {c.id for c in chat.tool_calls}
    if change == "arguments" and target is not None:
        forked_call = next(c for c in fork.tool_calls if c.id == target.id)
        assert [a for ident, a in runs.ran if ident == id(forked_call)] == [{"x": 99}]
    assert lifecycle(original) == calls and original.transcript == transcript
    assert original.events == events
    for c in original.tool_calls:  # nothing the fork ran counts as the original's
        assert runs.count(c) == (1 if c.status == "ok" else 0)
    if db is not None:  # both come back from the store as they are here, the fork's parent too
        for chat in (original, fork):
            chat.close()
            loaded = Chat.load(chat.id, store=db, tools=runs.tools(), provider=ScriptedProvider())
            assert loaded.parent == chat.parent and loaded.status == chat.status
            assert loaded.transcript == chat.transcript
            assert lifecycle(loaded) == lifecycle(chat)
            loaded.close()


# ------------------------------------------------------------------ the points
def _denied_then_approved_in_fork() -> tuple[Chat, Chat, Runs]:
    runs = Runs()
    chat = Chat(provider=scripted([["safe", "risky"]])).with_tools(*runs.tools())
    chat.ask("go")
    chat.deny(chat.pending_approvals[0], reason="not now")
    chat.complete()
    fork = chat.fork("c0_1", decision="approved")
    return chat, fork, runs


def test_approve_in_a_fork_a_call_denied_in_the_original_runs_it_exactly_once() -> None:
    chat, fork, runs = _denied_then_approved_in_fork()
    risky = {c.id: c for c in fork.tool_calls}["c0_1"]
    assert risky.status == "approved" and runs.count(risky) == 0
    fork.complete()
    fork.complete()  # again: nothing left to run
    assert fork.status == "complete"
    assert runs.count(risky) == 1
    safe_fork, safe_orig = fork.tool_calls[0], chat.tool_calls[0]
    assert runs.count(safe_fork) == 0 and runs.count(safe_orig) == 1  # shared: never rerun
    assert chat.tool_calls[1].status == "denied" and runs.count(chat.tool_calls[1]) == 0
    assert list(fork.log["decision"]) == ["auto", "approved"]
    assert list(chat.log["decision"]) == ["auto", "denied"]
    # the shared history is marked: its request and the safe call's outcome are the parent's
    assert fork.steps["shared"].tolist() == [True, False]
    assert fork.log["shared"].tolist() == [True, False]
    assert not chat.steps["shared"].any() and not chat.log["shared"].any()


def test_approve_in_a_fork_runs_once_when_driven_async() -> None:
    _, fork, runs = _denied_then_approved_in_fork()
    asyncio.run(fork.complete_async())
    risky = {c.id: c for c in fork.tool_calls}["c0_1"]
    assert fork.status == "complete" and runs.count(risky) == 1


def test_deny_in_a_fork_a_call_approved_in_the_original_never_runs_there() -> None:
    runs = Runs()
    chat = Chat(provider=scripted([["risky"]])).with_tools(*runs.tools())
    chat.ask("go")
    chat.approve(chat.pending_approvals[0])
    chat.complete()
    assert runs.count(chat.tool_calls[0]) == 1
    fork = chat.fork(chat.tool_calls[0], decision="denied", reason="on second thought")
    call = fork.tool_calls[0]
    assert call.status == "denied" and call.decision is not None
    assert call.decision.reason == "on second thought"
    fork.complete()
    assert fork.status == "complete" and runs.count(call) == 0
    assert "on second thought" in fork.transcript[2].content  # the model reads why


def test_fork_at_a_pending_call_decides_it_there_and_leaves_the_original_waiting() -> None:
    runs = Runs()
    chat = Chat(provider=scripted([["risky"]])).with_tools(*runs.tools())
    chat.ask("go")
    assert chat.status == "awaiting_approval"
    fork = chat.fork(chat.pending_approvals[0], decision="approved")
    fork.complete()
    assert fork.status == "complete" and runs.count(fork.tool_calls[0]) == 1
    assert chat.status == "awaiting_approval" and chat.tool_calls[0].decision is None
    assert runs.count(chat.tool_calls[0]) == 0


def test_a_forks_decision_is_recorded_as_made_by_whom_by_says() -> None:
    runs = Runs()
    chat = Chat(provider=scripted([["safe", "risky"]])).with_tools(*runs.tools())
    chat.ask("go")
    safe, risky = chat.tool_calls
    denied = chat.fork(risky, decision="denied", by="evaluate")
    edited = chat.fork(risky, arguments={"x": 5}, by="evaluate")
    edited.complete()
    assert denied.tool_calls[1].decision.by == "evaluate"
    assert (edited.tool_calls[1].decision.by, edited.tool_calls[1].status) == ("evaluate", "ok")
    assert runs.count(edited.tool_calls[1]) == 1 and runs.count(denied.tool_calls[1]) == 0
    assert chat.fork(risky, decision="approved").tool_calls[1].decision.by == "user"
    with pytest.raises(TypeError, match="goes with decision= or with arguments="):
        chat.fork(step=1, system="x", by="evaluate")
    with pytest.raises(TypeError, match="never needed a decision, so by= names no one"):
        chat.fork(safe, arguments={"x": 9}, by="evaluate")
    with pytest.raises(TypeError, match="names who decided"):
        chat.fork(risky, decision="denied", by="")
    assert chat.status == "awaiting_approval" and runs.count(risky) == 0  # the original waits


@pytest.mark.parametrize("how", ["whole history", "at its step", "at another call"])
def test_an_approval_not_run_yet_is_asked_again_in_the_fork(how: str) -> None:
    """Approved, not run yet, when the chat forks: it runs once, in the chat it was approved
    in, and the fork asks for it again (a policy's approval is made again there at its first
    step). Before, the fork inherited the approval and one click ran the call in both."""
    runs = Runs()
    chat = Chat(provider=scripted([["risky", "risky"]])).with_tools(*runs.tools())
    chat.ask("go")
    first, second = chat.pending_approvals
    chat.approve(first)  # not driven yet: approved, not run
    if how == "whole history":
        fork = chat.fork()
    elif how == "at its step":
        fork = chat.fork(step=int(chat.steps["step"].iloc[-1]))
    else:
        fork = chat.fork(second, decision="denied")
    forked = {c.id: c for c in fork.tool_calls}[first.id]
    assert forked.status == "awaiting_approval" and forked.decision is None
    fork.complete()
    chat.approve(second) if how != "at another call" else chat.deny(second)
    chat.complete()
    assert runs.count(first) == 1 and runs.count(forked) == 0  # one approval, one run
    fork.approve(forked)  # approved there too: it runs there, once
    fork.complete()
    assert runs.count(forked) == 1 and runs.count(first) == 1


def test_a_policy_approval_not_run_yet_is_made_again_by_the_forks_policy() -> None:
    runs = Runs()
    chat = Chat(provider=scripted([["risky"]])).with_tools(*runs.tools())
    chat.always_allow("risky")
    chat.ask_later("go")
    chat.step()  # the response: its call approved by the policy, not run yet
    (call,) = chat.tool_calls
    assert call.status == "approved"
    fork = chat.fork()
    fork.complete()
    chat.complete()
    (forked,) = fork.tool_calls
    assert runs.count(call) == 1 and runs.count(forked) == 1
    assert forked.decision is not None and forked.decision.by == "policy:always_allow:risky"


def test_step_points_cut_at_the_end_of_the_step() -> None:
    runs = Runs()
    chat = Chat(provider=scripted([["safe", "risky"]])).with_tools(*runs.tools())
    chat.ask("go")
    chat.complete()  # the safe call runs at step 2; risky waits
    chat.approve(chat.pending_approvals[0])
    chat.complete()
    numbers = [e.step for e in chat.events if isinstance(e, StepFinished) and e.kind == "ran_tools"]
    assert numbers == [2, 3]
    at_round = chat.fork(step=2)  # the safe call's result is in, risky still waits
    statuses = {c.name: c.status for c in at_round.tool_calls}
    assert statuses == {"safe": "ok", "risky": "awaiting_approval"}
    assert len(at_round.transcript) == 2  # the round is not closed yet
    whole = chat.fork()
    assert whole.transcript == chat.transcript and whole.status == "complete"
    with pytest.raises(ValueError, match=r"no step 9 .*1, 2, 3, 4"):
        chat.fork(step=9)


def test_result_change_answers_the_call_without_running_it() -> None:
    runs = Runs()
    chat = Chat(provider=scripted([["safe"]])).with_tools(*runs.tools())
    chat.ask("go")
    fork = chat.fork(chat.tool_calls[0], result={"temperature": 31})
    call = fork.tool_calls[0]
    assert call.status == "ok" and call.result is not None
    assert call.result.content == '{"temperature":31}' and call.result.value == {"temperature": 31}
    fork.complete()
    assert runs.count(call) == 0 and fork.status == "complete"
    assert fork.parent == ForkParent(chat.id, 1, "c0_0", "result", '{"temperature":31}')


def test_result_change_on_an_approved_call_that_ran_replaces_its_answer_once() -> None:
    runs = Runs()
    chat = Chat(provider=scripted([["risky"]])).with_tools(*runs.tools())
    chat.ask("go")
    chat.approve(chat.pending_approvals[0])
    chat.complete()
    fork = chat.fork(chat.tool_calls[0], result="what if")
    call = fork.tool_calls[0]
    finished = [e for e in fork.events if isinstance(e, ToolCallFinished)]
    assert [(e.status, e.result.content) for e in finished] == [("ok", "what if")]
    assert call.decision is not None and call.decision.verdict == "approved"  # kept
    fork.complete()
    assert runs.count(call) == 0 and fork.status == "complete"


def test_bad_forks_raise_clearly_and_create_nothing() -> None:
    runs = Runs()
    chat = Chat(provider=scripted([["safe", "risky"]])).with_tools(*runs.tools())
    chat.ask("go")
    chat.deny(chat.pending_approvals[0])
    chat.complete()
    safe, risky = chat.tool_calls
    with pytest.raises(TypeError, match="changes one thing"):
        chat.fork(risky, decision="approved", result="x")
    with pytest.raises(TypeError, match="needs the call"):
        chat.fork(decision="approved")
    with pytest.raises(TypeError, match="not both"):
        chat.fork(risky, step=1, decision="approved")
    with pytest.raises(TypeError, match="changes it"):
        chat.fork(risky, system="x")
    with pytest.raises(ValueError, match="never needed a decision"):
        chat.fork(safe, decision="denied")
    with pytest.raises(ValueError, match="already denied"):
        chat.fork(risky, decision="denied")
    with pytest.raises(ValueError, match="denied in the original"):
        chat.fork(risky, result="x")
    with pytest.raises(ValueError, match="'approved' or 'denied'"):
        chat.fork(risky, decision="yes")
    with pytest.raises(DecisionError, match="invalid"):
        chat.fork(risky, arguments={"x": "not a number"})
    with pytest.raises(DecisionError, match="no tool call"):
        chat.fork("nope", decision="approved")
    with pytest.raises(ValueError, match="nothing would change"):
        chat.fork(system=chat.system)
    with pytest.raises(TypeError, match="stepp"):  # neither a point, a change, nor a wing
        chat.fork(stepp=1)
    assert chat.status == "complete" and len(chat.tool_calls) == 2


def test_model_change_keeps_the_history_and_asks_the_other_model_from_then_on() -> None:
    runs = Runs()
    first = scripted([["safe"]])
    chat = Chat(provider=first).with_tools(*runs.tools())
    chat.ask("go")
    other = ScriptedProvider([reply("the other model")], model="other")
    fork = chat.fork(step=2, model=other)
    assert fork.provider is other and fork.parent is not None
    assert fork.parent.value == "scripted:other"
    fork.complete()
    assert fork.transcript[-1].content == "the other model"
    assert len(other.requests) == 1 and len(other.requests[0].messages) == 3
    assert runs.count(fork.tool_calls[0]) == 0  # step 2 (the round) was shared
    assert len(first.requests) == 2  # the original's provider was not asked again


def test_a_fork_of_a_fork_records_its_own_parent() -> None:
    _, fork, _ = _denied_then_approved_in_fork()
    fork.complete()
    again = fork.fork(step=1, system="third")
    assert again.parent is not None and again.parent.chat_id == fork.id
    assert again.transcript == fork.transcript[:2]


def test_a_chat_without_wings_forks_too() -> None:
    runs = Runs()
    chat = BaseChat(provider=scripted([["risky"]])).with_tools(*runs.tools())
    chat.ask("go")
    fork = chat.fork(chat.pending_approvals[0], decision="approved")
    assert type(fork) is BaseChat and fork.extensions == ()
    with pytest.raises(TypeError, match="store"):  # a store is Chat's wing, not the core's
        chat.fork(step=1, store=None)
    fork.complete()
    assert fork.status == "complete" and runs.count(fork.tool_calls[0]) == 1
    assert chat.status == "awaiting_approval"


def test_a_call_answered_at_once_can_be_given_a_result_or_valid_arguments() -> None:
    runs = Runs()
    provider = ScriptedProvider(
        [call_tools(("risky", {"x": "not a number"}, "bad")), reply("It failed.")]
    )
    chat = Chat(provider=provider).with_tools(*runs.tools())
    chat.ask("go")
    (bad,) = chat.tool_calls
    assert bad.status == "error" and bad.decision is None  # rejected before any approval
    with pytest.raises(
        ValueError, match="answered at once \\(error\\), before anyone could decide it"
    ):
        chat.fork(bad, decision="approved")
    answered = chat.fork(bad, result="risky 5")
    assert answered.tool_calls[0].status == "ok"
    provider.add(reply("Fine."), reply("Fine again."))
    answered.complete()
    assert runs.count(answered.tool_calls[0]) == 0 and answered.status == "complete"
    edited = chat.fork(bad, arguments={"x": 5})
    call = edited.tool_calls[0]
    assert call.status == "approved" and call.decision is not None
    assert call.decision.arguments == {"x": 5}
    edited.complete()
    assert runs.count(call) == 1 and runs.ran[-1][1] == {"x": 5}


def test_chat_fork_names_its_parameters_and_refuses_a_misspelt_one() -> None:
    """Editors complete ``store=``; a misspelt keyword names ``fork()``, not ``__init__``."""
    import inspect

    params = inspect.signature(Chat.fork).parameters
    assert {"step", "result", "arguments", "decision", "system", "model", "store"} <= set(params)
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    chat = Chat(model="demo")
    chat.ask("hello")
    with pytest.raises(TypeError, match=r"fork\(\) got an unexpected keyword argument 'stor'"):
        chat.fork(step=1, stor=None)  # type: ignore[call-arg]


@tool(external=True)
def sign(party: str) -> str:
    """Signs a contract (an external tool: a person or another system gives its result)."""
    raise AssertionError("an external tool never runs here")


@pytest.mark.parametrize("stored", [False, True])
def test_a_fork_of_a_chat_waiting_for_an_input_waits_for_its_own(
    stored: bool, tmp_path: Path
) -> None:
    """Forked while a call waits for an input: the fork's call waited in its record but not
    in the fork, so ``fork.answer`` said it was "already answered (pending by None)", and
    nothing (decline, complete, a store's answer) got the fork out. The fork waits for its
    own answer; each chat reads the answer it was given."""

    def model(request: Any) -> Any:
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        return (
            reply(f"read: {results[-1].content}")
            if results
            else call_tools(("sign", {"party": "ACME"}, "c1"))
        )

    db = tmp_path / "chats.db" if stored else None
    chat = Chat(provider=ScriptedProvider([model], repeat_last=True), store=db).with_tools(sign)
    chat.ask("sign it")
    fork = chat.fork()
    assert [p.id for p in fork.pending_inputs] == ["c1"] and fork.awaiting_input
    if stored:
        from nbagent.store import SQLiteStore

        with SQLiteStore(db) as store:
            assert {i.chat_id for i in store.pending_inputs()} == {chat.id, fork.id}
            store.answer("c1", "signed by the fork's signer", chat_id=fork.id)
        fork.refresh()
    else:
        fork.answer("c1", "signed by the fork's signer")
    assert fork.complete().content == "read: signed by the fork's signer"  # type: ignore[union-attr]
    assert [p.id for p in chat.pending_inputs] == ["c1"]  # the original still waits
    chat.decline("c1", "not signing")
    assert "not signing" in chat.complete().content  # type: ignore[union-attr]
    chat.close()
    fork.close()


def test_a_fork_in_an_earlier_turn_keeps_the_structured_answer_that_turn_asked_for() -> None:
    """The chat kept only its latest turn's ``output=``: a fork back in a turn that asked
    for a structured answer, made after the chat moved on, answered with ``parsed=None``."""
    from pydantic import BaseModel

    class Ans(BaseModel):
        order: int
        status: str

    def answer(request: ModelRequest) -> Any:
        assert request.output is not None and request.output.target is Ans
        return reply('{"order": 1, "status": "found"}')

    runs = Runs()
    safe = runs.tools()[0]
    script = [call_tools(("safe", {"x": 1}, "s1")), reply('{"order": 1, "status": "x"}')]
    chat = Chat(provider=ScriptedProvider([*script, reply("plain")])).with_tools(safe)
    assert chat.ask("Where is order 1?", output=Ans).parsed == Ans(order=1, status="x")
    chat.ask("Thanks")  # a turn without a structured answer
    assert chat.outputs == {1: Ans}
    for fork in (chat.fork(step=1), chat.fork("s1", result="order 1: found")):
        fork.provider = ScriptedProvider([answer])
        assert fork.complete().parsed == Ans(order=1, status="found")  # type: ignore[union-attr]
        assert fork.outputs == {1: Ans}
    late = chat.fork()  # the whole history: its next turn asks for what it asks for
    late.provider = ScriptedProvider([reply("text")])
    assert late.ask("More?").parsed is None


def test_a_fork_approves_a_call_whose_approval_never_ran() -> None:
    """An approved call cancelled before it started keeps no approval in a fork at it (the
    fork would ask again), so ``decision="approved"`` is a change; it was refused as
    "already approved in the original". A gated call answered at once (over the calls
    limit) says it was never decided, not that it never needed a decision."""
    runs = Runs()
    safe, risky = runs.tools()
    chat = Chat(provider=scripted([["risky", "risky"]])).with_tools(safe, risky)
    chat.ask("go")
    first, second = chat.pending_approvals
    chat.approve(first)
    chat.approve(second)
    chat.before_tool_call(lambda call: chat.cancel() if call.id == first.id else None)
    with pytest.raises(nbagent.ChatCancelled):
        chat.complete()
    assert [c.status for c in chat.tool_calls] == ["ok", "cancelled"]
    fork = chat.fork(second, decision="approved")
    fork.provider = scripted([])
    fork.complete()
    assert [c.status for c in fork.tool_calls] == ["ok", "ok"]
    assert runs.count(fork.tool_calls[1]) == 1 and runs.count(second) == 0

    limited = Chat(provider=scripted([["risky", "risky"]])).with_tools(safe, risky)
    limited.with_tool_options(calls="one")
    limited.ask("go")
    with pytest.raises(ValueError, match="answered at once \\(skipped\\), before anyone"):
        limited.fork(limited.tool_calls[1], decision="approved")
