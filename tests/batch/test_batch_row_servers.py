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

import pytest

import nbagent
from nbagent import Chat, MCPServer, StoreError
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


def test_a_resumed_rows_template_lets_go_of_its_server(tmp_path: Path) -> None:
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
    # the stored chats stay open (closed, they would stop recording: a fork or a follow-up
    # of them went unrecorded) with their servers; the templates' servers are closed
    one = own_server(f"one-{marker}", counter, approval="never").connect()
    per_server = len(servers(f"one-{marker}"))
    one.close()
    assert len(servers(marker)) == 4 * per_server  # the 4 rows' chats', not 8 (templates')


def test_a_failed_rows_chat_is_not_closed_and_a_rerun_continues_it_recorded(
    tmp_path: Path,
) -> None:
    """Only done rows' chats are closed: a failed row's is kept by the batch, and its rerun
    in the same process continues that object. Closed, its store stopped recording it: the
    rerun's tool result and answer never reached the file, and a false 'driven by another
    process' warning ended the row failed again."""
    ran: list[str] = []
    fail_once = {"b": True}

    @nbagent.tool
    def work(item: str) -> str:
        """Work on an item.

        Args:
            item: The item.
        """
        ran.append(item)
        return f"worked on {item}"

    def make_chat(row: str) -> Chat:
        script: list[Any] = []
        if fail_once.pop(row, False):
            script.append(RuntimeError("the provider fell over"))
        script += [call_tools(("work", {"item": row})), reply(f"done {row}")]
        return Chat(provider=ScriptedProvider(script)).with_tools(work)

    db = tmp_path / "batch.db"
    first = nbagent.batch(["a", "b"], make_chat, store=db, name="n", progress=False)
    assert list(first["status"]) == ["done", "failed"]
    again = nbagent.batch(["a", "b"], make_chat, store=db, name="n", progress=False)
    assert list(again["status"]) == ["done", "done"] and sorted(ran) == ["a", "b"]
    with SQLiteStore(db) as store:  # the rerun's work is on disk: the stored chat is whole
        chat_id = again.loc[1, "chat_id"]
        loaded = Chat.load(chat_id, store=store, tools=[work], provider=ScriptedProvider([]))
        assert loaded.is_complete and [c.status for c in loaded.tool_calls] == ["ok"]
        loaded.close()


def test_a_closed_stored_chat_refuses_to_be_driven_instead_of_going_unrecorded(
    tmp_path: Path,
) -> None:
    """A done row's chat (closed by the batch), or any stored chat after close(), asked more:
    a clear StoreError before anything runs, not a turn whose events the store never gets."""
    db = tmp_path / "chats.db"
    chat = Chat(provider=ScriptedProvider([reply("one"), reply("two")]), store=db)
    chat.ask("first")
    chat.close()
    with pytest.raises(StoreError, match=r"was closed: .* Load it again"):
        chat.ask("second")
    with SQLiteStore(db) as store:
        assert [m["content"] for m in store.load(chat.id).messages] == ["first", "one"]
