"""nbagent.evaluate: cases run on nbagent.batch, checks applied, a row per case and check.

The cases run on the offline demo model (and a judge on the real OpenAI SDK against the
strict loopback fake server); a store makes the run resumable, which the rerun proves by
counting how often the tool ran.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import nbagent
from nbagent import Chat, tool
from nbagent.evaluation import (
    Case,
    Check,
    Verdict,
    answer_contains,
    answer_matches,
    answer_satisfies,
    claims_hold,
    column,
    cost_under,
    judged,
    output_validates,
    score,
    steps_under,
    tokens_under,
    tool_called,
    tool_not_called,
    verdict_of,
)
from nbagent.evaluation._checks import check_name, judge_prompt
from nbagent.providers import OpenAIProvider
from nbagent.testing import FakeLLMServer, ScriptedProvider, Turn, call_tools, reply

RAN: list[int] = []


@tool
def order_status(order_id: int) -> str:
    """Look up an order's status.

    Args:
        order_id: The order number.
    """
    RAN.append(order_id)
    return "delivered" if order_id % 2 else "lost in transit"


@tool(requires_approval=True)
def issue_refund(order_id: int) -> str:
    """Refund an order.

    Args:
        order_id: The order number.
    """
    REFUNDED.append(order_id)
    return f"refunded order {order_id}"


REFUNDED: list[int] = []
CASES = pd.DataFrame(
    {
        "order_id": [41, 42, 43],
        "ask": ["Check the status of", "Refund", "Check the status of"],
        "expected": ["delivered", "refunded", "delivered"],
    }
)


def make_chat() -> Chat:
    return Chat("demo", display=False).with_tools(order_status, issue_refund)


def _cell(card: Any, case: str, check: str, col: str = "passed") -> Any:
    rows = card[(card["case"] == case) & (card["check"] == check)]
    assert len(rows) == 1, (case, check, card[["case", "check"]])
    value = rows.iloc[0][col]
    return None if pd.isna(value) else getattr(value, "item", lambda: value)()


def test_a_scorecard_has_one_row_per_case_and_check_with_the_chat_to_open() -> None:
    checks = [
        tool_called("order_status", order_id=column("order_id")),
        tool_not_called("issue_refund"),
        answer_contains(column("expected")),
    ]
    card = nbagent.evaluate(
        CASES, make_chat, checks, prompt="{ask} order {order_id}", decide="deny", progress=False
    )
    assert len(card) == 9
    assert list(card.columns) == [
        "case", "branch", "check", "passed", "score", "detail", "error", "status", "answer",
        "chat_id",
    ]  # fmt: skip
    status = "called order_status(order_id=column('order_id'))"
    assert [_cell(card, k, status) for k in "012"] == [True, False, True]
    assert [_cell(card, k, "not called issue_refund") for k in "012"] == [True, False, True]
    assert _cell(card, "1", "answer contains column('expected')") is False
    assert "missing 'refunded'" in _cell(card, "1", "answer contains column('expected')", "detail")
    # the chat id opens the case's chat: its log says the refund was denied by evaluate
    log = nbagent.read_log(card)
    refund = log[log["tool"] == "issue_refund"].iloc[0]
    assert refund["status"] == "denied" and refund["decided_by"] == "evaluate"
    assert refund["chat_id"] == _cell(card, "1", "not called issue_refund", "chat_id")
    summary = card.summary()
    assert summary.set_index("check").loc[status, "passed"] == 2
    assert summary["pass_rate"].tolist() == pytest.approx([2 / 3, 2 / 3, 2 / 3])


def test_decide_approve_runs_the_gated_call_once_and_none_leaves_it_parked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    approved = nbagent.evaluate(
        ["Refund order 8"], make_chat, [tool_called("issue_refund", status="ok", times=1)],
        decide="approve", progress=False,
    )  # fmt: skip
    assert approved["passed"].tolist() == [True]
    parked = nbagent.evaluate(
        ["Refund order 8"], make_chat, [tool_called("issue_refund"), answer_contains("refund")],
        progress=False,
    )  # fmt: skip
    assert parked["status"].tolist() == ["awaiting_approval"] * 2
    assert parked["passed"].tolist() == [True, False]  # called; no answer yet
    assert parked["detail"].tolist()[1] == "no final answer (awaiting_approval)"
    assert "pass decide= to nbagent.evaluate" in capsys.readouterr().err  # the way out, named
    chosen = nbagent.evaluate(
        ["Refund order 8", "Refund order 9"], make_chat,
        [tool_called("issue_refund", status="ok")],
        decide=lambda call: (call.arguments["order_id"] == 8, "only 8"), progress=False,
    )  # fmt: skip
    assert chosen["passed"].tolist() == [True, False]


def test_argument_matching_values_patterns_predicates_and_edits() -> None:
    provider = ScriptedProvider(
        [call_tools(("lookup", {"sku": "AB-12", "qty": 3, "price": 2.50}, "c1")), reply("done")]
    )

    @tool
    def lookup(sku: str, qty: int, price: float) -> str:
        """Look up stock."""
        return "ok"

    chat = Chat(provider=provider, display=False).with_tools(lookup)
    chat.ask("go")
    case = Case("k", {}, "go", record=chat.record, chat_id=chat.id)
    assert verdict_of(tool_called("lookup", sku="AB-12")(case)).passed is True
    assert verdict_of(tool_called("lookup", price=2.5, qty=3.0)(case)).passed is True
    assert verdict_of(tool_called("lookup", sku=re.compile(r"AB-\d+"))(case)).passed is True
    assert verdict_of(tool_called("lookup", sku=re.compile(r"AB"))(case)).passed is False
    assert verdict_of(tool_called("lookup", qty=lambda q: q > 2)(case)).passed is True
    assert verdict_of(tool_called("lookup", qty=lambda q: q > 5)(case)).passed is False
    assert verdict_of(tool_called("lookup", color="red")(case)).passed is False
    assert verdict_of(tool_called("lookup", times=2)(case)).passed is False
    assert verdict_of(tool_called("lookup", status="denied")(case)).passed is False
    assert verdict_of(tool_not_called("lookup", sku="XX")(case)).passed is True
    assert verdict_of(tool_not_called("lookup")(case)).passed is False


def test_a_predicate_matches_when_it_is_true_and_one_that_raises_is_an_error() -> None:
    import numpy as np

    checks = [
        Check("numpy bool", tool_called("issue_refund", order_id=lambda v: np.int64(v) > 40)),
        Check("re.search", tool_called("issue_refund", order_id=lambda v: re.search("4", str(v)))),
        Check("a count", tool_called("issue_refund", order_id=lambda v: str(v).count("4"))),
        Check("empty match", tool_not_called("issue_refund", order_id=lambda v: [])),
        Check("typo", tool_called("issue_refund", order_id=lambda v: v.bit_lenght() > 1)),
        Check("typo not", tool_not_called("issue_refund", order_id=lambda v: v.bit_lenght() > 1)),
    ]
    card = nbagent.evaluate(["Refund order 42"], make_chat, checks, decide="deny", progress=False)
    rows = card.set_index("check")
    assert rows.loc[["numpy bool", "re.search", "a count", "empty match"], "passed"].all()
    for check in ("typo", "typo not"):  # neither passed nor failed: the predicate is broken
        assert pd.isna(rows.loc[check, "passed"])
        assert rows.loc[check, "error"] == (
            "ValueError: the predicate for order_id= raised AttributeError: 'int' object has no "
            "attribute 'bit_lenght' (on 42)"
        )
    assert card.summary().set_index("check").loc["typo not", "errors"] == 1


def test_an_edited_approval_is_matched_on_the_arguments_it_ran_with() -> None:
    chat = make_chat()
    chat.ask("Refund order 42")
    chat.approve(chat.tool_calls[0], arguments={"order_id": 24})
    chat.complete()
    case = Case("k", {}, record=chat.record)
    assert verdict_of(tool_called("issue_refund", order_id=24)(case)).passed is True
    assert verdict_of(tool_called("issue_refund", order_id=42)(case)).passed is False


def _answered(text: str) -> Case:
    chat = Chat(provider=ScriptedProvider([reply(text)]), display=False)
    chat.ask("q")
    return Case("k", {"want": "Paris"}, "q", record=chat.record)


def test_answer_checks() -> None:
    case = _answered("The capital is Paris, population 2.1 million.")
    assert verdict_of(answer_contains("paris")(case)).passed is True
    assert verdict_of(answer_contains("paris", case_sensitive=True)(case)).passed is False
    assert verdict_of(answer_contains("Rome", "Paris")(case)).passed is False
    assert verdict_of(answer_contains("Rome", "Paris", any_of=True)(case)).passed is True
    assert verdict_of(answer_contains(column("want"))(case)).passed is True
    assert verdict_of(answer_matches(r"\d+\.\d million")(case)).passed is True
    assert verdict_of(answer_matches(r"^Paris")(case)).passed is False
    assert verdict_of(answer_satisfies(lambda a: len(a) < 20)(case)).passed is False
    short = answer_satisfies(lambda a: 1.0 - len(a) / 100, name="brevity")
    assert short.name == "brevity"
    assert verdict_of(short(case)).score == pytest.approx(1 - len(case.answer or "") / 100)


class Refund(BaseModel):
    order_id: int
    approved: bool


def test_output_validates_reads_json_as_a_structured_answer_does() -> None:
    good = _answered('```json\n{"order_id": 4, "approved": true}\n```')
    bad = _answered('{"order_id": "four"}')
    prose = _answered("I refunded it.")
    check = output_validates(Refund)
    assert verdict_of(check(good)).passed is True
    bad_verdict = verdict_of(check(bad))
    assert bad_verdict.passed is False and "order_id" in bad_verdict.detail
    assert verdict_of(check(prose)).passed is False
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert verdict_of(output_validates(schema)(_answered('{"n": 3}'))).passed is True
    assert verdict_of(output_validates(schema)(_answered('{"n": "3"}'))).passed is False


def test_spending_bounds() -> None:
    card = nbagent.evaluate(
        ["Check the status of order 41"], make_chat,
        [steps_under(3), steps_under(2), tokens_under(10_000), tokens_under(1), cost_under(0)],
        progress=False,
    )  # fmt: skip
    assert card["passed"].tolist() == [True, False, True, False, True]  # the demo costs $0
    # steps as max_steps counts them: the request, the tool round, the answer
    assert card["detail"].tolist()[1] == "3 (bound 2)"
    with pytest.raises(ValueError, match="bound >= 0"):
        steps_under(-1)


def test_custom_checks_their_return_values_and_errors() -> None:
    def polite(case: Case) -> bool:
        return "please" in (case.answer or "")

    def graded(case: Case) -> tuple[float, str]:
        return 0.25, "a quarter"

    def broken(case: Case) -> bool:
        raise RuntimeError("bad check\nsecond line")

    def skipped(case: Case) -> None:
        return None

    def wrong(case: Case) -> str:
        return "yes"

    card = nbagent.evaluate(
        ["Check the status of order 41"], make_chat,
        [polite, graded, broken, skipped, wrong, Check("named", lambda c: Verdict(True, 0.9))],
        progress=False,
    )  # fmt: skip
    rows = card.set_index("check")
    assert not rows.loc["polite", "passed"]
    assert not rows.loc["graded", "passed"] and rows.loc["graded", "score"] == 0.25
    assert rows.loc["graded", "detail"] == "a quarter"
    assert pd.isna(rows.loc["broken", "passed"])
    assert rows.loc["broken", "error"] == "RuntimeError: bad check"
    assert pd.isna(rows.loc["skipped", "passed"]) and pd.isna(rows.loc["skipped", "error"])
    assert rows.loc["wrong", "error"].startswith("TypeError: a check returns")
    assert rows.loc["named", "score"] == 0.9
    summary = card.summary().set_index("check")
    assert summary.loc["broken", "errors"] == 1 and summary.loc["skipped", "not_applicable"] == 1
    assert len(card.failures()) == 4  # polite and graded failed, broken and wrong raised
    with pytest.raises(ValueError, match="two checks are named 'polite'"):
        nbagent.evaluate(["x"], make_chat, [polite, polite], progress=False)
    with pytest.raises(TypeError, match="a check is a function"):
        nbagent.evaluate(["x"], make_chat, ["polite"], progress=False)


def test_a_verdict_no_scorecard_can_hold_is_that_checks_error_and_the_rest_is_kept() -> None:
    import numpy as np

    RAN.clear()
    checks = [
        tool_called("order_status"),
        Check("word", lambda case: Verdict("no", None, "x")),  # type: ignore[arg-type]
        Check("seven", lambda case: Verdict(True, 7.0, "x")),
        Check("big number", lambda case: 7.0),
        Check("numpy one", lambda case: np.int64(1)),
        Check("numpy half", lambda case: (np.float64(0.5), "half")),
        Check("numpy verdict", lambda case: Verdict(np.bool_(True), np.float32(1))),  # type: ignore[arg-type]
    ]
    card = nbagent.evaluate(
        ["Status of order 41", "Status of order 43"], make_chat, checks, progress=False
    )
    assert sorted(RAN) == [41, 43] and len(card) == 14  # every case, every check, kept
    rows = card[card["case"] == "0"].set_index("check")
    assert rows.loc["called order_status", "passed"]
    assert rows.loc["word", "error"].startswith("TypeError: a Verdict's passed is True, False")
    assert rows.loc["seven", "error"] == "ValueError: a Verdict's score must be in [0, 1], got 7.0"
    assert rows.loc["big number", "error"].startswith("ValueError: a check's score must be in")
    for check in ("word", "seven", "big number"):
        assert pd.isna(rows.loc[check, "passed"]) and pd.isna(rows.loc[check, "score"])
    assert card.summary().set_index("check").loc["seven", "errors"] == 2
    # numpy's numbers and bools are Python's: np.int64(1) is 1
    assert verdict_of(np.int64(1)) == verdict_of(1) == Verdict(True, 1.0)
    assert verdict_of(np.bool_(False)) == verdict_of(False)
    assert (rows.loc["numpy one", "passed"], rows.loc["numpy one", "score"]) == (True, 1.0)
    assert rows.loc["numpy half", "score"] == 0.5 and rows.loc["numpy half", "detail"] == "half"
    assert type(Verdict(np.bool_(True), np.float32(1)).passed) is bool
    assert rows.loc["numpy verdict", "passed"] and pd.isna(rows.loc["numpy verdict", "error"])


def test_a_store_makes_the_evaluation_resumable_and_rescoring_free(tmp_path: Any) -> None:
    RAN.clear()
    db = str(tmp_path / "eval.db")
    checks = [tool_called("order_status"), answer_contains("delivered")]
    first = nbagent.evaluate(
        CASES, make_chat, checks, prompt="Check the status of order {order_id}", store=db,
        progress=False,
    )  # fmt: skip
    assert sorted(RAN) == [41, 42, 43]
    again = nbagent.evaluate(
        CASES, make_chat, checks, prompt="Check the status of order {order_id}", store=db,
        progress=False,
    )  # fmt: skip
    assert sorted(RAN) == [41, 42, 43]  # read from the store, not rerun
    pd.testing.assert_frame_equal(
        pd.DataFrame(first).drop(columns=["detail"]), pd.DataFrame(again).drop(columns=["detail"])
    )
    rescored = score(nbagent.batch_results(again), [answer_contains("lost")])
    assert rescored["passed"].tolist() == [False, True, False]
    assert sorted(RAN) == [41, 42, 43]


def test_a_model_graded_check_with_a_chat_on_the_real_sdk_as_the_judge() -> None:
    turns = [
        Turn(text='{"passed": true, "reason": "It says the order was delivered."}'),
        Turn(text='{"passed": false, "reason": "It never says what happened."}'),
    ]
    with FakeLLMServer(turns) as server:
        provider = OpenAIProvider(
            "gpt-4.1-mini", api_key="sk-test-SECRET", base_url=server.openai_base_url,
            compatible=False, max_retries=0,
        )  # fmt: skip
        judge = Chat(provider=provider, system="You are a strict grader.", display=False)
        card = nbagent.evaluate(
            ["Check the status of order 41", "Check the status of order 42"], make_chat,
            [judged("the answer says what happened to the order", judge)], progress=False,
        )  # fmt: skip
        bodies = [r.body for r in server.requests]
    assert card["passed"].tolist() == [True, False]
    assert "never says" in card["detail"].tolist()[1]
    assert len(bodies) == 2 and not judge.transcript  # each case in a fork of the judge
    sent = bodies[0]["messages"]
    assert sent[0]["content"] == "You are a strict grader."
    assert "Check the status of order 41" in sent[1]["content"]
    assert "order_status" in sent[1]["content"] and ": ok" in sent[1]["content"]
    assert bodies[0]["response_format"]["json_schema"]["strict"] is True


@tool(requires_approval=True)
def connect(host: str, password: str, api_key: str = "") -> str:
    """Connect to a host.

    Args:
        host: Host.
        password: The password.
        api_key: A key.
    """
    return f"connected to {host}"


def _boom(value: Any) -> bool:
    raise ValueError("no")


def test_a_judge_reads_a_secret_argument_as_stars() -> None:
    """The judge is another model, maybe another provider's: a call's password or key is
    not sent to it (nor shown in a check's detail); the rest of the call is."""
    secrets = ["hunter2-PASSWORD-aaa", "plainkeyvalue1"]
    args = {"host": "db0", "password": secrets[0], "api_key": secrets[1]}
    script = [call_tools(("connect", args)), reply("Done, I connected.")]

    def make() -> Chat:
        return Chat(provider=ScriptedProvider(script), display=False).with_tools(connect)

    verdict = reply('{"passed": true, "reason": "fine"}')
    judge_provider = ScriptedProvider([verdict], repeat_last=True)
    judge = Chat(provider=judge_provider, display=False)
    card = nbagent.evaluate(
        ["Connect db0"], make,
        [judged("polite", judge), claims_hold(judge=judge), tool_called("connect", host="db1"),
         tool_called("connect", password=secrets[0]), tool_called("connect", password=_boom)],
        decide="approve", progress=False,
    )  # fmt: skip
    assert card["passed"].tolist()[:4] == [True, True, False, True]
    assert card["check"].iloc[3] == "called connect(password='***')"
    assert "(on '***')" in card["error"].iloc[4]
    sent = [
        m.content for r in judge_provider.requests for m in r.messages
        if isinstance(m.content, str)
    ]  # fmt: skip
    assert len([t for t in sent if "connect(" in t]) == 2
    shown = "\n".join(sent) + card.to_csv() + card._repr_html_()
    assert not any(s in shown for s in secrets)
    assert '- connect({"host": "db0", "password": "***", "api_key": "***"}): ok' in shown
    assert '"host": "db0"' in card["detail"].iloc[2]


def test_a_judge_reads_a_secret_in_the_prompt_and_the_answer_as_stars() -> None:
    """The user's prompt and the final answer quoting a call's password, or any text shaped
    like a key, reach the judge masked as the ledger is; the password is masked as a whole
    token (a word holding it, or another number, stays)."""
    password, key = "hunter2-Zq9", "sk-proj-abcdefghijklmnopqrstuvwxyz012345"
    prompt = f"connect to db0 with password {password} and key {key}, not hunter2-Zq9x"
    args = {"host": "db0", "password": password, "api_key": key}
    script = [
        call_tools(("connect", args)),
        reply(f'Connected to db0 using {password} / {key} ("{password}").'),
    ]

    def make() -> Chat:
        return Chat(provider=ScriptedProvider(script), display=False).with_tools(connect)

    verdict = reply('{"passed": true, "reason": "fine"}')
    judge_provider = ScriptedProvider([verdict], repeat_last=True)
    judge = Chat(provider=judge_provider, display=False)
    card = nbagent.evaluate(
        [prompt], make, [judged("polite", judge), claims_hold(judge=judge)],
        decide="approve", progress=False,
    )  # fmt: skip
    assert card["passed"].tolist() == [True, True]
    sent = [
        m.content for r in judge_provider.requests for m in r.messages
        if isinstance(m.content, str) and "The user asked" in m.content
    ]  # fmt: skip
    assert len(sent) == 2
    for text in sent:
        assert password not in text.replace("hunter2-Zq9x", "") and key not in text
        assert (
            "The user asked:\nconnect to db0 with password *** and key ***, not hunter2-Zq9x"
            in text
        )
        assert 'Connected to db0 using *** / *** ("***").' in text


@tool
def log_in(credentials: dict[str, str], password: str, passcode: int) -> str:
    """Log in.

    Args:
        credentials: Who.
        password: The password.
        passcode: A code.
    """
    return "ok"


def test_a_judge_reads_an_escaped_or_nested_secret_and_a_pin_as_stars() -> None:
    """A password quoted as repr or JSON escape it, a value inside ``credentials``, a
    numeric passcode: each is masked where the prompt or the answer names it as a word."""
    vault = "C:\\vault\\hunter2"
    args = {"credentials": {"user": "svc-admin"}, "password": vault, "passcode": 8642}
    answer = f'Logged in as svc-admin with "{json.dumps(vault)[1:-1]}" and 8642.'
    script = [call_tools(("log_in", args)), reply(answer)]
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(log_in)
    prompt = f"log in as svc-admin with {vault!r} and code 8642, not 86420"
    chat.ask(prompt)
    case = Case(key="0", row={}, prompt=prompt, chat_id=chat.id, record=chat.record, chat=chat)
    text = judge_prompt("polite", case)
    assert "The user asked:\nlog in as *** with '***' and code ***, not 86420" in text
    assert 'answer:\nLogged in as *** with "***" and ***.' in text
    assert "hunter2" not in text and "8642," not in text


def test_a_judge_that_gives_no_verdict_is_an_error_of_that_check() -> None:
    judge = lambda: Chat("demo", display=False)  # noqa: E731 (the demo fills the schema)
    with FakeLLMServer([Turn(text="no idea"), Turn(text="still no idea")]) as server:
        provider = OpenAIProvider("llama3", base_url=server.openai_base_url, max_retries=0)
        bad = judged("x", lambda: Chat(provider=provider, display=False))
        case = _answered("hello")
        card = score([case], [bad, judged("y", judge)])
    assert card["error"].tolist()[0].startswith("OutputValidationError")
    assert card["passed"].notna().tolist()[1]
    with pytest.raises(TypeError, match="judge= takes a chat"):
        judged("x", "gpt-4.1")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from([True, False, None, 0.3, 0.8, "boom"]), min_size=1, max_size=4),
        min_size=1,
        max_size=6,
    )
)
def test_the_summary_accounts_for_every_row(table: list[list[Any]]) -> None:
    """Property: per check, passed + failed + not applicable + errors == cases, and the
    pass rate is passed over the cases the check applied to."""
    width = max(len(r) for r in table)
    checks = []
    for j in range(width):

        def fn(case: Case, j: int = j) -> Any:
            row = table[int(case.key)]
            value = row[j] if j < len(row) else None
            if value == "boom":
                raise ValueError("boom")
            return value

        checks.append(Check(f"c{j}", fn))
    cases = [Case(str(i), {}) for i in range(len(table))]
    card = score(cases, checks)
    summary = card.summary().set_index("check")
    for j in range(width):
        s = summary.loc[f"c{j}"]
        assert s["passed"] + s["failed"] + s["not_applicable"] + s["errors"] == s["cases"]
        assert s["cases"] == len(table)
        values = [r[j] if j < len(r) else None for r in table]
        passed = sum(1 for v in values if v is True or v == 0.8)
        failed = sum(1 for v in values if v is False or v == 0.3)
        assert (s["passed"], s["failed"]) == (passed, failed)
        if passed + failed:
            assert s["pass_rate"] == pytest.approx(passed / (passed + failed))


def test_the_display_the_plot_and_a_filtered_card() -> None:
    card = nbagent.evaluate(
        ["Check the status of order 41", "Check the status of order <b>2</b>"], make_chat,
        [answer_contains("delivered"), tool_called("order_status")], progress=False,
    )  # fmt: skip
    html = card._repr_html_()
    assert "2 case(s) × 2 check(s): 3 of 4 passed (75%)" in html
    assert "<b>2</b>" not in html  # the answer is escaped
    assert repr(card).startswith("2 case(s) × 2 check(s)")
    failed = card[card["passed"] == False]  # noqa: E712
    assert len(failed) == 1 and failed.summary()["failed"].tolist() == [1]
    pytest.importorskip("matplotlib")
    fig = card.plot()
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [
        "answer contains 'delivered'", "called order_status",
    ]  # fmt: skip


def test_no_check_says_the_cases_ran_and_how_to_score_them() -> None:
    """Before: a run with no check read "0 case(s) × 0 check(s)" though its cases ran."""
    card = nbagent.evaluate(
        ["Check the status of order 41", "Check the status of order 42"], make_chat, [],
        progress=False,
    )  # fmt: skip
    assert len(card) == 0
    assert repr(card).startswith("2 case(s) ran, no check scored them")
    assert "2 case(s) ran, no check scored them" in card._repr_html_()
    later = score(nbagent.batch_results(card), [tool_called("order_status")])
    assert later["passed"].tolist() == [True, True] and repr(later).startswith("2 case(s) × 1")
    none_failed = later[later["passed"] == False]  # noqa: E712  (empty, and checks were given)
    assert repr(none_failed).startswith("0 case(s) × 1 check(s)")


def test_evaluate_async_is_the_same_evaluation_awaited() -> None:
    import asyncio

    async def run() -> Any:
        return await nbagent.evaluate_async(
            CASES, make_chat, [tool_called("order_status"), answer_contains(column("expected"))],
            prompt="Check the status of order {order_id}", progress=False,
        )  # fmt: skip

    card = asyncio.run(run())
    assert card["passed"].tolist() == [True, True, True, False, True, True]
    assert card.summary()["passed"].tolist() == [3, 2]
    assert len(nbagent.read_log(card)) == 3


def test_a_factory_gets_the_row_by_the_batchs_one_rule() -> None:
    from nbagent.evaluation import sweep

    seen: list[Any] = []

    def settings(model: str = "demo") -> Chat:  # a default with another name: a setting
        seen.append(model)
        return Chat(model, display=False).with_tools(order_status, issue_refund)

    def by_row(row: Any = None) -> Chat:  # named row: the row
        seen.append(row)
        return make_chat()

    checks, ask = [tool_called("order_status")], ["Status of order 41"]
    for run in (
        lambda make: nbagent.batch(ask, make, progress=False),
        lambda make: nbagent.evaluate(ask, make, checks, progress=False),
        lambda make: nbagent.evaluate(ask, make, checks, decide="deny", progress=False),
        lambda make: sweep(ask, make, checks, progress=False),
    ):
        seen.clear()
        assert run(settings)["status"].tolist() == ["done"]
        assert seen == ["demo"]
        seen.clear()
        run(by_row)
        assert seen == ["Status of order 41"]
    with pytest.raises(TypeError, match="takes 2 required arguments"):
        nbagent.evaluate(["x"], lambda a, b: make_chat(), checks, progress=False)


def test_a_case_changed_under_the_same_name_is_not_scored_against_its_old_chat(
    tmp_path: Any,
) -> None:
    db = str(tmp_path / "named.db")
    first = nbagent.evaluate(["Status of order 41"], make_chat, [answer_contains("delivered")],
                             store=db, name="ev", progress=False)  # fmt: skip
    assert first["passed"].tolist() == [True]
    changed = nbagent.evaluate(["Status of order 42"], make_chat, [answer_contains("delivered")],
                               store=db, name="ev", progress=False)  # fmt: skip
    row = changed.iloc[0]
    assert (row["status"], row["passed"], row["chat_id"]) == ("failed", False, pd.NA)
    assert "was asked 'Status of order 41', not 'Status of order 42'" in row["detail"]


def test_decide_on_a_rerun_decides_the_calls_left_waiting_each_run_once(tmp_path: Any) -> None:
    REFUNDED.clear()
    db = str(tmp_path / "parked.db")
    cases, checks = (
        ["Refund order 42", "Refund order 43"],
        [tool_called("issue_refund", status="ok")],
    )
    parked = nbagent.evaluate(cases, make_chat, checks, store=db, progress=False)
    assert parked["status"].tolist() == ["awaiting_approval"] * 2 and REFUNDED == []
    only_42 = nbagent.evaluate(
        cases, make_chat, checks, store=db, progress=False,
        decide=lambda call: "approve" if call.arguments["order_id"] == 42 else None,
    )  # fmt: skip
    assert only_42["status"].tolist() == ["done", "awaiting_approval"] and REFUNDED == [42]
    approved = nbagent.evaluate(cases, make_chat, checks, store=db, decide="approve",
                                progress=False)  # fmt: skip
    assert approved["passed"].tolist() == [True, True]
    again = nbagent.evaluate(cases, make_chat, checks, store=db, decide="deny", progress=False)
    assert again["passed"].tolist() == [True, True]  # done: read back, decided no more
    assert sorted(REFUNDED) == [42, 43]  # each approved call ran exactly once
    log = nbagent.read_log(again)
    assert log["decided_by"].tolist() == ["evaluate", "evaluate"]


def test_the_documented_join_lines_each_case_up_with_its_verdicts() -> None:
    cases = CASES.set_axis([10, 2, 5])  # "10" sorts before "2" as text: the order is kept
    checks = [tool_called("order_status", order_id=column("order_id")),
              answer_contains(column("expected"))]  # fmt: skip
    card = nbagent.evaluate(cases, make_chat, checks, prompt="{ask} order {order_id}",
                            decide="deny", progress=False)  # fmt: skip
    joined = cases.join(card.per_case())
    assert joined.columns.tolist() == [*cases.columns, *(check_name(c) for c in checks)]
    called, answered = (joined[check_name(c)].tolist() for c in checks)
    assert (called, answered) == ([True, False, True], [True, False, True])
    assert cases.join(card.per_case("detail")).loc[2, check_name(checks[1])] == "missing 'refunded'"
    listed = nbagent.evaluate(["Check the status of order 41"], make_chat, checks[:1],
                              progress=False)  # fmt: skip
    assert listed.per_case().index.tolist() == [0]  # a list's positions


def test_a_case_that_never_ran_fails_every_check() -> None:
    asked: list[str] = []

    def custom(case: Case) -> bool:
        asked.append(case.key)
        return True

    def make(row: Any) -> Chat:
        if row["order_id"] == 42:
            raise RuntimeError("misconfigured")
        return make_chat()

    checks = [tool_not_called("issue_refund"), steps_under(3), tokens_under(10**6),
              cost_under(1.0), claims_hold(), tool_called("order_status"), custom]  # fmt: skip
    cases = pd.DataFrame({"order_id": [41, 42, None]})
    card = nbagent.evaluate(cases, make, checks, prompt="Check the status of order {order_id}",
                            progress=False)  # fmt: skip
    broken = card[card["case"] != "0"]
    assert broken["passed"].tolist() == [False] * 14 and broken["score"].tolist() == [0.0] * 14
    assert set(broken["detail"]) == {
        "the case did not run (make_chat raised RuntimeError: misconfigured)",
        "the case did not run (the prompt template needs 'order_id', empty in this row)",
    }
    assert broken["error"].isna().all() and asked == ["0"]  # not asked of a case that never ran
    assert card[card["case"] == "0"]["passed"].all()
    assert card.summary()["pass_rate"].tolist() == pytest.approx([1 / 3] * 7)


def test_an_empty_cell_a_check_reads_makes_it_not_apply_never_matches_none() -> None:
    import numpy as np

    answers = ScriptedProvider(
        [reply("None of your orders are late (order 41).")], repeat_last=True
    )
    cases = pd.DataFrame({"q": ["Any late orders?"] * 4,
                          "expected": [np.nan, None, pd.NA, "late"]})  # fmt: skip
    card = nbagent.evaluate(cases, lambda: Chat(provider=answers, display=False),
                            [answer_contains(column("expected"))], prompt="q",
                            progress=False)  # fmt: skip
    assert card["passed"].tolist()[:3] == [pd.NA] * 3 and card["passed"].tolist()[3] is True
    assert card["detail"].tolist()[:3] == ["column 'expected' is empty in this case"] * 3
    assert card["error"].isna().all()
    assert card.summary().loc[0, "not_applicable"] == 3
    hand_made = Case("k", {"expected": float("nan")}, record=_answered("None here").record)
    assert score([hand_made], [answer_contains(column("expected"))])["passed"].isna().all()


def test_a_decide_function_that_raises_is_the_cases_error_and_nothing_runs() -> None:
    REFUNDED.clear()

    def decide(call: Any) -> str:
        return "approve" if call.arguments["amount"] < 50 else "deny"  # no such argument

    card = nbagent.evaluate(
        ["Refund order 1", "Refund order 2"], make_chat,
        [tool_called("issue_refund", status="ok"), tool_not_called("issue_refund")],
        decide=decide, progress=False,
    )  # fmt: skip
    assert REFUNDED == []  # the calls wait: nothing was decided, nothing ran
    assert card["error"].tolist() == ["decide= raised KeyError: 'amount'"] * 4
    assert card["passed"].isna().all() and card["status"].tolist() == ["failed"] * 4
    assert "4 check error(s)" in repr(card)
    # rescoring the batch reads the same errors
    again = score(nbagent.batch_results(card), [tool_called("issue_refund")])
    assert again["error"].tolist() == ["decide= raised KeyError: 'amount'"] * 2


def test_numpy_bounds_count_and_a_text_column_matches_a_number_argument() -> None:
    import numpy as np

    assert tokens_under(np.int64(100)).name == "tokens <= 100"
    assert steps_under(np.int64(3)).name == "steps <= 3"
    assert cost_under(np.float32(0.5)).name == "cost <= $0.5000"
    for bad in (True, -1, float("nan"), "3"):
        with pytest.raises(ValueError, match="bound >= 0"):
            steps_under(bad)  # type: ignore[arg-type]
    cases = pd.DataFrame({"order_id": ["41", "43"], "other": ["40", "40"]})  # read as text
    card = nbagent.evaluate(
        cases, make_chat,
        [tool_called("order_status", order_id=column("order_id")),
         Check("other", tool_called("order_status", order_id=column("other")))],
        prompt="Check the status of order {order_id}", progress=False,
    )  # fmt: skip
    assert card["passed"].tolist() == [True, False, True, False]
    detail = card["detail"].tolist()[1]  # what was expected here, and what each call had
    assert "(here order_id='40')" in detail and 'order_status[ok]({"order_id": 41})' in detail


def test_checks_given_as_text_are_refused_and_an_empty_run_counts_its_checks() -> None:
    with pytest.raises(TypeError, match="got the text 'answer_contains'"):
        nbagent.evaluate(["x"], make_chat, "answer_contains", progress=False)
    empty = nbagent.evaluate([], make_chat, [tool_called("order_status"), answer_contains("x")],
                             progress=False)  # fmt: skip
    assert repr(empty).startswith("0 case(s) × 2 check(s)")
