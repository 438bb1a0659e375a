"""A one-tool MCP server (official ``mcp`` SDK) for tests of which tool an approved call runs.

``charge(amount)`` is unannotated, so nbagent gates it by default. Each run appends a line
``<label> <amount>`` to the file named by ``NBAGENT_TEST_COUNTER`` (``<label>`` is the
``CHARGE_LABEL`` environment variable): the test reads which server really charged.
Run over stdio: ``python charge_server.py``.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("charges", log_level="WARNING")


@server.tool()
def charge(amount: int) -> str:
    """Charge an amount of money."""
    label = os.environ.get("CHARGE_LABEL", "?")
    with open(os.environ["NBAGENT_TEST_COUNTER"], "a") as f:
        f.write(f"{label} {amount}\n")
    return f"{label} charged {amount}"


if __name__ == "__main__":
    server.run("stdio")
