"""An MCP server behind bearer-token auth, built with the official ``mcp`` SDK.

Served over streamable HTTP on a socket the test bound (``--http-fd FD``). Its token
verifier takes ``GOOD_TOKEN`` (scope ``notes``) and ``NO_SCOPE_TOKEN`` (no scope), and
refuses every other token; the SDK then answers ``401 Unauthorized`` (a refused or missing
token) or ``403 Forbidden`` (a token without the ``notes`` scope). A token is refused from
the moment the file ``REVOKED_FILE`` exists (a token revoked mid-session). Its refusals'
``WWW-Authenticate`` header is the SDK's; the token it was sent is never in it.
"""

from __future__ import annotations

import os
import sys
import warnings

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

GOOD = os.environ.get("GOOD_TOKEN", "")
NO_SCOPE = os.environ.get("NO_SCOPE_TOKEN", "")
REVOKED = os.environ.get("REVOKED_FILE", "")


class Verifier:
    async def verify_token(self, token: str) -> AccessToken | None:
        if REVOKED and os.path.exists(REVOKED):
            return None
        if token == GOOD:
            return AccessToken(token=token, client_id="test", scopes=["notes"])
        if token == NO_SCOPE:
            return AccessToken(token=token, client_id="test", scopes=[])
        return None


with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    server = MCPServer(
        "authed",
        log_level="WARNING",
        token_verifier=Verifier(),
        auth=AuthSettings(
            issuer_url="http://127.0.0.1:1/issuer",  # type: ignore[arg-type]
            resource_server_url=None,
            required_scopes=["notes"],
        ),
    )


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def hello(name: str) -> str:
    """Say hello."""
    return f"hello {name}"


if __name__ == "__main__":
    from _http_serve import serve_http_fd

    serve_http_fd(server, int(sys.argv[sys.argv.index("--http-fd") + 1]))
