"""A server's ``idempotentHint`` is not the user's word that a tool is safe to run twice.

An approved call that a crash left in doubt is rerun only when its tool is declared
``idempotent`` (``@tool(idempotent=True)``); an MCP tool used to be so whenever its server
said ``idempotentHint`` (the reference filesystem server says it of ``write_file``,
``create_directory``; the git server of ``git_add``, ``git_reset``). Now the user opts in:
``MCPServer.stdio(..., idempotent=True | [names])``. The servers here are real (the
official SDK's ``MCPServer``), and the crash is a real ``SIGKILL`` of the process running
the chat while the server runs the call.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import nbagent
from nbagent import Chat, MCPServer, ToolDefinitionError
from nbagent.testing import ScriptedProvider, reply

ROOT = Path(nbagent.__file__).resolve().parent.parent

SERVER = textwrap.dedent(
    '''
    import json, os
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer("hinted", log_level="WARNING")
    COUNT = os.environ["COUNT_FILE"]
    RELEASE = COUNT + ".release"  # once it exists, a call sleeps no more

    def note(tool: str, phase: str) -> None:
        with open(COUNT, "a") as f:
            f.write(json.dumps({"tool": tool, "phase": phase, "pid": os.getpid()}) + "\\n")
            f.flush()
            os.fsync(f.fileno())

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True, read_only_hint=False))
    async def setval(key: str, sleep: float = 0.0) -> str:
        """Set a value (the server calls it idempotent; it writes)."""
        note("setval", "start")
        with anyio.move_on_after(sleep):
            while not os.path.exists(RELEASE):
                await anyio.sleep(0.02)
        return f"set {key}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def peek() -> str:
        """Read-only."""
        return "peeked"

    server.run()
    '''
)

CHILD = textwrap.dedent(
    """
    import sys
    from nbagent import Chat, MCPServer
    from nbagent.testing import ScriptedProvider, call_tools, reply
    script, count, db = sys.argv[1:4]
    server = MCPServer.stdio(sys.executable, [script], env={"COUNT_FILE": count}, prefix="p")
    provider = ScriptedProvider(
        [call_tools(("p_setval", {"key": "k1", "sleep": 30})), reply("done")]
    )
    chat = Chat(provider=provider, store=db, display=False).with_tools(server)
    print(chat.id, flush=True)
    chat.ask("go")
    chat.approve(chat.pending_approvals[0])
    chat.complete()
    """
)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "hinted_server.py"
    path.write_text(SERVER)
    return path


def runs(count: Path) -> list[dict[str, object]]:
    if not count.exists():
        return []
    return [json.loads(line) for line in count.read_text().splitlines() if line.strip()]


def crash_during_the_approved_call(script: Path, count: Path, db: Path) -> str:
    """A chat in another process approves ``p_setval``, and is killed while it runs.

    The call sleeps (30 s at most) until the crash; a rerun of it returns at once."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(script), str(count), str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert child.stdout is not None
        chat_id = child.stdout.readline().strip()
        for _ in range(600):  # until the server runs the call (a liveness bound)
            if runs(count) or child.poll() is not None:
                break
            time.sleep(0.05)
        assert len(runs(count)) == 1 and child.poll() is None, "the call never started"
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the kernel dies; its server goes with it
        child.communicate()
        Path(f"{count}.release").touch()
    return chat_id


def test_a_servers_idempotent_hint_alone_never_reruns_an_approved_call(
    script: Path, tmp_path: Path
) -> None:
    count, db = tmp_path / "count.jsonl", tmp_path / "chat.db"
    chat_id = crash_during_the_approved_call(script, count, db)
    server = MCPServer.stdio(
        sys.executable, [str(script)], env={"COUNT_FILE": str(count)}, prefix="p"
    )
    provider = ScriptedProvider([reply("after the crash")])
    with Chat.load(chat_id, store=str(db), tools=[server], provider=provider) as chat:
        [call] = chat.tool_calls
        assert call.status == "in_doubt", call.status
        chat.complete()
        assert chat.tool_calls[0].status == "in_doubt"
    server.close()
    assert len(runs(count)) == 1  # the approved call ran once, never again


def test_the_user_declares_a_tool_idempotent_and_it_is_rerun(script: Path, tmp_path: Path) -> None:
    count, db = tmp_path / "count.jsonl", tmp_path / "chat.db"
    chat_id = crash_during_the_approved_call(script, count, db)
    server = MCPServer.stdio(
        sys.executable,
        [str(script)],
        env={"COUNT_FILE": str(count)},
        prefix="p",
        idempotent=["setval"],
    )
    provider = ScriptedProvider([reply("after the crash")])
    with Chat.load(chat_id, store=str(db), tools=[server], provider=provider) as chat:
        chat.complete()
        [call] = chat.tool_calls
        assert call.status == "ok" and call.result is not None
        assert call.result.content == "set k1"
    server.close()
    assert len(runs(count)) == 2  # the user said running it twice is safe


def test_idempotent_takes_true_or_tool_names_with_or_without_the_prefix(
    script: Path, tmp_path: Path
) -> None:
    env = {"COUNT_FILE": str(tmp_path / "count.jsonl")}
    cases = {
        False: set(),
        True: {"setval", "peek"},
        ("setval",): {"setval"},
        ("p_peek",): {"peek"},
    }
    for given, expected in cases.items():
        declared = list(given) if isinstance(given, tuple) else given
        with MCPServer.stdio(
            sys.executable, [str(script)], env=env, prefix="p", idempotent=declared
        ) as server:
            tools = server.list_tools()
            assert {t.remote_name for t in tools if t.idempotent} == expected, given
            hinted = {t.remote_name: t for t in tools}["setval"]
            assert hinted.annotations.get("idempotentHint") is True  # still shown as said


@pytest.mark.parametrize("bad", ["setval", 1, [1], [""], None])
def test_idempotent_refuses_what_is_not_a_list_of_names(bad: object) -> None:
    with pytest.raises(ToolDefinitionError, match="idempotent="):
        MCPServer.stdio(sys.executable, ["x.py"], idempotent=bad)  # type: ignore[arg-type]
