"""Reading a final answer against a long chat's calls costs a substring test per value, not
a regular expression compiled per value (the notebook view reads every final answer)."""

from __future__ import annotations

import re
from typing import Any

import pytest

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
