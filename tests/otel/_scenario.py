"""The issue's turn (shared by the in-memory and the Phoenix tests): one response asks for
a gated local call (denied here), an MCP server's tool (run on the real notes server,
tests/mcp_client/notes_server.py) and carries a hosted MCP call the provider ran; the
model is the strict fake server spoken to through the real OpenAI SDK (Responses)."""

from __future__ import annotations

import sys
from pathlib import Path

from nbagent import Chat, HostedMCP, MCPServer, tool
from nbagent.providers import OpenAIProvider
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn, mcp_call, mcp_list_tools

KEY = "sk-test-SECRET-0123456789abcdef"
HEADER = "tok-HEADER-SECRET-98765"
MCP_ENV = "env-MCP-SECRET-4242"
SECRETS = (KEY, HEADER, MCP_ENV)
NOTES = str(Path(__file__).parents[1] / "mcp_client" / "notes_server.py")


@tool(requires_approval=True)
def refund(order_id: int) -> str:
    """Refund an order.

    Args:
        order_id: The order.
    """
    return f"refunded {order_id}"


def issue_turn() -> Chat:
    """Run the turn (the refund denied, then completed); the closed chat."""
    notes = MCPServer.stdio(sys.executable, [NOTES], prefix="notes", env={"NOTES_TOKEN": MCP_ENV})
    hosted = HostedMCP(
        "deepwiki",
        server_url="https://mcp.deepwiki.example/mcp",
        headers={"Authorization": f"Bearer {HEADER}"},
        require_approval="never",
    )
    with FakeLLMServer() as server:
        server.script(
            [
                Turn(
                    tool_calls=[
                        FakeToolCall("refund", {"order_id": 42}),
                        FakeToolCall("notes_read_note", {"title": "todo"}),
                    ],
                    hosted=[
                        mcp_list_tools("deepwiki", "ask_question"),
                        mcp_call("deepwiki", "ask_question", {"q": "wiki?"}, output="42"),
                    ],
                ),
                Turn(text="I did not refund order 42; your note says buy milk."),
            ]
        )
        provider = OpenAIProvider(
            "gpt-4.1-mini",
            api="responses",
            base_url=server.openai_base_url,
            api_key=KEY,
            compatible=False,
            max_retries=0,
        )
        chat = Chat(provider=provider, display=False).with_tools(refund, notes, hosted)
        try:
            chat.ask("Refund order 42, read my todo note and ask the wiki")
            chat.deny(chat.pending_approvals[0], reason="refunds need a manager")
            chat.complete()
        finally:
            chat.close()
            notes.close()
        assert not server.errors, server.errors
    return chat
