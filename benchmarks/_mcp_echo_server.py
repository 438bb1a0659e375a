"""The MCP server of bench_mcp: one read-only ``echo`` tool, over stdio (official SDK)."""

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("bench", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    server.run("stdio")
