"""An approved call whose server restarted with other tools is checked against them first.

A call is approved, then its stdio server exits while idle and is started again by the
call, upgraded meanwhile (``versioned_server.py``). Its arguments had been checked against
the old process's schema only, and were sent as they were: to a tool the new process no
longer lists, without an argument it now requires, and (the harm) with ``dry_run=True``
to a ``pay`` that no longer takes ``dry_run`` and ignores it, so an approved dry run paid
for real. After a reconnection the tools are listed again before the call is sent: a
tool no longer listed, arguments its new schema refuses, or an argument it no longer
takes end the call with an error that says so, and nothing is sent. The call is answered
(an error result): it is never sent later either. A restart that changed nothing, or
only added an optional argument, runs the call exactly once.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _mcp_servers import wait_gone

from nbagent import Chat, MCPServer
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

VERSIONED = str(Path(__file__).with_name("versioned_server.py"))


@dataclass
class Setup:
    server: MCPServer
    version: Path
    paid: Path

    def lines(self) -> list[str]:
        return self.paid.read_text().splitlines() if self.paid.exists() else []

    def restart_as(self, version: str) -> None:
        """The server exits while idle; its next start reads ``version``."""
        pid = int(str(self.server.call("pid")))
        self.version.write_text(version)
        os.kill(pid, signal.SIGKILL)
        assert wait_gone(pid)
        deadline = time.monotonic() + 60  # the connection has seen it end (idle, not mid-call)
        while self.server.connected and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not self.server.connected


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    version, paid = tmp_path / "version", tmp_path / "paid.log"
    version.write_text("v1")
    env = {"VERSION_FILE": str(version), "PAY_LOG": str(paid)}
    server = MCPServer.stdio(sys.executable, [VERSIONED], env=env, prefix="v")
    yield Setup(server, version, paid)
    server.close()


def approved(setup: Setup, arguments: dict[str, Any]) -> Chat:
    """A chat whose ``v_pay`` call with ``arguments`` is approved, not run yet."""
    provider = ScriptedProvider([call_tools(("v_pay", arguments)), reply("done"), reply("more")])
    chat = Chat(provider=provider).with_tools(setup.server)
    chat.ask("pay")
    [pending] = chat.pending_approvals
    chat.approve(pending)
    return chat


DRY_RUN = {"amount": 5, "to": "bob", "dry_run": True}


@pytest.mark.parametrize(
    ("version", "says"),
    [
        ("v3-gone", "no longer lists tool 'pay'"),
        ("v2-currency", "currency"),
        ("v4-no-dry-run", "no longer takes argument 'dry_run'"),
    ],
)
def test_an_approved_call_its_restarted_server_no_longer_takes_is_not_sent(
    setup: Setup, version: str, says: str
) -> None:
    chat = approved(setup, DRY_RUN)
    setup.restart_as(version)
    chat.complete()
    [call] = chat.tool_calls
    assert call.status == "error" and call.result is not None
    told = str(call.result.content)  # what the model reads
    assert says in told and "not sent" in told, told
    assert setup.lines() == []  # the new process never ran it
    chat.complete()  # and it is never sent later
    assert setup.lines() == [] and [c.status for c in chat.tool_calls] == ["error"]
    # the chat offers the new tools at its next request
    assert ("v_pay" in [t.name for t in chat.tools]) is (version != "v3-gone")
    chat.close()


@pytest.mark.parametrize("version", ["v1-again", "v5-note"])
def test_an_approved_call_still_valid_after_a_restart_runs_exactly_once(
    setup: Setup, version: str
) -> None:
    chat = approved(setup, DRY_RUN)
    setup.restart_as(version)
    chat.complete()
    [call] = chat.tool_calls
    assert call.status == "ok" and call.result is not None, call.result
    assert str(call.result.content) == "dry run"
    note = " note=" if version == "v5-note" else ""
    assert setup.lines() == [f"{version} pay 5 bob dry_run=True{note}"]
    chat.complete()
    assert len(setup.lines()) == 1
    chat.close()


def test_without_a_restart_an_approved_call_runs_as_before(setup: Setup) -> None:
    chat = approved(setup, {"amount": 7, "to": "ann"})
    chat.complete()
    assert [c.status for c in chat.tool_calls] == ["ok"]
    assert setup.lines() == ["v1 pay 7 ann dry_run=False"]
    chat.close()
