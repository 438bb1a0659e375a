"""Ordered rounds (issue 23, A.4): ``with_tool_options(order="listed")`` and the "ran before" mark.

The bug: in one response the model asked for ``insert(row)`` (gated) and then ``count()``;
``count`` ran first and the model was told 0. The seed's rule stays the default
(``order="ready"``: ungated calls run while gated ones wait), and the result produced early
is marked (``ToolCallFinished.ran_before``, the log's ``ran_before``, the view's note). Under
``order="listed"`` a call waits until every earlier gated call of its response is decided
and, if approved, has run; a gated call runs after every earlier call finished.

Every scenario runs under the three concurrency modes; a hypothesis property covers random
rounds and decisions.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import (
    ApprovalDecided,
    Chat,
    Event,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    ToolOptionError,
    ToolResultMessage,
    tool,
)
from nbagent.notebook._fallback import chat_mimebundle
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

table: list[str] = []
runs: Counter[str] = Counter()
_lock = threading.Lock()


@tool(requires_approval=True)
def insert(row: str) -> str:
    """Insert a row."""
    with _lock:
        table.append(row)
        runs["insert"] += 1
    return f"inserted {row}"


@tool
def count() -> int:
    """Count the rows."""
    with _lock:
        runs["count"] += 1
        return len(table)


@pytest.fixture(params=["sequential", "threads", "async"], autouse=True)
def mode(request: pytest.FixtureRequest) -> str:
    table.clear()
    runs.clear()
    nbagent.configure(tool_concurrency=request.param)
    return str(request.param)


def results(chat: Chat) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in chat.transcript if isinstance(m, ToolResultMessage)}


def finished(chat: Chat) -> dict[str, ToolCallFinished]:
    return {e.call.id: e for e in chat.events if isinstance(e, ToolCallFinished)}


def insert_then_count(order: str | None = None) -> Chat:
    provider = ScriptedProvider(
        [call_tools(("insert", {"row": "a"}, "c1"), ("count", {}, "c2")), reply("done")]
    )
    chat = Chat(provider=provider).with_tools(insert, count)
    if order is not None:
        chat.with_tool_options(order=order)
    return chat


# ------------------------------------------------------------------ the default, marked
def test_by_default_an_ungated_call_runs_while_the_gated_one_waits_and_is_marked() -> None:
    chat = insert_then_count()
    chat.ask("insert a row, then count")
    assert chat.awaiting_approval and chat.get_call("c2").status == "ok"  # the seed's rule
    chat.approve("c1")
    chat.complete()
    assert results(chat) == {"c1": "inserted a", "c2": "0"}
    assert finished(chat)["c2"].ran_before == ("c1",)
    assert finished(chat)["c1"].ran_before == ()
    log = chat.log.set_index("call_id")
    assert log.loc["c2", "ran_before"] == "insert (c1)"
    assert log["ran_before"].isna()["c1"]
    bundle = chat_mimebundle(chat)
    assert "ran before <code>insert</code> was decided" in bundle["text/html"]
    assert "ran before `insert` was decided" in bundle["text/markdown"]
    assert "ran before `insert` was decided" in bundle["text/plain"]


def test_no_mark_when_the_earlier_gated_call_was_decided_before_the_round() -> None:
    """A resolver approving at once: the gated call was decided when ``count`` ran."""

    @tool(requires_approval=lambda call: True)
    def add(row: str) -> str:
        """Insert a row, approved by a rule."""
        with _lock:
            table.append(row)
        return "ok"

    provider = ScriptedProvider(
        [call_tools(("add", {"row": "a"}, "c1"), ("count", {}, "c2")), reply("done")]
    )
    chat = Chat(provider=provider).with_tools(add, count)
    chat.ask("go")
    assert chat.is_complete
    assert finished(chat)["c2"].ran_before == ()
    assert chat.log["ran_before"].isna().all()


def test_the_mark_names_every_earlier_undecided_call() -> None:
    provider = ScriptedProvider(
        [
            call_tools(
                ("insert", {"row": "a"}, "c1"),
                ("insert", {"row": "b"}, "c2"),
                ("count", {}, "c3"),
            ),
            reply("done"),
        ]
    )
    chat = Chat(provider=provider).with_tools(insert, count)
    chat.ask("go")
    assert finished(chat)["c3"].ran_before == ("c1", "c2")
    assert chat.log.set_index("call_id").loc["c3", "ran_before"] == "insert (c1), insert (c2)"
    text = chat_mimebundle(chat)["text/plain"]
    assert "ran before `insert` and `insert` were decided" in text


# ------------------------------------------------------------------ order="listed"
def test_listed_the_later_call_waits_for_the_gated_one_and_sees_its_effect() -> None:
    chat = insert_then_count("listed")
    chat.ask("insert a row, then count")
    assert chat.awaiting_approval and chat.status == "awaiting_approval"
    assert chat.get_call("c2").status == "requested" and runs["count"] == 0
    assert [c.id for c in chat.pending_approvals] == ["c1"]
    chat.complete()
    assert chat.awaiting_approval and runs["count"] == 0  # still held
    chat.approve("c1")
    chat.complete()
    assert chat.is_complete
    assert results(chat) == {"c1": "inserted a", "c2": "1"}
    assert all(e.ran_before == () for e in finished(chat).values())
    assert chat.log["ran_before"].isna().all()
    assert runs == Counter({"insert": 1, "count": 1})


def test_listed_a_denial_releases_the_later_call_after_it_is_recorded() -> None:
    chat = insert_then_count("listed")
    seen: list[Event] = []
    chat.on(None, seen.append)
    chat.ask("insert a row, then count")
    chat.deny("c1", reason="not now")
    chat.complete()
    assert chat.is_complete and runs == Counter({"count": 1})
    assert json.loads(results(chat)["c1"])["status"] == "denied"
    assert results(chat)["c2"] == "0"
    kinds = [
        (type(e).__name__, e.call.id)
        for e in seen
        if isinstance(e, (ApprovalDecided, ToolCallStarted, ToolCallFinished))
    ]
    assert kinds.index(("ToolCallFinished", "c1")) < kinds.index(("ToolCallStarted", "c2"))


def test_listed_step_by_step() -> None:
    chat = insert_then_count("listed")
    chat.ask_later("go")
    assert chat.step().kind == "generated"
    waiting = chat.step()
    assert waiting.kind == "awaiting_approval" and [c.id for c in waiting.calls] == ["c1"]
    chat.approve("c1")
    first = chat.step()
    assert first.kind == "ran_tools" and [c.id for c in first.calls] == ["c1"]
    second = chat.step()
    assert second.kind == "ran_tools" and [c.id for c in second.calls] == ["c2"]
    assert chat.step().kind == "generated"
    assert chat.step().kind == "complete"


def test_listed_a_gated_call_runs_only_after_every_earlier_call_finished() -> None:
    """``count`` then an ``insert`` its rule approves at once: ``count`` must not see it."""

    @tool(requires_approval=lambda call: True)
    def add(row: str) -> str:
        """Insert a row, approved by a rule."""
        with _lock:
            table.append(row)
        return "ok"

    provider = ScriptedProvider(
        [
            call_tools(("count", {}, "c1"), ("add", {"row": "a"}, "c2"), ("count", {}, "c3")),
            reply("done"),
        ]
    )
    chat = Chat(provider=provider).with_tools(add, count).with_tool_options(order="listed")
    chat.ask("count, add, count")
    assert results(chat) == {"c1": "0", "c2": "ok", "c3": "1"}


def test_listed_ungated_calls_before_the_first_gate_still_run_together() -> None:
    provider = ScriptedProvider(
        [
            call_tools(("count", {}, "a"), ("count", {}, "b"), ("insert", {"row": "x"}, "c")),
            reply("done"),
        ]
    )
    chat = Chat(provider=provider).with_tools(insert, count).with_tool_options(order="listed")
    chat.ask("go")
    assert runs["count"] == 2 and chat.awaiting_approval
    starts = [e for e in chat.events if isinstance(e, ToolCallStarted)]
    assert {e.step for e in starts} == {2}  # one round


def test_the_order_option_is_validated_reset_and_announced() -> None:
    chat = Chat(provider=ScriptedProvider([reply("x")]))
    assert chat.tool_options.order == "ready"
    with pytest.raises(ToolOptionError, match="order must be 'ready' or 'listed'"):
        chat.with_tool_options(order="strict")
    assert chat.tool_options.order == "ready"
    seen: list[Any] = []
    chat.on("options_changed", seen.append)
    chat.with_tool_options(order="listed")
    assert chat.tool_options.order == "listed" and seen[-1].options["order"] == "listed"
    chat.with_tool_options(order=None)
    assert chat.tool_options.order == "ready"


# ------------------------------------------------------------------ the property
CALL = st.tuples(
    st.booleans(),  # gated
    st.sampled_from(["approve", "deny", "rule-yes", "rule-no"]),  # how a gated call is decided
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), plan=st.lists(CALL, min_size=1, max_size=6))
def test_listed_property_no_call_starts_before_earlier_gates_settle(
    data: st.DataObject, plan: list[tuple[bool, str]]
) -> None:
    """Random rounds, random decisions in a random order, ``complete()`` or ``step()``:
    under ``order="listed"`` no call's run starts before every earlier gated call of its
    response is decided and (if approved) finished; denied calls never run; approved and
    ungated calls run exactly once; nothing is marked as having run early."""
    history: list[tuple[str, str]] = []  # ("start" | "end" | "decided", call id), in order
    hist_lock = threading.Lock()

    def note(kind: str, cid: str) -> None:
        with hist_lock:
            history.append((kind, cid))

    def body(tool_call: ToolCall) -> str:
        note("start", tool_call.id)
        note("end", tool_call.id)
        return "ok"

    rule_says = {f"k{i}": how == "rule-yes" for i, (gated, how) in enumerate(plan)}

    @tool(name="free")
    def free(tool_call: ToolCall) -> str:
        """Ungated."""
        return body(tool_call)

    @tool(name="gate", requires_approval=True)
    def gate(tool_call: ToolCall) -> str:
        """Gated, decided by a person."""
        return body(tool_call)

    @tool(name="rule", requires_approval=lambda call: rule_says[call.id])
    def rule(tool_call: ToolCall) -> str:
        """Gated, decided by a rule."""
        return body(tool_call)

    calls = []
    for i, (gated, how) in enumerate(plan):
        name = "free" if not gated else ("rule" if how.startswith("rule") else "gate")
        calls.append((name, {}, f"k{i}"))
    chat = Chat(provider=ScriptedProvider([call_tools(*calls), reply("done")]))
    chat.with_tools(free, gate, rule).with_tool_options(order="listed")
    chat.on(ApprovalDecided, lambda e: note("decided", e.call.id))  # type: ignore[arg-type]
    chat.ask("go")
    guard = 0
    while not chat.is_complete:
        guard += 1
        assert guard < 50, "the chat never completed"
        pending = chat.pending_approvals
        if pending:
            c = data.draw(st.sampled_from(pending), label="decide next")
            how = plan[int(c.id[1:])][1]
            if how == "approve":
                chat.approve(c)
            else:
                chat.deny(c, reason="no")
        if data.draw(st.booleans(), label="step instead of complete"):
            chat.step()
        else:
            chat.complete()

    pos = {(kind, cid): i for i, (kind, cid) in enumerate(history)}
    for i, (gated, how) in enumerate(plan):
        cid = f"k{i}"
        approved = not gated or how in ("approve", "rule-yes")
        starts = [k for k, (kind, x) in enumerate(history) if kind == "start" and x == cid]
        assert len(starts) == (1 if approved else 0), (cid, how, history)
        if not starts:
            continue
        for j in range(i):
            earlier_gated, earlier_how = plan[j]
            if not earlier_gated:
                continue
            eid = f"k{j}"
            assert pos[("decided", eid)] < starts[0], (cid, eid, history)
            if earlier_how in ("approve", "rule-yes"):
                assert pos[("end", eid)] < starts[0], (cid, eid, history)
        if gated:  # a gated call runs after every earlier call finished
            for j in range(i):
                if ("end", f"k{j}") in pos:
                    assert pos[("end", f"k{j}")] < starts[0], (cid, j, history)
    assert all(e.ran_before == () for e in finished(chat).values())
