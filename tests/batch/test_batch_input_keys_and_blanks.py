"""Inputs a batch cannot key or ask, said before anything is made.

An empty key (NaN in the ``key=`` column or in the index) became the key ``'None'``
silently, and two of them raised "inputs 0 and 1 have the same key 'None'": now
:class:`BatchInputError` says which input has no key and where. A blank prompt (``""``,
whitespace) made and stored a chat that then failed with ``ValueError: ask() needs a
question ... use chat.complete()``: now its row fails as an empty cell does, with
``BatchInputError``, and no chat is made. A Series' result keeps the Series' index, as a
DataFrame's keeps the frame's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat
from nbagent.batch import BatchInputError
from nbagent.batch._inputs import input_index, jobs_from
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, reply

MADE: list[Any] = []


def make_chat() -> Chat:
    chat = Chat(provider=ScriptedProvider([reply("ok")], repeat_last=True))
    MADE.append(chat.id)
    return chat


EMPTY = [float("nan"), np.nan, None, pd.NaT, pd.NA]


@pytest.mark.parametrize(
    ("frame", "key", "said"),
    [
        (
            pd.DataFrame({"q": ["a", "b", "c"], "id": [1.0, np.nan, 3.0]}),
            "id",
            "NaN in column 'id'",
        ),
        (pd.DataFrame({"q": ["a", "b"], "id": [np.nan, "None"]}), "id", "NaN in column 'id'"),
        (pd.DataFrame({"q": ["a", "b"]}, index=[1.0, np.nan]), None, "NaN in the index"),
        (pd.DataFrame({"q": ["a", "b"]}, index=["x", None]), None, "NaN in the index"),
        (
            pd.DataFrame({"q": ["a", "b"]}, index=pd.to_datetime(["2024-01-01", None])),
            None,
            "NaT in the index",
        ),
    ],
)
def test_an_input_without_a_key_is_refused_before_anything_runs(
    frame: pd.DataFrame, key: str | None, said: str
) -> None:
    MADE.clear()
    with pytest.raises(BatchInputError) as raised:
        nbagent.batch(frame, make_chat, prompt="Work on {q}", key=key, progress=False)
    where = 0 if key == "id" and "None" in frame["id"].tolist() else 1
    assert str(raised.value).startswith(f"input {where} has no key ({said})"), raised.value
    assert "'None'" not in str(raised.value)
    assert MADE == []


def test_a_row_whose_key_field_is_empty_is_refused() -> None:
    rows = [{"q": "a", "id": "k1"}, {"q": "b", "id": None}]
    with pytest.raises(BatchInputError, match=r"^input 1 has no key \(None in field 'id'\)"):
        jobs_from(rows, prompt="Work on {q}", key="id")
    rows[1]["id"] = float("nan")
    with pytest.raises(BatchInputError, match=r"^input 1 has no key \(NaN in field 'id'\)"):
        jobs_from(rows, prompt="Work on {q}", key="id")


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.integers(0, 10**6), min_size=1, max_size=8, unique=True),
    holes=st.data(),
)
def test_an_empty_key_never_becomes_a_key(keys: list[int], holes: st.DataObject) -> None:
    """Any empty value at any place of a key column or an index is refused, naming the
    first such input; the inputs without one keep their own keys."""
    at = holes.draw(st.sets(st.integers(0, len(keys) - 1)), label="holes")
    empty = holes.draw(st.sampled_from(EMPTY), label="empty")
    column: list[Any] = [empty if i in at else k for i, k in enumerate(keys)]
    frame = pd.DataFrame({"q": [f"p{i}" for i in range(len(keys))], "id": column})
    for shaped in (lambda: jobs_from(frame, "Work on {q}", "id"),
                   lambda: jobs_from(frame.set_index("id"), "Work on {q}")):  # fmt: skip
        if not at:
            assert [j.key for j in shaped()] == [str(k) for k in keys]
            continue
        with pytest.raises(BatchInputError) as raised:
            shaped()
        assert str(raised.value).startswith(f"input {min(at)} has no key (")


def _stored_chats(db: Path) -> int:
    with SQLiteStore(db) as store:
        return len(store.chats())


@pytest.mark.parametrize(
    ("inputs", "prompt"),
    [
        (["Work on p1", "", "   ", "\t\n"], None),
        (pd.DataFrame({"q": ["Work on p1", "", "   ", "\u2003"]}), "q"),
        ([{"q": "Work on p1"}, {"q": ""}, {"q": "  "}, {"q": "\n"}], "q"),
        (pd.DataFrame({"q": ["Work on p1", "", " ", "  "]}), "{q}"),
        (["Work on p1", "", " ", "  "], "{prompt}"),
    ],
)
def test_a_blank_prompt_fails_its_row_and_makes_no_chat(
    tmp_path: Path, inputs: Any, prompt: str | None
) -> None:
    MADE.clear()
    db = tmp_path / "b.db"
    result = nbagent.batch(inputs, make_chat, prompt=prompt, store=str(db), progress=False)
    assert list(result["status"]) == ["done", "failed", "failed", "failed"]
    assert set(result["error_type"][1:]) == {"BatchInputError"}
    assert result.loc[1, "error"] == "the prompt is empty: nothing to ask"
    assert set(result["error"][2:]) == {"the prompt is only whitespace: nothing to ask"}
    assert result["chat_id"][1:].isna().all()
    assert len(MADE) == 1
    assert _stored_chats(db) == 1
    with pytest.raises(BatchInputError, match="the prompt is empty"):  # before anything runs
        nbagent.batch(inputs, make_chat, prompt=prompt, progress=False, on_error="raise")
    assert len(MADE) == 1


def test_a_prompt_with_text_around_a_blank_field_is_asked() -> None:
    jobs = jobs_from(pd.DataFrame({"q": ["", "x"]}), prompt="Work on {q}")
    assert [(j.prompt, j.error) for j in jobs] == [("Work on ", None), ("Work on x", None)]


def test_input_index_is_a_frames_or_a_series_index() -> None:
    series = pd.Series(["Work on p1", "Work on p2"], index=["a", "b"])
    assert list(input_index(series)) == ["a", "b"]
    frame = series.to_frame("q")
    assert input_index(frame) is frame.index
    assert input_index(["x"]) is None


def test_a_series_result_keeps_the_series_index() -> None:
    series = pd.Series(["Work on p1", "Work on p2"], index=["a", "b"])
    result = nbagent.batch(series, make_chat, progress=False)
    frame = nbagent.batch(series.to_frame("q"), make_chat, prompt="q", progress=False)
    assert list(frame.index) == ["a", "b"]
    assert list(result.index) == list(frame.index)
