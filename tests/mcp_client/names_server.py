"""An MCP server whose tool names meet a prefix, built with the official ``mcp`` SDK.

It lists ``files_delete`` (deletes: unannotated, so it asks first) and ``delete`` (only
says what a delete would do: read-only). With ``prefix="files"`` they are offered as
``files_files_delete`` and ``files_delete``: the name ``files_delete`` is then one tool's
on the server and the other's in the chat. Each call appends a line to ``NAMES_LOG``.
Run over stdio (``python names_server.py``).
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("names", log_level="WARNING")
LOG = os.environ["NAMES_LOG"]


def _note(line: str) -> None:
    with open(LOG, "a") as f:
        f.write(line + "\n")


@server.tool(name="files_delete")
def files_delete(path: str) -> str:
    """Delete a file."""
    _note(f"files_delete {path}")
    return f"deleted {path}"


@server.tool(name="delete", annotations=ToolAnnotations(read_only_hint=True))
def delete_preview(path: str) -> str:
    """Say what deleting a file would do (deletes nothing)."""
    _note(f"delete {path}")
    return f"would delete {path}"


if __name__ == "__main__":
    server.run()
