"""Ordered rounds with a real MCP server (issue 23, A.4).

The report: with the reference memory server, ``read_graph`` returned an empty graph while
``create_entities`` waited for approval. The same shape on the notes server (official
``mcp`` SDK, a real process): ``add_note`` is unannotated (gated by the default rule) and
``read_note`` is read-only (ungated). By default the read runs first, fails to find the
note and is marked; under ``order="listed"`` it waits and reads what was written.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _mcp_servers import notes_server

import nbagent
from nbagent import Chat, MCPServer, ToolCallFinished, ToolResultMessage
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply


@pytest.fixture(params=["sequential", "threads", "async"])
def notes(request: pytest.FixtureRequest) -> Iterator[MCPServer]:
    nbagent.configure(tool_concurrency=request.param)
    server = notes_server(prefix="notes")
    yield server
    server.close()


def write_then_read(server: MCPServer, order: str | None) -> Chat:
    provider = ScriptedProvider(
        [
            call_tools(
                ("notes_add_note", {"title": "plan", "text": "ship it"}, "w1"),
                ("notes_read_note", {"title": "plan"}, "r1"),
            ),
            reply("done"),
        ]
    )
    chat = Chat(provider=provider).with_tools(server)
    if order is not None:
        chat.with_tool_options(order=order)
    chat.ask("write the plan, then read it back")
    return chat


def result(chat: Chat, call_id: str) -> ToolResultMessage:
    return next(
        m for m in chat.transcript if isinstance(m, ToolResultMessage) and m.tool_call_id == call_id
    )


def test_by_default_the_read_runs_first_and_is_marked(notes: MCPServer) -> None:
    chat = write_then_read(notes, None)
    assert [c.id for c in chat.pending_approvals] == ["w1"]
    assert chat.get_call("r1").status == "error"  # it ran: the note is not there yet
    chat.approve("w1")
    chat.complete()
    assert "no note called 'plan'" in result(chat, "r1").content
    marks = {e.call.id: e.ran_before for e in chat.events if isinstance(e, ToolCallFinished)}
    assert marks["r1"] == ("w1",)
    assert chat.log.set_index("call_id").loc["r1", "ran_before"] == "notes_add_note (w1)"


def test_listed_the_read_waits_and_reads_what_was_written(notes: MCPServer) -> None:
    chat = write_then_read(notes, "listed")
    assert chat.awaiting_approval and chat.get_call("r1").status == "requested"
    chat.approve("w1")
    chat.complete()
    assert chat.is_complete
    assert result(chat, "r1").content == "ship it"
    assert chat.log["ran_before"].isna().all()
