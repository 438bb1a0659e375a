"""nbagent.compare says what it got when that is not chats: a batch's DataFrame is named,
with how to load its chats, and a string of names is refused, not split into letters."""

from __future__ import annotations

import pandas as pd
import pytest

import nbagent
from nbagent import Chat
from nbagent.testing import ScriptedProvider, reply


def _chat() -> Chat:
    chat = Chat(provider=ScriptedProvider([reply("x")]), display=False)
    chat.ask("hi")
    return chat


def test_a_dataframe_of_chats_says_how_to_load_them() -> None:
    frame = pd.DataFrame({"key": [0, 1], "chat_id": ["c1", "c2"]})
    with pytest.raises(TypeError) as exc:
        nbagent.compare(frame)
    text = str(exc.value)
    assert "\n" not in text
    assert text.startswith("compare() takes chats, got a DataFrame: load its chats by chat_id")
    assert 'Chat.load(i, store=store) for i in df["chat_id"]' in text
    with pytest.raises(TypeError, match="got a DataFrame"):
        nbagent.compare(_chat(), frame)


def test_names_given_as_one_string_are_refused() -> None:
    a, b = _chat(), _chat()
    with pytest.raises(
        TypeError, match=r"names: one name per chat, as a list .*got the string 'ab'"
    ):
        nbagent.compare(a, b, names="ab")
    diff = nbagent.compare(a, b, names=["old", "new"], display=False)
    assert list(diff.columns) == ["step", "field", "old", "new"]
