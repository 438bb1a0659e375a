"""The per-turn cost recipe of docs/costs-and-budgets.md gives NA, not a smaller number, when
a request of the turn is unpriced (as ``chat.cost_usd`` is ``None``): the page used to give
``...sum()``, which skips NA and understated the bill. Also the budget values the page lists
as accepted and refused."""

from __future__ import annotations

import ast
import re
from typing import Any

import pandas as pd
import pytest
from _docs import DOCS, blocks

from nbagent import Chat, LLMToolResponse, ToolCall, tool
from nbagent.testing import ScriptedProvider

PAGE = DOCS / "costs-and-budgets.md"


@tool
def w(city: str) -> str:
    """W.

    Args:
        city: A city.
    """
    return "x"


def _r(text: str = "", calls: tuple[ToolCall, ...] = (), model: str = "claude-sonnet-4-5") -> Any:
    return LLMToolResponse(
        text=text,
        tool_calls=calls,
        stop_reason="tool_use" if calls else "end",
        input_tokens=100_000,
        output_tokens=1_000,
        model=model,
        provider="anthropic",
    )


def _chat(unpriced: bool) -> Chat:
    second = "my-unpriced-finetune" if unpriced else "claude-sonnet-4-5"
    script = [_r(calls=(ToolCall("a", "w", {"city": "x"}),)), _r("done", model=second), _r("d2")]
    chat = Chat(provider=ScriptedProvider(script)).with_tools(w)
    chat.ask("go")
    chat.ask("again")
    return chat


def _per_turn_recipe() -> str:
    """The page's per-turn expression, from its first code block."""
    code = blocks(PAGE)[0].code
    for node in ast.parse(code).body:
        text = ast.get_source_segment(code, node) or ""
        if isinstance(node, ast.Expr) and text.startswith('chat.steps.groupby("turn")'):
            return text
    raise AssertionError("costs-and-budgets.md's first block has no per-turn recipe")


@pytest.mark.parametrize("unpriced", [True, False], ids=["unpriced", "priced"])
def test_the_per_turn_recipe_never_understates(unpriced: bool) -> None:
    chat = _chat(unpriced)
    per_turn = eval(_per_turn_recipe(), {"chat": chat})  # the page's own code
    assert per_turn["input_tokens"].tolist() == [200_000, 100_000]
    if unpriced:
        assert chat.cost_usd is None
        assert pd.isna(per_turn.loc[1, "cost_usd"])  # not the priced request's cost alone
        assert per_turn.loc[2, "cost_usd"] == pytest.approx(chat.steps["cost_usd"].iloc[2])
    else:
        assert per_turn["cost_usd"].sum() == pytest.approx(chat.cost_usd)


def test_the_chat_total_recipe_in_the_prose_matches_cost_usd() -> None:
    total = re.search(r"the chat's total is\s+`([^`]+)`", PAGE.read_text())
    assert total is not None
    for unpriced in (True, False):
        chat = _chat(unpriced)
        sums = eval(total.group(1), {"chat": chat})
        if unpriced:
            assert pd.isna(sums["cost_usd"]) and chat.cost_usd is None
        else:
            assert sums["cost_usd"] == pytest.approx(chat.cost_usd)
        assert sums["input_tokens"] == chat.usage.input_tokens


def test_the_demo_model_costs_zero_so_a_cost_budget_never_stops_it() -> None:
    chat = Chat(model="demo", max_cost_usd=1e-9)
    chat.ask("hi")
    assert (chat.cost_usd, chat.status) == (0.0, "complete")


@pytest.mark.parametrize("tokens", [2**63, 10**400])
def test_any_positive_int_is_a_token_budget(tokens: int) -> None:
    assert Chat(model="demo", max_total_tokens=tokens).max_total_tokens == tokens


@pytest.mark.parametrize(
    ("cost", "tokens"),
    [(0, None), (10**400, None), (float("nan"), None), (None, 0), (None, 10.0), (None, "10")],
)
def test_the_refused_budgets_are_value_errors(cost: object, tokens: object) -> None:
    with pytest.raises(ValueError, match="max_"):
        Chat(model="demo", max_cost_usd=cost, max_total_tokens=tokens)
