"""Scorecards at their edges: an unknown cost, an empty expected text, a pickled card, a
sweep's per-case table joined to the cases."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pandas as pd
import pytest

import nbagent
from nbagent import Chat, tool
from nbagent.evaluation import (
    answer_contains,
    column,
    cost_under,
    sweep,
    tokens_under,
    tool_called,
)
from nbagent.evaluation._scorecard import scorecard_type
from nbagent.testing import ScriptedProvider, reply


@tool(requires_approval=True)
def issue_refund(order_id: int) -> str:
    """Refund an order.

    Args:
        order_id: The order number.
    """
    return f"refunded order {order_id}"


def _unpriced() -> Chat:  # the scripted model has no price: its cost is unknown
    script = [reply("hi", input_tokens=1000, output_tokens=1000)]
    return Chat(provider=ScriptedProvider(script), display=False)


@pytest.mark.parametrize("bound", [0.0, 0.01, 1000.0])
def test_cost_under_does_not_pass_a_case_whose_cost_is_unknown(bound: float) -> None:
    card = nbagent.evaluate(["x"], _unpriced, [cost_under(bound), tokens_under(10)],
                            progress=False)  # fmt: skip
    cost = card.iloc[0]
    assert pd.isna(cost["passed"]) and pd.isna(cost["score"]) and pd.isna(cost["error"])
    assert cost["detail"].startswith("cost unknown: 1 model request(s) have no price")
    assert "model scripted" in cost["detail"]
    assert card.summary()["not_applicable"].tolist() == [1, 0]
    assert bool(card.iloc[1]["passed"]) is False  # the tokens are known: judged


def test_cost_under_still_judges_a_priced_chat() -> None:
    card = nbagent.evaluate(["hello"], lambda: Chat("demo", display=False),
                            [cost_under(0), cost_under(1)], progress=False)  # fmt: skip
    assert card["passed"].tolist() == [True, True]


@pytest.mark.parametrize("blank", ["", "   ", "\n\t"])
def test_an_empty_expected_text_makes_answer_contains_not_apply(blank: str) -> None:
    answers = ScriptedProvider([reply("Order 41 was delivered.")], repeat_last=True)
    cases = pd.DataFrame({"q": ["Where is order 41?"] * 2, "expected": [blank, "delivered"]})
    card = nbagent.evaluate(cases, lambda: Chat(provider=answers, display=False),
                            [answer_contains(column("expected"))], prompt="q",
                            progress=False)  # fmt: skip
    assert card["passed"].tolist() == [pd.NA, True]
    assert card["detail"].iloc[0] == "column 'expected' is empty in this case"
    with pytest.raises(ValueError, match="in every answer"):
        answer_contains(blank)


def test_a_scorecard_pickles_and_comes_back_a_scorecard(tmp_path: Any) -> None:
    card = nbagent.evaluate(["hello", "bye"], lambda: Chat("demo", display=False),
                            [answer_contains("x"), cost_under(1)], progress=False)  # fmt: skip
    again = pickle.loads(pickle.dumps(card))
    assert type(again) is scorecard_type()
    pd.testing.assert_frame_equal(pd.DataFrame(again), pd.DataFrame(card))
    pd.testing.assert_frame_equal(again.summary(), card.summary())
    assert repr(again) == repr(card)
    card.to_pickle(tmp_path / "card.pkl")
    assert type(pd.read_pickle(tmp_path / "card.pkl")) is scorecard_type()
    failed = card[card["passed"] == False]  # noqa: E712
    assert type(pickle.loads(pickle.dumps(failed))) is scorecard_type()
    assert type(copy.deepcopy(card)) is scorecard_type()


def test_a_sweeps_per_case_table_joins_the_cases() -> None:
    cases = pd.DataFrame({"order_id": [41, 42]}, index=pd.Index([10, 20], name="n"))

    def make() -> Chat:
        return Chat("demo", display=False).with_tools(issue_refund)

    card = sweep(cases, make, [tool_called("issue_refund", status="ok")],
                 prompt="Refund order {order_id}", progress=False)  # fmt: skip
    table = card.per_case()
    assert table.index.tolist() == [10, 20] and table.index.name == "n"
    joined = cases.join(table)
    assert joined["approve issue_refund / called issue_refund [ok]"].tolist() == [True, True]
    assert joined["deny issue_refund / called issue_refund [ok]"].tolist() == [False, False]
    assert joined["order_id"].tolist() == [41, 42]
