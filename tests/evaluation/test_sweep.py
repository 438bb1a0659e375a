"""Decision sweeps: every gated call forked approved, denied and edited, each branch scored.

A denied branch never runs its tool; an approved or edited one runs it exactly once; the
forks' requests are recorded, so a second sweep with replay="auto" sends nothing to the
model (the real OpenAI SDK against the strict fake server); two configurations line up
with nbagent.compare's alignment.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat, DecisionError, ToolResultMessage, tool
from nbagent.evaluation import (
    answer_contains,
    claims_hold,
    compare_scorecards,
    sweep,
    tool_called,
)
from nbagent.providers import OpenAIProvider
from nbagent.testing import FakeLLMServer, FakeToolCall, ScriptedProvider, Turn, call_tools, reply

RAN: Counter[tuple[int, float]] = Counter()


@tool(requires_approval=True)
def issue_refund(order_id: int, amount: float = 0.0) -> str:
    """Refund an order.

    Args:
        order_id: The order.
        amount: Dollars to refund.
    """
    RAN[(order_id, amount)] += 1
    return f"refunded order {order_id} ({amount:g} dollars)"


@tool(requires_approval=True)
def notify(text: str) -> str:
    """Tell the customer."""
    RAN[(-1, 0.0)] += 1
    return "notified"


def make_chat() -> Chat:
    return Chat("demo", display=False).with_tools(issue_refund)


def test_each_gated_call_is_approved_denied_and_edited_and_each_branch_scored() -> None:
    RAN.clear()
    checks = [tool_called("issue_refund", status="ok"), answer_contains("refunded"), claims_hold()]
    card = sweep(
        ["Refund order 42 for 30 dollars", "Refund order 7 for 2 dollars"], make_chat, checks,
        edits={"issue_refund": [{"amount": 5}]}, progress=False,
    )  # fmt: skip
    branches = ["approve issue_refund", "deny issue_refund", "edit issue_refund 1"]
    assert list(dict.fromkeys(card["branch"])) == branches
    assert len(card) == 2 * 3 * 3
    # a denied call never ran; an approved one ran once; the edit ran with its amount
    assert Counter({(42, 30.0): 1, (42, 5.0): 1, (7, 2.0): 1, (7, 5.0): 1}) == RAN
    summary = card.summary().set_index(["branch", "check"])
    assert summary.loc[("deny issue_refund", "called issue_refund [ok]"), "pass_rate"] == 0
    assert summary.loc[("approve issue_refund", "called issue_refund [ok]"), "pass_rate"] == 1
    assert summary.loc[("edit issue_refund 1", "answer contains 'refunded'"), "passed"] == 2
    # every branch is its own chat, its log readable from the card
    assert card["chat_id"].nunique() == 6
    log = nbagent.read_log(card)
    assert sorted(log["decision"].tolist()) == ["approved"] * 4 + ["denied"] * 2


def test_an_edit_the_tool_refuses_stops_the_sweep_before_any_branch_runs() -> None:
    RAN.clear()
    cases = ["Refund order 42 for 30 dollars", "Refund order 7 for 2 dollars"]
    check = [tool_called("issue_refund", status="ok")]
    with pytest.raises(DecisionError) as caught:
        sweep(cases, make_chat, check, progress=False,
              edits={"issue_refund": [{"amount": 5}, {"order_id": "abc"}]})  # fmt: skip
    assert str(caught.value) == (
        "sweep: case '0', branch 'edit issue_refund 2': edited arguments for issue_refund are "
        "invalid: order_id: expected integer, got string ({'order_id': 'abc', 'amount': 30.0}); "
        "no branch ran"
    )
    assert Counter() == RAN  # no approve branch, no first edit ran before the refusal
    # an edit that changes nothing is the approve branch again (no fork, no second run)
    card = sweep(cases[:1], make_chat, check, progress=False,
                 edits={"issue_refund": [{"amount": 30}]})  # fmt: skip
    rows = card.set_index("branch")
    assert rows.loc["edit issue_refund 1", "chat_id"] == rows.loc["approve issue_refund", "chat_id"]
    assert Counter({(42, 30.0): 1}) == RAN


def test_a_sweeps_decisions_teach_nothing_and_leave_nothing_waiting(tmp_path: Path) -> None:
    from nbagent.store import SQLiteStore

    RAN.clear()
    store = SQLiteStore(str(tmp_path / "people.db"))
    for n in (10, 20, 30):  # a person approves three refunds
        chat = Chat("demo", store=store, display=False).with_tools(issue_refund)
        chat.ask(f"Refund order {n}")
        chat.approve(chat.tool_calls[0])
        chat.complete()
    before = nbagent.suggest_policies(store)
    stored = lambda: Chat("demo", store=store, display=False).with_tools(issue_refund)  # noqa: E731
    card = sweep(["Refund order 11"], stored, [tool_called("issue_refund", status="ok")],
                 progress=False)  # fmt: skip
    assert card["passed"].tolist() == [True, False]
    log = nbagent.read_log(store)
    sweep_rows = log[log["arguments"].map(lambda a: a.get("order_id")) == 11]
    assert sweep_rows["decided_by"].tolist() == ["evaluate"] * 3  # the original and two forks
    assert nbagent.suggest_policies(store) == before  # only the person's three decisions count
    assert store.pending_approvals() == []  # no scaffolding waits in an inbox
    original = sweep_rows[sweep_rows["chat_id"].map(lambda c: c not in set(card["chat_id"]))]
    assert original["decision"].tolist() == ["denied"]
    assert original["reason"].tolist()[0].startswith("decision sweep:")
    assert Counter({(10, 0.0): 1, (20, 0.0): 1, (30, 0.0): 1, (11, 0.0): 1}) == RAN


def test_later_gated_calls_in_a_branch_are_decided_by_rest() -> None:
    """Approving the refund makes the model ask to notify (gated too): rest decides it."""
    RAN.clear()

    def answer(request: Any) -> Any:  # the forks share the provider: answer by the request
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        if not results:
            return call_tools(("issue_refund", {"order_id": 1}, "r"))
        if results[-1].name == "issue_refund" and results[-1].status == "ok":
            return call_tools(("notify", {"text": "done"}, "n"))
        return reply("I refunded order 1 and notified you.")

    def scripted() -> Chat:
        provider = ScriptedProvider([answer], repeat_last=True)
        return Chat(provider=provider, display=False).with_tools(issue_refund, notify)

    denied = sweep(["go"], scripted, [claims_hold()], progress=False)
    approve = denied[denied["branch"] == "approve issue_refund"]
    assert approve["passed"].tolist() == [False]  # notify was denied by rest="deny"
    assert "notify was denied" in approve["detail"].tolist()[0]
    assert Counter({(1, 0.0): 1}) == RAN
    RAN.clear()
    approved = sweep(["go"], scripted, [claims_hold()], rest="approve", progress=False)
    assert approved[approved["branch"] == "approve issue_refund"]["passed"].tolist() == [True]
    assert Counter({(1, 0.0): 1, (-1, 0.0): 1}) == RAN
    left = sweep(["go"], scripted, [claims_hold()], rest=None, progress=False)
    row = left[left["branch"] == "approve issue_refund"]
    assert row["status"].tolist() == ["awaiting_approval"] and row["passed"].isna().all()


def test_a_run_that_decided_is_a_branch_as_run_and_the_same_decision_is_not_forked() -> None:
    RAN.clear()
    card = sweep(["Refund order 3"], make_chat, [tool_called("issue_refund", status="ok")],
                 decide="approve", progress=False)  # fmt: skip
    assert card["branch"].tolist() == ["as run", "approve issue_refund", "deny issue_refund"]
    assert card["passed"].tolist() == [True, True, False]
    rows = card.set_index("branch")["chat_id"]
    assert rows["as run"] == rows["approve issue_refund"] != rows["deny issue_refund"]
    assert Counter({(3, 0.0): 1}) == RAN  # approved once, in the run itself
    none = sweep(["What time is it?"], make_chat, [claims_hold()], progress=False)
    assert none["branch"].tolist() == ["no gated call"]


def test_a_second_sweep_is_answered_from_the_recordings(tmp_path: Path) -> None:
    turns = [
        Turn(tool_calls=[FakeToolCall("issue_refund", {"order_id": 9})]),
        Turn(text="I refunded order 9."),
        Turn(text="I refunded order 9."),  # the denied branch's answer: a false claim
    ]
    with FakeLLMServer(turns) as server:
        provider = OpenAIProvider("gpt-4.1-mini", api_key="sk-test", compatible=False,
                                  base_url=server.openai_base_url, max_retries=0)  # fmt: skip

        def recorded() -> Chat:
            return Chat(provider=provider, display=False, replay="auto",
                        recordings=str(tmp_path / "rec")).with_tools(issue_refund)  # fmt: skip

        first = sweep(["Refund order 9"], recorded, [claims_hold()], concurrency=1,
                      progress=False)  # fmt: skip
        assert len(server.requests) == 3
        again = sweep(["Refund order 9"], recorded, [claims_hold()], progress=False)
        assert len(server.requests) == 3  # nothing new asked
    assert first["passed"].tolist() == again["passed"].tolist() == [True, False]
    steps = nbagent.read_log(again, "steps")
    assert steps["replayed"].all()


def test_two_configurations_line_up_with_compares_alignment() -> None:
    cases = ["Refund order 11", "Refund order 12"]
    checks = [tool_called("issue_refund", status="ok")]
    approving = nbagent.evaluate(cases, make_chat, checks, decide="approve", progress=False)
    denying = nbagent.evaluate(cases, make_chat, checks, decide="deny", progress=False)
    diff = compare_scorecards(approving, denying, names=["approve", "deny"])
    assert diff["passed_approve"].tolist() == [True, True]
    assert diff["passed_deny"].tolist() == [False, False]
    assert diff["changed"].tolist() == [True, True]
    assert diff["first_difference"].tolist() == ["step 1: call 1 decision"] * 2
    same = compare_scorecards(approving, approving, names=["x", "y"])
    assert not same["changed"].any() and same["first_difference"].isna().all()
    with pytest.raises(ValueError, match="names must differ"):
        compare_scorecards(approving, denying, names=["a", "a"])


def test_resumed_configurations_are_compared_on_their_stored_chats(tmp_path: Path) -> None:
    RAN.clear()
    cases = ["Refund order 11", "Refund order 12"]
    checks = [tool_called("issue_refund", status="ok")]
    runs = {}
    for attempt in ("first", "resumed"):
        runs[attempt] = [
            nbagent.evaluate(
                cases, make_chat, checks, decide=d, store=str(tmp_path / d), progress=False
            )
            for d in ("approve", "deny")
        ]
    assert Counter({(11, 0.0): 1, (12, 0.0): 1}) == RAN  # the rerun read the chats back
    approving, denying = runs["resumed"]
    diff = compare_scorecards(approving, denying, names=["approve", "deny"])
    assert diff["changed"].tolist() == [True, True]
    assert diff["first_difference"].tolist() == ["step 1: call 1 decision"] * 2
    same = compare_scorecards(approving, runs["first"][0], names=["x", "y"])
    assert not same["changed"].any() and same["first_difference"].isna().all()


def test_a_call_a_deny_rule_decided_is_one_branch_as_run_and_never_runs() -> None:
    """A chat's deny rule decided the refund: the sweep makes no approve branch (a fork
    approving it would run what the rule forbids) and scores the case as it ran."""
    from nbagent import Rule

    RAN.clear()
    no_big = Rule.deny("issue_refund", ("order_id", ">", 10))
    make = lambda: Chat("demo", display=False).with_tools(issue_refund).add_rule(no_big)  # noqa: E731
    card = sweep(["Refund order 42 for 30 dollars", "Refund order 7 for 2 dollars"], make,
                 [tool_called("issue_refund", status="ok")], progress=False)  # fmt: skip
    assert sum(RAN.values()) == 1 and RAN[(7, 2.0)] == 1  # 42 never ran; 7's approve branch did
    rows = {(c, b): p for c, b, p in zip(card["case"], card["branch"], card["passed"], strict=True)}
    assert rows == {
        ("0", "deny issue_refund by rule"): False,
        ("1", "approve issue_refund"): True,
        ("1", "deny issue_refund"): False,
    }
    log = nbagent.read_log(card)
    ruled = log[log["decided_by"] == "rule"]
    assert ruled["status"].tolist() == ["denied"]


def test_a_rest_function_that_raises_is_that_branchs_error_and_the_rest_are_kept() -> None:
    RAN.clear()

    def brain(request: Any) -> Any:
        last = request.messages[-1]
        if getattr(last, "role", None) == "user":
            n = int(last.content.split()[-1])
            return call_tools(("issue_refund", {"order_id": n}), ("notify", {"text": f"t{n}"}))
        return reply("Done.")

    def make() -> Chat:
        provider = ScriptedProvider([brain], repeat_last=True)
        return Chat(provider=provider, display=False).with_tools(issue_refund, notify)

    def rest(call: Any) -> Any:
        if call.arguments.get("text") == "t2":
            raise KeyError("oops")
        return "deny"

    card = sweep(["Refund 1", "Refund 2"], make, [tool_called("issue_refund", status="ok")],
                 rest=rest, progress=False)  # fmt: skip
    approve = card[card["branch"] == "approve issue_refund"].set_index("case")
    assert approve.loc["0", "passed"] == True  # noqa: E712
    assert pd_isna(approve.loc["1", "passed"]) and approve.loc["1", "status"] == "failed"
    assert approve.loc["1", "error"] == "rest= raised KeyError: 'oops'"
    assert RAN[(1, 0.0)] == 1  # what ran is kept and scored
    assert len(card) == 8 and card["error"].notna().sum() == 2  # the 2nd's two branches


def pd_isna(value: Any) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


def test_an_edit_a_deny_rule_matches_stops_the_sweep_before_any_branch_runs() -> None:
    """A rule the edited call would meet is checked with the schema, every edit of every
    case before any branch runs: before, the first case's approve branch refunded, then the
    fork of the edit raised the chat's own error (no case, no branch) and the scorecard was
    lost (a rerun refunded again)."""
    from nbagent import Rule

    RAN.clear()
    no_big = Rule.deny("issue_refund", ("order_id", ">", 100))
    make = lambda: Chat("demo", display=False).with_tools(issue_refund).add_rule(no_big)  # noqa: E731
    cases = ["Refund order 42 for 30 dollars", "Refund order 7 for 2 dollars"]
    check = [tool_called("issue_refund", status="ok")]

    def edits(call: Any) -> list[dict[str, Any]]:  # the second case's edit meets the rule
        return [{"amount": 1}, {"order_id": 500}] if call.arguments["order_id"] == 7 else []

    with pytest.raises(DecisionError) as caught:
        sweep(cases, make, check, edits=edits, progress=False)
    message = str(caught.value)
    assert message.startswith("sweep: case '1', branch 'edit issue_refund 2': issue_refund(")
    assert message.endswith(
        "cannot be approved with these arguments: Denied by rule: tool issue_refund, "
        "order_id > 100 (a call a deny rule matches never runs) "
        "({'order_id': 500, 'amount': 2.0}); no branch ran"
    )
    assert Counter() == RAN  # no branch of either case ran
    card = sweep(cases, make, check, edits=lambda call: [{"order_id": 99}], progress=False)
    assert Counter({(42, 30.0): 1, (99, 30.0): 1, (7, 2.0): 1, (99, 2.0): 1}) == RAN
    assert set(card["branch"]) == {"approve issue_refund", "deny issue_refund",
                                   "edit issue_refund 1"}  # fmt: skip


def test_a_gated_call_answered_at_once_is_not_branched() -> None:
    """A gated call rejected before anyone was asked (arguments the schema refuses) has no
    decision to try otherwise: before, its approve branch's fork raised ValueError
    mid-sweep (the branches before it had run) and the scorecard was lost."""
    RAN.clear()

    def brain(request: Any) -> Any:
        if not any(isinstance(m, ToolResultMessage) for m in request.messages):
            return call_tools(("issue_refund", {"order_id": "abc"}, "bad"),
                              ("issue_refund", {"order_id": 3}, "good"))  # fmt: skip
        return reply("Done.")

    def make() -> Chat:
        return Chat(provider=ScriptedProvider([brain], repeat_last=True),
                    display=False).with_tools(issue_refund)  # fmt: skip

    card = sweep(["go", "again"], make, [tool_called("issue_refund", status="ok")],
                 edits={"issue_refund": [{"amount": 4}]}, progress=False)  # fmt: skip
    assert card["branch"].tolist() == [
        "approve issue_refund", "deny issue_refund", "edit issue_refund 1"
    ] * 2  # fmt: skip
    assert card["passed"].tolist() == [True, False, True] * 2
    assert Counter({(3, 0.0): 2, (3, 4.0): 2}) == RAN
