"""A batch in a Jupyter kernel, with the notebook wing and without it: the same CPU.

In a kernel every ``Chat`` gets the notebook wing (``install_auto_display``). It used to
give each one a display state at once, folding every event "for a later
``display(chat)``": a batch in a notebook spent 1.34x the CPU per chat of the same batch
with the wing removed. A chat nobody shows is now only followed quietly (a failed tool's
traceback, who decided), and its display state is made when something shows it.

Measured here in a real kernel (jupyter_client): ``nbagent.batch`` of 3-round chats on a
scripted model, with the wing and with ``install_auto_display`` replaced by a no-op, in
turns, the kernel's CPU (``process_time``, its own threads included in both) per chat.
"""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks._common import Result

SETUP = '''
import time
import nbagent
import nbagent.notebook as notebook_wing
from nbagent import Chat, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

nbagent.configure(quiet=True)

@tool
def lookup(item: str) -> str:
    """Look an item up.

    Args:
        item: The item.
    """
    return "x" * 200

script = [
    call_tools(("lookup", {"item": "a"}), ("lookup", {"item": "b"})),
    call_tools(("lookup", {"item": "c"})),
    call_tools(("lookup", {"item": "d"})),
    reply("done " * 50),
]
wing = notebook_wing.install_auto_display

def make():
    return Chat(provider=ScriptedProvider(list(script))).with_tools(lookup)

def cpu_per_chat(n, with_wing):
    notebook_wing.install_auto_display = wing if with_wing else (lambda chat: None)
    try:
        start = time.process_time()
        out = nbagent.batch([f"go {i}" for i in range(n)], make, progress=False)
        assert (out["status"] == "done").all()
        return (time.process_time() - start) / n
    finally:
        notebook_wing.install_auto_display = wing
'''


def _cell(kc: Any, code: str) -> str:
    """Run ``code`` in the kernel; what it printed (an error raises)."""
    out: list[str] = []

    def hook(msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            raise RuntimeError("\n".join(msg["content"]["traceback"]))

    kc.execute_interactive(code, timeout=600, output_hook=hook)
    return "".join(out)


def run(quick: bool = False) -> list[Result]:
    from jupyter_client.manager import start_new_kernel

    n = 100 if quick else 300
    repeat = 2 if quick else 5
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        _cell(kc, SETUP)
        _cell(kc, "cpu_per_chat(30, True); cpu_per_chat(30, False)")  # warm both paths
        cpu: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(repeat):
            for with_wing in (True, False):
                printed = _cell(kc, f"print(cpu_per_chat({n}, {with_wing}))")
                cpu[with_wing].append(float(printed.strip()))
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    wing_ms = statistics.median(cpu[True]) * 1000
    bare_ms = statistics.median(cpu[False]) * 1000
    ratio = wing_ms / bare_ms
    return [
        Result(
            "batch in a kernel: with the notebook wing / without it (CPU)",
            ratio,
            "x",
            target="<= 1.1x",
            target_met=ratio <= 1.1,
            detail=f"{wing_ms:.2f} vs {bare_ms:.2f} ms CPU per 3-round chat, {n} chats",
        )
    ]
