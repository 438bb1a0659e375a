"""Reading a final answer against a long chat's calls costs a substring test per value, not
a regular expression compiled per value (the notebook view reads every final answer)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent._claims import _ENDS, _STARTS, Ledger, _named_pieces, _named_values
from nbagent._record import CallRecord
from nbagent.evaluation import false_claims


def test_values_absent_from_the_answer_compile_no_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [
        CallRecord(f"c{i}", "lookup", status="ok", arguments={"key": f"item-{i}", "n": i + 10})
        for i in range(2000)
    ]
    searched: list[str] = []
    real = re.search

    def counting(pattern: Any, text: str, flags: int = 0) -> Any:
        searched.append(pattern)
        return real(pattern, text, flags)

    monkeypatch.setattr(re, "search", counting)
    # "Looked up" claims the lookup tool, and no call's value is in the sentence
    assert false_claims("Looked up the items for you.", calls) == []
    assert searched == []
    # a value that is there is still matched as a whole word: item-7 is not item-70
    searched.clear()
    denied = [*calls, CallRecord("d", "refund", status="denied", arguments={"order": "A-77"})]
    claims = false_claims("I refunded order A-77.", denied)
    assert [(c.tool, c.status) for c in claims] == [("refund", "denied")]
    assert len(searched) == 1
    # A-7 names no call's value: the refund's only call (denied) is what happened
    assert [c.status for c in false_claims("I refunded order A-7.", denied)] == ["denied"]


def test_edited_arguments_are_read_not_the_originals() -> None:
    call = CallRecord("c", "refund", status="ok", arguments={"order": "A-1"})
    assert false_claims("I refunded order A-1.", [call]) == []
    edited = CallRecord(
        "c", "refund", status="ok", arguments={"order": "A-1"}, edited_arguments={"order": "B-2"}
    )
    assert false_claims("I refunded order B-2.", [edited]) == []


_TEXT = st.text(alphabet="ab1é .-_@/$,\n", max_size=30) | st.from_regex(
    r"[a $]{0,3}1?(,1{1,4}){1,3}[ .a]{0,3}", fullmatch=True
)


@settings(max_examples=500, deadline=None)
@given(_TEXT, st.lists(st.text(alphabet="ab1é .-_@/$,", min_size=1, max_size=6), max_size=30))
def test_a_sentences_pieces_name_exactly_the_values_a_whole_word_search_finds(
    low: str, values: list[str]
) -> None:
    """Property: a long chat's answer looks the sentence's pieces up in its calls' values
    (the cost of the sentence); a short chat's looks each value up in the sentence. Both
    name exactly the values found as whole words (no word or dot before, no word after,
    no part of a number with thousands commas)."""
    starts = [m.start() for m in _STARTS.finditer(low)]
    ends = [m.end() for m in _ENDS.finditer(low)]
    longest = max(map(len, values), default=0)
    expected = {
        v
        for v in values
        if re.search(rf"(?<![\w.])(?<!\d,){re.escape(v)}(?!\w)(?!,\d{{3}}(?!\d))", low)
    }
    assert _named_values(low, values) == expected
    assert _named_pieces(low, starts, ends, set(values), longest) == expected


def test_an_answer_costs_its_sentences_not_the_chats_calls() -> None:
    """The ledger's lookups, counted: reading an answer against 10,000 calls looks up a
    few pieces of the sentence, not 10,000 values."""
    calls = [
        CallRecord(f"c{i}", "lookup", status="ok", arguments={"key": f"item-{i}"})
        for i in range(10_000)
    ]
    ledger = Ledger(calls)

    class Counting(dict):  # type: ignore[type-arg]
        looked = 0

        def __contains__(self, key: object) -> bool:
            Counting.looked += 1
            return super().__contains__(key)

        def __iter__(self):  # type: ignore[no-untyped-def]
            raise AssertionError("the values were walked")

    index = ledger._tools["lookup"]
    index.where = Counting(index.where)
    claims = ledger.claims("I looked up item-7 and item-70. Looked up 12 items.")
    assert claims == []
    assert 0 < Counting.looked < 100
