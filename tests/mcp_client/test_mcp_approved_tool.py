"""An approved call runs the tool it was made for, or none: never another tool that took its name.

A call records the MCP server whose tool the model asked for (``call.server``), and a
person approves that: "charge 9 on server A". When the call runs, the name may mean
another tool: a second server added to the chat that lists a tool of that name (hiding
A's), a tool of the chat's own added under that name, or a chat loaded with another
server. Before, the call ran whatever tool held the name (server B charged, while the
log said server A's call was ``ok``). Now: in a chat that still has server A, the call
is answered as an error that says which tool hides it, and nothing runs; in a chat
without server A (loaded with the wrong servers), ``complete()`` raises
``ToolUnavailableError`` and the approval waits for a process that has server A.
Real servers (``charge_server.py``, the official SDK), counted on their side.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from nbagent import Chat, MCPServer, ToolDefinitionError, ToolUnavailableError, tool
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

CHARGES = str(Path(__file__).with_name("charge_server.py"))


def charges(label: str, counter: Path, **kwargs: object) -> MCPServer:
    env = {"NBAGENT_TEST_COUNTER": str(counter), "CHARGE_LABEL": label}
    return MCPServer.stdio(sys.executable, [CHARGES], env=env, label=label, **kwargs)  # type: ignore[arg-type]


def charged(counter: Path) -> list[str]:
    return counter.read_text().splitlines() if counter.exists() else []


def parked(server: MCPServer, **kwargs: object) -> Chat:
    provider = ScriptedProvider([call_tools(("charge", {"amount": 9})), reply("done")])
    chat = Chat(provider=provider, display=False, **kwargs).with_tools(server)  # type: ignore[arg-type]
    chat.ask("charge 9")
    (call,) = chat.pending_approvals
    assert (call.name, call.server) == ("charge", "A")
    return chat


def local_charge(counter: Path) -> Callable[[int], str]:
    @tool
    def charge(amount: int) -> str:
        """Charge an amount of money."""
        with counter.open("a") as f:
            f.write(f"local {amount}\n")
        return "local charged"

    return charge


@pytest.mark.parametrize("hider", ["another server", "a tool of the chat's own"])
def test_an_approved_call_never_runs_the_tool_that_hides_its_own(
    tmp_path: Path, hider: str
) -> None:
    counter = tmp_path / "charges.txt"
    a = charges("A", counter)
    b = charges("B", counter, approval="never")
    chat = parked(a)
    try:
        call = chat.pending_approvals[0]
        chat.with_tools(b if hider == "another server" else local_charge(counter))
        assert chat.tools  # listed: B's (or the local) charge now holds the name
        chat.approve(call)
        chat.complete()
        assert charged(counter) == []  # neither B nor the local tool charged for A's call
        assert call.status == "error" and call.server == "A"
        assert call.result is not None and "of MCP server 'A' is hidden" in call.result.content
        owner = "MCP server 'B'" if hider == "another server" else "a tool of the chat's own"
        assert f"that name now belongs to {owner}" in call.result.content
        row = chat.log.set_index("call_id").loc[call.id]
        assert (row["server"], row["status"]) == ("A", "error")  # the record does not lie
    finally:
        chat.close()
        a.close()
        b.close()


def test_a_chat_loaded_with_another_server_keeps_the_approval_for_one_with_its_own(
    tmp_path: Path,
) -> None:
    counter = tmp_path / "charges.txt"
    db = tmp_path / "chats.db"
    a = charges("A", counter)
    chat = parked(a, store=db)
    chat_id, call_id = chat.id, chat.pending_approvals[0].id
    chat.approve(call_id)
    chat.close()
    a.close()
    b = charges("B", counter, approval="never")
    wrong = Chat.load(chat_id, store=db, tools=[b], provider=ScriptedProvider([reply("x")]))
    try:
        with pytest.raises(ToolUnavailableError, match="tool 'charge' of MCP server 'A'"):
            wrong.complete()
        assert charged(counter) == [] and wrong.tool_calls[-1].status == "approved"
    finally:
        wrong.close()
        b.close()
    a = charges("A", counter)
    right = Chat.load(chat_id, store=db, tools=[a], provider=ScriptedProvider([reply("done")]))
    try:
        right.complete()
        assert charged(counter) == ["A 9"]  # the approved call ran once, on its own server
        assert right.tool_calls[-1].status == "ok" and right.is_complete
    finally:
        right.close()
        a.close()


def test_two_servers_of_one_label_in_a_chat_are_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    """Two instances of one program, unlabelled, are both named by what the server calls
    itself: a call's record ("charges") could not say which one a person approved, and B
    charged for A's approved call. Listing them in one chat is refused, naming the fix."""
    counter = tmp_path / "charges.txt"
    env_a = {"NBAGENT_TEST_COUNTER": str(counter), "CHARGE_LABEL": "A"}
    env_b = {"NBAGENT_TEST_COUNTER": str(counter), "CHARGE_LABEL": "B"}
    a = MCPServer.stdio(sys.executable, [CHARGES], env=env_a)
    b = MCPServer.stdio(sys.executable, [CHARGES], env=env_b, approval="never")
    provider = ScriptedProvider([call_tools(("charge", {"amount": 9})), reply("done")])
    chat = Chat(provider=provider, display=False).with_tools(a)
    try:
        chat.ask("charge 9")
        (call,) = chat.pending_approvals
        chat.with_tools(b)
        chat.approve(call)
        with pytest.raises(ToolDefinitionError, match=r"labelled .charges.*own label="):
            chat.tools  # noqa: B018  (listing B beside A)
        with pytest.raises(ToolDefinitionError, match=r"labelled 'charges'"):
            chat.complete()  # A's approved call runs on A; the next request lists B: refused
        assert charged(counter) == ["A 9"] and call.status == "ok"  # never on B
    finally:
        chat.close()
        a.close()
        b.close()
    # per chat: A alone in one chat is fine while another chat holds A and B (refused)
    a = MCPServer.stdio(sys.executable, [CHARGES], env=env_a)
    b = MCPServer.stdio(sys.executable, [CHARGES], env=env_b, approval="never")
    alone = Chat(provider=ScriptedProvider([reply("x")]), display=False).with_tools(a)
    both = Chat(provider=ScriptedProvider([reply("x")]), display=False).with_tools(a, b)
    try:
        with pytest.raises(ToolDefinitionError, match=r"labelled 'charges'"):
            both.tools  # noqa: B018
        assert [t.name for t in alone.tools] == ["charge"]
        assert alone.ask("hi").content == "x"  # type: ignore[union-attr]
    finally:
        both.close()
        alone.close()
        a.close()
        b.close()
