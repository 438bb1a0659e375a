"""Task-augmented tools (issue 26, item 3): the installed ``mcp`` SDK's client cannot run
them (``ClientSession.call_tool`` has no task parameter, and there is no ``tasks/get`` /
``tasks/result`` / ``tasks/cancel`` method: the task types exist for the 2025-11-25 wire
only), so a tool whose ``execution.taskSupport`` is ``required`` is not offered to the
model (a notice says why), and a direct call of it says so instead of failing on the
server. ``optional`` tools run as ordinary calls.

The SDK's own server cannot declare task support, so ``tasks_server.py`` adds
``execution.taskSupport`` to its ``tools/list`` answer in a middleware; the same rule is
also checked on the SDK's own ``Tool`` values fed to the server's rebuild.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _mcp_servers import PROTOCOL_SERVER
from mcp.types import Tool, ToolExecution

from nbagent import Chat, MCPServer, MCPServerError, ToolCallProgress
from nbagent.testing import ScriptedProvider, call_tools, reply

TASKS_SERVER = str(Path(__file__).with_name("tasks_server.py"))


@pytest.fixture(scope="module")
def tasks() -> Iterator[MCPServer]:
    server = MCPServer.stdio(sys.executable, [TASKS_SERVER], prefix="t")
    yield server
    server.close()


def listed(name: str, support: str | None) -> Tool:
    execution = None if support is None else ToolExecution(task_support=support)  # type: ignore[arg-type]
    return Tool(name=name, input_schema={"type": "object"}, execution=execution)


def test_a_task_only_tool_is_not_offered_and_a_direct_call_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = MCPServer.stdio(sys.executable, [PROTOCOL_SERVER], prefix="t")
    tools = server._rebuild(
        [
            listed("plain", None),
            listed("either", "optional"),
            listed("research", "required"),
            listed("never", "forbidden"),
        ]
    )
    assert [t.name for t in tools] == ["t_plain", "t_either", "t_never"]
    assert "'research' runs only as a task" in capsys.readouterr().err
    with pytest.raises(MCPServerError, match="runs only as a task"):
        server._refuse_task_only("research")
    server._refuse_task_only("either")  # offered, called as usual
    server.close()


def test_over_the_wire_a_task_only_tool_is_never_offered_nor_run(tasks: MCPServer) -> None:
    provider = ScriptedProvider(
        [call_tools(("t_research", {"topic": "tides"}, "c1")), reply("could not")]
    )
    chat = Chat(provider=provider, display=False).with_tools(tasks)
    chat.ask("research the tides")
    offered = {t.name for t in provider.requests[0].tools}
    assert offered == {"t_tally", "t_plain"}
    call = chat.get_call("c1")  # the model asked for it anyway: not a tool of the chat
    assert call.status == "error" and "RAN" not in (call.result.content if call.result else "")
    with pytest.raises(MCPServerError, match="runs only as a task"):
        tasks.call("research", {"topic": "tides"})


def test_an_optional_task_tool_runs_as_a_plain_call_with_its_progress(tasks: MCPServer) -> None:
    provider = ScriptedProvider([call_tools(("t_tally", {"n": 3}, "c1")), reply("done")])
    chat = Chat(provider=provider, display=False).with_tools(tasks)
    progress: list[ToolCallProgress] = []
    chat.on(ToolCallProgress, progress.append)
    chat.ask("tally to three")
    call = chat.get_call("c1")
    assert call.status == "ok" and call.result is not None
    assert call.result.content == "tallied 3"
    assert [(p.progress, p.total) for p in progress] == [(1, 3), (2, 3), (3, 3)]
