"""A stdio server that does not start: the error says what is known, when it is due.

A server that exits at once (a missing token, a bad flag) used to give only "MCPError:
Connection closed"; now the error has its exit code and says where its stderr (which
says why) went. ``connect_timeout=1`` used to raise after about 3 s: the server's grace
to stop after its stdin closed (2 s) was waited for before raising; now it is stopped in
the background and the error comes when the timeout is due. Real processes: a Python
program that exits, and one that never answers.
"""

from __future__ import annotations

import sys
import time

import pytest

from nbagent import MCPServer, MCPServerError


def test_a_server_exiting_at_start_says_its_exit_code_and_where_its_stderr_went() -> None:
    exits = "import sys; sys.stderr.write('MY_TOKEN is not set\\n'); sys.exit(3)"
    server = MCPServer.stdio(sys.executable, ["-c", exits], prefix="bad", connect_timeout=20)
    with pytest.raises(MCPServerError) as info:
        server.connect()
    text = str(info.value)
    assert "exit code 3" in text, text
    assert "stderr" in text and "Jupyter" in text, text
    server.close()


def test_connect_timeout_is_honoured_by_a_server_that_ignores_its_stdin() -> None:
    sleeps = "import time; time.sleep(30)"  # never answers, never reads its input
    server = MCPServer.stdio(sys.executable, ["-c", sleeps], prefix="slow", connect_timeout=0.5)
    started = time.monotonic()
    with pytest.raises(MCPServerError, match="connect_timeout"):
        server.connect()
    took = time.monotonic() - started
    assert took < 2.0, f"raised after {took:.1f} s for connect_timeout=0.5"
    server.close()
