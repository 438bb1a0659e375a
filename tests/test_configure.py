"""``nbagent.configure``: every option's value is checked before any is applied, so a bad
value raises a one-line error naming the option and changes nothing; the chat-level
spellings of the same values (``Chat(max_steps=)``, ``ask(max_steps=)``,
``with_tool_options(timeout=)``) are checked the same way, before anything is sent."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, ToolOptionError, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


def _int_from(least: int) -> Callable[[Any], bool]:
    return lambda v: type(v) is int and v >= least


def _seconds(zero: bool) -> Callable[[Any], bool]:
    def ok(v: Any) -> bool:
        if type(v) not in (int, float) or not math.isfinite(v):
            return False
        return v >= 0 if zero else v > 0

    return ok


def _flag_or(value: Any, *words: str) -> bool:
    return value is True or value is False or (type(value) is str and value in words)


# What each option may be, written from its documentation (not from the code's checks).
VALID: dict[str, Callable[[Any], bool]] = {
    "max_concurrency": _int_from(1),
    "max_steps": _int_from(1),
    "result_max_chars": _int_from(1),
    "result_max_rows": _int_from(0),
    "max_total_tokens": _int_from(1),
    "tool_timeout": _seconds(zero=False),
    "max_cost_usd": _seconds(zero=False),
    "approval_wait": _seconds(zero=True),
    "stream": lambda v: type(v) is bool,
    "quiet": lambda v: type(v) is bool,
    "display": lambda v: type(v) is bool,
    "approval_fallback": lambda v: v in ("park", "deny"),
    "tool_concurrency": lambda v: _flag_or(v, "threads", "async", "sequential", "none", "off"),
    "replay": lambda v: _flag_or(v, "auto", "only", "off"),
}

VALUES = st.one_of(
    st.booleans(),
    st.integers(min_value=-3, max_value=10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.sampled_from(["park", "deny", "threads", "async", "auto", "only", "off", "none", "8"]),
    st.lists(st.integers(), max_size=2),
)


@pytest.fixture
def restored() -> Iterator[None]:
    """Whatever a test configures, the process's defaults are as they were afterwards."""
    before = asdict(nbagent.get_config())
    try:
        yield
    finally:
        nbagent.configure(**before)


@settings(max_examples=300, deadline=None)
@given(option=st.sampled_from(sorted(VALID)), value=VALUES)
def test_a_value_is_taken_when_valid_and_refused_with_its_name_otherwise(
    option: str, value: Any
) -> None:
    before = nbagent.get_config()
    try:
        if VALID[option](value):
            after = nbagent.configure(**{option: value})
            stored = getattr(after, option)
            if option == "tool_concurrency":
                assert stored in ("sequential", "threads", "async")
            elif option == "replay":
                assert stored in ("auto", "only", "off")
            else:
                assert stored == value
        else:
            with pytest.raises(ValueError, match=option) as info:
                nbagent.configure(**{option: value})
            assert "\n" not in str(info.value)
            assert nbagent.get_config() is before  # nothing changed
    finally:
        nbagent.configure(**asdict(before))


def test_one_bad_value_changes_none_of_the_others(restored: None) -> None:
    before = nbagent.get_config()
    with pytest.raises(ValueError, match="approval_fallback must be 'park' or 'deny'"):
        nbagent.configure(max_steps=7, tool_timeout=2.0, approval_fallback="maybe")
    assert nbagent.get_config() is before
    assert nbagent.get_config().max_steps == before.max_steps


def test_none_resets_an_option_to_its_default(restored: None) -> None:
    nbagent.configure(max_steps=3, approval_wait=0, tool_timeout=1.5)
    config = nbagent.configure(max_steps=None, approval_wait=None, tool_timeout=None)
    assert (config.max_steps, config.approval_wait, config.tool_timeout) == (25, 300.0, None)


def test_an_unknown_option_is_a_type_error_listing_the_known_ones(restored: None) -> None:
    with pytest.raises(
        TypeError, match=r"unknown option\(s\) \['tool_timout'\]; known: .*tool_timeout"
    ):
        nbagent.configure(tool_timout=5)


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _weather_chat() -> Chat:
    provider = ScriptedProvider(
        [call_tools(("get_weather", {"city": "Oslo"}, "c1")), reply("It is sunny in Oslo.")]
    )
    return Chat(provider=provider, display=False).with_tools(get_weather)


def test_a_refused_tool_timeout_leaves_the_tools_running(restored: None) -> None:
    """Before: ``configure(tool_timeout="soon")`` was taken, and every later call failed
    inside the loop with ``TypeError: '<=' not supported`` sent to the model."""
    with pytest.raises(ValueError, match="tool_timeout must be a finite number of seconds"):
        nbagent.configure(tool_timeout="soon")
    chat = _weather_chat()
    assert chat.ask("Weather in Oslo?").content == "It is sunny in Oslo."  # type: ignore[union-attr]
    assert chat.get_call("c1").status == "ok"


@pytest.mark.parametrize("bad", [0, -1, 2.5, "many", True])
def test_a_bad_max_steps_is_refused_before_anything_is_sent_or_kept(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_steps must be a positive int"):
        Chat(provider=ScriptedProvider([]), display=False, max_steps=bad)
    chat = _weather_chat()
    with pytest.raises(ValueError, match="max_steps must be a positive int"):
        chat.ask("Weather in Oslo?", max_steps=bad)
    assert len(chat.messages) == 0 and len(chat.provider.requests) == 0  # type: ignore[attr-defined]
    chat.ask_later("Weather in Oslo?")
    with pytest.raises(ValueError, match="max_steps must be a positive int"):
        chat.complete(max_steps=bad)
    assert len(chat.messages) == 1 and len(chat.provider.requests) == 0  # type: ignore[attr-defined]
    assert chat.complete(max_steps=5).content == "It is sunny in Oslo."  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [math.nan, math.inf, 0, -2, "5"])
def test_a_chats_tool_timeout_is_checked_like_the_default(bad: Any) -> None:
    chat = _weather_chat()
    with pytest.raises(ToolOptionError, match="timeout must be a finite number of seconds"):
        chat.with_tool_options(timeout=bad)
    assert chat.tool_options.timeout is None


@pytest.mark.parametrize("option", ["stream", "display"])
def test_a_chats_flags_are_true_or_false(option: str) -> None:
    with pytest.raises(ValueError, match=f"{option} must be True or False, got 'no'"):
        Chat(provider=ScriptedProvider([]), **{option: "no"})
