"""An MCP server that quotes the secret in its environment everywhere the protocol lets a
server put text, built with the official ``mcp`` SDK.

Its secret is ``LEAKY_TOKEN`` (given by the test in ``env=``, so nbagent knows it is one).
It shows it in: a tool's description and its input schema, a prompt's messages, an
elicitation's message, a sampling request's message and system prompt, a structured
result (JSON text, so a ``"`` or ``\\`` in it arrives escaped), and, over HTTP, the
``Authorization`` header it was sent (``echo_auth``). It also has ``wait`` (a call that
stays in flight) and ``summarize`` (a sampling request quoting its text), for two chats
sharing it.

Run over stdio (``python secrets_server.py [--legacy]``) or streamable HTTP on a socket
the test bound (``--http-fd FD``). ``--legacy`` serves only the protocol before
2026-07-28, where a server's requests come in the middle of a call.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve, Sample
from mcp.types import CreateMessageResult, SamplingMessage, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

TOKEN = os.environ.get("LEAKY_TOKEN", "")
READ_ONLY = ToolAnnotations(read_only_hint=True)
server = MCPServer("secrets", log_level="WARNING")


class Answer(BaseModel):
    name: str = Field(description=f"your name (the server's token is {TOKEN})")


def ask_leaky() -> Elicit[Answer]:
    return Elicit(f"Type your name; I run with token {TOKEN}", Answer)


def sample_leaky() -> Sample:
    said = TextContent(type="text", text=f"Summarize: my token is {TOKEN}")
    return Sample(
        [SamplingMessage(role="user", content=said)],
        max_tokens=20,
        system_prompt=f"You serve token {TOKEN}.",
    )


def sample_text(text: str) -> Sample:
    said = TextContent(type="text", text=f"Summarize: {text}")
    return Sample([SamplingMessage(role="user", content=said)], max_tokens=20)


def _said(reply: CreateMessageResult) -> str:
    content = reply.content
    return content.text if isinstance(content, TextContent) else str(content)


@server.tool(
    annotations=READ_ONLY,
    description=f"Look something up (configured with token {TOKEN}).",
)
def lookup(query: Annotated[str, Field(description=f"what to look up; token {TOKEN}")]) -> str:
    return f"found {query}"


@server.tool(annotations=READ_ONLY)
def ask_name(answer: Annotated[ElicitationResult[Answer], Resolve(ask_leaky)]) -> str:
    """Ask the user for their name (the message quotes the token)."""
    return f"asked: {answer.action}"


@server.tool(annotations=READ_ONLY)
def sample_token(reply: Annotated[CreateMessageResult, Resolve(sample_leaky)]) -> str:
    """Ask the client's model about the token."""
    return f"sampled: {_said(reply)}"


@server.tool(annotations=READ_ONLY)
def summarize(text: str, reply: Annotated[CreateMessageResult, Resolve(sample_text)]) -> str:
    """Summarize a text with the client's model (sampling)."""
    return f"summary: {_said(reply)}"


@server.tool(annotations=READ_ONLY)
async def wait(seconds: float) -> str:
    """Stay in flight for a while."""
    await anyio.sleep(seconds)
    return f"waited {seconds:g} s"


@server.tool(annotations=READ_ONLY)
def echo_token() -> dict[str, str]:
    """The token, as structured content (its text is JSON: quotes and backslashes escaped)."""
    return {"token": TOKEN}


@server.tool(annotations=READ_ONLY)
def echo_auth(ctx: Context) -> str:
    """The Authorization header this request came with (HTTP only)."""
    headers = {k.lower(): v for k, v in dict(ctx.headers or {}).items()}
    return f"you sent {headers.get('authorization', 'nothing')}"


@server.prompt()
def leaky(topic: str) -> str:
    """A prompt quoting the token."""
    return f"Write about {topic}. Use token {TOKEN}."


def serve_legacy_only() -> None:
    """Serve only the era before 2026-07-28 (as ``inputs_server.py --legacy``)."""
    import mcp.server.runner as runner

    runner._has_modern_envelope = lambda params: False  # type: ignore[attr-defined]


if __name__ == "__main__":
    if "--legacy" in sys.argv:
        serve_legacy_only()
    if "--http-fd" in sys.argv:
        from _http_serve import serve_http_fd

        serve_http_fd(server, int(sys.argv[sys.argv.index("--http-fd") + 1]))
    else:
        server.run()
