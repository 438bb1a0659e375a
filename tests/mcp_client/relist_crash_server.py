"""An MCP server that dies while listing its tools again, built with the official ``mcp`` SDK.

``arm`` (read-only) announces that its tool list changed and makes the next ``tools/list``
end the process before it answers; ``pay`` (destructive, so it asks first) appends a line
to ``PAY_LOG``. A chat that approved ``pay`` lists the tools again before it sends it (the
list changed): the server dies there, and ``pay`` never reaches it. Run over stdio.
"""

from __future__ import annotations

import contextlib
import os

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

LOG = os.environ["PAY_LOG"]
ARMED = False


class Server(MCPServer):
    async def list_tools(self):  # type: ignore[no-untyped-def]
        if ARMED:
            os._exit(3)  # dies while listing: nothing after this is answered
        return await super().list_tools()


server = Server("relist-crash", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def arm(ctx: Context) -> str:
    """Change the tool list (the next listing ends the server)."""
    global ARMED
    ARMED = True
    await ctx.notify_tools_changed()  # modern protocol: subscriptions/listen
    with contextlib.suppress(Exception):
        await ctx.session.send_tool_list_changed()  # legacy protocol: the notification
    return "armed"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def pay(amount: int) -> str:
    """Pay an amount."""
    with open(LOG, "a") as f:
        f.write(f"paid {amount}\n")
    return f"paid {amount}"


if __name__ == "__main__":
    server.run()
