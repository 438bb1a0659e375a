"""A tool whose parameter name Anthropic refuses fails before sending, naming the tool.

An MCP server listing a tool with a parameter ``filter[id]`` (or ``größe``) made every
Anthropic request of the chat a 400, whatever was asked: nbagent checks its own tools'
parameter names when they are declared, not an MCP server's (nor a tool dict's). On the
Anthropic wire such a tool is now a ``ToolDefinitionError`` naming the tool and the key
and saying how to leave it out, before anything is sent.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import nbagent
from nbagent import (
    AnthropicProvider,
    Chat,
    ChatMessage,
    OpenAIProvider,
    ToolDefinitionError,
    ToolSpec,
)
from nbagent._schema import property_key_ok
from nbagent.providers import ModelRequest
from nbagent.providers._anthropic_wire import tools_json
from nbagent.testing import FakeLLMServer, Turn

pytest.importorskip("mcp")

SERVER = textwrap.dedent(
    """
    from typing import Annotated

    from mcp.server.mcpserver import MCPServer
    from pydantic import Field

    server = MCPServer("odd", log_level="WARNING")


    @server.tool(description="Search items by an id filter.")
    def search(filter_id: Annotated[str, Field(alias="filter[id]")]) -> str:
        return filter_id


    @server.tool(description="Look up a word.")
    def lookup(word: str) -> str:
        return "found " + word


    server.run()
    """
)
USER = ChatMessage("user", "look up the word kiwi")


@pytest.fixture
def odd(tmp_path: Path) -> Iterator[nbagent.MCPServer]:
    script = tmp_path / "odd_server.py"
    script.write_text(SERVER)
    with nbagent.MCPServer.stdio(sys.executable, [str(script)]) as server:
        yield server


def test_an_mcp_tool_anthropic_refuses_fails_before_sending(odd: nbagent.MCPServer) -> None:
    assert (
        "filter[id]"
        in {t.name: t for t in odd.list_tools()}["search"].spec.input_schema["properties"]
    )
    with FakeLLMServer([Turn(text="fine")], cycle=True) as fake:  # strict: it 400s such a tool
        provider = AnthropicProvider(
            "claude-sonnet-4-5", base_url=fake.anthropic_base_url, api_key="sk-ant-x"
        )
        chat = Chat(provider=provider, display=False).with_tools(odd)
        with pytest.raises(ToolDefinitionError) as info:
            chat.ask("search for item 7")
        text = str(info.value)
        assert "'search'" in text and "'filter[id]'" in text
        assert "server.tools(exclude=['search'])" in text and "nothing was sent" in text
        assert fake.requests == []
        # what it says to do works: the other tools go on
        kept = Chat(provider=provider, display=False).with_tools(odd.tools(exclude=["search"]))
        assert kept.ask("look up kiwi").content == "fine"
        assert [t["name"] for t in fake.requests[0].body["tools"]] == ["lookup"]
        provider.close()


def test_openai_takes_the_same_tool(odd: nbagent.MCPServer) -> None:
    with FakeLLMServer([Turn(text="fine")]) as fake:
        provider = OpenAIProvider("gpt-4.1-mini", base_url=fake.openai_base_url, api_key="sk-x")
        chat = Chat(provider=provider, display=False).with_tools(odd)
        assert chat.ask("search for item 7").content == "fine"
        provider.close()


def test_a_tool_dict_is_checked_too() -> None:
    tool = {"name": "size", "input_schema": {"type": "object", "properties": {"größe": {}}}}
    provider = AnthropicProvider("claude-sonnet-4-5", api_key="sk-ant-x")
    with pytest.raises(ToolDefinitionError, match="'größe'"):
        provider.preview_request(messages=[USER], tools=[tool])
    with pytest.raises(ToolDefinitionError, match="'größe'"):
        provider.complete(ModelRequest((USER,), tools=(tool,)))  # type: ignore[arg-type]
    assert provider.last_request is None
    provider.close()


@given(st.dictionaries(st.text(max_size=70), st.just({"type": "string"}), max_size=4))
def test_refused_exactly_when_a_key_is_not_anthropics(props: dict[str, object]) -> None:
    spec = ToolSpec("t", "", {"type": "object", "properties": props})
    if all(property_key_ok(k) for k in props):
        assert tools_json([spec])
    else:
        with pytest.raises(ToolDefinitionError):
            tools_json([spec])
