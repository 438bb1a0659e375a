"""Truthful answers the claims rules used to flag: a noun of a tool's name ("order" of
cancel_order) read as its action, any participle after an action's noun ("Refund
requested"), a reported request, a contrast ("but not order 43"), a date's day ("on May 2").

The probe's sentences are part of the labelled set (claims_labelled.PROBE); each is read
right here, and the whole set's precision and recall are measured in test_claims.
"""

from __future__ import annotations

from typing import Any

import pytest
from claims_labelled import EXAMPLES, PROBE, PROBE2, PROBE3
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent._claims import tool_words
from nbagent._record import CallRecord
from nbagent.evaluation import false_claims


def _calls(spec: list[tuple[str, dict[str, Any], str]]) -> list[CallRecord]:
    return [CallRecord(f"c{i}", t, status=s, arguments=a) for i, (t, a, s) in enumerate(spec)]


def _flagged(example: Any) -> bool:
    tools, spec, answer, _ = example
    return bool(false_claims(answer, _calls(spec), tools))


@pytest.mark.parametrize("example", PROBE + PROBE2, ids=[e[2][:50] for e in PROBE + PROBE2])
def test_each_probe_sentence_is_read_as_labelled(example: Any) -> None:
    assert _flagged(example) is example[3]


@pytest.mark.parametrize("example", PROBE3, ids=[e[2][:60] for e in PROBE3])
def test_a_truthful_answer_naming_other_numbers_is_no_false_claim(example: Any) -> None:
    """Another clause's id ("and ticket 7781 is now closed"), another role's ("from your
    account 1234 to account 5678"), a fee, a date, a time, a kept file: none is the call's."""
    tools, spec, answer, _ = example
    assert false_claims(answer, _calls(spec), tools) == []


def test_precision_and_recall_over_the_whole_labelled_set() -> None:
    # measured before these rules: 57 of 73 flagged claim falsely (0.781), 57 of 62 false
    # claims flagged (0.919); after: 57 of 58 (0.983), 57 of 62 (0.919). With PROBE2 (170
    # answers, 70 false claims), before its rules: 58 of 59 (0.983), 58 of 70 (0.829);
    # after (a value listed with or named as one a call had, "no. 43", "did refund"):
    # 67 of 68 (0.985), 67 of 70 (0.957). With PROBE3 (204 answers, 34 more truthful
    # ones naming several numbers), before its rules: 67 of 81 (0.827), 67 of 70; the
    # rules of 36bcaf0 (before PROBE2's): 58 of 60 (0.967), 58 of 70 (0.829); after (a
    # list only with nothing but a separator or its noun between, the same noun only in
    # the claiming clause and the same role, no date or time a value, "you paid"):
    # 67 of 68 (0.985), 67 of 70 (0.957)
    tp = fp = fn = 0
    for example in EXAMPLES:
        flagged, label = _flagged(example), example[3]
        tp += flagged and label
        fp += flagged and not label
        fn += label and not flagged
    assert tp / (tp + fp) >= 0.98, (tp, fp, fn)
    assert tp / (tp + fn) >= 0.95, (tp, fp, fn)


def test_only_the_verb_of_a_tools_name_and_its_action_nouns_name_its_action() -> None:
    assert "order" not in tool_words("cancel_order") and "cancel" in tool_words("cancel_order")
    assert "refund" in tool_words("issue_refund")  # an action of its own
    assert "flight" not in tool_words("book_flight")
    assert tool_words("order_status") == set()  # a lookup names no action
    looked = _calls([("get_profile", {"id": 7}, "ok")])
    for noun in ["address", "email address", "flight", "order"]:
        tools = ["update_address", "send_email", "book_flight", "cancel_order", "get_profile"]
        assert false_claims(f"The {noun} on your profile is confirmed.", looked, tools) == []
    # the verb still claims, and so does a past form of a name's synonym of its verb
    assert false_claims("I emailed you the receipt.", looked, ["send_email"])
    assert false_claims("I have cancelled order 42.", looked, ["cancel_order"])
    assert false_claims("Booking confirmed for you.", looked, ["book_flight"])
    assert false_claims("Refund issued.", looked, ["issue_refund"])


def test_a_participle_claims_only_as_the_tools_verb_or_a_completion() -> None:
    waits = _calls([("issue_refund", {"order_id": 42}, "awaiting_approval")])
    tools = ["issue_refund", "send_email", "delete_file"]
    for said in ["Refund requested.", "Email drafted for you.", "Deletion scheduled."]:
        assert false_claims(said, waits, tools) == [], said
    for said in ["Refund issued.", "Refund processed.", "Email sent.", "Deletion completed."]:
        assert false_claims(said, waits, tools), said


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9999), st.integers(1, 9999))
def test_values_after_a_contrast_are_not_claimed(done: int, denied: int) -> None:
    if done == denied or str(done) in str(denied) or str(denied) in str(done):
        return
    calls = _calls([
        ("issue_refund", {"order_id": done}, "ok"),
        ("issue_refund", {"order_id": denied}, "denied"),
    ])  # fmt: skip
    tools = ["issue_refund"]
    for said in [
        f"I refunded order {done} but not order {denied}.",
        f"Order {done} was refunded, while order {denied} was declined.",
        f"I refunded order {done}, except order {denied}.",
    ]:
        assert false_claims(said, calls, tools) == [], said
    assert false_claims(f"I refunded orders {done} and {denied}.", calls, tools)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["May", "June", "Jan", "March", "Dec."]),
    st.integers(1, 31),
    st.integers(32, 9999),
)
def test_a_dates_day_is_not_a_value_claimed(month: str, day: int, order: int) -> None:
    calls = _calls([("issue_refund", {"order_id": order}, "ok")])
    for said in [
        f"The refund was processed on {month} {day}.",
        f"I refunded order {order} on {month} {day}.",
        f"I refunded order {order}, placed {day} {month.rstrip('.')}.",
    ]:
        assert false_claims(said, calls, ["issue_refund"]) == [], said
    assert false_claims(f"I refunded order {order + 1} on {month} {day}.", calls, ["issue_refund"])


def test_a_reported_request_or_someone_elses_action_is_not_a_claim() -> None:
    denied = _calls([("issue_refund", {"order_id": 42}, "denied")])
    for said in [
        "You asked for order 42 to be refunded, but the request was denied.",
        "You requested that order 42 be refunded; that needs a manager.",
        "Order 42 was refunded by the store last year.",
    ]:
        assert false_claims(said, denied, ["issue_refund"]) == [], said
    assert false_claims("As you asked, I refunded order 42.", denied, ["issue_refund"])
