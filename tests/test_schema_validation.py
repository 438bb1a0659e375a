"""How arguments are checked against a tool's schema, and how problems read to the model.

JSON Schema ``pattern`` is ECMA-262 (``$`` is the end of the text, ``\\d`` is ASCII),
problems name JSON types (``null``, ``string``) rather than Python's, and the
converter's own problems can be reported with the schema's in the same round.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nbagent import Tool, tool
from nbagent._schema import ecma_to_python, function_parameters, validate_json_schema

# -- pattern: ECMA-262, not Python's re ---------------------------------------------------


class _Raw(Tool):
    """Raw-schema tool."""

    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["code"],
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
    }

    def execute(self, code: str) -> str:
        return code


def test_dollar_is_the_end_of_the_text() -> None:
    assert _Raw().validate_arguments({"code": "ABC"}) == {"code": "ABC"}
    for bad in ["ABC\n", "abc", "ABCD"]:
        with pytest.raises(Exception, match="does not match the pattern"):
            _Raw().validate_arguments({"code": bad})


@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [
        (r"^\d+$", "123", "١٢٣"),  # Arabic-Indic digits are not \d in ECMA-262
        (r"^\w+$", "a_1", "é"),
        (r"^[$a]+$", "$a$", "$a\n"),  # $ in a class is a dollar sign
        (r"^a\$$", "a$", "a"),  # an escaped dollar is a dollar sign
        (r"^a\sb$", "a\u00a0b", "a\x1cb"),  # ECMA's whitespace, not Python's
        (r"^(?<y>\d{2})-\k<y>$", "12-12", "12-13"),  # ECMA named groups
        (r"^[^]$", "\n", "ab"),  # [^] is any character
        (r"^a[]$", None, "a"),  # [] is none
        (r"^[[a]+$", "[a[", "b"),  # [ inside a class is literal
    ],
)
def test_patterns_mean_what_ecma_262_says(pattern: str, good: str | None, bad: str) -> None:
    schema = {"type": "string", "pattern": pattern}
    if good is not None:
        assert validate_json_schema(good, schema) == [], (pattern, good)
    assert validate_json_schema(bad, schema), (pattern, bad)


def test_pattern_properties_use_ecma_meaning_too() -> None:
    schema = {
        "type": "object",
        "patternProperties": {"^x$": {"type": "integer"}},
        "additionalProperties": False,
    }
    assert validate_json_schema({"x": 1}, schema) == []
    assert validate_json_schema({"x\n": 1}, schema) == ["x\n: unexpected argument"]


@given(st.text(alphabet="ABCabc\n\r ", max_size=6))
def test_an_anchored_pattern_takes_exactly_the_full_matches(text: str) -> None:
    schema = {"type": "string", "pattern": "^[A-Z]{1,3}$"}
    accepted = validate_json_schema(text, schema) == []
    assert accepted == (re.fullmatch("[A-Z]{1,3}", text) is not None)


def test_translation_leaves_plain_patterns_alone() -> None:
    for pattern in [r"^[a-z]+", r"(?<=a)b", r"(?<!a)b", r"a{2,3}\.", r"\\$"]:
        translated = ecma_to_python(pattern)
        assert translated.replace(r"\Z", "$") == pattern


# -- problems name JSON types -------------------------------------------------------------


@tool
def _book(guests: int, note: str = "") -> str:
    """Book a table."""
    return "booked"


@pytest.mark.parametrize(
    ("value", "name"),
    [(None, "null"), ("5", "string"), (1.5, "number"), (True, "boolean"), ([], "array"),
     ({}, "object")],
)  # fmt: skip
def test_problems_name_json_types(value: Any, name: str) -> None:
    with pytest.raises(Exception) as info:
        _book.validate_arguments({"guests": value})
    assert str(info.value) == f"guests: expected integer, got {name}"


# -- the converter's problems in the same round -------------------------------------------


def test_the_converters_problems_come_with_the_schemas() -> None:
    def tally(counts: dict[int, str], n: int) -> str:
        """Tally."""
        return ""

    params = function_parameters(tally)
    arguments = {"counts": {"x": "a"}, "n": "many"}
    reported = validate_json_schema(arguments, params.schema)
    assert reported == ["n: expected integer, got string"]  # the schema cannot say "int keys"
    more = params.more_problems(arguments, reported)
    assert len(more) == 1 and more[0].startswith("counts.x.[key]: Input should be a valid integer")
    assert params.more_problems({"counts": {"1": "a"}, "n": 2}, []) == []


def test_a_tool_names_every_problem_of_a_call_in_one_round() -> None:
    """What only the converter sees (a dict key that is not a number) comes with the schema's
    problems: a model that mends what it was told is not refused a second time."""
    from nbagent import SchemaValidationError, tool

    @tool
    def tally(counts: dict[int, str], n: int) -> str:
        """Tally."""
        return ""

    with pytest.raises(SchemaValidationError) as info:
        tally.validate_arguments({"counts": {"x": "a"}, "n": "many"})
    assert "n: expected integer, got string" in str(info.value)
    assert "counts.x.[key]: Input should be a valid integer" in str(info.value)
    assert tally.validate_arguments({"counts": {"1": "a"}, "n": 2}) == {"counts": {1: "a"}, "n": 2}
