"""A forced tool choice is spent when its tool was used, not when any tool round closed.

RubyLLM (the seed): "After a required or specific tool executes, RubyLLM clears that choice
so the model can answer without calling it again." nbagent cleared a ``required`` or named
choice whenever a tool round closed, even when the forced tool never ran: the model called
only another tool (skipped as off-choice), or its one call had invalid arguments or named no
tool of the chat. The next request went out with ``tool_choice`` auto and the model answered
without the tool it was told to call. Now the choice is spent only by a call of the forced
tool (any tool, for ``required``) that ran (its result, its own error) or that someone
decided (a denial counts: else the model is forced into a denied tool again and again); a
round whose every call was skipped by the choice or the limit, or rejected as malformed or
unknown, leaves it in force, for at most ``FORCED_IGNORED_ROUNDS`` such rounds in a row
(then the model may answer: tests/test_forced_choice_bounded.py). Through the real SDK
clients against the loopback fake server, on the three wires, streamed and not.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _provider_harness import make_provider

from nbagent import Chat, tool
from nbagent._options import FORCED_IGNORED_ROUNDS
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

WIRES = [(k, s) for k in ("openai-chat", "openai-responses", "anthropic") for s in (False, True)]
IDS = [f"{k}-{'sse' if s else 'json'}" for k, s in WIRES]

ran: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Get the weather for a city.

    Args:
        city: The city.
    """
    ran.append(f"weather {city}")
    if city == "Atlantis":
        raise LookupError("no such city")
    return f"{city}: 18 C"


@tool
def get_time(city: str) -> str:
    """Get the time in a city.

    Args:
        city: The city.
    """
    ran.append(f"time {city}")
    return f"{city}: 12:00"


@tool(requires_approval=True)
def lock_door(door: str) -> str:
    """Lock a door.

    Args:
        door: Which door.
    """
    ran.append(f"lock {door}")
    return "locked"


@pytest.fixture(params=WIRES, ids=IDS)
def wire(request: pytest.FixtureRequest) -> Iterator[tuple[FakeLLMServer, str, bool]]:
    kind, stream = request.param
    with FakeLLMServer() as server:
        yield server, kind, stream
        assert not server.errors, server.errors


def _chat(wire: tuple[FakeLLMServer, str, bool], choice: str) -> Chat:
    server, kind, stream = wire
    ran.clear()
    chat = Chat(provider=make_provider(kind, server), display=False, stream=stream)
    return chat.with_tools(get_weather, get_time, lock_door).with_tool_options(choice=choice)


def _forced(body: dict[str, Any]) -> str:
    """The choice a request sent, on any wire: a tool's name, ``required`` or ``auto``."""
    sent = body.get("tool_choice", "auto")
    if isinstance(sent, str):
        return sent
    if sent["type"] in ("function", "tool"):
        return str(sent.get("name") or sent["function"]["name"])
    return {"any": "required"}.get(sent["type"], sent["type"])


def _choices(server: FakeLLMServer) -> list[str]:
    return [_forced(r.body) for r in server.requests]


# -- kept: the forced tool was never used ------------------------------------------


def test_another_tool_only_leaves_a_named_choice_in_force(
    wire: tuple[FakeLLMServer, str, bool],
) -> None:
    server = wire[0]
    server.script(
        [
            Turn(tool_calls=[FakeToolCall("get_time", {"city": "Rome"})]),
            Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Rome"})]),
            "It is 18 C in Rome.",
        ]
    )
    chat = _chat(wire, "get_weather")
    assert chat.ask("Weather in Rome?").content == "It is 18 C in Rome."
    assert ran == ["weather Rome"]  # the off-choice call was skipped, never run
    assert _choices(server) == ["get_weather", "get_weather", "auto"]


@pytest.mark.parametrize(
    "call",
    [
        FakeToolCall("get_weather", {"city": 5}),  # schema-invalid
        FakeToolCall("get_forecast", {"city": "Rome"}),  # no such tool
    ],
    ids=["invalid", "unknown"],
)
def test_a_rejected_call_leaves_required_in_force(
    wire: tuple[FakeLLMServer, str, bool], call: FakeToolCall
) -> None:
    server = wire[0]
    server.script(
        [
            Turn(tool_calls=[call]),
            Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Rome"})]),
            "It is 18 C in Rome.",
        ]
    )
    chat = _chat(wire, "required")
    chat.ask("Weather in Rome?")
    assert ran == ["weather Rome"]
    assert _choices(server) == ["required", "required", "auto"]


def test_a_server_ignoring_the_choice_gets_an_answer_within_the_bound(
    wire: tuple[FakeLLMServer, str, bool],
) -> None:
    """The model never complies (its server ignores tool_choice): after
    FORCED_IGNORED_ROUNDS rounds of skipped calls the choice is dropped and it answers,
    not forced until max_steps runs out."""
    server = wire[0]
    off = Turn(tool_calls=[FakeToolCall("get_time", {"city": "Rome"})])
    server.script([off] * FORCED_IGNORED_ROUNDS + ["I could not get the weather."])
    chat = _chat(wire, "get_weather")
    assert chat.ask("Weather in Rome?").content == "I could not get the weather."
    assert ran == [] and len(server.requests) == FORCED_IGNORED_ROUNDS + 1
    assert _choices(server) == ["get_weather"] * FORCED_IGNORED_ROUNDS + ["auto"]


def test_a_malformed_call_of_the_forced_tool_counts_as_ignored(
    wire: tuple[FakeLLMServer, str, bool],
) -> None:
    server = wire[0]
    bad = Turn(tool_calls=[FakeToolCall("get_weather", {"city": 5})])
    server.script([bad] * FORCED_IGNORED_ROUNDS + ["done"])
    chat = _chat(wire, "get_weather")
    assert chat.ask("Weather in Rome?").content == "done"
    assert ran == []
    assert _choices(server) == ["get_weather"] * FORCED_IGNORED_ROUNDS + ["auto"]


# -- spent: the forced tool ran, or someone decided it -----------------------------


@pytest.mark.parametrize(
    ("choice", "call"),
    [
        ("get_weather", FakeToolCall("get_weather", {"city": "Rome"})),
        ("get_weather", FakeToolCall("get_weather", {"city": "Atlantis"})),  # its own error
        ("required", FakeToolCall("get_time", {"city": "Rome"})),
    ],
    ids=["ran", "raised", "required-any-tool"],
)
def test_the_forced_tool_run_spends_the_choice(
    wire: tuple[FakeLLMServer, str, bool], choice: str, call: FakeToolCall
) -> None:
    server = wire[0]
    server.script([Turn(tool_calls=[call]), "done"])
    chat = _chat(wire, choice)
    assert chat.ask("Weather in Rome?").content == "done"
    assert len(ran) == 1
    assert _choices(server) == [choice, "auto"]


def test_a_denied_call_of_the_forced_tool_spends_the_choice(
    wire: tuple[FakeLLMServer, str, bool],
) -> None:
    """Else the model would be forced into the tool the person just refused."""
    server = wire[0]
    server.script([Turn(tool_calls=[FakeToolCall("lock_door", {"door": "front"})]), "ok"])
    chat = _chat(wire, "lock_door")
    chat.ask("Lock the front door.")
    chat.deny(chat.pending_approvals[0], reason="not now")
    assert chat.complete().content == "ok"
    assert ran == []
    assert _choices(server) == ["lock_door", "auto"]


def test_the_forced_tool_beside_a_skipped_call_spends_the_choice(
    wire: tuple[FakeLLMServer, str, bool],
) -> None:
    """A round where the forced tool ran spends it, whatever else was skipped."""
    server = wire[0]
    server.script(
        [
            Turn(
                tool_calls=[
                    FakeToolCall("get_time", {"city": "Rome"}),
                    FakeToolCall("get_weather", {"city": "Rome"}),
                ]
            ),
            "done",
        ]
    )
    chat = _chat(wire, "get_weather")
    chat.ask("Weather in Rome?")
    assert ran == ["weather Rome"]
    assert _choices(server) == ["get_weather", "auto"]
