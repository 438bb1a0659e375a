"""The one check of an answer (``chat.answer``, ``store.answer``, the inbox, the cards):

- a server's form answered with a field it does not ask for was accepted and sent to
  the server as given; it is refused, naming the field and the form's fields (a schema
  that says what else it takes, ``additionalProperties``, is checked as it says);
- an answer of the wrong shape was "(arguments): expected object", the words of a tool
  call's check: it says "the answer";
- a field of titled choices (``oneOf`` of ``const``s, shown as a list on the card)
  answered with none of them said "matches none of the allowed shapes": it lists them.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent import Chat, InputError, ModelRequest, PendingInput, ask_user
from nbagent._chat_state import checked_answer
from nbagent.testing import ScriptedProvider, call_tools, reply

FORM = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "tier": {
            "type": "string",
            "oneOf": [{"const": "a", "title": "Basic"}, {"const": "b", "title": "Gold"}],
        },
    },
}


def form(schema: dict[str, Any] = FORM) -> PendingInput:
    return PendingInput("in_1", "elicitation", "c1", "book", "Who?", {}, schema, "srv")


def test_a_field_the_form_does_not_ask_for_is_refused() -> None:
    with pytest.raises(InputError, match="'admin': not a field of the form") as err:
        checked_answer(form(), {"name": "Ada", "admin": True})
    assert "'name', 'tier'" in str(err.value)
    assert checked_answer(form(), {"name": "Ada", "tier": "b"})[0] == {"name": "Ada", "tier": "b"}


def test_a_form_that_takes_more_fields_takes_them() -> None:
    schema = {**FORM, "additionalProperties": {"type": "integer"}}
    assert checked_answer(form(schema), {"name": "Ada", "seats": 2})[0]["seats"] == 2
    with pytest.raises(InputError):
        checked_answer(form(schema), {"name": "Ada", "seats": "two"})


@settings(max_examples=60, deadline=None)
@given(extra=st.text(min_size=1, max_size=12).filter(lambda k: k not in FORM["properties"]))
def test_no_unasked_field_gets_through(extra: str) -> None:
    with pytest.raises(InputError, match="not a field of the form"):
        checked_answer(form(), {"name": "Ada", extra: 1})


def test_titled_choices_are_listed_when_none_is_given() -> None:
    with pytest.raises(InputError, match=r"tier: should be one of 'a' \(Basic\), 'b' \(Gold\)"):
        checked_answer(form(), {"name": "Ada", "tier": "c"})


def test_an_answer_of_the_wrong_shape_is_called_the_answer() -> None:
    with pytest.raises(InputError) as err:
        checked_answer(form(), ["Ada"])
    assert "(the answer): expected object" in str(err.value)
    assert "(arguments)" not in str(err.value)

    def asks(request: ModelRequest) -> Any:
        if any(getattr(m, "role", "") == "tool" for m in request.messages):
            return reply("done")
        return call_tools(("ask_user", {"question": "Which?", "choices": ["x", "y"]}, "q"))

    chat = Chat(provider=ScriptedProvider([asks], repeat_last=True), display=False)
    chat.with_tools(ask_user).ask("go")
    with pytest.raises(InputError) as err:
        chat.answer("q", "z")
    assert "(the answer)" in str(err.value) and "(arguments)" not in str(err.value)
    assert chat.pending_inputs  # still waits
