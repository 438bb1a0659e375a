"""An MCP server whose ``pay`` tool changes between starts, built with the official ``mcp``
SDK: a server upgraded (or reconfigured) and restarted between a call's approval and its run.

At each start it reads its version from the file ``VERSION_FILE``:

- ``v1``: ``pay(amount: int, to: str, dry_run: bool = False)``
- ``v1-again``: the same ``pay`` (a restart that changed nothing)
- ``v2-currency``: ``pay(amount: int, to: str, currency: str)`` (a new required argument)
- ``v3-gone``: no ``pay`` at all
- ``v4-no-dry-run``: ``pay(amount: int, to: str)``; ``dry_run`` is no longer taken, and an
  argument the tool does not declare is ignored (the SDK's default): a dry run sent to it
  pays for real
- ``v5-note``: ``pay(amount: int, to: str, dry_run: bool = False, note: str = "")`` (an
  optional argument added: the old arguments still hold)
- ``v6-open``: ``pay(amount: int, to: str)`` whose schema says it takes any other argument
  (``additionalProperties: true``) and ignores them

``pid`` (read-only) gives the process id. Each ``pay`` that runs appends a line to
``PAY_LOG``. Run over stdio (``python versioned_server.py``).
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

with open(os.environ["VERSION_FILE"]) as f:
    VERSION = f.read().strip()
LOG = os.environ["PAY_LOG"]
server = MCPServer("versioned", log_level="WARNING")


def _paid(line: str) -> str:
    with open(LOG, "a") as f:
        f.write(f"{VERSION} {line}\n")
    return "dry run" if "dry_run=True" in line else "paid"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> str:
    """This process's id."""
    return str(os.getpid())


if VERSION in ("v1", "v1-again"):

    @server.tool()
    def pay(amount: int, to: str, dry_run: bool = False) -> str:
        """Pay someone (dry_run: only check that it would work)."""
        return _paid(f"pay {amount} {to} dry_run={dry_run}")

elif VERSION == "v2-currency":

    @server.tool()
    def pay(amount: int, to: str, currency: str) -> str:  # type: ignore[misc]
        """Pay someone, in a currency."""
        return _paid(f"pay {amount} {to} {currency}")

elif VERSION == "v4-no-dry-run":

    @server.tool()
    def pay(amount: int, to: str) -> str:  # type: ignore[misc]
        """Pay someone."""
        return _paid(f"pay {amount} {to}")

elif VERSION == "v5-note":

    @server.tool()
    def pay(amount: int, to: str, dry_run: bool = False, note: str = "") -> str:  # type: ignore[misc]
        """Pay someone, with a note."""
        return _paid(f"pay {amount} {to} dry_run={dry_run} note={note}")

elif VERSION == "v6-open":

    @server.tool()
    def pay(amount: int, to: str) -> str:  # type: ignore[misc]
        """Pay someone (other arguments are accepted, and ignored)."""
        return _paid(f"pay {amount} {to}")

    server._tool_manager.get_tool("pay").parameters["additionalProperties"] = True


if __name__ == "__main__":
    server.run()
