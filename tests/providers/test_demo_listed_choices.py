"""The demo model lists the choices a request lists, one choice each.

"Ask the user which colour they prefer, red or green" gave ``ask_user`` the one choice
``'red green'`` (and "red, green or blue" ``'green blue'``), so the user could answer
neither colour: the demo read a list of words as one value.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat
from nbagent.providers._demo_filling import Reader
from nbagent.providers._demo_plan import listed
from nbagent.providers._demo_reading import STOP, words


def _asked(text: str) -> tuple[str, ...]:
    chat = Chat(model="demo", display=False).with_tools(nbagent.ask_user)
    chat.ask(text)
    return tuple(chat.pending_inputs[0].choices)


@pytest.mark.parametrize(
    ("text", "choices"),
    [
        ("Ask the user which colour they prefer, red or green", ("red", "green")),
        ("Ask the user which colour they prefer: red, green or blue", ("red", "green", "blue")),
        ("Ask the user which colour they prefer red or green", ("red", "green")),
        ("Ask the user which size they want: small, medium, large", ("small", "medium", "large")),
        (
            "Ask the user which plan they want: light blue or dark green",
            ("light blue", "dark green"),
        ),
        ("Ask the user which colour they prefer", ()),
    ],
)
def test_each_listed_item_is_a_choice(text: str, choices: tuple[str, ...]) -> None:
    assert _asked(text) == choices


def test_the_user_can_answer_one_of_them() -> None:
    chat = Chat(model="demo", display=False).with_tools(nbagent.ask_user)
    chat.ask("Ask the user which colour they prefer, red or green")
    question = chat.pending_inputs[0]
    chat.answer(question, "green")
    assert chat.pending_inputs == []


_VOCAB = Reader(nbagent.ask_user.spec).vocab
_WORD = st.from_regex(r"[a-z]{3,9}", fullmatch=True).filter(
    lambda w: w not in STOP and not set(words(w)) & _VOCAB
)


@settings(max_examples=60, deadline=None)
@given(items=st.lists(_WORD, min_size=2, max_size=5, unique=True), colon=st.booleans())
def test_any_listed_words_come_back_as_listed(items: list[str], colon: bool) -> None:
    said = ", ".join(items[:-1]) + " or " + items[-1]
    text = f"Ask the user which one they prefer{':' if colon else ','} {said}"
    assert listed(text, _VOCAB) == items
