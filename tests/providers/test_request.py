"""The seam's one request value: what it accepts, what it stores, how adapters preview it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from _provider_harness import WEATHER, WEATHER_SCHEMA

import nbagent
from nbagent import ChatMessage, DemoProvider, ModelRequest, Provider, StreamDelta, ToolSpec
from nbagent.providers._sdk import SDKProvider
from nbagent.testing import ScriptedProvider, reply

USER = ChatMessage("user", "What is the weather in Paris?")


def test_lists_and_dict_tools_are_stored_as_tuples_of_specs() -> None:
    as_dict = {"name": "get_weather", "description": "Weather.", "input_schema": WEATHER_SCHEMA}
    request = ModelRequest([USER], tools=[as_dict, WEATHER])  # type: ignore[arg-type]
    assert request.messages == (USER,)
    assert request.tools == (ToolSpec("get_weather", "Weather.", WEATHER_SCHEMA), WEATHER)
    assert request.tools[0].input_schema is WEATHER_SCHEMA  # not copied: it keys the wire cache
    assert request.tools[1] is WEATHER
    with pytest.raises(TypeError, match="needs 'name'"):
        ModelRequest((USER,), tools=({"description": "no name"},))  # type: ignore[arg-type]


def test_on_delta_is_not_part_of_the_value() -> None:
    seen: list[StreamDelta] = []
    streamed = ModelRequest((USER,), stream=True, on_delta=seen.append)
    assert streamed == ModelRequest((USER,), stream=True)
    assert "on_delta" not in repr(streamed)
    with pytest.raises(dataclasses.FrozenInstanceError):
        streamed.stream = False  # type: ignore[misc]


def test_the_in_process_providers_implement_the_protocol() -> None:
    request = ModelRequest((USER,), tools=(WEATHER,), tool_choice="get_weather", calls="one")
    scripted = ScriptedProvider([reply("sunny")])
    demo = DemoProvider()
    for provider in (scripted, demo):
        assert isinstance(provider, Provider)
    assert scripted.complete(request).text == "sunny"
    assert scripted.requests == [request]
    assert [c.name for c in demo.complete(request).tool_calls] == ["get_weather"]
    assert nbagent.testing.ScriptedRequest is ModelRequest  # the older name still works


def test_preview_takes_the_request_or_its_fields(
    kind: str, provider_factory: Callable[..., SDKProvider]
) -> None:
    provider = provider_factory(kind)
    fields: dict[str, Any] = {
        "messages": (USER,),
        "system": "Be brief.",
        "tools": (WEATHER,),
        "tool_choice": "required",
        "calls": "one",
        "max_tokens": 99,
    }
    request = ModelRequest(**fields)
    body = provider.preview_request(request)
    assert body == provider.preview_request(**fields)
    assert provider.preview_request(request, tool_choice="auto") == provider.preview_request(
        **{**fields, "tool_choice": "auto"}
    )
    assert 99 in body.values() and provider.last_request is None  # nothing was sent


def test_dict_tools_reuse_the_cached_wire_json(
    kind: str, provider_factory: Callable[..., SDKProvider]
) -> None:
    provider = provider_factory(kind)
    tools = [{"name": "get_weather", "description": "Weather.", "input_schema": WEATHER_SCHEMA}]
    provider.preview_request(messages=(USER,), tools=tools)
    cached = provider._tools._value  # type: ignore[attr-defined]
    provider.preview_request(messages=(USER, USER), tools=tools)
    assert provider._tools._value is cached  # type: ignore[attr-defined]
