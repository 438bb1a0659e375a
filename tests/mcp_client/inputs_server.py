"""An MCP server that asks its client for input during a call, built with the official ``mcp`` SDK.

Its tools ask through the SDK's resolvers (``Resolve`` with ``Elicit``, ``Sample``,
``ListRoots``), which follow the negotiated protocol: before 2026-07-28 the
server sends each request in the middle of the call; on 2026-07-28 the call
answers an ``InputRequiredResult`` and the client retries it with the answers
(``input_responses``, ``request_state``). ``--legacy`` serves only the older
protocol (it refuses ``server/discover``, so the client falls back to
``initialize``). Each tool returns what it got back, so a test sees what
nbagent answered. Run over stdio: ``python inputs_server.py [--legacy]``.
"""

from __future__ import annotations

import sys
from typing import Annotated

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Elicit,
    ElicitationResult,
    ListRoots,
    MCPServer,
    Resolve,
    Sample,
)
from mcp.types import (
    CreateMessageResult,
    ListRootsResult,
    SamplingMessage,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel

READ_ONLY = ToolAnnotations(read_only_hint=True)
server = MCPServer("inputs", log_level="WARNING")
RUNS = {"book_table": 0}


class Booking(BaseModel):
    name: str
    guests: int
    vegetarian: bool = False


def ask_booking(day: str) -> Elicit[Booking]:
    return Elicit(f"Who is the table on {day} for?", Booking)


def ask_model(text: str) -> Sample:
    prompt = SamplingMessage(
        role="user", content=TextContent(type="text", text=f"Summarize: {text}")
    )
    return Sample([prompt], max_tokens=50, system_prompt="Be brief.")


def ask_roots() -> ListRoots:
    return ListRoots()


@server.tool(annotations=READ_ONLY)
def book_table(
    day: str, booking: Annotated[ElicitationResult[Booking], Resolve(ask_booking)]
) -> str:
    """Book a table; asks the user for the booking's details."""
    RUNS["book_table"] += 1
    if not isinstance(booking, AcceptedElicitation):
        return f"not booked ({booking.action})"
    b = booking.data
    return (
        f"booked {day} for {b.name}, {b.guests} guests, vegetarian={b.vegetarian} "
        f"(run {RUNS['book_table']})"
    )


@server.tool(annotations=READ_ONLY)
def summarize(text: str, reply: Annotated[CreateMessageResult, Resolve(ask_model)]) -> str:
    """Summarize a text with the client's model (sampling)."""
    content = reply.content
    said = content.text if isinstance(content, TextContent) else str(content)
    return f"summary by {reply.model}: {said}"


@server.tool(annotations=READ_ONLY)
def workspace(roots: Annotated[ListRootsResult, Resolve(ask_roots)]) -> str:
    """The client's roots."""
    return ", ".join(f"{r.name}={r.uri}" for r in roots.roots) or "no roots"


def serve_legacy_only() -> None:
    """Serve only the 2025-11-25 era, as a server written before 2026-07-28 does: every
    connection opens legacy, so the client's ``server/discover`` probe is refused and it
    falls back to the ``initialize`` handshake (and requests come mid-call)."""
    import mcp.server.runner as runner

    runner._has_modern_envelope = lambda params: False  # type: ignore[attr-defined]


if __name__ == "__main__":
    if "--legacy" in sys.argv:
        serve_legacy_only()
    server.run()
