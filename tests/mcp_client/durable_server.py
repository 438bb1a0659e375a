"""An MCP server on the 2026-07-28 protocol whose input requests survive a client restart.

Built with the official ``mcp`` SDK. Its ``request_state`` is sealed with a fixed key
(``RequestStateSecurity(keys=[...])``), so a server process started after the client's
kernel restarted accepts the state a call parked with (the SDK's default key is
process-local and would reject it). Each completed call appends one line to the file
named by ``NBAGENT_TEST_COUNTER``: the test counts the calls that really ran; then it
sleeps ``NBAGENT_TEST_SLEEP`` seconds (a client can die while the call is in flight).
Run over stdio: ``python durable_server.py``.
"""

from __future__ import annotations

import os
import time
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
from mcp.server.request_state import RequestStateSecurity
from mcp.types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent
from pydantic import BaseModel

server = MCPServer(
    "durable",
    log_level="WARNING",
    request_state_security=RequestStateSecurity(keys=[b"nbagent-test-key-0123456789abcdef"]),
)


class Booking(BaseModel):
    name: str
    guests: int


def _ran(what: str) -> None:
    counter = os.environ.get("NBAGENT_TEST_COUNTER")
    if counter:
        with open(counter, "a") as f:
            f.write(f"{os.getpid()} {what}\n")


def ask_booking(day: str) -> Elicit[Booking]:
    return Elicit(f"Who is the table on {day} for?", Booking)


def ask_model(text: str) -> Sample:
    prompt = SamplingMessage(role="user", content=TextContent(type="text", text=f"Title: {text}"))
    return Sample([prompt], max_tokens=20)


def ask_roots() -> ListRoots:
    return ListRoots()


@server.tool()
def book_table(
    day: str,
    booking: Annotated[ElicitationResult[Booking], Resolve(ask_booking)],
    roots: Annotated[ListRootsResult, Resolve(ask_roots)],
) -> str:
    """Book a table (a side effect); asks the user for the booking's details."""
    if not isinstance(booking, AcceptedElicitation):
        return f"not booked ({booking.action})"
    b = booking.data
    _ran(f"book_table {day} for {b.name}")  # the name as the server received it
    time.sleep(float(os.environ.get("NBAGENT_TEST_SLEEP", "0")))
    where = ",".join(r.name or "" for r in roots.roots)
    return f"booked {day} for {b.name}, {b.guests} guests (roots: {where})"


@server.tool()
def title(text: str, reply: Annotated[CreateMessageResult, Resolve(ask_model)]) -> str:
    """A title for a text, by the client's model (sampling)."""
    _ran("title")
    content = reply.content
    return f"title by {reply.model}: {content.text if isinstance(content, TextContent) else ''}"


if __name__ == "__main__":
    server.run()
