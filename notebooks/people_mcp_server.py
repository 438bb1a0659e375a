"""A small MCP server for notebook 11 that asks its client for things while it works,
built with the official ``mcp`` SDK.

- ``book_table(day)`` asks the user for the booking's details (an elicitation: a form);
- ``summarize(text)`` asks the client's model for a summary (a sampling request);
- ``reindex(folder)`` reports its progress as it goes.

Run over stdio: ``python people_mcp_server.py``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
    Sample,
)
from mcp.types import CreateMessageResult, SamplingMessage, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

READ_ONLY = ToolAnnotations(read_only_hint=True)
server = MCPServer("bistro", log_level="WARNING")


class Booking(BaseModel):
    name: str = Field(title="Name", min_length=2)
    guests: int = Field(title="Guests", ge=1, le=12)
    seating: Literal["inside", "terrace"] = Field("inside", title="Seating")
    vegetarian: bool = Field(False, title="Vegetarian menu")


def ask_booking(day: str) -> Elicit[Booking]:
    return Elicit(f"Who is the table on {day} for?", Booking)


def ask_model(text: str) -> Sample:
    content = TextContent(type="text", text=f"Summarize: {text}")
    prompt = SamplingMessage(role="user", content=content)
    return Sample([prompt], max_tokens=60, system_prompt="One short sentence.")


@server.tool(annotations=READ_ONLY)
def book_table(
    day: str, booking: Annotated[ElicitationResult[Booking], Resolve(ask_booking)]
) -> str:
    """Book a table at the bistro; asks the user for the booking's details."""
    if not isinstance(booking, AcceptedElicitation):
        return f"not booked ({booking.action})"
    b = booking.data
    menu = "vegetarian" if b.vegetarian else "regular"
    return f"booked {day} for {b.name}: {b.guests} guests, {b.seating}, {menu} menu"


@server.tool(annotations=READ_ONLY)
def summarize(text: str, reply: Annotated[CreateMessageResult, Resolve(ask_model)]) -> str:
    """Summarize a text with the client's model (a sampling request)."""
    content = reply.content
    said = content.text if isinstance(content, TextContent) else str(content)
    return f"summary ({reply.model}): {said}"


@server.tool(annotations=READ_ONLY)
async def reindex(folder: str, ctx: Context) -> str:
    """Reindex a folder of menus, reporting progress."""
    files = ["starters.md", "mains.md", "desserts.md", "wines.md"]
    for i, name in enumerate(files, 1):
        await ctx.report_progress(i, len(files), f"indexed {name}")
    return f"reindexed {len(files)} files in {folder}"


if __name__ == "__main__":
    server.run()
