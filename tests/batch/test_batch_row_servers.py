"""A batch lets go of each row's chat once the row is final: an MCP server made per row stops.

``make_chat`` often builds a chat with its own stdio server. Before, the local backend
never closed a row's chat, nor the template chat ``make_chat`` returned for a row it
resumed from a store: every such server kept running until garbage collection (a batch
of 30 rows at concurrency 2 had 17 servers up at once, 13 still up after it returned).
Real servers (the official SDK's, ``tests/mcp_client/charge_server.py``), counted as
processes. A server shared by every row is one process and stays up for the chats that
hold it.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

import nbagent
from nbagent import Chat, MCPServer
from nbagent.store import SQLiteStore
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

CHARGES = str(Path(__file__).parents[1] / "mcp_client" / "charge_server.py")


def servers(marker: str) -> list[int]:
    """The live server processes started with ``marker`` on their command line."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(pid))
    return found


def own_server(marker: str, counter: Path, **kwargs: Any) -> MCPServer:
    env = {"NBAGENT_TEST_COUNTER": str(counter), "CHARGE_LABEL": "row"}
    return MCPServer.stdio(sys.executable, [CHARGES, marker], env=env, label="c", **kwargs)


def test_a_rows_own_server_stops_when_its_row_is_done(tmp_path: Path) -> None:
    marker, counter = f"rows-{uuid.uuid4().hex}", tmp_path / "charges.txt"
    peak: list[int] = []

    def make_chat(row: dict[str, Any]) -> Chat:
        peak.append(len(servers(marker)))  # up while the next row's chat is made
        script = [call_tools(("charge", {"amount": row["n"]})), reply("ok")]
        server = own_server(marker, counter, approval="never")
        return Chat(provider=ScriptedProvider(script)).with_tools(server)

    result = nbagent.batch(
        [{"n": i} for i in range(12)], make_chat, prompt="charge {n}", progress=False, concurrency=2
    )
    assert list(result["status"]) == ["done"] * 12
    assert sorted(counter.read_text().split("\n")[:-1]) == sorted(f"row {i}" for i in range(12))
    assert max(peak) <= 2  # the done rows' servers were gone, not piling up
    assert servers(marker) == []  # none left once the batch returned (nothing collected)


def test_a_resumed_rows_template_and_chat_let_go_of_their_servers(tmp_path: Path) -> None:
    marker, counter = f"resumed-{uuid.uuid4().hex}", tmp_path / "charges.txt"
    db = tmp_path / "batch.db"

    def make_chat(row: dict[str, Any]) -> Chat:
        script = [call_tools(("charge", {"amount": row["n"]})), reply("charged")]
        return Chat(provider=ScriptedProvider(script)).with_tools(own_server(marker, counter))

    rows = [{"n": i} for i in range(4)]
    first = nbagent.batch(rows, make_chat, prompt="charge {n}", store=db, progress=False)
    assert list(first["status"]) == ["awaiting_approval"] * 4  # charge is gated
    with SQLiteStore(db) as store:
        for call in store.pending_approvals():
            store.approve(call.id)
    again = nbagent.batch(rows, make_chat, prompt="charge {n}", store=db, progress=False)
    assert list(again["status"]) == ["done"] * 4
    assert sorted(counter.read_text().split("\n")[:-1]) == [f"row {i}" for i in range(4)]
    del first
    assert servers(marker) == []  # neither the loaded chats' nor the templates' left up
