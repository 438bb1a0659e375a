"""Approval gates: declaring, deciding, running; every scenario under every concurrency mode.

Side-effect counters prove "never executed" instead of assuming it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from typing import Any

import pytest

import nbagent
from nbagent import (
    Chat,
    DecisionError,
    PendingToolCallsError,
    Tool,
    ToolCall,
    ToolResultMessage,
    tool,
)
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

runs: Counter[str] = Counter()
ran_with: list[dict[str, Any]] = []
_lock = threading.Lock()


def _count(name: str, args: dict[str, Any]) -> None:
    with _lock:
        runs[name] += 1
        ran_with.append({"tool": name, **args})


class IssueRefund(Tool):
    """Issues a refund for an order.

    Args:
        order_id: The order to refund.
        amount: Amount in euros.
    """

    requires_approval = True

    def execute(self, order_id: int, amount: float = 10.0) -> str:
        _count("issue_refund", {"order_id": order_id, "amount": amount})
        return f"refunded order {order_id}: {amount} EUR"


class BigRefund(IssueRefund):
    """Inherits the gate."""


@tool(requires_approval=True)
async def delete_file(path: str) -> str:
    """Delete a file (async tool)."""
    await asyncio.sleep(0)
    _count("delete_file", {"path": path})
    return f"deleted {path}"


@tool
def lookup(order_id: int) -> dict[str, Any]:
    """Look an order up (safe)."""
    _count("lookup", {"order_id": order_id})
    return {"order_id": order_id, "total": 99}


resolver_answers: dict[int, bool | None] = {}


def refund_rule(call: ToolCall) -> bool | None:
    """Small refunds run, huge ones are denied, the rest wait for a human."""
    return resolver_answers.get(call.arguments["order_id"])


@tool(approval=refund_rule)
def ruled_refund(order_id: int) -> str:
    """Refund decided by a rule."""
    _count("ruled_refund", {"order_id": order_id})
    return "ok"


@pytest.fixture(params=["sequential", "threads", "async"], autouse=True)
def mode(request: pytest.FixtureRequest) -> str:
    runs.clear()
    ran_with.clear()
    resolver_answers.clear()
    nbagent.configure(tool_concurrency=request.param)
    return str(request.param)


def make_chat(*script: Any) -> tuple[Chat, ScriptedProvider]:
    provider = ScriptedProvider(script)
    chat = Chat(provider=provider).with_tools(
        IssueRefund, BigRefund, delete_file, lookup, ruled_refund
    )
    return chat, provider


def results(chat: Chat) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in chat.transcript if isinstance(m, ToolResultMessage)}


def test_gated_call_parks_and_runs_once_after_approval_by_object() -> None:
    chat, _ = make_chat(call_tools(("issue_refund", {"order_id": 42}, "r1")), reply("Refunded."))
    chat.ask("refund 42")
    assert chat.awaiting_approval and chat.status == "awaiting_approval"
    [pending] = chat.pending_approvals
    assert pending.id == "r1" and pending.status == "awaiting_approval"
    assert pending.approval == nbagent.Approval(
        True, "tool", "issue_refund requires approval before it runs"
    )
    assert runs["issue_refund"] == 0
    chat.approve(pending)
    assert runs["issue_refund"] == 0  # approving records; running happens in complete()
    assert chat.complete().content == "Refunded."  # type: ignore[union-attr]
    assert runs["issue_refund"] == 1
    assert pending.status == "ok" and pending.decision is not None
    assert pending.decision.by == "user" and pending.decision.at.tzinfo is not None
    # approving again, completing again, re-running: never a second execution
    chat.approve("r1")
    chat.complete()
    assert runs["issue_refund"] == 1


def test_approve_by_id() -> None:
    chat, _ = make_chat(call_tools(("issue_refund", {"order_id": 1}, "r1")), reply("ok"))
    chat.ask("refund")
    chat.approve("r1")
    chat.complete()
    assert runs["issue_refund"] == 1


@pytest.mark.parametrize("reason", [None, "customer already refunded by phone"])
def test_denied_call_never_runs_and_model_gets_a_structured_denial(reason: str | None) -> None:
    chat, provider = make_chat(
        call_tools(("issue_refund", {"order_id": 7}, "r7")), reply("OK, not refunding.")
    )
    chat.ask("refund 7")
    chat.deny("r7", reason=reason)
    chat.complete()
    assert runs["issue_refund"] == 0
    result = results(chat)["r7"]
    assert result.is_error and result.status == "denied" and result.is_denial
    payload = json.loads(result.content)
    assert payload["status"] == "denied" and payload["tool"] == "issue_refund"
    assert "denied by the user" in payload["message"]
    assert payload.get("reason") == reason
    assert provider.requests[-1].messages[-1] == result
    call = chat.get_call("r7")
    assert call.status == "denied" and call.decision is not None
    assert call.decision.reason == reason
    # approving a denied call is a contradiction
    with pytest.raises(DecisionError, match="already denied"):
        chat.approve("r7")
    assert runs["issue_refund"] == 0


@pytest.mark.parametrize(
    ("decide", "message"),
    [
        (lambda chat: chat.deny("r8", reason=5), "reason is a string, got int"),
        (lambda chat: chat.approve("r8", reason=["ok"]), "reason is a string, got list"),
        (lambda chat: chat.deny("r8", by=""), "names who decided"),
        (lambda chat: chat.approve("r8", by=None), "names who decided"),
    ],
)
def test_a_malformed_decision_is_refused_and_the_call_still_waits(
    decide: Any, message: str
) -> None:
    """Before: ``deny(id, reason=5)`` failed deep inside with ``AttributeError: 'int'
    object has no attribute 'isascii'``."""
    chat, _ = make_chat(call_tools(("issue_refund", {"order_id": 8}, "r8")), reply("ok"))
    chat.ask("refund 8")
    with pytest.raises(TypeError, match=message):
        decide(chat)
    assert chat.get_call("r8").status == "awaiting_approval" and chat.awaiting_approval
    chat.deny("r8", reason="5")
    chat.complete()
    assert chat.get_call("r8").decision.reason == "5"  # type: ignore[union-attr]
    assert runs["issue_refund"] == 0


def test_subclass_inherits_the_gate() -> None:
    chat, _ = make_chat(call_tools(("big_refund", {"order_id": 5})))
    chat.ask("big refund")
    assert chat.awaiting_approval and runs["issue_refund"] == 0


def test_async_tool_gate() -> None:
    chat, _ = make_chat(call_tools(("delete_file", {"path": "/tmp/x"}, "d1")), reply("deleted"))
    chat.ask("delete")
    assert chat.awaiting_approval
    chat.approve("d1")
    chat.complete()
    assert runs["delete_file"] == 1


def test_mixed_round_safe_calls_run_while_gated_wait() -> None:
    chat, provider = make_chat(
        call_tools(
            ("lookup", {"order_id": 1}, "l1"),
            ("issue_refund", {"order_id": 1}, "r1"),
            ("lookup", {"order_id": 2}, "l2"),
        ),
        reply("done"),
    )
    chat.ask("look up and refund")
    assert runs["lookup"] == 2 and runs["issue_refund"] == 0
    assert chat.awaiting_approval
    assert [c.id for c in chat.pending_approvals] == ["r1"]
    # results are not in the transcript until the round is complete
    assert not results(chat)
    assert len(provider.requests) == 1
    chat.approve("r1")
    chat.complete()
    assert runs == Counter({"lookup": 2, "issue_refund": 1})
    # results in call order, all together
    ids = [m.tool_call_id for m in chat.transcript if isinstance(m, ToolResultMessage)]
    assert ids == ["l1", "r1", "l2"]


@pytest.mark.parametrize("order", [("a", "b", "c"), ("c", "a", "b"), ("b", "c", "a")])
def test_several_gated_calls_decided_in_any_order(order: tuple[str, ...]) -> None:
    chat, provider = make_chat(
        call_tools(
            ("issue_refund", {"order_id": 1}, "a"),
            ("issue_refund", {"order_id": 2}, "b"),
            ("delete_file", {"path": "p"}, "c"),
        ),
        reply("all decided"),
    )
    chat.ask("do three things")
    verdicts = {"a": "approve", "b": "deny", "c": "approve"}
    for n, cid in enumerate(order):
        getattr(chat, verdicts[cid])(cid)
        step = chat.complete()
        if n < 2:
            assert chat.awaiting_approval, f"still waiting after deciding {order[: n + 1]}"
            assert len(provider.requests) == 1
    assert step is not None and step.content == "all decided"  # type: ignore[union-attr]
    assert runs == Counter({"issue_refund": 1, "delete_file": 1})
    assert [r["order_id"] for r in ran_with if r["tool"] == "issue_refund"] == [1]
    statuses = {cid: m.status for cid, m in results(chat).items()}
    assert statuses == {"a": "ok", "b": "denied", "c": "ok"}


def test_edit_arguments_valid() -> None:
    chat, provider = make_chat(
        call_tools(("issue_refund", {"order_id": 42, "amount": 500}, "r1")), reply("refunded less")
    )
    chat.ask("refund 500")
    call = chat.approve("r1", arguments={"order_id": 42, "amount": 50})
    assert call.arguments == {"order_id": 42, "amount": 500}  # what the model asked, kept
    assert call.effective_arguments == {"order_id": 42, "amount": 50}
    chat.complete()
    assert ran_with == [{"tool": "issue_refund", "order_id": 42, "amount": 50.0}]
    result = results(chat)["r1"]
    assert "edited the arguments" in result.content and '"amount": 50' in result.content
    assert provider.requests[-1].messages[-1] == result


def test_edit_arguments_invalid_is_refused_and_nothing_changes() -> None:
    chat, _ = make_chat(call_tools(("issue_refund", {"order_id": 42}, "r1")), reply("ok"))
    chat.ask("refund")
    with pytest.raises(DecisionError, match="order_id"):
        chat.approve("r1", arguments={"order_id": "not a number"})
    call = chat.get_call("r1")
    assert call.status == "awaiting_approval" and call.decision is None
    chat.approve("r1")
    chat.complete()
    assert ran_with == [{"tool": "issue_refund", "order_id": 42, "amount": 10.0}]


def test_always_allow_approves_pending_and_future_calls() -> None:
    chat, _ = make_chat(
        call_tools(("issue_refund", {"order_id": 1}, "r1"), ("delete_file", {"path": "x"}, "d1")),
        reply("one"),
        call_tools(("issue_refund", {"order_id": 2}, "r2")),
        reply("two"),
    )
    chat.ask("first")
    chat.always_allow(IssueRefund)
    assert chat.get_call("r1").decision.by == "policy:always_allow:issue_refund"  # type: ignore[union-attr]
    assert [c.id for c in chat.pending_approvals] == ["d1"]
    chat.deny("d1")
    chat.complete()
    chat.ask("second")
    assert chat.is_complete
    assert runs == Counter({"issue_refund": 2})
    assert chat.get_call("r2").decision.by == "policy:always_allow:issue_refund"  # type: ignore[union-attr]


def test_always_allow_of_a_name_the_chat_has_no_tool_of_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A typo (``"isue_refund"``) would leave every call of the real tool asking with no
    word why: the chat says it has no such tool. The rule still stands for a tool of that
    name added later, and a known name says nothing."""
    chat, _ = make_chat(call_tools(("late_tool", {}, "l1")), reply("done"))
    chat.always_allow("isue_refund")
    err = capsys.readouterr().err
    assert "always_allow('isue_refund'): this chat has no tool 'isue_refund'" in err
    assert "its tools: issue_refund, big_refund, delete_file, lookup, ruled_refund" in err
    chat.always_allow("issue_refund").always_allow(delete_file)
    chat.always_allow("late_tool")
    assert "no tool 'late_tool'" in capsys.readouterr().err

    @tool(requires_approval=True)
    def late_tool() -> str:
        """Added after its rule."""
        runs["late_tool"] += 1
        return "ran"

    chat.with_tools(late_tool)
    chat.ask("go")
    assert chat.is_complete and runs["late_tool"] == 1  # the rule given first applied
    assert chat.get_call("l1").decision.by == "policy:always_allow:late_tool"  # type: ignore[union-attr]
    assert capsys.readouterr().err == ""


def test_revoke_stops_always_allowing_and_keeps_what_it_approved() -> None:
    chat, _ = make_chat(
        call_tools(("issue_refund", {"order_id": 1}, "r1")),
        reply("one"),
        call_tools(("issue_refund", {"order_id": 2}, "r2")),
        reply("two"),
    )
    chat.always_allow(IssueRefund)
    assert chat.always_allowed == ("issue_refund",)
    chat.ask("first")
    assert runs == Counter({"issue_refund": 1})
    chat.revoke("issue_refund")
    assert chat.always_allowed == ()
    assert chat.get_call("r1").decision.by == "policy:always_allow:issue_refund"  # type: ignore[union-attr]
    chat.ask("second")
    assert [c.id for c in chat.pending_approvals] == ["r2"]
    assert runs == Counter({"issue_refund": 1})
    with pytest.raises(ValueError, match="not always allowed"):
        chat.revoke("issue_refund")


def test_policy_with_predicate() -> None:
    chat, _ = make_chat(
        call_tools(
            ("issue_refund", {"order_id": 1, "amount": 5}, "small"),
            ("issue_refund", {"order_id": 2, "amount": 5000}, "big"),
        ),
        reply("ok"),
    )
    chat.always_allow("issue_refund", when=lambda c: c.arguments.get("amount", 0) < 100)
    chat.ask("refunds")
    assert [c.id for c in chat.pending_approvals] == ["big"]
    assert runs["issue_refund"] == 1
    chat.deny("big", reason="too much")
    chat.complete()
    assert runs["issue_refund"] == 1


def test_resolver_true_false_none_and_changing_answer() -> None:
    resolver_answers.update({1: True, 2: False, 3: None})
    chat, _ = make_chat(
        call_tools(
            ("ruled_refund", {"order_id": 1}, "c1"),
            ("ruled_refund", {"order_id": 2}, "c2"),
            ("ruled_refund", {"order_id": 3}, "c3"),
        ),
        reply("done"),
    )
    chat.ask("three refunds")
    assert runs["ruled_refund"] == 1  # c1 ran; c2 denied; c3 waits
    assert chat.get_call("c1").decision.by == "resolver"  # type: ignore[union-attr]
    assert chat.get_call("c2").status == "denied"
    assert [c.id for c in chat.pending_approvals] == ["c3"]
    assert chat.get_call("c3").approval.source == "resolver"  # type: ignore[union-attr]
    chat.complete()
    assert chat.awaiting_approval  # still None: still pending
    resolver_answers[3] = True  # the rule changes its mind: picked up on the next step
    chat.complete()
    assert chat.is_complete and runs["ruled_refund"] == 2
    assert chat.get_call("c3").decision.by == "resolver"  # type: ignore[union-attr]


def test_resolver_that_raises_leaves_the_call_pending() -> None:
    @tool(approval=lambda call: 1 / 0)
    def fragile(x: int) -> int:
        _count("fragile", {"x": x})
        return x

    provider = ScriptedProvider([call_tools(("fragile", {"x": 1}, "f1")), reply("ok")])
    chat = Chat(provider=provider).with_tools(fragile)
    chat.ask("go")
    assert chat.awaiting_approval and runs["fragile"] == 0
    assert "ZeroDivisionError" in chat.get_call("f1").approval.reason  # type: ignore[union-attr]


def test_explicit_decision_wins_over_resolver_before_the_call_runs() -> None:
    resolver_answers[9] = True
    chat, _ = make_chat(call_tools(("ruled_refund", {"order_id": 9}, "c9")), reply("stopped"))
    chat.ask_later("refund 9")
    assert chat.step().kind == "generated"
    assert chat.get_call("c9").status == "approved"  # the rule approved it
    chat.deny("c9", reason="not today")  # a human overrules before it runs
    chat.complete()
    assert runs["ruled_refund"] == 0
    assert chat.get_call("c9").decision.by == "user"  # type: ignore[union-attr]


def test_contradicting_a_human_decision_raises() -> None:
    chat, _ = make_chat(call_tools(("issue_refund", {"order_id": 1}, "r1")))
    chat.ask("refund")
    chat.approve("r1")
    chat.approve("r1")  # same answer: no-op
    with pytest.raises(DecisionError, match="already approved"):
        chat.deny("r1")


def test_deciding_unknown_or_ungated_calls_raises() -> None:
    chat, _ = make_chat(
        call_tools(("lookup", {"order_id": 1}, "l1"), ("issue_refund", {"order_id": 1}, "r1"))
    )
    chat.ask("x")
    with pytest.raises(DecisionError, match="no tool call 'nope'"):
        chat.approve("nope")
    with pytest.raises(DecisionError, match="does not need approval"):
        chat.approve("l1")


def test_ask_while_approval_pending_raises() -> None:
    chat, _ = make_chat(call_tools(("issue_refund", {"order_id": 1}, "r1")))
    chat.ask("refund")
    with pytest.raises(PendingToolCallsError, match=r"issue_refund\(r1\): awaiting approval"):
        chat.ask("and another thing")
    assert "chat.approve" in str(PendingToolCallsError(chat.pending_approvals))


def _shape(messages: Any) -> list[tuple[str, str | None]]:
    return [(type(m).__name__, getattr(m, "tool_call_id", None)) for m in messages]


ROUND_THEN_QUESTION = [
    ("ChatMessage", None),
    ("AssistantToolCallMessage", None),
    ("ToolResultMessage", "l1"),
    ("ToolResultMessage", "r1"),
    ("ChatMessage", None),  # the new question, after the round's results
]


def test_ask_after_a_denial_puts_the_rounds_results_before_the_question() -> None:
    """A denial is an answer: ``ask()`` right after it (no ``complete()``) adds the round's
    results first, in call order, so the model reads the denial and the request is one every
    provider takes (before, the question went between the calls and their results, which
    OpenAI refuses with a 400, for good: the chat could not go on)."""
    chat, provider = make_chat(
        call_tools(("lookup", {"order_id": 1}, "l1"), ("issue_refund", {"order_id": 1}, "r1")),
        reply("Noted; it is sunny."),
    )
    chat.ask("look order 1 up and refund it")
    chat.deny("r1", reason="not today")
    assert chat.ask("and the weather?").content == "Noted; it is sunny."  # type: ignore[union-attr]
    assert _shape(provider.requests[-1].messages) == ROUND_THEN_QUESTION
    assert _shape(chat.transcript) == [*ROUND_THEN_QUESTION, ("ChatMessage", None)]
    assert results(chat)["r1"].status == "denied" and "not today" in results(chat)["r1"].content
    assert [m.turn for m in chat.transcript] == [1, 1, 1, 1, 2, 2]
    assert runs == Counter({"lookup": 1})  # the ungated call ran once, the denied one never
    assert chat.status == "complete"


def test_ask_after_a_denial_made_elsewhere_and_a_reload(tmp_path: Any) -> None:
    """The denial comes from another process through the store, and the chat is loaded
    again: the question still follows the round's results, and the store keeps that order."""
    from nbagent.store import SQLiteStore

    db = tmp_path / "chat.db"
    script = call_tools(("lookup", {"order_id": 1}, "l1"), ("issue_refund", {"order_id": 1}, "r1"))
    chat = Chat(provider=ScriptedProvider([script]), store=db).with_tools(IssueRefund, lookup)
    chat.ask("look order 1 up and refund it")
    chat.close()
    with SQLiteStore(db) as other:
        other.deny("r1", reason="no", chat_id=chat.id)
    provider = ScriptedProvider([reply("ok")])
    again = Chat.load(chat.id, store=db, tools=[IssueRefund, lookup], provider=provider)
    again.ask("next question")
    assert _shape(provider.requests[-1].messages) == ROUND_THEN_QUESTION
    again.close()
    reread = Chat.load(chat.id, store=db, tools=[IssueRefund, lookup], provider=provider)
    assert _shape(reread.transcript) == [*ROUND_THEN_QUESTION, ("ChatMessage", None)]
    reread.close()
    assert runs == Counter({"lookup": 1})


def test_ask_after_an_approval_still_waits_for_the_call_to_run() -> None:
    """An approved call is not answered until it ran: ``ask()`` refuses, and nothing is added."""
    chat, _ = make_chat(call_tools(("issue_refund", {"order_id": 1}, "r1")), reply("done"))
    chat.ask("refund order 1")
    chat.approve("r1")
    before = list(chat.transcript)
    with pytest.raises(PendingToolCallsError, match=r"issue_refund\(r1\)"):
        chat.ask("and another thing")
    assert list(chat.transcript) == before and runs["issue_refund"] == 0


def test_step_by_step_stops_at_awaiting_approval() -> None:
    chat, _ = make_chat(
        call_tools(("lookup", {"order_id": 1}, "l1"), ("issue_refund", {"order_id": 1}, "r1")),
        reply("done"),
    )
    chat.ask_later("go")
    assert chat.step().kind == "generated"
    ran = chat.step()
    assert ran.kind == "ran_tools" and [c.id for c in ran.calls] == ["l1"]
    waiting = chat.step()
    assert waiting.kind == "awaiting_approval" and [c.id for c in waiting.calls] == ["r1"]
    assert chat.step().kind == "awaiting_approval"  # idempotent while nobody decides
    chat.approve("r1")
    assert chat.step().kind == "ran_tools"
    assert chat.step().kind == "generated"
    assert chat.step().kind == "complete"
    assert runs == Counter({"lookup": 1, "issue_refund": 1})


def test_concurrent_approve_and_complete_run_the_tool_once() -> None:
    chat, _ = make_chat(call_tools(("issue_refund", {"order_id": 1}, "r1")), reply("ok"))
    chat.ask("refund")
    chat.approve("r1")
    barrier = threading.Barrier(4)

    def go() -> None:
        barrier.wait()
        chat.approve("r1")
        chat.complete()

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    chat.complete()
    assert runs["issue_refund"] == 1
    assert chat.is_complete


def test_decision_events_record_who_when_why() -> None:
    chat, _ = make_chat(call_tools(("issue_refund", {"order_id": 1}, "r1")), reply("ok"))
    decided: list[nbagent.ApprovalDecided] = []
    requested: list[nbagent.ApprovalRequested] = []
    chat.on(nbagent.ApprovalDecided, decided.append)  # type: ignore[arg-type]
    chat.on("approval_requested", requested.append)  # type: ignore[arg-type]
    chat.ask("refund")
    chat.deny("r1", reason="policy")
    assert requested[0].reason == "issue_refund requires approval before it runs"
    assert decided[0].decision.verdict == "denied" and decided[0].decision.reason == "policy"
    assert decided[0].decision.by == "user"


def test_async_api_with_approvals() -> None:
    chat, _ = make_chat(call_tools(("issue_refund", {"order_id": 1}, "r1")), reply("async ok"))

    async def main() -> Any:
        await chat.ask_async("refund")
        assert chat.awaiting_approval
        chat.approve("r1")
        return await chat.complete_async()

    assert asyncio.run(main()).content == "async ok"
    assert runs["issue_refund"] == 1


def test_a_call_object_of_another_chat_is_refused_not_matched_by_its_id(tmp_path: Any) -> None:
    """Call ids repeat across chats (the demo model's ``demo_call_1``; a fork keeps its
    parent's). Approving chat B's call on chat A approved A's call of that id, and it ran:
    the person approved order 5 and order 1 was refunded."""
    store = nbagent.open_store(tmp_path / "s.db")
    a, b = (
        Chat(
            provider=ScriptedProvider([call_tools(("issue_refund", {"order_id": n}, "r1"))]),
            store=store,
        ).with_tools(IssueRefund)
        for n in (1, 5)
    )
    a.ask("one")
    b.ask("five")
    with pytest.raises(DecisionError, match="not a call of this chat"):
        a.approve(b.pending_approvals[0])
    with pytest.raises(DecisionError, match="not a call of this chat"):
        a.deny(b.pending_approvals[0])
    with pytest.raises(DecisionError, match="not a call of this chat"):
        a.fork(b.pending_approvals[0], decision="approved")
    forked = a.fork(a.pending_approvals[0], arguments={"order_id": 2})  # ids shared with a
    with pytest.raises(DecisionError, match="not a call of this chat"):
        a.approve(forked.tool_calls[0])
    made_by_hand = ToolCall("r1", "issue_refund", {"order_id": 5})
    with pytest.raises(DecisionError, match="not the one this chat has"):
        a.approve(made_by_hand)
    assert runs["issue_refund"] == 0
    assert [c.status for c in a.tool_calls] == ["awaiting_approval"]
    # the store, holding both chats, finds the call of the chat the object came from
    store.approve(b.pending_approvals[0], by="reviewer")
    b.refresh()
    assert [c.status for c in b.tool_calls] == ["approved"]
    assert [c.status for c in a.tool_calls] == ["awaiting_approval"]
    a.approve(ToolCall("r1", "issue_refund", {"order_id": 1}))  # the same call, by value
    assert [c.status for c in a.tool_calls] == ["approved"]


def _broken_predicate(call: ToolCall) -> bool:
    return bool(call.arguments["amout"] < 50)  # a typo: KeyError


def test_a_broken_always_allow_predicate_warns_in_every_chat_it_fails_in() -> None:
    """Its warning was said once per (policy, call id) in the whole process: call ids repeat
    across chats (a server's ``call_0``, a fork's, scripted ones), so the same broken
    predicate in a second chat left its call waiting with no word why. Once a call of each
    chat, as before (every step asks the predicate again)."""
    for _ in range(2):
        chat, _ = make_chat(
            call_tools(("issue_refund", {"order_id": 1, "amount": 10}, "call_0")), reply("ok")
        )
        chat.always_allow("issue_refund", when=_broken_predicate)
        with pytest.warns(nbagent.CallbackWarning, match="raised KeyError") as caught:
            chat.ask("refund")
            chat.complete()  # the predicate is asked again: not said again
        assert sum(issubclass(w.category, nbagent.CallbackWarning) for w in caught) == 1
        assert [c.id for c in chat.pending_approvals] == ["call_0"]
        assert runs["issue_refund"] == 0


def test_what_a_policy_remembers_of_its_warnings_is_bounded() -> None:
    """What was warned about is kept with the policy (freed with its chat), a bounded number
    of calls: a long chat whose predicate fails on every call does not grow it for ever."""
    policy = nbagent._approvals.always_allow_policy("issue_refund", _broken_predicate)
    with pytest.warns(nbagent.CallbackWarning):
        for n in range(5000):
            call = ToolCall(f"c{n}", "issue_refund", {"amount": 1}, chat_id="chat-a")
            assert not policy.matches(call)
    assert len(policy._warned) <= nbagent._approvals.WARNED_CALLS
    assert not hasattr(nbagent._approvals, "_warned")  # nothing kept for the process
