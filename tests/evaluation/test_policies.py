"""Policies learned from decisions: rules a store's history supports, accepted into chats.

The history is a real SQLite store of demo chats decided by a person; an accepted rule is
data the chat's store keeps (``Chat.load`` applies it again): an allow rule approves what
it matches, a deny rule denies it before anything runs; the card says which rule decided.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, tool
from nbagent.evaluation import Condition, PolicySuggestion, suggest_policies
from nbagent.notebook._fallback import bundle_for
from nbagent.notebook._state import ChatState

RAN: Counter[str] = Counter()


@tool(requires_approval=True)
def issue_refund(order_id: int, amount: float = 0) -> str:
    """Refund an order.

    Args:
        order_id: The order.
        amount: Dollars.
    """
    RAN["issue_refund"] += 1
    return f"refunded {amount:g}"


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The path.
    """
    RAN["delete_file"] += 1
    return "deleted"


def _chat(db: str | None = None) -> Chat:
    return Chat("demo", store=db, display=False).with_tools(issue_refund, delete_file)


def _history(db: str) -> None:
    for amount in [10, 20, 35, 50, 400, 900, 700]:
        chat = _chat(db)
        chat.ask(f"Refund order 4 for {amount} dollars")
        decide = chat.approve if amount <= 50 else chat.deny
        decide(chat.tool_calls[0])
        chat.complete()
    for name in ["a.tmp", "b.tmp", "c.tmp"]:
        chat = _chat(db)
        chat.ask(f"Delete the file {name}")
        chat.deny(chat.tool_calls[0], reason="keep it")
        chat.complete()


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> str:
    db = str(tmp_path_factory.mktemp("policies") / "decisions.db")
    _history(db)
    return db


def test_the_rules_the_decisions_support(history: str) -> None:
    rules = suggest_policies(nbagent.open_store(history))
    assert [(r.rule, r.support, len(r.changed)) for r in rules] == [
        ("always allow issue_refund when amount <= 50", 4, 0),
        ("always deny delete_file", 3, 0),
        ("always deny issue_refund when amount >= 400", 3, 0),
    ]
    frame = rules.frame()
    assert frame["support"].tolist() == [4, 3, 3] and frame["agreement"].tolist() == [1.0] * 3
    assert "always allow issue_refund when amount &lt;= 50" in rules._repr_html_()
    assert suggest_policies(history, min_support=4).frame()["rule"].tolist() == [
        "always allow issue_refund when amount <= 50"
    ]
    assert suggest_policies(history, tools=["delete_file"])[0].rule == "always deny delete_file"


def test_a_rule_with_exceptions_lists_the_decisions_it_would_have_change(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    for name, verdict in [("a", "approve"), ("b", "approve"), ("c", "approve"), ("d", "deny")]:
        chat = _chat(db)
        chat.ask(f"Delete the file {name}.txt")
        getattr(chat, verdict)(chat.tool_calls[0])
        chat.complete()
    assert suggest_policies(db) == []  # no rule without exceptions
    rules = suggest_policies(db, min_agreement=0.75)
    assert rules[0].rule == "always allow delete_file"
    assert rules[0].support == 3 and rules[0].agreement == 0.75
    (changed,) = rules[0].changed
    assert changed["decision"] == "denied" and changed["arguments"] == {"path": "d.txt"}
    log = nbagent.read_log(nbagent.open_store(db))
    assert changed["call_id"] in set(log["call_id"]) and changed["chat_id"] in set(log["chat_id"])


def test_an_accepted_allow_rule_is_stored_and_shown_on_the_cards_it_decides(
    history: str, tmp_path: Path
) -> None:
    rule = suggest_policies(history)[0]
    db = str(tmp_path / "new.db")
    RAN.clear()
    chat = rule.accept(_chat(db))
    assert chat.rules == (nbagent.Rule.allow("issue_refund", ("amount", "<=", 50)),)
    chat.ask("Refund order 5 for 30 dollars")
    assert chat.status == "complete" and Counter({"issue_refund": 1}) == RAN
    call = chat.record.calls[0]
    assert (call.decided_by, call.reason) == (
        "rule", "Allowed by rule: tool issue_refund, amount <= 50",
    )  # fmt: skip
    text = bundle_for(ChatState.from_chat(chat))["text/plain"]
    assert "Allowed by rule: tool issue_refund, amount <= 50" in text
    log = chat.log.frame()
    assert log[["decided_by", "reason"]].values.tolist() == [
        ["rule", "Allowed by rule: tool issue_refund, amount <= 50"]
    ]
    big = _chat(db)
    rule.accept(big).ask("Refund order 5 for 300 dollars")
    assert big.tool_calls[0].status == "awaiting_approval"  # the rule does not decide it
    # the store keeps the rule as data: loaded with nothing given back, it applies again
    loaded = Chat.load(chat.id, store=db, tools=[issue_refund, delete_file])
    assert loaded.rules == chat.rules
    loaded.ask("Refund order 6 for 40 dollars")
    assert loaded.tool_calls[-1].status == "ok" and RAN["issue_refund"] == 2


def test_an_accepted_deny_rule_denies_before_anything_runs(history: str, tmp_path: Path) -> None:
    rule = next(r for r in suggest_policies(history) if r.tool == "delete_file")
    db = str(tmp_path / "deny.db")
    RAN.clear()
    chat = rule.accept(_chat(db))
    chat.ask("Delete the file z.tmp")
    assert chat.status == "complete" and Counter() == RAN
    call = chat.record.calls[0]
    assert (call.status, call.decided_by, call.reason) == (
        "denied", "rule", "Denied by rule: tool delete_file",
    )  # fmt: skip
    seen = chat.transcript[-2]  # the structured denial the model read names the rule
    assert '"reason": "Denied by rule: tool delete_file"' in seen.content
    text = bundle_for(ChatState.from_chat(chat))["text/plain"]
    assert "Denied by rule: tool delete_file" in text
    with pytest.raises(nbagent.DecisionError):  # a rule's decision is final
        chat.approve(call.call_id)
    waiting = _chat()
    waiting.ask("Delete the file y.tmp")
    rule.accept(waiting)  # a call already waiting is decided at once
    assert waiting.tool_calls[0].status == "denied"
    loaded = Chat.load(chat.id, store=db, tools=[issue_refund, delete_file])
    loaded.ask("Delete the file w.tmp")  # the stored rule denies again after a load
    assert loaded.tool_calls[-1].status == "denied" and Counter() == RAN
    assert loaded.tool_calls[-1].decision.by == "rule"


def test_accepted_into_a_batch_and_rules_decisions_teach_nothing(history: str) -> None:
    rules = suggest_policies(history)

    def make_chat() -> Chat:
        chat = _chat()
        for rule in rules:
            rule.accept(chat)
        return chat

    result = nbagent.batch(
        ["Refund order 1 for 20 dollars", "Refund order 2 for 800 dollars",
         "Refund order 3 for 100 dollars"], make_chat, progress=False,
    )  # fmt: skip
    assert result["status"].tolist() == ["done", "done", "awaiting_approval"]
    log = nbagent.read_log(result)
    assert suggest_policies(log, min_support=1) == []  # decided by rules, not people
    card = nbagent.evaluate(["Delete the file q.tmp"], lambda: _chat(), [], decide="deny",
                            progress=False)  # fmt: skip
    assert suggest_policies(nbagent.read_log(card), min_support=1) == []


def test_bad_arguments_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="min_support"):
        suggest_policies(pd.DataFrame(), min_support=0)
    with pytest.raises(ValueError, match="min_agreement"):
        suggest_policies(pd.DataFrame(), min_agreement=0.4)


DECISION = st.tuples(
    st.sampled_from(["a", "b"]),
    st.fixed_dictionaries({"n": st.integers(0, 9), "k": st.sampled_from(["x", "y"])}),
    st.sampled_from(["approved", "denied"]),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(DECISION, max_size=25), st.integers(1, 4))
def test_every_rule_without_exceptions_agrees_with_every_decision_it_matches(
    decided: list[tuple[str, dict[str, Any], str]], min_support: int
) -> None:
    frame = pd.DataFrame(
        {
            "tool": [t for t, _, _ in decided],
            "arguments": [a for _, a, _ in decided],
            "decision": [d for _, _, d in decided],
            "decided_by": ["user"] * len(decided),
            "chat_id": ["c"] * len(decided),
            "call_id": [f"{i}" for i in range(len(decided))],
        }
    )
    for rule in suggest_policies(frame, min_support=min_support):
        matched = [d for t, a, d in decided if rule.matches(_Call(t, a))]
        assert rule.changed == () and rule.support == len(matched) >= min_support
        assert set(matched) == {rule.verdict}


class _Call:
    def __init__(self, name: str, arguments: dict[str, Any]):
        self.name, self.arguments = name, arguments


def test_conditions_read_arguments_safely() -> None:
    assert Condition("amount", "<=", 50).holds({"amount": 50})
    assert not Condition("amount", "<=", 50).holds({"amount": "50"})
    assert not Condition("amount", "<=", 50).holds({})
    assert not Condition("amount", "<=", 50).holds(None)
    assert str(Condition("region", "==", "eu")) == 'region == "eu"'
    rule = PolicySuggestion("t", "approved", (Condition("n", ">=", 2),), 3)
    assert rule.rule == "always allow t when n >= 2" and rule.matches(_Call("t", {"n": 3}))


@tool(requires_approval=True)
def ship(region: str) -> str:
    """Ship.

    Args:
        region: Where to.
    """
    RAN["ship"] += 1
    return "shipped"


def _decided(db: str, fn: Any, arguments: dict[str, Any], **decision: Any) -> Chat:
    """A chat of ``db`` whose model calls ``fn`` with ``arguments``, decided by a person
    (``approve=True`` or ``False``, ``edit=`` arguments to approve with)."""
    from nbagent.testing import ScriptedProvider, call_tools, reply

    provider = ScriptedProvider([call_tools((fn.name, arguments)), reply("done")])
    chat = Chat(provider=provider, store=db, display=False).with_tools(fn)
    chat.ask("go")
    call = chat.tool_calls[0]
    if "edit" in decision:
        chat.approve(call, arguments=decision["edit"])
    elif decision["approve"]:
        chat.approve(call)
    else:
        chat.deny(call)
    chat.complete()
    return chat


def test_an_edited_approval_supports_no_allow_of_the_arguments_asked_for(tmp_path: Path) -> None:
    """A person who approved refunds of 900, 800 and 700 only after editing them down to 9
    did not approve 900: no rule may allow it (accepted, it would run 850 unasked)."""
    db = str(tmp_path / "edited.db")
    for n in (10, 20, 30, 40):
        _decided(db, issue_refund, {"order_id": n}, approve=True)
    for n in (900, 800, 700):
        _decided(db, issue_refund, {"order_id": n}, edit={"order_id": 9})
    rules = suggest_policies(db)
    assert [r.rule for r in rules] == ["always allow issue_refund when order_id <= 40"]
    assert rules[0].support == 4
    RAN.clear()
    from nbagent.testing import ScriptedProvider, call_tools, reply

    provider = ScriptedProvider([call_tools(("issue_refund", {"order_id": 850})), reply("ok")])
    chat = rules[0].accept(Chat(provider=provider, display=False).with_tools(issue_refund))
    chat.ask("refund 850")
    assert chat.record.calls[-1].status == "awaiting_approval" and RAN["issue_refund"] == 0
    # with exceptions allowed, the edited approvals are what an allow rule would change
    (loose,) = [r for r in suggest_policies(db, min_agreement=0.51) if not r.conditions]
    assert (loose.verdict, loose.support) == ("approved", 4)
    assert [c["decision"] for c in loose.changed] == ["edited"] * 3


def test_a_forks_copied_decisions_count_once(tmp_path: Path) -> None:
    db = str(tmp_path / "forked.db")
    chats = [_decided(db, issue_refund, {"order_id": n}, approve=True) for n in (10, 20)]
    chats[-1].fork()
    from nbagent.store import open_store

    assert nbagent.read_log(open_store(db))["shared"].fillna(False).astype(bool).sum() == 1
    assert list(suggest_policies(db)) == []  # two decisions: below min_support=3
    (rule,) = suggest_policies(db, min_support=2)
    assert rule.support == 2


def test_rules_on_other_values_of_one_argument_are_all_kept(tmp_path: Path) -> None:
    db = str(tmp_path / "regions.db")
    for region, approve in [("eu", True)] * 3 + [("uk", True)] * 3 + [("us", False)] * 3:
        _decided(db, ship, {"region": region}, approve=approve)
    assert sorted(r.rule for r in suggest_policies(db)) == [
        'always allow ship when region == "eu"',
        'always allow ship when region == "uk"',
        'always deny ship when region == "us"',
    ]


def test_a_hosted_calls_two_rows_are_one_decision() -> None:
    """A hosted call approved by a person is two rows of the log (the approval request and
    the provider's call, its decision copied, the same ``decided_at``): one decision."""
    at = [f"2024-01-01T00:00:0{i}" for i in range(3)]
    rows = []
    for i, t in enumerate(at):
        for kind in ("mcp_approval_request", "mcp_call"):
            rows.append({"tool": "lookup", "arguments": {"q": i}, "decision": "approved",
                         "decided_by": "user", "chat_id": "c", "call_id": f"{kind}{i}",
                         "item_type": kind, "decided_at": t, "shared": False})  # fmt: skip
    frame = pd.DataFrame(rows)
    assert list(suggest_policies(frame, min_support=4)) == []
    (rule,) = suggest_policies(frame)
    assert rule.support == 3


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["eu", "uk", "us", "fr"]), st.booleans()), max_size=20))
def test_every_unanimous_value_with_support_gets_its_rule(decided: list[tuple[str, bool]]) -> None:
    """Property: when the tool's decisions are not all one way, every value of an argument
    whose decisions all went one way, at least min_support of them, has its rule."""
    frame = pd.DataFrame(
        {
            "tool": ["ship"] * len(decided),
            "arguments": [{"region": r} for r, _ in decided],
            "decision": ["approved" if a else "denied" for _, a in decided],
            "decided_by": ["user"] * len(decided),
            "chat_id": ["c"] * len(decided),
            "call_id": [f"{i}" for i in range(len(decided))],
        }
    )
    rules = {r.rule for r in suggest_policies(frame)}
    if len({a for _, a in decided}) < 2:
        return
    for region in {r for r, _ in decided}:
        verdicts = {a for r, a in decided if r == region}
        count = sum(1 for r, _ in decided if r == region)
        if len(verdicts) == 1 and count >= 3:
            word = "allow" if verdicts == {True} else "deny"
            assert f'always {word} ship when region == "{region}"' in rules


@tool(requires_approval=True)
def connect(host: str, password: str = "", passcode: int = 0) -> str:
    """Connect.

    Args:
        host: Host.
        password: Password.
        passcode: A numeric code.
    """
    RAN["connect"] += 1
    return "connected"


def test_no_rule_is_proposed_on_a_secret_and_a_written_one_shows_it_as_stars() -> None:
    """A rule on a password would have to hold the password: suggest_policies proposes none
    (not ``password == "..."``, not ``passcode <= 1111``), and a rule a person writes on one
    shows its value as ``***`` wherever it reads as text: its str and repr, the call's
    reason, and the denial the model reads."""
    from nbagent.testing import ScriptedProvider, call_tools, reply

    good, bad = "hunter2-PASSWORD-good", "hunter3-PASSWORD-bad"
    decided = [(good, 1111, "approved")] * 4 + [(bad, 9999, "denied")] * 3
    frame = pd.DataFrame(
        {
            "tool": ["connect"] * 7,
            "arguments": [
                {"host": f"h{i}", "password": pw, "passcode": code}
                for i, (pw, code, _) in enumerate(decided)
            ],
            "decision": [d for _, _, d in decided],
            "decided_by": ["alice"] * 7,
            "chat_id": ["c"] * 7,
            "call_id": [f"{i}" for i in range(7)],
        }
    )
    rules = suggest_policies(frame)
    assert list(rules) == []
    (loose,) = suggest_policies(frame, min_agreement=0.55)  # allow connect, 3 exceptions
    assert (loose.rule, loose.support, len(loose.changed)) == ("always allow connect", 4, 3)
    shown = repr(loose) + repr(loose.changed)  # the decisions it would change, as shown
    assert good not in shown and bad not in shown
    assert loose.changed[0]["arguments"] == {"host": "h4", "password": "***", "passcode": "***"}

    rule = nbagent.Rule.deny("connect", ("password", "==", bad), ("host", "==", "h9"))
    assert str(rule) == 'tool connect, password == ***, host == "h9"'
    assert bad not in repr(rule) and bad not in repr((rule,))
    provider = ScriptedProvider(
        [call_tools(("connect", {"host": "h9", "password": bad})), reply("ok")]
    )
    chat = Chat(provider=provider, display=False).with_tools(connect).add_rule(rule)
    RAN.clear()
    chat.ask("connect")
    call = chat.record.calls[-1]
    assert (call.status, RAN["connect"]) == ("denied", 0)  # the rule still compares the value
    assert call.reason == 'Denied by rule: tool connect, password == ***, host == "h9"'
    seen = [m.content for m in provider.requests[-1].messages if m.role == "tool"]
    assert seen and not any(bad in text for text in seen)
    assert bad not in repr(chat.rules)
