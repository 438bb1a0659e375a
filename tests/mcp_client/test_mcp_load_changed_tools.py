"""An approved call is checked against its tool as the server lists it when it is sent,
whatever this process saw of the server before.

47fb932 checked an approved call against the tools listed anew only when this process had
seen its server restart or announce a change. A chat with a store approved
``v_pay(amount=5, to="bob", dry_run=True)`` on ``v1`` and closed; the server was upgraded to
``v4-no-dry-run`` (``pay(amount, to)``, an argument it does not declare ignored); a new
process loaded the chat with a new ``MCPServer.stdio`` and completed it: it listed ``v4``
before the call ran, so nothing looked changed, and the server paid for real
(``v4-no-dry-run pay 5 bob``). A batch rerun, a worker, an approval from another process
then a load: the same. Now an argument the tool's schema does not declare is refused, unless
the schema says it takes others (``additionalProperties``): when the model's call is first
checked (the model is told at once), and again when an approved call is about to be sent
(the call is answered with an error saying why and is never sent, now or later).

Real servers (the official ``mcp`` SDK's, ``versioned_server.py``); the chat that loads and
completes runs in a real child process; SQLite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat, MCPServer
from nbagent.testing import ScriptedProvider, call_tools, reply

HERE = Path(__file__).resolve().parent
ROOT = Path(nbagent.__file__).resolve().parent.parent
VERSIONED = str(HERE / "versioned_server.py")
DRY_RUN = {"amount": 5, "to": "bob", "dry_run": True}

CHILD = textwrap.dedent(
    """
    import json, sys
    from nbagent import Chat, MCPServer
    from nbagent.testing import ScriptedProvider, reply
    job = json.loads(sys.argv[1])
    server = MCPServer.stdio(sys.executable, [job["server"]], env=job["env"], prefix="v")
    chat = Chat.load(job["chat_id"], store=job["url"], tools=[server], display=False,
                     provider=ScriptedProvider([reply("after")], repeat_last=True))
    chat.complete()
    first = [[c.status, c.result and str(c.result.content)] for c in chat.tool_calls]
    chat.complete()  # and again: nothing more is sent
    again = [c.status for c in chat.tool_calls]
    chat.close()
    server.close()
    print(json.dumps({"first": first, "again": again}), flush=True)
    """
)


@dataclass
class Setup:
    url: str
    version: Path
    paid: Path
    env: dict[str, str]

    def lines(self) -> list[str]:
        return self.paid.read_text().splitlines() if self.paid.exists() else []

    def server(self) -> MCPServer:
        return MCPServer.stdio(sys.executable, [VERSIONED], env=self.env, prefix="v")

    def approved_and_closed(self, arguments: dict[str, Any]) -> str:
        """A stored chat whose ``v_pay`` call is approved on ``v1``, not run; none has it open."""
        server = self.server()
        provider = ScriptedProvider([call_tools(("v_pay", arguments, "c1")), reply("done")])
        chat = Chat(provider=provider, store=self.url, display=False).with_tools(server)
        chat.ask("pay")
        [pending] = chat.pending_approvals
        chat.approve(pending)
        chat.close()
        server.close()
        return chat.id

    def load_in_child(self, chat_id: str) -> dict[str, Any]:
        job = {"server": VERSIONED, "env": self.env, "chat_id": chat_id, "url": self.url}
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


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    version, paid = tmp_path / "version", tmp_path / "paid.log"
    version.write_text("v1")
    env = {"VERSION_FILE": str(version), "PAY_LOG": str(paid)}
    yield Setup(str(tmp_path / "agent.db"), version, paid, env)


def stored_status(url: str, chat_id: str) -> str:
    with nbagent.open_store(url) as store:
        return store.call("c1", chat_id=chat_id).status


def test_an_approved_dry_run_loaded_after_the_upgrade_is_refused_not_paid(setup: Setup) -> None:
    """The critic's repro: approved on v1, loaded and completed in a new process on v4."""
    chat_id = setup.approved_and_closed(DRY_RUN)
    setup.version.write_text("v4-no-dry-run")
    out = setup.load_in_child(chat_id)
    [[status, told]] = out["first"]
    assert status == "error", out
    assert "dry_run" in told and "not run" in told, told  # the model (and the person) see why
    assert out["again"] == ["error"]
    assert setup.lines() == []  # never paid
    assert stored_status(setup.url, chat_id) == "error"
    out = setup.load_in_child(chat_id)  # another load: still nothing sent
    assert out["first"][0][0] == "error"
    assert setup.lines() == []


@pytest.mark.parametrize(
    ("version", "line"),
    [
        ("v1-again", "v1-again pay 5 bob dry_run=True"),
        ("v5-note", "v5-note pay 5 bob dry_run=True note="),
    ],
)
def test_an_approved_call_its_loaded_server_still_takes_runs_exactly_once(
    setup: Setup, version: str, line: str
) -> None:
    chat_id = setup.approved_and_closed(DRY_RUN)
    setup.version.write_text(version)
    out = setup.load_in_child(chat_id)
    assert out["first"] == [["ok", "dry run"]], out
    assert setup.lines() == [line]
    setup.load_in_child(chat_id)
    assert setup.lines() == [line]


def test_the_model_is_told_at_once_of_an_argument_the_tool_does_not_declare(
    setup: Setup,
) -> None:
    """An undeclared argument was passed through and ignored by the server (a dry run paid);
    it is now refused when the model's call is checked, before any approval is asked."""
    setup.version.write_text("v4-no-dry-run")
    server = setup.server()
    provider = ScriptedProvider(
        [
            call_tools(("v_pay", DRY_RUN)),
            call_tools(("v_pay", {"amount": 5, "to": "bob"})),
            reply("done"),
        ]
    )
    chat = Chat(provider=provider, display=False).with_tools(server)
    chat.ask("pay")
    first = chat.tool_calls[0]
    assert first.status == "error" and first.result is not None
    told = str(first.result.content)
    assert "invalid arguments for v_pay" in told and "dry_run" in told, told
    assert "amount" in told and "to" in told  # what it does take
    # the model's next call, without it, waits for approval as usual
    assert [c.status for c in chat.tool_calls] == ["error", "awaiting_approval"]
    assert setup.lines() == []
    chat.approve(chat.pending_approvals[0])
    chat.complete()
    assert setup.lines() == ["v4-no-dry-run pay 5 bob"]
    chat.close()
    server.close()


def test_a_tool_whose_schema_takes_other_arguments_gets_them(setup: Setup) -> None:
    """``additionalProperties: true``: the server said it takes them; they are sent."""
    setup.version.write_text("v6-open")
    server = setup.server()
    call = {"amount": 5, "to": "bob", "memo": "rent"}
    provider = ScriptedProvider([call_tools(("v_pay", call)), reply("done")])
    chat = Chat(provider=provider, display=False).with_tools(server)
    chat.ask("pay")
    chat.approve(chat.pending_approvals[0])
    chat.complete()
    assert [c.status for c in chat.tool_calls] == ["ok"]
    assert setup.lines() == ["v6-open pay 5 bob"]
    chat.close()
    server.close()
