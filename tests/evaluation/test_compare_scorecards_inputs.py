"""compare_scorecards says what is wrong with what it was given, in one line, and what to
pass instead: not a pandas KeyError, an AttributeError on ``.attrs`` or an unpacking error."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

import nbagent
from nbagent import Chat
from nbagent.evaluation import compare_scorecards, tool_called


def make_chat() -> Chat:
    return Chat("demo", display=False)


@pytest.fixture(scope="module")
def card() -> Any:
    return nbagent.evaluate(["Hello"], make_chat, [tool_called("x")], progress=False)


def _one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize(
    ("given", "error", "says"),
    [
        (pd.DataFrame({"x": [1]}), ValueError, "a: not a scorecard, it has no case, branch, "),
        (pd.DataFrame(), ValueError, "a: an empty DataFrame is not a scorecard"),
        ([{"case": 0}], TypeError, "a: compare_scorecards takes scorecards, got a list"),
        (None, TypeError, "a: compare_scorecards takes scorecards, got a NoneType"),
    ],
    ids=["wrong-columns", "empty", "list", "none"],
)
def test_what_is_not_a_scorecard_is_named(card: Any, given: Any, error: type, says: str) -> None:
    with pytest.raises(error) as exc:
        compare_scorecards(given, card)
    text = _one_line(exc)
    assert says in text and "nbagent.evaluate" in text


def test_a_batchs_results_are_told_apart_from_a_scorecard(card: Any) -> None:
    results = nbagent.batch(["Hello"], make_chat, progress=False)
    with pytest.raises(ValueError) as exc:
        compare_scorecards(card, results)
    text = _one_line(exc)
    assert text.startswith("b: a batch's results, not a scorecard")
    assert "nbagent.evaluate(cases, make_chat, checks)" in text


def test_a_chat_is_told_to_be_scored_or_compared() -> None:
    chat = make_chat()
    with pytest.raises(TypeError) as exc:
        compare_scorecards(chat, chat)
    text = _one_line(exc)
    assert "got a chat" in text and "nbagent.compare(chat_a, chat_b)" in text


@pytest.mark.parametrize(
    ("names", "error", "says"),
    [
        (["x"], ValueError, "names: two names, one per scorecard, got 1"),
        (["x", "y", "z"], ValueError, "names: two names, one per scorecard, got 3"),
        ("xy", TypeError, "names: two names as a list (names=['old', 'new']), got str 'xy'"),
        (None, TypeError, "names: two names as a list"),
        (["x", "x"], ValueError, "names must differ"),
    ],
)
def test_names_are_two_different_names(card: Any, names: Any, error: type, says: str) -> None:
    with pytest.raises(error) as exc:
        compare_scorecards(card, card, names=names)
    assert says in _one_line(exc)


def test_two_scorecards_still_compare(card: Any) -> None:
    diff = compare_scorecards(card, card, names=("old", "new"))
    assert diff.columns.tolist()[:5] == ["case", "branch", "check", "passed_old", "chat_id_old"]
    assert not diff["changed"].any()


def test_the_rows_keep_the_scorecards_order_of_cases_and_checks() -> None:
    """Before: the outer merge sorted the rows by check name ("answer..." before "called")."""
    from nbagent.evaluation import answer_contains

    cases = ["Hello", "Hi there"]
    checks_a = [tool_called("x"), answer_contains("zz")]
    a = nbagent.evaluate(cases, make_chat, checks_a, progress=False)
    b = nbagent.evaluate(cases, make_chat, [*checks_a, answer_contains("aa")], progress=False)
    both = compare_scorecards(a, b)
    assert list(zip(both["case"], both["check"], strict=True)) == [
        ("0", "called x"), ("0", "answer contains 'zz'"),
        ("1", "called x"), ("1", "answer contains 'zz'"),
        ("0", "answer contains 'aa'"), ("1", "answer contains 'aa'"),
    ]  # fmt: skip
