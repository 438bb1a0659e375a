"""An MCP server whose tools declare task support, built with the official ``mcp`` SDK.

The SDK's ``MCPServer`` has no way to declare ``execution.taskSupport`` on a tool, so a
middleware adds it to the ``tools/list`` answer, as a server that runs tasks would send it:

- ``tally``: ``taskSupport: "optional"`` (a client may run it as a task, or call it the
  ordinary way); it reports progress and answers;
- ``research``: ``taskSupport: "required"`` (only as a task); called the ordinary way it
  would still answer here, which is how a test can tell nbagent never calls it;
- ``plain``: no ``execution`` at all.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True)
SUPPORT = {"tally": "optional", "research": "required"}


async def declare_tasks(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    result = await call_next(ctx)
    if ctx.method == "tools/list" and isinstance(result, dict):
        for tool in result.get("tools") or ():
            if tool.get("name") in SUPPORT:
                tool["execution"] = {"taskSupport": SUPPORT[tool["name"]]}
    return result


server = MCPServer("tasks", log_level="WARNING", middleware=[declare_tasks])


@server.tool(annotations=READ_ONLY)
async def tally(n: int, ctx: Context) -> str:
    """Count to n, reporting progress (tasks optional)."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i} of {n}")
    return f"tallied {n}"


@server.tool(annotations=READ_ONLY)
def research(topic: str) -> str:
    """Research a topic (only as a task)."""
    return f"RAN research on {topic}"


@server.tool(annotations=READ_ONLY)
def plain() -> str:
    """No task support declared."""
    return "plain"


if __name__ == "__main__":
    server.run("stdio")
