"""A damaged recording (a field of the wrong type) is a miss with a warning, never a crash.

A recordings file edited by hand (a merge conflict fixed) with ``usage: ["12", ...]``
raised a raw ``TypeError`` deep in the chat's step (the step lost), and the bad
response had already been copied into the process's recordings, so the same error
came back after the folder was deleted. Reading a recording now checks every field.
"""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import Chat
from nbagent._recording import deltas_in, recording_in, response_in, result_in
from nbagent._replay import PROCESS


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    PROCESS.clear()
    yield
    PROCESS.clear()


RESPONSE: dict[str, Any] = {
    "text": "hi",
    "tool_calls": [
        {
            "id": "c1",
            "name": "lookup",
            "arguments": {"order": 1},
            "raw_arguments": '{"order": 1}',
            "parse_error": None,
            "server": None,
            "hosted": False,
        }
    ],
    "usage": [1, 2, 0, 0, 0],
    "model": "m",
    "provider": "p",
    "stop_reason": "tool_use",
    "raw_stop_reason": "tool_calls",
    "refusal": None,
    "items": [],
}

# where a field lives in a response, and values of a type it never has
PATHS = [
    ("text",),
    ("usage",),
    ("usage", 0),
    ("usage", 1),
    ("model",),
    ("provider",),
    ("stop_reason",),
    ("raw_stop_reason",),
    ("refusal",),
    ("tool_calls",),
    ("tool_calls", 0),
    ("tool_calls", 0, "id"),
    ("tool_calls", 0, "name"),
    ("tool_calls", 0, "arguments"),
    ("tool_calls", 0, "raw_arguments"),
    ("items",),
]
_OK: dict[tuple[Any, ...], Any] = {  # values of the right type a path may take
    ("raw_stop_reason",): (str, type(None)),
    ("refusal",): (str, type(None)),
    ("tool_calls", 0, "raw_arguments"): (str, type(None)),
}
wrong = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=False),
    st.booleans(),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


def _set(d: Any, path: tuple[Any, ...], value: Any) -> None:
    for p in path[:-1]:
        d = d[p]
    d[path[-1]] = value


def _count_ok(n: Any) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0


def _fits(path: tuple[Any, ...], value: Any) -> bool:
    """Whether ``value`` is a right value for ``path`` (then it is no damage)."""
    if path in (("usage", 0), ("usage", 1)):
        return _count_ok(value)
    if path == ("usage",):
        return isinstance(value, list) and len(value) <= 5 and all(map(_count_ok, value))
    if path == ("stop_reason",):
        return value in ("end", "tool_use", "max_tokens", "refusal", "pause_turn", "other")
    if path in (("tool_calls",), ("items",)):
        return value == [] and isinstance(value, list)  # no calls, no items
    if path == ("tool_calls", 0):
        return False  # an object with no id and no name
    if path == ("tool_calls", 0, "arguments"):
        return isinstance(value, dict) or not value  # an empty value reads as no arguments
    ok = _OK.get(path, str)
    return isinstance(value, ok)


@settings(max_examples=150, deadline=None)
@given(path=st.sampled_from(PATHS), value=wrong)
def test_a_wrong_field_is_a_value_error_never_anything_else(
    path: tuple[Any, ...], value: Any
) -> None:
    d = copy.deepcopy(RESPONSE)
    _set(d, path, value)
    if _fits(path, value):
        response_in(d)
        return
    with pytest.raises(ValueError, match="damaged recording"):
        response_in(d)


@settings(max_examples=60, deadline=None)
@given(i=st.integers(0, 4), value=wrong)
def test_a_wrong_stream_fragment_is_a_value_error(i: int, value: Any) -> None:
    row: list[Any] = ["text", "hi", 0, None, None]
    row[i] = value
    try:
        deltas_in([row])
    except ValueError as exc:
        assert "damaged recording" in str(exc)


def test_the_other_forms_say_damaged_too() -> None:
    with pytest.raises(ValueError, match="damaged"):
        recording_in({"key": "k", "fingerprint": [], "response": RESPONSE})
    with pytest.raises(ValueError, match="damaged"):
        recording_in({"key": 3, "fingerprint": {}, "response": RESPONSE})
    with pytest.raises(ValueError, match="damaged"):
        result_in({"status": "ok", "content": ["x"]})
    with pytest.raises(ValueError, match="damaged"):
        deltas_in({"text": "x"})  # type: ignore[arg-type]


def _damage(folder: Path, path: tuple[Any, ...], value: Any) -> str:
    (f,) = folder.glob("*.json")
    d = json.loads(f.read_text())
    _set(d["response"], path, value)
    f.write_text(json.dumps(d))
    return str(d["key"])


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    damage=st.sampled_from(
        [
            (("usage",), ["12", "34", 0, 0, 0]),
            (("usage", 0), -1),
            (("text",), 12),
            (("model",), ["m"]),
            (("stop_reason",), "finished"),
            (("items",), "none"),
            (("tool_calls",), {"id": 1}),
        ]
    )
)
def test_a_damaged_file_asks_the_model_and_stays_out_of_the_process(
    tmp_path_factory: pytest.TempPathFactory, damage: tuple[tuple[Any, ...], Any]
) -> None:
    folder = tmp_path_factory.mktemp("rec")
    Chat("demo", replay="auto", recordings=folder, display=False).ask("hello")
    PROCESS.clear()  # a new kernel: only the folder remembers
    key = _damage(folder, *damage)
    chat = Chat("demo", replay="auto", recordings=folder, display=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat.ask("hello")  # it raised TypeError
    assert any("damaged recording" in str(w.message) for w in caught)
    assert chat.status == "complete"
    assert list(chat.steps["replayed"]) == [False]  # the model was asked again
    kept = PROCESS.find(key)  # the process keeps the fresh answer, not the damaged one
    assert kept is not None and isinstance(kept.response.input_tokens, int)
    assert isinstance(kept.response.text, str)
    again = Chat("demo", replay="auto", recordings=folder, display=False)
    again.ask("hello")  # the folder's file was replaced by the fresh answer
    assert list(again.steps["replayed"]) == [True]
