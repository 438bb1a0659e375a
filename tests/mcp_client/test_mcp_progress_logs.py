"""An MCP server's progress notifications and log messages during a call (issue 26, item 3).

Against protocol_server.py (the official SDK) over stdio and streamable HTTP: progress
becomes ``ToolCallProgress`` events folded into the call's record (the card's bar, the
log's columns); ``notifications/message`` becomes ``ToolCallLog`` events under the call
(folded on its card) and Python logging under ``nbagent.mcp``, at the level the client asks
for (``info``: the server's debug line never arrives); the server's secret never shows.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _mcp_servers import PROTOCOL_SERVER, TOKEN

from nbagent import Chat, MCPServer, SQLiteStore, ToolCallLog, ToolCallProgress
from nbagent._record import fold
from nbagent.testing import ScriptedProvider, call_tools, reply


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest) -> Iterator[MCPServer]:
    if request.param == "stdio":
        s = MCPServer.stdio(
            sys.executable, [PROTOCOL_SERVER], env={"NOTES_TOKEN": TOKEN}, prefix="p"
        )
    else:
        url = request.getfixturevalue("http_protocol_url")
        s = MCPServer.http(url, headers={"X-Token": TOKEN}, prefix="p")
    yield s
    s.close()


def count(server: MCPServer, n: int = 3, **chat_kwargs: object) -> Chat:
    provider = ScriptedProvider([call_tools(("p_count", {"n": n}, "c1")), reply("done")])
    chat = Chat(provider=provider, display=False, **chat_kwargs).with_tools(server)  # type: ignore[arg-type]
    chat.ask("count")
    return chat


def test_progress_notifications_become_events_and_the_calls_latest_progress(
    server: MCPServer,
) -> None:
    chat = count(server, 3)
    progress = [e for e in chat.events if isinstance(e, ToolCallProgress)]
    assert [(e.progress, e.total, e.message) for e in progress] == [
        (1.0, 3.0, "step 1 of 3"),
        (2.0, 3.0, "step 2 of 3"),
        (3.0, 3.0, "step 3 of 3"),
    ]
    assert all(e.call.id == "c1" and e.step == 2 for e in progress)
    r = chat.record.call("c1")
    assert (r.progress, r.progress_total, r.progress_message) == (3.0, 3.0, "step 3 of 3")
    assert chat.log.frame().iloc[0]["progress_message"] == "step 3 of 3"


def test_log_messages_fold_under_the_call_and_go_to_python_logging_without_the_secret(
    server: MCPServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="nbagent.mcp"):
        chat = count(server, 2)
    logs = [e for e in chat.events if isinstance(e, ToolCallLog)]
    assert [(e.level, e.message, e.logger) for e in logs] == [
        ("info", "did step 1", "counter"),
        ("info", "did step 2", "counter"),
        ("warning", "used token *** for the count", None),
    ]  # the debug line is below the level asked for: never sent
    r = chat.record.call("c1")
    assert r.log_messages == 3 and [x.message for x in r.logs][-1].endswith("*** for the count")
    records = [  # the server's log lines (progress is logged at debug too)
        x for x in caplog.records if x.name == "nbagent.mcp" and ": progress " not in x.getMessage()
    ]
    assert [x.levelno for x in records] == [logging.INFO, logging.INFO, logging.WARNING]
    assert "[counter]: did step 1" in records[0].getMessage()
    html = chat._repr_mimebundle_()["text/html"]
    assert "3 server log messages" in html and "nba-logs-bad" in html  # a warning among them
    everything = [html, chat._repr_mimebundle_()["text/plain"], caplog.text, repr(chat.events)]
    everything.append(chat.log.frame().to_csv())
    assert not [x for x in everything if TOKEN in x]
    assert fold(chat.events) == chat.record


def test_progress_and_logs_are_stored_and_a_loaded_chat_has_them(
    server: MCPServer, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "chats.db")
    chat = count(server, 2, store=store)
    chat.close()
    loaded = Chat.load(chat.id, store=store, provider=ScriptedProvider([]), display=False)
    r = loaded.record.call("c1")
    assert (r.progress, r.progress_message, r.log_messages) == (2.0, "step 2 of 2", 3)
    raw = (tmp_path / "chats.db").read_bytes()
    assert TOKEN.encode() not in raw
    store.close()


def test_a_direct_call_outside_a_chat_still_works_and_only_logs(
    server: MCPServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="nbagent.mcp"):
        assert server.call("count", {"n": 2}) == "counted to 2"
    assert "did step 2" in caplog.text and TOKEN not in caplog.text
