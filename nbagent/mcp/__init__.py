"""MCP servers as tool sources: ``chat.with_tools(nbagent.MCPServer.stdio(...))``.

Needs the ``mcp`` extra (``pip install 'nbagent[mcp]'``, the official MCP
Python SDK); without it, making a server fails with one line saying so.
Importing this package does not import the SDK.

- :class:`MCPServer`: ``MCPServer.stdio(command, args)`` or
  ``MCPServer.http(url)``; ``server.tools(include=..., exclude=...)``.
- :class:`MCPTool`: one of a server's tools (``server`` is its label).
- :class:`MCPResult`: what a call returns (a ``str`` plus the structured content,
  its images as parts), and a resource's contents (``server.read_resource(uri)``).
- :class:`MCPResource`, :class:`MCPPrompt`, :class:`MCPPromptMessages`: what
  ``server.resources()``, ``server.prompts()`` and ``server.prompt(name, ...)`` give.

Sessions live on nbagent's background loop, so every driver reaches them
(see ``_connection.py`` and docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from .._exports import publish as _publish
from ._resources import MCPPrompt, MCPPromptArgument, MCPPromptMessages, MCPResource
from ._results import MCPResult
from ._server import MCPServer, MCPTool, MCPToolSelection

__all__ = [
    "MCPPrompt",
    "MCPPromptArgument",
    "MCPPromptMessages",
    "MCPResource",
    "MCPResult",
    "MCPServer",
    "MCPTool",
    "MCPToolSelection",
]

_publish(__name__, globals(), __all__)
