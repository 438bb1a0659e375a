"""A hand-written tool dict with a key nbagent does not know is refused, naming the nearest.

``{"name": ..., "description": ..., "input_shema": {...}}`` (one letter short) was accepted
and sent as a tool with no parameters: the model called it with ``{}`` and the tool failed,
far from the typo. The docs promise a tool of the wrong shape is a ``TypeError`` before
anything is sent; the message also said 'description' and 'input_schema' were required,
and both are optional.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nbagent import ChatMessage, DemoProvider, ModelRequest
from nbagent.providers._base import _TOOL_KEYS, as_spec
from nbagent.providers._sdk import SDKProvider

USER = ChatMessage("user", "What is the weather in Lagos?")
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_a_mistyped_schema_key_is_refused_naming_the_right_one(
    kind: str, provider_factory: Callable[..., SDKProvider]
) -> None:
    provider = provider_factory(kind)
    typo = {"name": "get_weather", "description": "Weather", "input_shema": SCHEMA}
    with pytest.raises(TypeError, match=r"'input_shema' \(did you mean 'input_schema'\?\)"):
        provider.preview_request(messages=[USER], tools=[typo])
    with pytest.raises(TypeError, match="input_shema"):
        provider.complete_with_tools(messages=[USER], tools=[typo])
    assert provider.last_request is None  # nothing was sent


def test_the_demo_model_refuses_it_too() -> None:
    with pytest.raises(TypeError, match=r"'paramters' \(did you mean 'parameters'\?\)"):
        DemoProvider().complete_with_tools(
            messages=[USER], tools=[{"name": "get_weather", "paramters": SCHEMA}]
        )


def test_the_message_says_only_the_name_is_required() -> None:
    with pytest.raises(TypeError) as info:
        as_spec({"nam": "get_weather"})
    text = str(info.value)
    assert "'nam' (did you mean 'name'?)" in text
    assert "'name' (required" in text and "optionally 'description'" in text
    with pytest.raises(TypeError, match=r"needs 'name'.*optionally"):
        as_spec({"description": "no name"})
    assert as_spec({"name": "ping"}).input_schema == {"type": "object", "properties": {}}


def test_the_apis_own_formats_still_pass() -> None:
    """OpenAI's Chat and Responses shapes, Anthropic's with cache_control, an MCP listing."""
    shapes = [
        {"type": "function", "function": {"name": "w", "parameters": SCHEMA, "strict": True}},
        {"type": "function", "name": "w", "description": "d", "parameters": SCHEMA},
        {"name": "w", "input_schema": SCHEMA, "cache_control": {"type": "ephemeral"}},
        {"name": "w", "type": "custom", "input_schema": SCHEMA},
        {
            "name": "w",
            "title": "Weather",
            "inputSchema": SCHEMA,
            "outputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": True},
            "_meta": {},
            "icons": [],
        },
    ]
    for shape in shapes:
        assert as_spec(shape).input_schema == SCHEMA, shape
    with pytest.raises(TypeError, match="unknown key 'extra'"):
        as_spec({"type": "function", "function": {"name": "w"}, "extra": 1})
    with pytest.raises(TypeError, match="'web_search' is not a function tool"):
        as_spec({"name": "w", "type": "web_search"})


@given(
    key=st.text(min_size=1, max_size=20).filter(lambda k: k not in _TOOL_KEYS),
    value=st.one_of(st.none(), st.integers(), st.text(max_size=5), st.just(SCHEMA)),
)
def test_any_unknown_key_is_refused_by_name(key: str, value: object) -> None:
    tool = {"name": "get_weather", "description": "Weather.", "input_schema": SCHEMA, key: value}
    with pytest.raises(TypeError, match="unknown key") as info:
        ModelRequest((USER,), tools=(tool,))  # type: ignore[arg-type]
    assert repr(key) in str(info.value)


def test_an_mcp_listing_and_anthropics_own_keys_are_taken() -> None:
    """A raw MCP tools/list entry carries ``execution`` (task support), the MCP SDK's
    ``model_dump()`` spells ``output_schema`` and ``meta``, and Anthropic's tool format has
    ``input_examples``, ``defer_loading``, ``eager_input_streaming``: refusing them broke
    tool dicts that worked ("did you mean 'description'?")."""
    import mcp.types

    listed = mcp.types.Tool(name="search", inputSchema={"type": "object", "properties": {}})
    for tool in (
        listed.model_dump(),
        listed.model_dump(by_alias=True),
        {"name": "s", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}},
        {"name": "s", "input_schema": {"type": "object"}, "input_examples": [{}]},
        {"name": "s", "defer_loading": True, "eager_input_streaming": True},
    ):
        assert as_spec(tool).name in ("search", "s")
