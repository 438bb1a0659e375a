"""A tool whose ``structuredContent`` breaks its own ``outputSchema`` still ran.

The SDK checks a result against the tool's declared output schema *after* the tool ran,
and raises a bare ``RuntimeError``; nbagent used to read that as the server lost ("stopped
or became unreachable"), restart the healthy server and throw the answer away, so the
model, told the call failed, would run the payment again. Now the answer is kept as the
server sent it with a line saying what is wrong (``MCPResult.output_error``), the call is
``ok``, and the server keeps running. The server is real (the official SDK's
``MCPServer``, its ``pay`` listed with an output schema its answers break).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from nbagent import Chat, MCPServer
from nbagent.mcp import MCPResult
from nbagent.testing import ScriptedProvider, call_tools, reply

SERVER = textwrap.dedent(
    '''
    import json, os
    from typing import Any
    from mcp.server.mcpserver import MCPServer
    from mcp.types import CallToolResult, TextContent

    COUNT = os.environ["COUNT_FILE"]
    LIE = {
        "type": "object",
        "properties": {"receipt": {"type": "integer"}},
        "required": ["receipt"],
    }

    class Liar(MCPServer):
        async def list_tools(self) -> list[Any]:
            tools = await super().list_tools()
            return [
                t.model_copy(update={"output_schema": LIE}) if t.name == "pay" else t
                for t in tools
            ]

    server = Liar("liar", log_level="WARNING")

    @server.tool()
    def pay(amount: int) -> CallToolResult:
        """Pay (its structured answer breaks its own outputSchema)."""
        with open(COUNT, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "amount": amount}) + "\\n")
        return CallToolResult(
            content=[TextContent(type="text", text=f"paid {amount}")],
            structured_content={"receipt": "R-1"},
        )

    server.run()
    '''
)


@pytest.fixture
def liar(tmp_path: Path) -> tuple[MCPServer, Path]:
    script = tmp_path / "liar_server.py"
    script.write_text(SERVER)
    count = tmp_path / "count.jsonl"
    server = MCPServer.stdio(
        sys.executable, [str(script)], env={"COUNT_FILE": str(count)}, prefix="l", approval="never"
    )
    return server, count


def runs(count: Path) -> list[dict[str, int]]:
    return [json.loads(line) for line in count.read_text().splitlines()] if count.exists() else []


def test_an_answer_breaking_its_output_schema_is_kept_and_the_server_not_restarted(
    liar: tuple[MCPServer, Path],
) -> None:
    server, count = liar
    provider = ScriptedProvider(
        [call_tools(("l_pay", {"amount": 40})), call_tools(("l_pay", {"amount": 2})), reply("ok")]
    )
    with server, Chat(provider=provider, display=False).with_tools(server) as chat:
        chat.ask("pay")
        first, second = chat.tool_calls
        for call, amount in ((first, 40), (second, 2)):
            assert call.status == "ok", (call.status, call.result)
            assert call.result is not None
            text = call.result.content
            assert text.startswith(f"paid {amount}\n"), text  # what the tool answered
            assert "does not match its declared output schema" in text
            assert "'R-1' is not of type 'integer'" in text
            assert "unreachable" not in text and "restarted" not in text
        done = runs(count)
        assert [r["amount"] for r in done] == [40, 2]  # each ran once...
        assert done[0]["pid"] == done[1]["pid"]  # ...on the same process: never restarted
        assert server.connected


def test_a_direct_call_returns_the_answer_with_its_output_error(
    liar: tuple[MCPServer, Path],
) -> None:
    server, count = liar
    with server:
        result = server.call("pay", {"amount": 7})
        assert isinstance(result, MCPResult)
        assert result.startswith("paid 7\n")
        assert result.structured_content == {"receipt": "R-1"}  # as the server sent it
        assert result.output_error is not None and "R-1" in result.output_error
        assert len(runs(count)) == 1 and server.connected
