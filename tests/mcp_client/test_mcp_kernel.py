"""In a real Jupyter kernel (nbclient): MCP tools from ``chat.ask()`` (the kernel's loop is
blocked while the round runs) and from a top-level ``await chat.ask_async()``, in every
concurrency mode; a tool bound to the kernel's loop fails clearly from ``chat.ask()`` and
works from ``await chat.ask_async()``."""

from __future__ import annotations

import json
from pathlib import Path

import nbclient
import nbformat
import pytest
from _mcp_servers import SERVER

SETUP = f"""
import asyncio, json, sys, time
import nbagent
from nbagent import Chat, tool
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply
nbagent.configure(display=False, quiet=True)
server = nbagent.MCPServer.stdio(sys.executable, [{SERVER!r}], prefix="notes")

def chat_for(tools, mode, *calls):
    provider = ScriptedProvider([call_tools(*calls), reply("done")])
    chat = Chat(provider=provider, display=False).with_tools(tools)
    return chat.with_tool_options(concurrency={{"sequential": False}}.get(mode, mode))

def report(chat):
    return [(c.status, c.result.content) for c in chat.tool_calls]

calls = [("notes_echo", {{"text": "one"}}), ("notes_slow", {{"seconds": 0.05}})]
out = {{}}
"""

SYNC = """
for mode in ("sequential", "threads", "async"):
    chat = chat_for(server, mode, *calls)
    chat.ask("go")
    out["sync", mode] = report(chat)
"""

ASYNC = """
for mode in ("sequential", "threads", "async"):
    chat = chat_for(server, mode, *calls)
    await chat.ask_async("go")
    out["async", mode] = report(chat)
"""

BOUND = """
class Doubler:
    def __init__(self):
        self.loop = asyncio.get_running_loop()
        self.queue = asyncio.Queue()
        self.task = self.loop.create_task(self.serve())
    async def serve(self):
        while True:
            x, fut = await self.queue.get()
            fut.set_result(2 * x)
    async def double(self, x):
        fut = self.loop.create_future()
        self.queue.put_nowait((x, fut))
        return await fut

doubler = Doubler()

@tool(loop="current")
async def double(x: int) -> int:
    \"\"\"Double with the kernel-bound resource.\"\"\"
    return await doubler.double(x)

chat = chat_for(double, "async", ("double", {"x": 2}))
t0 = time.perf_counter()
chat.ask("go")
out["bound", "sync"] = [(c.status, c.result.content[:60]) for c in chat.tool_calls]
out["bound", "sync seconds"] = time.perf_counter() - t0
chat = chat_for(double, "threads", ("double", {"x": 2}))
await chat.ask_async("go")
out["bound", "async"] = report(chat)
"""

REPORT = """
server.close()
print(json.dumps({" ".join(k): v for k, v in out.items()}))
"""


@pytest.mark.notebook
def test_mcp_and_loop_bound_tools_from_every_driver_in_a_kernel() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (SETUP, SYNC, ASYNC, BOUND, REPORT)]
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            assert o.get("output_type") != "error", "\n".join(o.get("traceback", []))
    printed = nb.cells[-1]["outputs"][0]["text"]
    out = json.loads(printed)
    expected = [["ok", "one"], ["ok", "slept 0.05"]]
    for mode in ("sequential", "threads", "async"):
        assert out[f"sync {mode}"] == expected, mode
        assert out[f"async {mode}"] == expected, mode
    ((status, text),) = out["bound sync"]
    assert status == "error" and "ToolLoopError" in text
    assert out["bound sync seconds"] < 5
    assert out["bound async"] == [["ok", "4"]]


@pytest.mark.notebook
def test_a_cell_run_again_lets_go_of_its_chats_server() -> None:
    """In a real kernel, run as JupyterLab runs it (each request names its cell): the same
    cell that starts a server and asks through it, run five times, leaves one server
    process, the one ``chat`` still names (five before: each view kept its chat, and the
    chat its server)."""
    import sys

    from jupyter_client.manager import start_new_kernel

    sys.path.insert(0, str(Path(__file__).parents[1] / "notebook"))
    from test_view_memory import KERNEL_SETUP, _run_cell

    setup = KERNEL_SETUP + (
        "import os, subprocess, sys\n"
        "from nbagent import MCPServer\n"
        "from nbagent.testing import ScriptedProvider, call_tools, reply\n"
        "def servers():\n"
        "    ps = ['ps', '-o', 'pid=', '--ppid', str(os.getpid())]\n"
        "    out = subprocess.run(ps, capture_output=True, text=True).stdout\n"
        "    return len(out.split()) - 1  # not ps itself\n"
    )
    cell = (
        f"srv = MCPServer.stdio(sys.executable, [{SERVER!r}], prefix='notes')\n"
        "script = [call_tools(('notes_echo', {'text': 'hi'})), reply('done')]\n"
        "chat = Chat(provider=ScriptedProvider(script)).with_tools(srv)\n"
        "chat.ask('echo')\n"
    )
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        _run_cell(kc, setup, "setup")
        for _ in range(5):
            _run_cell(kc, cell, "cell-mcp")
        probe = (
            "chats = live_chats()\n"
            "deadline = time.monotonic() + 10\n"
            "while servers() > 1 and time.monotonic() < deadline:  # a closed server exits\n"
            "    time.sleep(0.05)\n"
            "print(chats, servers(), chat.status)"
        )
        assert _run_cell(kc, probe, "probe").split() == ["1", "1", "complete"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
