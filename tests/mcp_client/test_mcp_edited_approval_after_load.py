"""An approval with edited arguments of an MCP server's call, made while no chat had it open,
is applied by the next process that loads the chat with its server: never lost.

An MCP server lists its tools only when something asks for them, so right after
``Chat.load(..., tools=[server])`` the chat did not know the server's tools yet. The edit's
check against the tool said ``tool 'charge' is not available in this chat``: the first step
rejected ops's ``store.approve(..., arguments=...)`` (the store's row back to
``awaiting_approval``, the decision erased, every later load waiting again), and
``chat.approve(call, arguments=...)`` raised until ``chat.tools`` had been read. The check now
lists the sources first; a server that cannot list them now leaves the stored decision
stored (not a verdict), and a server that lists its tools without that one refuses the edit
in words that say so.

Real servers (the official ``mcp`` SDK's, ``charge_server.py``), counted on their side; the
chat is loaded in a real child process, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat, DecisionError, MCPServer
from nbagent.store import StoreConflictWarning
from nbagent.testing import ScriptedProvider, call_tools, reply

HERE = Path(__file__).resolve().parent
ROOT = Path(nbagent.__file__).resolve().parent.parent
CHARGES = str(HERE / "charge_server.py")

GONE = textwrap.dedent(
    '''
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("charges", log_level="WARNING")

    @server.tool()
    def refund(amount: int) -> str:
        """Refund an amount (the server's new version: charge is gone)."""
        return f"refunded {amount}"

    server.run("stdio")
    '''
)
"""The same server (label ``A``) in a version that no longer has ``charge``."""

DOWN = "import sys; sys.exit(3)"
"""A server command that exits at once: the server cannot be reached."""

CHILD = textwrap.dedent(
    """
    import asyncio, json, sys, warnings
    from nbagent import Chat, MCPServer, open_store
    from nbagent.store import StoreConflictWarning
    from nbagent.testing import ScriptedProvider, reply
    url, chat_id, counter, how, args = sys.argv[1:6]
    args = json.loads(args)
    server = MCPServer.stdio(sys.executable, args, env={"NBAGENT_TEST_COUNTER": counter,
                             "CHARGE_LABEL": "A"}, label="A")
    out = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat = Chat.load(chat_id, store=url, tools=[server], display=False,
                         provider=ScriptedProvider([reply("after")]))
        out["loaded"] = [c.status for c in chat.tool_calls]
        if how.startswith("later"):  # ops decides while this process has the chat open
            with open_store(url) as store:
                store.approve("c1", arguments={"amount": 7}, by="ops", chat_id=chat_id)
        if how == "approve":  # at once, nothing read chat.tools
            try:
                chat.approve(chat.pending_approvals[0], arguments={"amount": 7})
            except Exception as exc:
                out["raised"] = f"{type(exc).__name__}: {exc}"
        if how.endswith("async"):  # the step's hook runs on the loop's thread first
            asyncio.run(chat.complete_async())
        else:
            chat.complete()
        out["status"] = chat.status
        out["calls"] = [
            [c.status, c.decision and c.decision.by, c.decision and c.decision.arguments]
            for c in chat.tool_calls
        ]
    out["warnings"] = [str(w.message) for w in caught if w.category is StoreConflictWarning]
    chat.close()
    server.close()
    print(json.dumps(out), flush=True)
    """
)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "agent.db")
    server = request.getfixturevalue("postgres_server")
    return str(server.new_database())


def charges(counter: Path) -> MCPServer:
    env = {"NBAGENT_TEST_COUNTER": str(counter), "CHARGE_LABEL": "A"}
    return MCPServer.stdio(sys.executable, [CHARGES], env=env, label="A")


def runs(counter: Path) -> list[str]:
    return counter.read_text().splitlines() if counter.exists() else []


def parked(url: str, counter: Path) -> str:
    """A stored chat whose gated ``charge(amount=5)`` waits; no chat has it open."""
    server = charges(counter)
    provider = ScriptedProvider([call_tools(("charge", {"amount": 5}, "c1")), reply("done")])
    chat = Chat(provider=provider, store=url, display=False).with_tools(server)
    chat.ask("charge it")
    assert [c.status for c in chat.tool_calls] == ["awaiting_approval"]
    chat.close()
    server.close()
    return chat.id


def ops_approves(url: str, chat_id: str) -> None:
    with nbagent.open_store(url) as store:
        store.approve("c1", arguments={"amount": 7}, by="ops", chat_id=chat_id)


def load_in_child(
    url: str, chat_id: str, counter: Path, how: str = "complete", server: list[str] | None = None
) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    argv = [url, chat_id, str(counter), how, json.dumps(server or [CHARGES])]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def stored(url: str, chat_id: str) -> tuple[str, str | None, Any]:
    with nbagent.open_store(url) as store:
        c = store.call("c1", chat_id=chat_id)
    d = c.decision
    return c.status, d.by if d else None, d.arguments if d else None


@pytest.mark.parametrize("how", ["complete", "async", "later", "later-async"])
def test_an_edit_approved_in_the_store_runs_once_in_the_next_process_with_the_server(
    url: str, tmp_path: Path, how: str
) -> None:
    """Decided before the load (applied as the chat loads) or after it (by the next step's
    look at the store, the async driver's included)."""
    counter = tmp_path / "charges"
    chat_id = parked(url, counter)
    if not how.startswith("later"):
        ops_approves(url, chat_id)
    out = load_in_child(url, chat_id, counter, how)
    assert out["warnings"] == []  # was: "cannot be applied ... awaiting approval again"
    assert out["status"] == "complete"
    assert out["calls"] == [["ok", "ops", {"amount": 7}]]
    assert runs(counter) == ["A 7"]  # ops's arguments, once
    assert stored(url, chat_id) == ("ok", "ops", {"amount": 7})


def test_an_edit_approved_at_once_after_load_needs_no_listing_first(
    url: str, tmp_path: Path
) -> None:
    counter = tmp_path / "charges"
    chat_id = parked(url, counter)
    out = load_in_child(url, chat_id, counter, "approve")
    assert "raised" not in out  # was: DecisionError "tool 'charge' is not available"
    assert out["status"] == "complete"
    assert out["calls"] == [["ok", "user", {"amount": 7}]]
    assert runs(counter) == ["A 7"]


def test_a_server_down_at_load_keeps_the_stored_edit_for_a_later_step(tmp_path: Path) -> None:
    url = str(tmp_path / "agent.db")
    counter = tmp_path / "charges"
    chat_id = parked(url, counter)
    ops_approves(url, chat_id)
    down = load_in_child(url, chat_id, counter, server=["-c", DOWN])
    assert down["status"] == "awaiting_approval"  # the load and the step did not fail
    assert down["calls"] == [["awaiting_approval", None, None]]
    assert len(down["warnings"]) >= 1
    assert all(
        "approved elsewhere by ops, but its edited arguments cannot be checked now" in w
        and "stays stored" in w
        for w in down["warnings"]
    ), down["warnings"]
    assert stored(url, chat_id) == ("approved", "ops", {"amount": 7})  # not rejected
    assert runs(counter) == []
    up = load_in_child(url, chat_id, counter)  # the server back: the decision applies
    assert up["warnings"] == [] and up["status"] == "complete"
    assert up["calls"] == [["ok", "ops", {"amount": 7}]]
    assert runs(counter) == ["A 7"]


def test_a_chat_loaded_without_the_server_keeps_the_stored_edit(tmp_path: Path) -> None:
    url = str(tmp_path / "agent.db")
    counter = tmp_path / "charges"
    chat_id = parked(url, counter)
    ops_approves(url, chat_id)
    with pytest.warns(StoreConflictWarning, match="has no 'charge' tool .* stays stored"):
        chat = Chat.load(chat_id, store=url, display=False, provider=ScriptedProvider([]))
    with pytest.raises(DecisionError, match="'charge' is not available in this chat"):
        chat.approve(chat.pending_approvals[0], arguments={"amount": 9})
    chat.close()
    assert stored(url, chat_id) == ("approved", "ops", {"amount": 7})
    out = load_in_child(url, chat_id, counter)
    assert out["calls"] == [["ok", "ops", {"amount": 7}]] and runs(counter) == ["A 7"]


def test_a_tool_its_server_no_longer_lists_refuses_the_edit_in_its_words(
    tmp_path: Path,
) -> None:
    url = str(tmp_path / "agent.db")
    counter = tmp_path / "charges"
    gone = tmp_path / "charges_v2.py"
    gone.write_text(GONE)
    chat_id = parked(url, counter)
    said = "MCP server 'A' does not list tool 'charge' now (it no longer offers it)"
    # chat.approve: refused at once, with what can still be done
    out = load_in_child(url, chat_id, counter, "approve", server=[str(gone)])
    assert out["raised"].startswith(f"DecisionError: {said}"), out
    assert "deny the call, or approve it as it is" in out["raised"]
    # an edit made in the store: rejected with that reason (kept in the store's
    # decisions), the call waits again, for a denial or a plain approval
    ops_approves(url, chat_id)
    out = load_in_child(url, chat_id, counter, server=[str(gone)])
    assert len(out["warnings"]) == 1 and said in out["warnings"][0], out
    assert "cannot be applied" in out["warnings"][0]
    assert stored(url, chat_id) == ("awaiting_approval", None, None)
    with nbagent.open_store(url) as store:
        store.deny("c1", reason="charge is gone", by="ops", chat_id=chat_id)
    out = load_in_child(url, chat_id, counter, server=[str(gone)])
    assert out["status"] == "complete" and out["calls"][0][:2] == ["denied", "ops"]
    assert runs(counter) == []
