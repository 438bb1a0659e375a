"""What a scorecard says when a check, a judge or ``decide=`` fails.

A false claim the rules found fails its case whatever a judge does; the text of whatever
raised (a custom check, ``answer_satisfies``' function, a ``tool_called`` predicate,
``decide=``) reaches the scorecard (its ``error`` and ``detail`` columns, its HTML) with
keys, URL credentials and the chat's provider's own secret masked; the "await approval"
line does not tell a user who passed ``decide=`` to pass it.
"""

from __future__ import annotations

from typing import Any

import pytest

import nbagent
from nbagent import Chat, tool
from nbagent.evaluation import (
    Case,
    Check,
    Verdict,
    answer_satisfies,
    claims_hold,
    score,
    tool_called,
)
from nbagent.providers import OpenAIProvider
from nbagent.testing import ScriptedProvider, call_tools, reply

KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
ODD_KEY = "Zq7Lmn0pQrStUv8WxYzAbCd"  # a provider key of no known shape: masked as the chat's


@tool(requires_approval=True)
def issue_refund(order_id: int) -> str:
    """Refund an order.

    Args:
        order_id: The order number.
    """
    return f"refunded {order_id}"


@tool
def lookup(x: int) -> str:
    """Look something up.

    Args:
        x: What.
    """
    return "found"


def _claiming_chat() -> Chat:
    script = [call_tools(("issue_refund", {"order_id": 42})), reply("I have refunded order 42.")]
    return Chat(provider=ScriptedProvider(script), display=False).with_tools(issue_refund)


def _broken_judge() -> Chat:
    return Chat(provider=ScriptedProvider([ConnectionError("judge endpoint down")]), display=False)


def _prose_judge() -> Chat:
    provider = ScriptedProvider([reply("yes it is fine")], repeat_last=True)
    return Chat(provider=provider, display=False)


@pytest.mark.parametrize("judge", [_broken_judge, _prose_judge], ids=["raises", "not json"])
def test_a_false_claim_the_rules_found_fails_whatever_the_judge_does(judge: Any) -> None:
    card = nbagent.evaluate(
        ["Refund order 42"], _claiming_chat, [claims_hold(judge=judge)], decide="deny",
        progress=False,
    )  # fmt: skip
    row = card.iloc[0]
    assert row["passed"] is False or bool(row["passed"]) is False
    assert not bool(card["passed"].isna().iloc[0])
    assert pd_na(row["error"])
    assert "issue_refund was denied" in row["detail"]
    assert "the judge failed" in row["detail"]


def test_a_judge_that_fails_when_the_rules_found_nothing_is_the_checks_error() -> None:
    script = [call_tools(("issue_refund", {"order_id": 42})), reply("I could not refund it.")]

    def make() -> Chat:
        return Chat(provider=ScriptedProvider(script), display=False).with_tools(issue_refund)

    card = nbagent.evaluate(
        ["Refund order 42"], make, [claims_hold(judge=_broken_judge)], decide="deny",
        progress=False,
    )  # fmt: skip
    assert bool(card["passed"].isna().iloc[0])
    assert "judge endpoint down" in card["error"].iloc[0]


def pd_na(value: Any) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


def _tool_chat() -> Chat:
    script = [call_tools(("lookup", {"x": 1})), reply("ok")]
    return Chat(provider=ScriptedProvider(script), display=False).with_tools(lookup)


def _shown(card: Any) -> str:
    return "\n".join(
        [str(v) for v in card["error"]]
        + [str(v) for v in card["detail"]]
        + [card._repr_html_(), repr(card)]
    )


def test_a_checks_error_text_reaches_the_scorecard_with_its_key_masked() -> None:
    def custom(case: Case) -> bool:
        raise RuntimeError(f"POST https://grader.example.com/v1/score?api_key={KEY} returned 401")

    def fn(answer: str) -> bool:
        raise ValueError(f"Authorization: Bearer {KEY} rejected")

    def predicate(value: Any) -> bool:
        raise KeyError(KEY)

    def detail(case: Case) -> Verdict:
        return Verdict(True, 1.0, f"read postgresql://me:hunter2pass@db/x with {KEY}")

    card = nbagent.evaluate(
        ["x"],
        _tool_chat,
        [custom, answer_satisfies(fn, name="fn"), tool_called("lookup", x=predicate), detail],
        progress=False,
    )
    errors = card["error"].tolist()
    assert all(isinstance(e, str) and e for e in errors[:3]), errors  # still said, masked
    assert "returned 401" in errors[0] and "rejected" in errors[1]
    shown = _shown(card)
    assert KEY not in shown and KEY[8:] not in shown
    assert "hunter2pass" not in shown


def test_a_checks_error_is_scrubbed_of_the_chats_provider_key_of_any_shape() -> None:
    provider = OpenAIProvider("gpt-4.1-mini", api_key=ODD_KEY, base_url="http://127.0.0.1:9")
    chat = Chat(provider=provider, display=False)

    def custom(case: Case) -> Verdict:
        raise RuntimeError(f"the grader refused key {ODD_KEY}")

    def says(case: Case) -> Verdict:
        return Verdict(False, 0.0, f"used {ODD_KEY}")

    card = score([Case(key="0", row={}, chat=chat)], [custom, says])
    assert "the grader refused key ***" in card["error"].iloc[0]
    assert ODD_KEY not in _shown(card)


def _decide_raising(call: Any) -> str:
    raise PermissionError(f"policy https://policy.example.com/check?token={KEY} said 403")


def test_what_decide_raised_reaches_the_scorecard_masked_and_the_notice_says_it_was_decide(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def make() -> Chat:
        return Chat("demo", display=False).with_tools(issue_refund)

    card = nbagent.evaluate(
        ["Refund order 4"], make, [tool_called("issue_refund")], decide=_decide_raising,
        progress=False,
    )  # fmt: skip
    error = card["error"].iloc[0]
    assert error.startswith("decide= raised PermissionError") and "said 403" in error
    assert KEY not in _shown(card) and KEY[8:] not in _shown(card)
    err = capsys.readouterr().err
    notices = [line for line in err.splitlines() if "await approval" in line]
    assert notices, err
    assert not any("pass decide=" in n for n in notices), notices
    assert any("decide= left them undecided" in n for n in notices), notices


class _ApiError(Exception):
    """An SDK error whose ``__str__`` reads a field it lacks: ``str()`` of it raises."""

    def __init__(self, response: Any = None) -> None:
        self.response = response

    def __str__(self) -> str:
        return self.response["message"]  # type: ignore[no-any-return]


def _unreadable(*args: Any) -> Any:
    raise _ApiError()


def test_an_exception_whose_text_cannot_be_read_is_its_rows_error_not_the_evaluations() -> None:
    """Every case already ran (and was paid for) when the checks run: an exception whose
    ``str()`` raises, from a check, a predicate, ``answer_satisfies``, a judge, ``decide=``
    or the factory, is that row's error (its type, and that its message could not be read),
    not an exception losing the whole scorecard."""
    made: list[int] = []

    def make() -> Chat:
        made.append(1)
        if len(made) == 2:
            raise _ApiError()
        return _claiming_chat()

    unread = "(its message could not be read: TypeError)"
    card = nbagent.evaluate(
        ["Refund order 42", "Refund order 43"],
        make,
        [
            Check("custom", _unreadable),
            tool_called("issue_refund", order_id=_unreadable),
            answer_satisfies(_unreadable, name="fn"),
            claims_hold(judge=_unreadable),
        ],
        decide="deny",
        progress=False,
    )
    ran, broken = card.iloc[:4], card.iloc[4:]
    assert ran["error"].tolist()[:3] == [
        f"_ApiError: {unread}",
        f"ValueError: the predicate for order_id= raised _ApiError: {unread} (on 42)",
        f"_ApiError: {unread}",
    ]
    assert f"the judge failed (_ApiError: {unread})" in ran["detail"].iloc[3]
    assert all(f"make_chat raised _ApiError: {unread}" in d for d in broken["detail"])

    decided = nbagent.evaluate(
        ["Refund order 42"], _claiming_chat, [claims_hold()], decide=_unreadable, progress=False
    )
    assert decided["error"].iloc[0] == f"decide= raised _ApiError: {unread}"
