"""An MCP server built with the official ``mcp`` SDK whose tools carry hand-written input
schemas (as a server not built from Python signatures may list them), each tool answering
with the arguments it was sent (``sorted key=value``):

- ``bare``: ``{"type": "object"}``: JSON Schema takes any argument
- ``required_only``: ``properties`` names ``a``, ``required`` names ``a`` and ``b``
- ``named_by_pattern``: ``propertyNames`` alone (``^x_``)
- ``declared``: ``declared(a: str)``, its schema the SDK's (``properties``: ``a``); an
  argument it does not declare is ignored (the SDK's default)

Run over stdio (``python schemas_server.py``).
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("schemas", log_level="WARNING")

SCHEMAS: dict[str, dict[str, Any]] = {
    "bare": {"type": "object"},
    "required_only": {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a", "b"],
    },
    "named_by_pattern": {"type": "object", "propertyNames": {"pattern": "^x_"}},
}


def _sent(**arguments: Any) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(arguments.items())) or "(none)"


# the SDK calls each with the arguments its own model takes; the schemas listed are SCHEMAS'
@server.tool()
def bare(text: str = "", n: int = 0) -> str:
    """Take anything."""
    return _sent(text=text, n=n)


@server.tool()
def required_only(a: str, b: int) -> str:
    """Take a and b."""
    return _sent(a=a, b=b)


@server.tool()
def named_by_pattern(x_1: int = 0) -> str:
    """Take names starting x_."""
    return _sent(x_1=x_1)


@server.tool()
def declared(a: str) -> str:
    """Take a."""
    return _sent(a=a)


for _name, _schema in SCHEMAS.items():
    server._tool_manager.get_tool(_name).parameters = _schema

if __name__ == "__main__":
    server.run()
