"""Rules as data (``nbagent.Rule``, ``chat.add_rule``; issue 27, item 5): conditions read
arguments safely and as text, bad rules are refused with a clear error, and the gate
applies a chat's rules: a call a deny rule matches never runs (whatever else would have
approved it, a tool that needs no approval included), an allow rule approves, and the
model reads which rule decided. Side-effect counters prove "never executed".
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
import nbagent.store
from nbagent import (
    Chat,
    Condition,
    DecisionError,
    Rule,
    RuleChanged,
    ToolCall,
    ToolResultMessage,
    tool,
)
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

RAN: Counter[str] = Counter()


@tool(requires_approval=True)
def refund(order_id: int, amount: float = 0, region: str = "eu") -> str:
    """Refund an order.

    Args:
        order_id: The order.
        amount: Dollars.
        region: Where.
    """
    RAN["refund"] += 1
    return "refunded"


@tool
def lookup(order_id: int) -> str:
    """Look an order up (needs no approval).

    Args:
        order_id: The order.
    """
    RAN["lookup"] += 1
    return "found"


def _chat(*script: Any) -> Chat:
    RAN.clear()
    return Chat(provider=ScriptedProvider(script), display=False).with_tools(refund, lookup)


def _results(chat: Chat) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in chat.transcript if isinstance(m, ToolResultMessage)}


def test_conditions_hold_as_their_operators_say() -> None:
    args = {"amount": 600, "region": "eu-west", "flag": True, "n": 1}
    holds = [
        (("amount", ">", 500), True), (("amount", ">=", 600), True), (("amount", "<", 600), False),
        (("amount", "<=", 600.0), True), (("amount", "==", 600.0), True),
        (("amount", "!=", 600), False),
        (("region", "in", ["eu-west", "us"]), True), (("region", "in", ["us"]), False),
        (("region", "matches", r"^eu-"), True), (("region", "matches", r"^us"), False),
        (("flag", "==", 1), False), (("n", "==", True), False),  # True is not 1
        (("region", ">", 5), False), (("amount", "matches", "6"), False),  # wrong types: never
        (("missing", "!=", 1), False),  # a missing argument never meets a condition
    ]  # fmt: skip
    assert [(c, Condition(*c).holds(args)) for c, _ in holds] == holds
    assert not Condition("amount", ">", 1).holds(None)


def test_a_rule_reads_as_text_and_round_trips_as_data() -> None:
    rule = Rule.deny("refund", ("amount", ">", 500), Condition("region", "in", ["eu", "uk"]))
    assert str(rule) == 'tool refund, amount > 500, region in ["eu", "uk"]'
    assert rule.reason == 'Denied by rule: tool refund, amount > 500, region in ["eu", "uk"]'
    assert Rule.allow(refund).reason == "Allowed by rule: tool refund"
    data = json.loads(json.dumps(rule.as_dict()))
    assert Rule.from_dict(data) == rule and hash(Rule.from_dict(data)) == hash(rule)
    assert Rule("refund", "deny") == Rule.deny("refund")  # allow / deny spell the verdicts too


OWN_KEY = "corpkey_ZZZ999yyy1234"  # a key of no known shape: the chat's provider's


class KeyedProvider(ScriptedProvider):
    def secrets(self) -> tuple[str, ...]:
        return (OWN_KEY,)


def test_a_rules_reason_hides_the_secrets_its_conditions_hold() -> None:
    """A rule's reason (sent to the model with its denial, in the log, the store and an
    edit's ``DecisionError``) quoted its conditions whole: a token it blocks, URL
    credentials, a value under a secret's name, the chat's provider's key."""
    rule = Rule.deny(
        "refund",
        ("region", "==", "sk-proj-abc123def456ghi789"),
        ("region", "matches", "postgresql://app:hunter2@db"),
        ("api_key", "in", ["plain-value-1"]),
        ("amount", ">", 500),
    )
    assert rule.reason == (
        'Denied by rule: tool refund, region == "sk-***", region matches "postgresql://***@db",'
        " api_key in ***, amount > 500"
    )
    assert "abc123def456" not in repr(rule) and "hunter2" not in repr(rule)
    assert Rule.from_dict(rule.as_dict()) == rule  # the rule itself keeps what it matches
    call = call_tools(("refund", {"order_id": 1, "region": OWN_KEY}, "r1"))
    chat = Chat(provider=KeyedProvider([call, reply("ok")]), display=False).with_tools(refund)
    chat.add_rule(Rule.deny("refund", ("region", "==", OWN_KEY)))
    chat.ask("refund")
    reason = 'Denied by rule: tool refund, region == "***"'
    assert json.loads(_results(chat)["r1"])["reason"] == reason  # what the model read
    assert chat.get_call("r1").decision.reason == reason  # type: ignore[union-attr]
    assert chat.log["reason"].tolist() == [reason]


def test_a_long_condition_value_hides_the_providers_key_before_it_is_cut() -> None:
    """A value over 60 characters is cut in a rule's text. The chat hid its provider's key
    in the reason after the cut, so a key the cut split kept its first part (the whole key
    was no longer there to be found): the chat's reason is now made with its key hidden
    first, then cut."""
    value = "x" * 50 + OWN_KEY + "-tail"  # the cut at 60 falls inside the key
    assert Rule.deny("refund", ("region", "==", value)).reason.endswith(OWN_KEY[:9] + '…"')
    call = call_tools(("refund", {"order_id": 1, "region": value}, "r1"))
    chat = Chat(provider=KeyedProvider([call, reply("ok")]), display=False).with_tools(refund)
    chat.add_rule(Rule.deny("refund", ("region", "==", value)))
    chat.ask("refund")
    reason = f'Denied by rule: tool refund, region == "{"x" * 50}***-tail"'
    assert json.loads(_results(chat)["r1"])["reason"] == reason  # what the model read
    assert chat.get_call("r1").decision.reason == reason  # type: ignore[union-attr]
    assert chat.log["reason"].tolist() == [reason]
    said = [getattr(e, "decision", None) or getattr(e, "approval", None) for e in chat.events]
    assert [r for r in said if r is not None and OWN_KEY[:6] in (r.reason or "")] == []


def test_a_deny_rule_gating_an_ungated_tool_hides_the_providers_key_in_its_reason() -> None:
    """A deny rule gates even an ungated tool's call; the approval it made quoted the rule's
    reason with the chat's provider's key whole (a short value) or its first part (a long
    one, cut at 60 characters): in the call's approval, the log and the store."""
    for value in (OWN_KEY, "x" * 50 + OWN_KEY + "-tail"):
        call = call_tools(("lookup", {"order_id": 1}, "l1"))
        chat = Chat(provider=KeyedProvider([call, reply("ok")]), display=False)
        chat.with_tools(lookup).add_rule(Rule.deny("lookup", ("order_id", "!=", value)))
        chat.ask("look it up")
        approval = chat.get_call("l1").approval
        assert approval is not None and approval.reason is not None
        assert approval.reason.startswith("Denied by rule: tool lookup, order_id != ")
        assert OWN_KEY[:6] not in approval.reason
        shown = " ".join(str(v) for v in chat.log.to_dict("list").values())
        assert OWN_KEY[:6] not in shown


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Condition("amount", "~", 1), "unknown condition operator '~'"),
        (lambda: Condition("amount", ">", "500"), "amount > needs a number"),
        (lambda: Condition("amount", "<", float("nan")), "JSON data"),
        (lambda: Condition("region", "in", "eu"), "region in needs a list"),
        (lambda: Condition("region", "matches", "("), "region matches '\\(':"),
        (lambda: Condition("region", "==", object()), "JSON data"),
        (lambda: Rule("refund", "maybe"), "'approved' or 'denied'"),
        (lambda: Rule("", "denied"), "tool name"),
        (lambda: Rule.deny("refund", ("amount", ">")), "Condition or \\(key, op, value\\)"),
        (lambda: Rule.from_dict({"tool": "refund", "verdict": "denied", "conditions": [1]}),
         "a condition is"),
        (lambda: Rule.from_dict("refund"), "a rule is"),
    ],
)  # fmt: skip
def test_a_bad_rule_says_what_is_wrong(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_a_deny_rule_denies_before_anything_runs_and_the_model_reads_which() -> None:
    chat = _chat(
        call_tools(("refund", {"order_id": 1, "amount": 900}, "r1"),
                   ("lookup", {"order_id": 1}, "l1"),
                   ("refund", {"order_id": 2, "amount": 20}, "r2")),
        reply("done"),
    )  # fmt: skip
    events: list[RuleChanged] = []
    chat.on(RuleChanged, events.append)
    chat.add_rule(Rule.deny("refund", ("amount", ">", 500)))
    chat.add_rule(Rule.deny("refund", ("amount", ">", 500)))  # the same rule again: a no-op
    chat.add_rule(Rule.allow("refund", ("amount", "<=", 50)))
    chat.add_rule(Rule.deny("lookup"))  # a tool that needs no approval: gated by the rule
    chat.ask("refunds")
    assert chat.status == "complete" and Counter({"refund": 1}) == RAN
    r1, l1, r2 = (chat.get_call(i) for i in ("r1", "l1", "r2"))
    assert (r1.status, r1.decision.by) == ("denied", "rule")  # type: ignore[union-attr]
    assert (l1.status, l1.approval.source) == ("denied", "rule")  # type: ignore[union-attr]
    assert (r2.status, r2.decision.by) == ("ok", "rule")  # type: ignore[union-attr]
    denial = json.loads(_results(chat)["r1"])
    assert denial["status"] == "denied" and "denied by a rule" in denial["message"]
    assert denial["reason"] == "Denied by rule: tool refund, amount > 500"
    assert [(e.rule["tool"], e.added) for e in events] == [
        ("refund", True), ("refund", True), ("lookup", True)
    ]  # fmt: skip
    with pytest.raises(DecisionError, match="already denied by rule"):
        chat.approve("r1")  # a rule's decision is final
    frame = chat.log.frame().set_index("call_id")
    assert frame.loc["r1", "decided_by"] == "rule"
    assert frame.loc["r1", "reason"] == "Denied by rule: tool refund, amount > 500"


def test_a_deny_rule_comes_before_a_resolver_and_always_allow() -> None:
    chat = _chat(call_tools(("refund", {"order_id": 1, "amount": 900}, "r1")), reply("ok"))
    chat.always_allow(refund)
    chat.add_rule(Rule.deny("refund", ("amount", ">=", 900)))
    chat.ask("refund")
    assert chat.get_call("r1").status == "denied" and Counter() == RAN


def test_a_rule_decides_the_calls_waiting_now_and_a_fork_keeps_it() -> None:
    chat = _chat(call_tools(("refund", {"order_id": 1, "amount": 900}, "r1")), reply("ok"))
    chat.ask("refund")
    assert chat.status == "awaiting_approval"
    chat.add_rule(Rule.deny("refund", ("region", "==", "eu")))  # the model did not send it
    assert chat.get_call("r1").status == "awaiting_approval"  # a missing argument: no match
    chat.add_rule(Rule.deny("refund", ("amount", ">", 500)))
    assert chat.get_call("r1").status == "denied"
    fork = chat.fork(step=0)
    assert fork.rules == chat.rules
    chat.remove_rule(Rule.deny("refund", ("region", "==", "eu")))
    assert chat.rules == (Rule.deny("refund", ("amount", ">", 500)),)
    with pytest.raises(ValueError, match="has no rule tool refund"):
        chat.remove_rule(Rule.deny("refund"))
    with pytest.raises(TypeError, match=r"nbagent\.Rule"):
        chat.add_rule("deny refund")  # type: ignore[arg-type]


CALL = st.fixed_dictionaries(
    {
        "tool": st.sampled_from(["refund", "lookup"]),
        "amount": st.integers(0, 1000),
        "region": st.sampled_from(["eu", "us", "uk"]),
    }
)
CONDITION = st.one_of(
    st.tuples(st.just("amount"), st.sampled_from(["<", "<=", ">", ">=", "==", "!="]),
              st.integers(0, 1000)),
    st.tuples(st.just("region"), st.sampled_from(["==", "!="]), st.sampled_from(["eu", "us"])),
    st.tuples(st.just("region"), st.just("in"), st.lists(st.sampled_from(["eu", "us", "uk"]))),
    st.tuples(st.just("region"), st.just("matches"), st.sampled_from(["^e", "s$", "u"])),
)  # fmt: skip
RULE = st.builds(
    lambda tool, verdict, conditions: Rule(tool, verdict, tuple(Condition(*c) for c in conditions)),
    st.sampled_from(["refund", "lookup"]),
    st.sampled_from(["approved", "denied"]),
    st.lists(CONDITION, max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(CALL, min_size=1, max_size=4), st.lists(RULE, max_size=4), st.booleans())
def test_a_call_matching_a_deny_rule_never_runs(
    calls: list[dict[str, Any]], rules: list[Rule], allow_all: bool
) -> None:
    script = call_tools(
        *[
            (c["tool"], {"order_id": n} | ({"amount": c["amount"], "region": c["region"]}
                                           if c["tool"] == "refund" else {}), f"c{n}")
            for n, c in enumerate(calls)
        ]
    )  # fmt: skip
    chat = _chat(script, reply("ok"))
    if allow_all:  # every other way a call could be approved, at once
        chat.always_allow(refund)
    for rule in rules:
        chat.add_rule(rule)
    chat.ask("go", max_steps=2)
    if chat.status == "awaiting_approval":  # a person approves everything still waiting
        for call in chat.pending_approvals:
            chat.approve(call)
        chat.complete(max_steps=2)
    ran: Counter[str] = Counter()
    for n, _ in enumerate(calls):
        call = chat.get_call(f"c{n}")
        if any(r.verdict == "denied" and r.matches(call) for r in rules):
            assert call.status == "denied" and call.started_at is None
            assert call.decision is not None and call.decision.by == "rule"
        else:
            assert call.status == "ok"
            ran[call.name] += 1
    assert ran == RAN  # exactly the calls no deny rule matches ran, each once


def _matched(rules: list[Rule], name: str, arguments: dict[str, Any]) -> bool:
    edited = ToolCall("x", name, arguments)
    return any(r.verdict == "denied" and r.matches(edited) for r in rules)


REFUND = st.fixed_dictionaries(
    {"amount": st.integers(0, 1000), "region": st.sampled_from(["eu", "us", "uk"])}
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(REFUND, min_size=1, max_size=3),
    st.lists(RULE, max_size=3),
    st.lists(st.none() | st.integers(0, 1000), min_size=3, max_size=3),
)
def test_what_runs_matches_no_deny_rule_whoever_decided_and_whatever_they_edited(
    calls: list[dict[str, Any]], rules: list[Rule], edits: list[int | None]
) -> None:
    chat = _chat(
        call_tools(*[("refund", {"order_id": n} | c, f"c{n}") for n, c in enumerate(calls)]),
        reply("ok"),
    )
    for rule in rules:
        chat.add_rule(rule)
    chat.ask("go", max_steps=2)
    for call, amount in zip(list(chat.pending_approvals), edits, strict=False):
        edited = None if amount is None else {**call.arguments, "amount": amount}
        if edited is not None and _matched(rules, "refund", edited):
            with pytest.raises(DecisionError, match="a call a deny rule matches never runs"):
                chat.approve(call, arguments=edited)  # a person's edit is no way around it
            assert call.status == "awaiting_approval" and call.decision is None
        chat.approve(call, arguments=None if _matched(rules, "refund", edited or {}) else edited)
    for call in chat.tool_calls:  # nor is a fork: a rule's decision is final
        if call.decision is not None and call.decision.by == "rule":
            other = "denied" if call.decision.verdict == "approved" else "approved"
            with pytest.raises(DecisionError, match="a rule's decision is final"):
                chat.fork(call, decision=other)
            with pytest.raises(DecisionError, match="a rule's decision is final"):
                chat.fork(call, arguments={**call.arguments, "amount": 1})
    chat.complete(max_steps=2)
    ran = 0
    for call in chat.tool_calls:
        if call.status == "ok":
            assert not _matched(rules, call.name, dict(call.effective_arguments))
            ran += 1
        else:
            assert call.status == "denied" and call.started_at is None
    assert Counter({"refund": ran} if ran else {}) == RAN  # only those, each once


def test_a_fork_cannot_approve_what_a_deny_rule_denied_nor_edit_into_one() -> None:
    chat = _chat(
        call_tools(("refund", {"order_id": 42, "amount": 900}, "r1"),
                   ("refund", {"order_id": 7, "amount": 20}, "r2")),
        reply("ok"), reply("ok"), reply("ok"),
    )  # fmt: skip
    chat.add_rule(Rule.deny("refund", ("amount", ">", 500)))
    chat.ask("refunds")
    chat.approve("r2")
    chat.complete()
    assert Counter({"refund": 1}) == RAN  # r2 only
    with pytest.raises(DecisionError, match=r"refund\(r1\) was denied by a rule"):
        chat.fork("r1", decision="approved")
    with pytest.raises(DecisionError, match="amount > 500"):
        chat.fork("r2", arguments={"order_id": 7, "amount": 700})
    fork = chat.fork("r2", arguments={"order_id": 7, "amount": 30})  # allowed: no rule matches
    fork.complete()
    assert Counter({"refund": 2}) == RAN
    assert fork.get_call("r2").effective_arguments == {"order_id": 7, "amount": 30}


def _stored_refund(tmp_path: Any) -> Chat:
    """A chat with a store, about to ask for a refund of 20 on order 7 (call ``r1``)."""
    RAN.clear()
    script = [call_tools(("refund", {"order_id": 7, "amount": 20}, "r1")), reply("ok")]
    return Chat(
        provider=ScriptedProvider(script),
        display=False,
        store=nbagent.open_store(tmp_path / "s.db"),
    ).with_tools(refund)


def test_an_edit_from_another_process_that_a_deny_rule_matches_is_rejected(tmp_path: Any) -> None:
    chat = _stored_refund(tmp_path)
    chat.add_rule(Rule.deny("refund", ("amount", ">", 500)))
    chat.ask("refund")
    other = nbagent.open_store(tmp_path / "s.db")
    with pytest.raises(DecisionError, match="amount > 500"):  # told now, nothing written
        other.approve(chat.get_call("r1"), arguments={"order_id": 7, "amount": 900})
    assert other.call("r1", chat_id=chat.id).decision is None
    chat.remove_rule(Rule.deny("refund", ("amount", ">", 500)))
    chat.add_rule(Rule.deny("refund", ("amount", ">", 800)))  # the store reads the rules now
    with pytest.raises(DecisionError, match="amount > 800"):
        other.approve(chat.get_call("r1"), arguments={"order_id": 7, "amount": 900})
    other.approve(chat.get_call("r1"), arguments={"order_id": 7, "amount": 600})
    chat.complete()
    assert chat.get_call("r1").effective_arguments == {"order_id": 7, "amount": 600}
    assert Counter({"refund": 1}) == RAN
    other.close()


def test_an_edit_the_store_took_before_a_deny_rule_came_is_rejected_by_the_chat(
    tmp_path: Any,
) -> None:
    chat = _stored_refund(tmp_path)
    chat.ask("refund")
    nbagent.open_store(tmp_path / "s.db").approve(
        chat.get_call("r1"), arguments={"order_id": 7, "amount": 900}
    )
    chat.add_rule(Rule.deny("refund", ("amount", ">", 500)))  # here, before the chat read it
    with pytest.warns(nbagent.store.StoreConflictWarning, match="amount > 500"):
        chat.complete()
    assert chat.get_call("r1").status == "awaiting_approval" and Counter() == RAN
    chat.approve("r1")  # as asked: no rule matches
    chat.complete()
    assert Counter({"refund": 1}) == RAN


@pytest.mark.parametrize(
    ("key", "op", "value"),
    [
        ("password", ">", "hunter2-secret"),
        ("password", "in", "hunter2-secret"),
        ("password", "matches", "hunter2-secret("),
        ("password", "==", {"hunter2-secret"}),
        ("region", ">", "sk-proj-abc123def456ghi789"),
    ],
)
def test_a_bad_condition_on_a_secret_says_what_is_wrong_without_it(
    key: str, op: str, value: Any
) -> None:
    """A condition's errors quoted its value: a password a person typed into a rule, or a
    key-shaped value, on the screen in the traceback."""
    with pytest.raises(ValueError, match=f"{key} ") as raised:
        Condition(key, op, value)
    assert "hunter2" not in str(raised.value) and "abc123def456" not in str(raised.value)


def test_an_edit_a_deny_rule_refuses_hides_the_providers_key_in_its_error() -> None:
    """The ``DecisionError`` an edit got when a deny rule matched it quoted the rule's own
    reason, cut at 60 characters before the chat's provider's key could be hidden: its first
    part on the screen and in a traceback (an approval with arguments, a fork's edit)."""
    for value in (OWN_KEY, "x" * 50 + OWN_KEY + "-tail"):  # whole, and split by the cut
        call = call_tools(("refund", {"order_id": 1, "region": "eu"}, "r1"))
        chat = Chat(provider=KeyedProvider([call, reply("ok")]), display=False)
        chat.with_tools(refund).add_rule(Rule.deny("refund", ("region", "==", value)))
        chat.ask("refund")
        edited = {"order_id": 1, "region": value}
        with pytest.raises(DecisionError, match="cannot be approved") as approving:
            chat.approve("r1", arguments=edited)
        chat.approve("r1")  # as asked: no rule matches
        chat.complete()
        with pytest.raises(DecisionError, match="cannot be approved") as forking:
            chat.fork("r1", arguments=edited)
        for raised in (approving, forking):
            assert OWN_KEY[:6] not in str(raised.value), str(raised.value)
            assert "region == " in str(raised.value)
