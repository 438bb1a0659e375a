"""An MCP server's tools in a chat: schemas, approval by annotation and by rule, results,
selection, streamable HTTP, and a stored chat loaded back with its server.

The server is tests/mcp_client/notes_server.py, a real server built with the official
``mcp`` SDK, started as a process (stdio) or serving HTTP on 127.0.0.1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _mcp_servers import notes_server

import nbagent
from nbagent import Chat, MCPServer, tool
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply


def chat_with(*tools: Any, script: list[Any], **kwargs: Any) -> tuple[Chat, ScriptedProvider]:
    provider = ScriptedProvider(script)
    return Chat(provider=provider, **kwargs).with_tools(*tools), provider


def result_of(chat: Chat, name: str) -> nbagent.ToolResultMessage:
    call = next(c for c in chat.tool_calls if c.name == name)
    assert call.result is not None, call
    return call.result


def test_a_servers_tools_are_offered_with_their_schemas_and_label(
    shared_notes: MCPServer,
) -> None:
    @tool
    def local_clock() -> str:
        """The time here."""
        return "noon"

    chat, provider = chat_with(shared_notes, local_clock, script=[reply("hi")])
    chat.ask("hello")
    sent = {spec.name: spec for spec in provider.requests[0].tools}
    assert "local_clock" in sent
    assert {"notes_read_note", "notes_add_note", "notes_delete_note"} <= set(sent)
    add = sent["notes_add_note"]
    assert add.description.startswith("Add a note")
    assert add.input_schema["required"] == ["title", "text"]
    assert add.input_schema["properties"]["tags"]["anyOf"][0] == {
        "items": {"type": "string"},
        "type": "array",
    }
    by_name = {t.name: t for t in chat.tools}
    assert by_name["notes_read_note"].server == "notes"
    assert by_name["notes_read_note"].remote_name == "read_note"
    assert by_name["local_clock"].server is None


def test_nothing_connects_until_a_chat_needs_the_server() -> None:
    server = notes_server()
    chat = Chat(provider=ScriptedProvider([reply("hi")])).with_tools(server)
    assert not server.connected
    chat.ask("hello")
    assert server.connected
    assert server.label == "notes"  # the name the server gives itself, once connected
    chat.close()
    assert not server.connected


def test_approval_by_annotation_read_only_runs_destructive_and_unannotated_wait(
    shared_notes: MCPServer,
) -> None:
    chat, _ = chat_with(
        shared_notes,
        script=[
            call_tools(
                ("notes_read_note", {"title": "todo"}),
                ("notes_delete_note", {"title": "todo"}),
                ("notes_add_note", {"title": "x", "text": "y"}),
            ),
            reply("done"),
        ],
    )
    chat.ask("go")
    assert chat.status == "awaiting_approval"
    status = {c.name: c.status for c in chat.tool_calls}
    assert status == {
        "notes_read_note": "ok",
        "notes_delete_note": "awaiting_approval",
        "notes_add_note": "awaiting_approval",
    }
    assert result_of(chat, "notes_read_note").content == "buy milk"
    assert {c.server for c in chat.tool_calls} == {"notes"}  # cards and pending show the label
    assert set(chat.log["server"]) == {"notes"}
    delete, add = chat.pending_approvals
    chat.deny(delete, reason="keep it")
    chat.approve(add)
    chat.complete()
    assert chat.status == "complete"
    assert result_of(chat, "notes_add_note").content == "added 'x'"
    assert result_of(chat, "notes_delete_note").status == "denied"
    # the denied call never reached the server: the note is still there
    assert shared_notes.call("read_note", {"title": "todo"}) == "buy milk"


@pytest.mark.parametrize(
    ("approval", "gated"),
    [
        ("always", {"read_note", "delete_note", "add_note"}),
        ("never", set()),
        ({"read_note": True, "delete_note": "never"}, {"read_note", "add_note"}),
        ({"*": "always", "add_note": False}, {"read_note", "delete_note"}),
    ],
)
def test_approval_rules_per_server_and_per_tool(
    shared_notes: MCPServer, approval: Any, gated: set[str]
) -> None:
    # the same server process, seen through a server object with another rule
    server = MCPServer.stdio("unused", approval=approval, prefix="notes")
    server._connection = shared_notes._connection
    tools = {t.remote_name: t for t in server.list_tools()}
    assert {n for n in ("read_note", "delete_note", "add_note") if tools[n].requires_approval} == (
        gated
    )


def test_an_approval_function_decides_each_call_as_a_resolver(shared_notes: MCPServer) -> None:
    def only_todo(call: nbagent.ToolCall) -> bool | None:
        if call.name == "n_delete_note":
            return None  # a human decides
        return call.arguments.get("title") == "todo"

    server = MCPServer.stdio("unused", approval=only_todo, prefix="n")
    server._connection = shared_notes._connection
    chat, _ = chat_with(
        server,
        script=[
            call_tools(
                ("n_read_note", {"title": "todo"}),
                ("n_read_note", {"title": "secret"}),
                ("n_delete_note", {"title": "todo"}),
            ),
            reply("done"),
        ],
    )
    chat.ask("go")
    first, second, third = chat.tool_calls
    assert (first.status, first.decision.by if first.decision else None) == ("ok", "resolver")
    assert second.status == "denied"
    assert third.status == "awaiting_approval"
    assert third.approval is not None and third.approval.source == "resolver"


def test_always_allow_approves_an_mcp_tool_like_a_local_one(shared_notes: MCPServer) -> None:
    chat, _ = chat_with(
        shared_notes,
        script=[call_tools(("notes_add_note", {"title": "a", "text": "b"})), reply("ok")],
    )
    chat.always_allow("notes_add_note")
    chat.ask("add")
    assert chat.status == "complete"
    call = chat.tool_calls[0]
    assert call.decision is not None and call.decision.by == "policy:always_allow:notes_add_note"


def test_results_text_structured_image_and_is_error(shared_notes: MCPServer) -> None:
    seen: list[nbagent.ToolResult] = []
    chat, _ = chat_with(
        shared_notes,
        script=[
            call_tools(
                ("notes_note_info", {"title": "todo"}),
                ("notes_picture", {}),
                ("notes_read_note", {"title": "nope"}),
            ),
            reply("ok"),
        ],
    )
    chat.after_tool_result(seen.append)
    chat.ask("go")
    info = result_of(chat, "notes_note_info")
    assert json.loads(info.content) == {"title": "todo", "text": "buy milk", "words": 2}
    assert info.value.structured_content == {"title": "todo", "text": "buy milk", "words": 2}
    picture = result_of(chat, "notes_picture")
    assert picture.status == "ok"
    assert picture.content == "[image 1: image/png, 0 KB]"  # a real image part follows
    assert [(p.media_type, len(p.data)) for p in picture.parts] == [("image/png", 66)]
    assert picture.value.content[0]["type"] == "image"
    missing = result_of(chat, "notes_read_note")
    assert missing.status == "error" and missing.is_error
    assert "no note called 'nope'" in missing.content
    assert "MCPToolError" in missing.content
    assert [r.status for r in seen] == ["ok", "ok", "error"]


def test_arguments_are_checked_against_the_input_schema_before_anything_is_sent(
    shared_notes: MCPServer,
) -> None:
    chat, _ = chat_with(
        shared_notes,
        script=[
            call_tools(
                ("notes_read_note", {"title": 42}),
                ("notes_read_note", {}),
                ("notes_echo", {"text": "fine", "extra": 1}),
            ),
            reply("ok"),
        ],
        on_tool_error="result",
    )
    chat.always_allow("notes_echo")
    chat.ask("go")
    bad_type, missing, extra = chat.tool_calls
    assert bad_type.status == "error" and "expected string" in bad_type.result.content  # type: ignore[union-attr]
    assert missing.status == "error" and "title" in missing.result.content  # type: ignore[union-attr]
    # an argument the schema does not declare (the SDK's schemas say nothing of others, and
    # its servers ignore them) is refused: a server ignoring a dropped dry_run pays for real
    assert extra.status == "error" and "extra: unexpected argument" in extra.result.content  # type: ignore[union-attr]


def test_a_selection_offers_only_the_tools_it_names(shared_notes: MCPServer) -> None:
    chat, provider = chat_with(
        shared_notes.tools(
            include=["read_note", "notes_echo", "delete_note"], exclude=["delete_note"]
        ),
        script=[reply("ok")],
    )
    chat.ask("go")
    assert sorted(s.name for s in provider.requests[0].tools) == ["notes_echo", "notes_read_note"]
    with pytest.raises(TypeError):
        shared_notes.tools(include="read_note")


def test_prefixes_keep_two_servers_tools_apart(shared_notes: MCPServer) -> None:
    other = MCPServer.stdio("unused", prefix="other")
    other._connection = shared_notes._connection
    chat, provider = chat_with(
        shared_notes,
        other,
        script=[
            call_tools(("notes_echo", {"text": "a"}), ("other_echo", {"text": "b"})),
            reply(""),
        ],
    )
    chat.ask("go")
    names = {s.name for s in provider.requests[0].tools}
    assert {"notes_echo", "other_echo"} <= names
    assert [c.result.content for c in chat.tool_calls] == ["a", "b"]  # type: ignore[union-attr]
    assert {t.server for t in chat.tools if t.name.endswith("_echo")} == {"notes", "other"}


def test_streamable_http_with_headers_that_never_show(http_notes_url: str) -> None:
    secret = "sk-test-never-shown-123"
    server = MCPServer.http(http_notes_url, headers={"Authorization": f"Bearer {secret}"})
    with server:
        chat, _ = chat_with(
            server,
            script=[
                call_tools(("read_note", {"title": "todo"}), ("delete_note", {"title": "x"})),
                reply("ok"),
            ],
        )
        chat.ask("go")
        assert chat.tool_calls[0].result.content == "buy milk"  # type: ignore[union-attr]
        assert chat.tool_calls[1].status == "awaiting_approval"
        chat.approve(chat.tool_calls[1])
        chat.complete()
        assert chat.tool_calls[1].result.content == "deleted 'x'"  # type: ignore[union-attr]
        assert server.label == "notes"
        assert secret not in repr(server) and secret not in repr(chat.tools)
    assert not server.connected


def test_a_stored_chat_loads_back_with_its_server_and_runs_the_approved_call(
    tmp_path: Path, shared_notes: MCPServer
) -> None:
    db = tmp_path / "chats.db"
    chat, _ = chat_with(
        shared_notes,
        script=[call_tools(("notes_add_note", {"title": "stored", "text": "kept"})), reply("")],
        store=db,
    )
    chat.ask("add it")
    assert chat.status == "awaiting_approval"
    chat_id = chat.id
    chat.close()  # also closes the server's connection; the next use reconnects

    again = notes_server(prefix="notes")
    try:
        loaded = Chat.load(
            chat_id, store=db, tools=[again], provider=ScriptedProvider([reply("added")])
        )
        (pending,) = loaded.pending_approvals
        assert pending.name == "notes_add_note"
        assert pending.server == "notes"  # the stored call kept the server's label
        tool_ = {t.name: t for t in loaded.tools}[pending.name]
        assert tool_.server == "notes"
        loaded.approve(pending)
        loaded.complete()
        assert pending.result is not None and pending.result.content == "added 'stored'"
        assert again.call("read_note", {"title": "stored"}) == "kept"
        loaded.close()
    finally:
        again.close()


def test_making_a_server_checks_its_arguments() -> None:
    with pytest.raises(nbagent.ToolDefinitionError, match="prefix"):
        MCPServer.stdio("x", prefix="bad prefix")
    with pytest.raises(nbagent.ToolDefinitionError, match="approval"):
        MCPServer.stdio("x", approval="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="http"):
        MCPServer.http("ftp://example.org/mcp")
    with pytest.raises(nbagent.MCPServerError, match=r"could not be started.*not found"):
        MCPServer.stdio("/nonexistent/nbagent-mcp-server").connect()
    with pytest.raises(nbagent.MCPServerError, match="'no-such-command' not found on the serv"):
        MCPServer.stdio("no-such-command").connect()


def test_an_mcp_calls_card_names_its_server_and_says_why_it_waits(
    shared_notes: MCPServer,
) -> None:
    from nbagent.notebook import ChatView
    from nbagent.notebook._fallback import chat_mimebundle

    chat, _ = chat_with(
        shared_notes,
        script=[
            call_tools(
                ("notes_delete_note", {"title": "todo"}),
                ("notes_add_note", {"title": "x", "text": "y"}),
            ),
            reply("done"),
        ],
        display=False,
    )
    view = ChatView(chat)
    chat.ask("go")
    delete, add = chat.pending_approvals
    assert (delete.server, add.server) == ("notes", "notes")
    assert delete.approval is not None and delete.approval.reason == (
        "notes_delete_note requires approval before it runs (the notes server marks it destructive)"
    )
    cards = {c.tool: c for c in view._cards.values()}
    assert cards["notes_delete_note"].reason == "the notes server marks it destructive"
    assert cards["notes_add_note"].reason == "the notes server does not mark it read-only"
    assert '<span class="nba-server" title="MCP server notes">notes</span>' in (
        cards["notes_delete_note"].value
    )
    assert cards["notes_add_note"].editable and not cards["notes_add_note"].hosted
    assert "tool notes · notes_add_note(" in chat_mimebundle(chat)["text/plain"]
    always = MCPServer.stdio("unused", approval="always", prefix="notes")
    always._connection = shared_notes._connection
    notes = {t.remote_name: t for t in always.list_tools()}
    assert notes["read_note"].approval_note == "approval='always' for the notes server"
    chat.deny(delete)
    chat.deny(add)
    chat.complete()
    assert chat.status == "complete"
