"""A decision made in the store is recorded into a chat only once it passed the chat's checks,
whichever way it reaches the chat; and a chat's own setup is no verdict on one.

1. ops approved ``charge`` with ``{'amount': 500}`` in the store, then another process added
   ``Rule.deny('charge', ('amount', '>', 100))``. The chat was loaded while its MCP server was
   down (the edit cannot be checked: it stays stored, the card waits); the server came back and
   the user clicked Deny (or Approve as it is): the click raised "already approved by ops", but
   ops's edit was recorded unchecked (the store hands its first decision back to a decision made
   here) and the server ran ``A 500``, which a deny rule refuses. The same with the server up all
   along, the rule added by the chat itself after ops's edit. Now a decision the store hands
   back is checked as one applied from it: refused, it is dropped from the store (with a
   ``StoreConflictWarning``) and the person's own decision is the one recorded; nothing refused
   runs.
2. A chat loaded with ``server.tools(exclude=['charge'])``, another ``prefix=``, or a local
   tool of that name took its own setup for "the server dropped the tool" and erased ops's
   stored edit (the row back to ``awaiting_approval``). The server still lists the tool: the
   decision now stays stored for a chat that offers it, which applies it and runs it once.

Real servers (the official ``mcp`` SDK's), counted on their side; the chat that loads and
decides runs in a real child process; SQLite, and PostgreSQL for the first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat, DecisionError, MCPServer, Rule
from nbagent.store import StoreConflictWarning
from nbagent.testing import ScriptedProvider, call_tools, reply

HERE = Path(__file__).resolve().parent
ROOT = Path(nbagent.__file__).resolve().parent.parent
CHARGES = str(HERE / "charge_server.py")
DENY = Rule.deny("charge", ("amount", ">", 100))

TWO = textwrap.dedent(
    '''
    import os
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("charges", log_level="WARNING")

    @server.tool()
    def charge(amount: int) -> str:
        """Charge an amount of money."""
        with open(os.environ["NBAGENT_TEST_COUNTER"], "a") as f:
            f.write(f"A {amount}\\n")
        return f"charged {amount}"

    @server.tool()
    def balance() -> str:
        """The balance."""
        return "100"

    server.run("stdio")
    '''
)
"""A server (label ``A``) with ``charge`` and ``balance``: a view may leave ``charge`` out."""

MAYBE_DOWN = textwrap.dedent(
    """
    import os, runpy, sys
    if os.path.exists(os.environ["DOWN_FLAG"]):
        sys.exit(3)
    sys.argv = [os.environ["SERVER_SCRIPT"]]
    runpy.run_path(os.environ["SERVER_SCRIPT"], run_name="__main__")
    """
)
"""The charge server, not reachable while the file named by ``DOWN_FLAG`` exists."""

CHILD = textwrap.dedent(
    """
    import json, os, sys, warnings
    from nbagent import Chat, DecisionError, MCPServer, tool
    from nbagent.store import StoreConflictWarning
    from nbagent.testing import ScriptedProvider, reply
    job = json.loads(sys.argv[1])
    env = {"NBAGENT_TEST_COUNTER": job["counter"], "CHARGE_LABEL": "A",
           "DOWN_FLAG": job.get("flag", ""), "SERVER_SCRIPT": job.get("script", "")}
    server = MCPServer.stdio(sys.executable, job["server"], env=env, label="A",
                             prefix=job.get("prefix"))
    tools = [server]
    if job.get("exclude"):
        tools = [server.tools(exclude=job["exclude"])]
    if job.get("local"):
        @tool
        def charge(amount: int) -> str:
            '''A local charge that hides the server's.'''
            return "local"
        tools.append(charge)
    out = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat = Chat.load(job["chat_id"], store=job["url"], tools=tools, display=False,
                         provider=ScriptedProvider([reply("after")]))
        out["loaded"] = [c.status for c in chat.tool_calls]
        if job.get("flag"):
            os.remove(job["flag"])  # the server is back
        click = job.get("click")
        if click:
            call = chat.pending_approvals[0]
            try:
                chat.deny(call, reason="no") if click == "deny" else chat.approve(call)
            except DecisionError as exc:
                out["raised"] = str(exc)
        if job.get("complete", True):
            chat.complete()
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


def runs(counter: Path) -> list[str]:
    return counter.read_text().splitlines() if counter.exists() else []


def parked(url: str, counter: Path, server: list[str], amount: int = 5, **kw: Any) -> str:
    """A stored chat whose gated ``charge(amount)`` (call ``c1``) waits; no chat has it open."""
    env = {"NBAGENT_TEST_COUNTER": str(counter), "CHARGE_LABEL": "A", **kw.pop("env", {})}
    mcp = MCPServer.stdio(sys.executable, server, env=env, label="A", **kw)
    name = f"{kw['prefix']}_charge" if kw.get("prefix") else "charge"
    provider = ScriptedProvider([call_tools((name, {"amount": amount}, "c1")), reply("done")])
    chat = Chat(provider=provider, store=url, display=False).with_tools(mcp)
    chat.ask("charge it")
    assert [c.status for c in chat.tool_calls] == ["awaiting_approval"]
    chat.close()
    mcp.close()
    return chat.id


def ops_approves(url: str, chat_id: str, arguments: dict[str, Any] | None) -> None:
    with nbagent.open_store(url) as store:
        store.approve("c1", arguments=arguments, by="ops", chat_id=chat_id)


def rule_added_elsewhere(url: str, chat_id: str) -> None:
    """Another process (a dashboard, loaded without the server) adds the deny rule."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreConflictWarning)
        other = Chat.load(chat_id, store=url, display=False, provider=ScriptedProvider([]))
    other.add_rule(DENY)
    other.close()


def in_child(**job: Any) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(job)],
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


# -- 1. a decision the store hands back is checked ------------------------------------------


@pytest.mark.parametrize("click", ["deny", "approve"])
def test_a_click_never_records_a_stored_edit_a_deny_rule_refuses(
    url: str, tmp_path: Path, click: str
) -> None:
    """The critic's repro: server down at load, back before the click."""
    counter, flag = tmp_path / "charges", tmp_path / "down"
    wrapper = tmp_path / "maybe_down.py"
    wrapper.write_text(MAYBE_DOWN)
    env = {"DOWN_FLAG": str(flag), "SERVER_SCRIPT": CHARGES}
    chat_id = parked(url, counter, [str(wrapper)], env=env)
    ops_approves(url, chat_id, {"amount": 500})
    rule_added_elsewhere(url, chat_id)
    flag.write_text("down")
    out = in_child(
        url=url,
        chat_id=chat_id,
        counter=str(counter),
        server=[str(wrapper)],
        flag=str(flag),
        script=CHARGES,
        click=click,
    )
    assert "raised" not in out, out  # was: "already approved by ops", ops's edit recorded
    assert out["loaded"] == ["awaiting_approval"]
    # the load kept ops's edit (unchecked: the server was down); the click found it refused
    assert any("stays stored" in w for w in out["warnings"]), out["warnings"]
    dropped = [w for w in out["warnings"] if "amount > 100" in w]
    assert len(dropped) == 1 and "cannot be applied" in dropped[0], out["warnings"]
    if click == "deny":
        assert out["calls"] == [["denied", "user", None]]
        assert runs(counter) == []  # was: ['A 500']
        assert stored(url, chat_id) == ("denied", "user", None)
    else:  # approved as the model asked: 5, which no rule refuses
        assert out["calls"] == [["ok", "user", None]]
        assert runs(counter) == ["A 5"]
        assert stored(url, chat_id) == ("ok", "user", None)


def test_a_rule_added_here_after_the_stored_edit_wins_over_it_at_the_click(
    tmp_path: Path,
) -> None:
    """The race before 62c4d1c too: the server up, the edit stored, the chat's own rule
    added, then Deny: ops's edit was recorded and ran."""
    url, counter = str(tmp_path / "agent.db"), tmp_path / "charges"
    env = {"NBAGENT_TEST_COUNTER": str(counter), "CHARGE_LABEL": "A"}
    server = MCPServer.stdio(sys.executable, [CHARGES], env=env, label="A")
    provider = ScriptedProvider([call_tools(("charge", {"amount": 5}, "c1")), reply("done")])
    chat = Chat(provider=provider, store=url, display=False).with_tools(server)
    chat.ask("charge it")
    ops_approves(url, chat.id, {"amount": 500})
    chat.add_rule(DENY)
    with pytest.warns(StoreConflictWarning, match=r"cannot be applied .*amount > 100"):
        chat.deny(chat.pending_approvals[0], reason="no")  # was: DecisionError, 500 recorded
    chat.complete()
    assert [(c.status, c.decision and c.decision.by) for c in chat.tool_calls] == [
        ("denied", "user")
    ]
    assert runs(counter) == []  # was: ['A 500']
    assert stored(url, chat.id) == ("denied", "user", None)
    chat.close()
    server.close()


def test_a_stored_edit_that_cannot_be_checked_at_the_click_is_not_recorded(
    tmp_path: Path,
) -> None:
    """The server still down at the click: ops's edit cannot be checked, so it is neither
    recorded nor dropped; the click says so, and a later step with the server applies it."""
    url, counter, flag = str(tmp_path / "agent.db"), tmp_path / "charges", tmp_path / "down"
    wrapper = tmp_path / "maybe_down.py"
    wrapper.write_text(MAYBE_DOWN)
    env = {"DOWN_FLAG": str(flag), "SERVER_SCRIPT": CHARGES}
    chat_id = parked(url, counter, [str(wrapper)], env=env)
    ops_approves(url, chat_id, {"amount": 7})
    flag.write_text("down")
    server = MCPServer.stdio(
        sys.executable,
        [str(wrapper)],
        env={"NBAGENT_TEST_COUNTER": str(counter), "CHARGE_LABEL": "A", **env},
        label="A",
    )
    with pytest.warns(StoreConflictWarning, match="stays stored"):
        chat = Chat.load(chat_id, store=url, tools=[server], display=False,
                         provider=ScriptedProvider([reply("after")]))  # fmt: skip
    with pytest.raises(DecisionError, match=r"approved by ops .*cannot be checked"):
        chat.deny(chat.pending_approvals[0], reason="no")
    call = chat.get_call("c1")
    assert call.status == "awaiting_approval" and call.decision is None  # was: ops's, unchecked
    assert stored(url, chat_id) == ("approved", "ops", {"amount": 7})
    flag.unlink()
    chat.complete()
    assert [(c.status, c.decision and c.decision.arguments) for c in chat.tool_calls] == [
        ("ok", {"amount": 7})
    ]
    assert runs(counter) == ["A 7"]
    chat.close()
    server.close()


# -- 2. this chat's own setup is no verdict -------------------------------------------------


@pytest.mark.parametrize("setup", ["exclude", "prefix", "local"])
def test_a_chat_that_does_not_offer_the_tool_keeps_the_stored_edit(
    tmp_path: Path, setup: str
) -> None:
    url, counter = str(tmp_path / "agent.db"), tmp_path / "charges"
    two = tmp_path / "two_tools.py"
    two.write_text(TWO)
    prefix = "p" if setup == "prefix" else None
    chat_id = parked(url, counter, [str(two)], prefix=prefix)
    ops_approves(url, chat_id, {"amount": 7})
    job: dict[str, Any] = {"url": url, "chat_id": chat_id, "counter": str(counter)}
    how = {
        "exclude": {"exclude": ["charge"]},
        "prefix": {"prefix": "q"},
        "local": {"local": True},
    }[setup]
    out = in_child(server=[str(two)], **job, **how)
    assert out["calls"] == [["awaiting_approval", None, None]], out
    assert out["warnings"], out
    for w in out["warnings"]:  # was: "MCP server 'A' does not list tool 'charge' now"
        assert "does not list" not in w and "stays stored" in w, w
    assert stored(url, chat_id) == ("approved", "ops", {"amount": 7})  # was: erased
    assert runs(counter) == []
    # a chat with the server as the call was made applies it: once, ops's arguments
    out = in_child(server=[str(two)], prefix=prefix, **job)
    assert out["warnings"] == [] and out["calls"] == [["ok", "ops", {"amount": 7}]], out
    assert runs(counter) == ["A 7"]
