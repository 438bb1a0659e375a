"""Task-augmented tools (issue 26, item 3): the installed ``mcp`` SDK's client cannot run
them (``ClientSession.call_tool`` has no task parameter, and there is no ``tasks/get`` /
``tasks/result`` / ``tasks/cancel`` method: the task types exist for the 2025-11-25 wire
only), so a tool whose ``execution.taskSupport`` is ``required`` is not offered to the
model (a notice says why), and a direct call of it says so instead of failing on the
server. ``optional`` tools run as ordinary calls.

No server available here declares a task-only tool (the SDK's own server cannot), so the
listing is fed to the server's rebuild as the SDK's own ``Tool`` values.
"""

from __future__ import annotations

import sys

import pytest
from _mcp_servers import PROTOCOL_SERVER
from mcp.types import Tool, ToolExecution

from nbagent import MCPServer, MCPServerError


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
