"""An MCP server's resources and prompts (issue 26, item 3), against protocol_server.py.

``server.resources()`` / ``read_resource(uri)`` (sync and async), ``chat.ask(text,
resources=[...])``; the read tool the model follows a resource link with, gated by the
server's rule like its other tools (a denied read never happens, an approved one happens
once); ``server.prompts()`` / ``prompt(name, **arguments)`` asked with.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator

import pytest
from _mcp_servers import PROTOCOL_SERVER

from nbagent import Chat, ChatMessage, ImagePart, MCPServer, MCPServerError
from nbagent.mcp import MCPPromptMessages, MCPResource, MCPResult
from nbagent.testing import ScriptedProvider, call_tools, reply


def protocol(**kwargs: object) -> MCPServer:
    return MCPServer.stdio(sys.executable, [PROTOCOL_SERVER], prefix="p", **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def server() -> Iterator[MCPServer]:
    s = protocol()
    yield s
    s.close()


def test_resources_are_listed_and_read_sync_and_async(server: MCPServer) -> None:
    listed = {r.uri: r for r in server.resources()}
    assert {"docs://guide", "docs://logo", "docs://counter"} <= set(listed)
    guide = listed["docs://guide"]
    assert (guide.name, guide.mime_type, guide.server) == ("guide", "text/markdown", "p")
    text = server.read_resource("docs://guide")
    assert isinstance(text, MCPResult) and text == "# Guide\n\nTurn the knob to the left."
    assert text.uri == "docs://guide" and text.parts == ()
    assert guide.read() == text
    logo = server.read_resource("docs://logo")
    [part] = logo.parts
    assert isinstance(part, ImagePart) and part.data.startswith(b"\x89PNG")
    assert logo == "[image 1: image/png, 0 KB]"
    assert server.read_resource("docs://pages/7") == "page 7: nothing to see"  # a template

    async def both() -> tuple[list[MCPResource], MCPResult]:
        return await server.resources_async(), await server.read_resource_async("docs://guide")

    listed_async, read_async = asyncio.run(both())
    assert [r.uri for r in listed_async] == list(listed) and read_async == text


def test_an_unknown_resource_or_a_bad_uri_is_a_clear_error(server: MCPServer) -> None:
    with pytest.raises(MCPServerError, match="refused MCP resource 'docs://nope'"):
        server.read_resource("docs://nope")
    with pytest.raises(ValueError, match="non-empty string"):
        server.read_resource("")


def test_ask_with_resources_attaches_their_text_and_images(server: MCPServer) -> None:
    provider = ScriptedProvider([reply("to the left")])
    chat = Chat(provider=provider, display=False)
    guide = next(r for r in server.resources() if r.uri == "docs://guide")
    chat.ask("Which way is the knob?", resources=[guide, server.read_resource("docs://logo")])
    [sent] = [m for m in provider.requests[0].messages if getattr(m, "role", "") == "user"]
    assert sent.content.startswith(
        'Which way is the knob?\n\n<resource uri="docs://guide">\n# Guide'
    )
    assert '<resource uri="docs://logo">\n[image 1: image/png, 0 KB]\n</resource>' in sent.content
    assert [p.media_type for p in sent.parts] == ["image/png"]


def test_ask_async_takes_resources_and_a_bad_one_adds_nothing(server: MCPServer) -> None:
    chat = Chat(provider=ScriptedProvider([reply("ok")]), display=False)
    with pytest.raises(TypeError, match="resources= takes an MCP server's resources"):
        chat.ask("x", resources=["docs://guide"])
    assert chat.transcript == ()
    asyncio.run(chat.ask_async("read", resources=server.read_resource("docs://guide")))
    assert '<resource uri="docs://guide">' in chat.transcript[0].content


def read_chat(server: MCPServer) -> Chat:
    provider = ScriptedProvider(
        [
            call_tools(("p_find_doc", {"topic": "knobs"}, "f1")),
            call_tools(("p_read_resource", {"uri": "docs://counter"}, "r1")),
            reply("done"),
        ]
    )
    chat = Chat(provider=provider, display=False).with_tools(server)
    chat.ask("how do I use the knob?")
    return chat


def test_the_model_follows_a_resource_link_with_the_read_tool(server: MCPServer) -> None:
    before = server.call("reads")
    chat = read_chat(server)
    found = chat.get_call("f1").result
    assert found is not None and "[resource link: docs://guide (guide)]" in found.content
    read = chat.get_call("r1")
    assert read.status == "ok" and not read.approval.required  # type: ignore[union-attr]
    assert read.result is not None and read.result.content.startswith("read ")
    assert int(server.call("reads")) == int(before) + 1


@pytest.mark.parametrize("approval", ["always", {"read_resource": "always"}])
def test_the_read_tool_is_gated_by_the_servers_rule_a_denied_read_never_happens(
    approval: object,
) -> None:
    s = protocol(approval=approval)
    try:
        reads = int(s.call("reads"))
        chat = read_chat(s) if approval != "always" else None
        if chat is None:  # every tool asks: approve the link search, then deny the read
            provider = ScriptedProvider(
                [call_tools(("p_read_resource", {"uri": "docs://counter"}, "r1")), reply("done")]
            )
            chat = Chat(provider=provider, display=False).with_tools(s)
            chat.ask("read the counter")
        assert [c.id for c in chat.pending_approvals] == ["r1"]
        chat.deny("r1", reason="no reading")
        chat.complete()
        assert chat.get_call("r1").status == "denied"
        assert int(s.call("reads")) == reads  # never read
        provider2 = ScriptedProvider(
            [call_tools(("p_read_resource", {"uri": "docs://counter"}, "r2")), reply("done")]
        )
        chat2 = Chat(provider=provider2, display=False).with_tools(s)
        chat2.ask("read it now")
        chat2.approve("r2")
        chat2.complete()
        assert chat2.get_call("r2").status == "ok"
        assert int(s.call("reads")) == reads + 1  # read once
    finally:
        s.close()


def test_a_server_without_resources_gets_no_read_tool(shared_notes: MCPServer) -> None:
    names = [t.name for t in shared_notes.list_tools()]
    assert "notes_read_resource" not in names


def test_an_image_read_by_the_model_reaches_it_as_an_image(server: MCPServer) -> None:
    provider = ScriptedProvider(
        [call_tools(("p_read_resource", {"uri": "docs://logo"}, "r1")), reply("a logo")]
    )
    chat = Chat(provider=provider, display=False).with_tools(server)
    chat.ask("show the logo")
    result = chat.get_call("r1").result
    assert result is not None and [p.media_type for p in result.parts] == ["image/png"]


def test_prompts_are_listed_and_asked_with(server: MCPServer) -> None:
    prompts = {p.name: p for p in server.prompts()}
    review = prompts["review"]
    assert [(a.name, a.required) for a in review.arguments] == [("code", True), ("style", False)]
    asked = server.prompt("review", code="x = 1", style="thorough")
    assert isinstance(asked, MCPPromptMessages)
    assert asked == "Please review this code (thorough):\nx = 1" and asked.before == ()
    hello = server.prompt("hello")
    assert hello == "Go on." and [m.role for m in hello.before] == ["user", "assistant"]
    provider = ScriptedProvider([reply("sure")])
    chat = Chat(provider=provider, display=False)
    chat.ask(hello)
    assert [(m.role, m.content, m.turn) for m in chat.transcript] == [  # type: ignore[union-attr]
        ("user", "Hello!", 1),
        ("assistant", "Hi, how can I help?", 1),
        ("user", "Go on.", 1),
        ("assistant", "sure", 1),
    ]
    assert all(isinstance(m, ChatMessage) for m in provider.requests[0].messages)
    assert asyncio.run(server.prompt_async("review", code="y")).startswith("Please review")
    assert [p.name for p in asyncio.run(server.prompts_async())] == list(prompts)


def test_a_prompt_missing_a_required_argument_is_refused(server: MCPServer) -> None:
    with pytest.raises(MCPServerError, match="refused MCP prompt 'review'"):
        server.prompt("review")
