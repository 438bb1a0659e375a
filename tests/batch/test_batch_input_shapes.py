"""``prompt=`` reads a list of rows as it reads a DataFrame.

A list of dicts with ``prompt="question"`` asked every row the literal word "question" (a
frame's column of that name gave each row its own prompt), and a list of prompts with a
``prompt=`` that has no ``{prompt}`` field sent that text to every row: both ran, and paid,
a batch of identical questions. A field's name now means that field, as a column's does,
and a text that is neither a field nor a template is refused before anything runs.
"""

from __future__ import annotations

import pandas as pd
import pytest

import nbagent
from nbagent import Chat
from nbagent.batch import BatchInputError
from nbagent.batch._inputs import jobs_from
from nbagent.evaluation import answer_contains

ROWS = [{"question": "Check the status of order 41"}, {"question": "Refund order 7"}]


def test_prompt_naming_a_field_of_a_list_of_dicts_is_that_field_as_for_a_frame() -> None:
    from_list = [(j.key, j.prompt, j.error) for j in jobs_from(ROWS, prompt="question")]
    from_frame = [(j.key, j.prompt, j.error) for j in jobs_from(pd.DataFrame(ROWS), "question")]
    assert from_list == from_frame
    assert from_list == [("0", "Check the status of order 41", None), ("1", "Refund order 7", None)]
    # a row without the field, or with no text in it, fails alone, as an empty cell does
    rows = [*ROWS, {"other": "x"}, {"question": None}, {"question": 3}]
    jobs = jobs_from(rows, prompt="question")
    assert [j.prompt for j in jobs[:2]] == [r["question"] for r in ROWS]
    assert [j.error for j in jobs[2:]] == [
        "row 2 has no field 'question'",
        "field 'question' is empty",
        "field 'question' is a int, not text",
    ]
    # a template over the same rows still fills from them
    assert [j.prompt for j in jobs_from(ROWS, prompt="Q: {question}")] == [
        "Q: Check the status of order 41", "Q: Refund order 7",
    ]  # fmt: skip


def test_evaluate_over_a_list_of_dicts_asks_each_row_its_own_prompt() -> None:
    card = nbagent.evaluate(
        ROWS, lambda: Chat("demo", display=False), [answer_contains("order")],
        prompt="question", progress=False,
    )  # fmt: skip
    jobs = nbagent.batch_results(card).attrs["nbagent_batch"].jobs
    assert [j.prompt for j in jobs] == [r["question"] for r in ROWS]


@pytest.mark.parametrize(
    ("inputs", "prompt"),
    [
        (["Refund order 1", "Refund order 2"], "Be brief."),  # no {prompt} field
        (["Refund order 1"], "prompt"),
        (ROWS, "Be brief."),  # neither a field of the rows nor a template
    ],
    ids=["prompts", "prompts-word", "rows"],
)
def test_a_prompt_that_is_neither_a_field_nor_a_template_over_a_list_is_refused(
    inputs: list[object], prompt: str
) -> None:
    made: list[int] = []

    def make() -> Chat:
        made.append(1)
        return Chat("demo", display=False)

    with pytest.raises(BatchInputError, match=r"neither a field .* nor a template"):
        nbagent.batch(inputs, make, prompt=prompt, progress=False)
    with pytest.raises(BatchInputError, match=r"neither a field .* nor a template"):
        nbagent.evaluate(inputs, make, [answer_contains("x")], prompt=prompt, progress=False)
    assert made == []
    # a template with the {prompt} field still wraps each prompt
    prompts = jobs_from(["a", "b"], prompt="Be brief. {prompt}")
    assert [j.prompt for j in prompts] == ["Be brief. a", "Be brief. b"]


class _Unformattable:
    """A row's value whose ``__format__`` raises an error whose own text cannot be read."""

    def __format__(self, spec: str) -> str:
        raise _BadValue()


class _BadValue(ValueError):
    def __str__(self) -> str:
        raise TypeError("no message")


def test_a_value_failing_the_template_with_an_unreadable_error_fails_its_row() -> None:
    jobs = jobs_from([{"n": 1}, {"n": _Unformattable()}], prompt="Order {n}")
    assert [j.prompt for j in jobs] == ["Order 1", None]
    assert jobs[1].error == (
        "the prompt template cannot be filled from this row: _BadValue: "
        "(its message could not be read: TypeError)"
    )
