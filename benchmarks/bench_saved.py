"""A big chat in a real kernel: the bytes of its saved notebook, and the cost of one more round
(reported by ``bench_view``).

Targets (issue 28, item 5): a saved notebook holding a 1,000-call chat's view is at
most 2x the bytes of its printed transcript; one more round on that chat costs at
most 1.5x with the view what it costs without.

Both run in a real ipykernel driven by nbclient, as ``make notebooks``, papermill or a
CI job runs a notebook: the view is live in the kernel (comms, display updates) and
nbclient keeps the widget state of every model it saw (``store_widget_state``, its
default), as the saved file then holds it.

- **saved bytes**: one cell asks a scripted model for 1,000 tool calls (one per
  response, then an answer); the notebook is written with ``nbformat`` and its size
  compared with the chat's *printed transcript*: the ``text/plain`` a terminal prints
  for ``chat`` (its repr and the conversation as text).
- **one more round**: two chats of 1,000 calls in one kernel, one shown (``Chat()`` in
  a kernel shows each turn live) and one with ``display=False``; cells alternate a
  round (a user message, one tool call, an answer) on each, and each cell prints the
  kernel process's CPU seconds for its ``ask``; the ratio of the medians is reported.
  Two chats of 10 calls take their turns in the same kernel: what the view adds a round
  on the long chat against what it adds on the short one says whether the view's cost
  grows with the chat (a second line). It does not: what the view adds is a turn's own
  output (a view made, its three forms rendered and sent once), about the same at 10
  calls as at 1,000, so the first line's ratio is that fixed cost over a round of a
  model that costs nothing.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import tempfile
from pathlib import Path

from benchmarks._common import Result

CALLS = 1000

SETUP = '''
import time
from nbagent import Chat, LLMToolResponse, ToolCall, ToolResultMessage, tool

class Scripted:
    """n tool calls (one per response) then an answer; later turns: one call, then an answer."""
    name = "bench"
    model = "bench-model"

    def __init__(self, n):
        self.n, self.made = n, 0

    def complete(self, request):
        last = request.messages[-1]
        if not isinstance(last, ToolResultMessage) or self.made < self.n:
            self.made += 1
            call = ToolCall(f"call_{self.made:05d}", "lookup", {"key": f"item-{self.made}"})
            return LLMToolResponse("", (call,), 120, 12, self.model, self.name, "tool_use")
        return LLMToolResponse(f"Looked up {self.made} items.", (), 150, 20, self.model, self.name)

    async def complete_async(self, request):
        return self.complete(request)

@tool
def lookup(key: str) -> dict:
    """Look up an item by key.

    Args:
        key: The item's key.
    """
    return {"key": key, "value": len(key), "note": "x" * 80}

def make_chat(n, **options):
    chat = Chat(provider=Scripted(n), max_steps=2 * n + 5, stream=False, **options)
    return chat.with_tools(lookup)
'''

BIG = f'chat = make_chat({CALLS})\nreply = chat.ask("Look up {CALLS} items")'

TRANSCRIPT = (
    "import json\n"
    "print(json.dumps({'transcript': len(chat._repr_mimebundle_()['text/plain'].encode()),"
    " 'calls': len(chat.tool_calls)}))"
)

ROUND = (
    "c0 = time.process_time(); {name}.ask('One more'); "
    "print('cpu', time.process_time() - c0, len({name}.tool_calls))"
)


def _run(cells: list[str], *, timeout: int = 900) -> object:
    import nbclient
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=False,
        record_timing=False,
        iopub_timeout=timeout,  # a long chat's last updates are big: wait for all of them
    ).execute()
    return nb


def _printed(nb: object, index: int) -> str:
    cell = nb.cells[index]  # type: ignore[attr-defined]
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


def saved_size() -> tuple[int, int, dict[str, int]]:
    """(saved notebook bytes, printed transcript bytes, what the bytes are)."""
    import nbformat

    # A last cell, as a notebook has: nbclient stops reading a cell's messages at its idle
    # status, and the view's last update can come after it (JupyterLab applies it anyway).
    nb = _run([SETUP, BIG, "pass"])
    big = nb.cells[1]
    parts: dict[str, int] = {}
    for out in big.outputs:
        for kind, value in out.get("data", {}).items():
            parts[kind] = parts.get(kind, 0) + len(json.dumps(value))
    widgets = nb.metadata.get("widgets", {})
    state = widgets.get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    parts["widget state"] = len(json.dumps(widgets))
    parts["widget models"] = len(state)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.ipynb"
        nbformat.write(nb, path)
        size = path.stat().st_size
    # The printed transcript of the same chat, in a kernel of its own (no view saved there).
    nb2 = _run([SETUP, BIG.replace("make_chat(", "make_chat(display=False, n="), TRANSCRIPT])
    facts = json.loads(_printed(nb2, 2))
    assert facts["calls"] == CALLS, facts
    return size, int(facts["transcript"]), parts


def run(quick: bool) -> list[Result]:
    size, transcript, parts = saved_size()
    ratio = size / transcript
    what = ", ".join(
        f"{k} {v / 1024:,.0f} KiB" if k != "widget models" else f"{v:,} widget models"
        for k, v in parts.items()
        if v
    )
    results = [
        Result(
            "saved notebook, 1,000-call chat / its printed transcript",
            ratio,
            "x",
            "<= 2.0x",
            ratio <= 2.0,
            f"{size / 1024:,.0f} KiB vs {transcript / 1024:,.0f} KiB; {what}",
        )
    ]
    return results  # one more round with the view / without: bench_view (round_result)


def round_costs(rounds: int, sizes: tuple[int, ...] = (CALLS,)) -> dict[int, tuple[float, float]]:
    """Median CPU seconds of one round on a chat of each size (calls), with the view and
    without: ``{size: (viewed, bare)}``. All the chats live in one kernel; each round is a
    cell of its own, the chats taking turns."""
    cells = [SETUP]
    for n in sizes:
        cells += [
            f'viewed{n} = make_chat({n}); viewed{n}.ask("Look up {n} items")',
            f'bare{n} = make_chat({n}, display=False); bare{n}.ask("Look up {n} items")',
        ]
    names = [f"{kind}{n}" for n in sizes for kind in ("viewed", "bare")]
    first = len(cells) + len(names)  # the first round of each chat warms up
    for _ in range(rounds + 1):
        cells += [ROUND.format(name=name) for name in names]
    nb = _run(cells)
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for i in range(first, len(cells)):
        m = re.search(r"cpu (\S+)", _printed(nb, i))
        assert m, _printed(nb, i)
        cpu[cells[i].split(".ask(")[0].split("; ")[-1]].append(float(m[1]))
    med = {name: statistics.median(values) for name, values in cpu.items()}
    return {n: (med[f"viewed{n}"], med[f"bare{n}"]) for n in sizes}


def round_result(quick: bool) -> list[Result]:
    """One more round on a 1,000-call chat, with the view / without, with the load average;
    and how the view's own cost a round grows from a 10-call chat to a 1,000-call one."""
    load = os.getloadavg()[0]
    costs = round_costs(5 if quick else 9, (10, CALLS))
    (viewed, bare), (small_viewed, small_bare) = costs[CALLS], costs[10]
    ratio = viewed / bare
    added, small_added = viewed - bare, small_viewed - small_bare
    growth = added / small_added if small_added > 0 else float("inf")
    loads = f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}"
    return [
        Result(
            "one more round on a 1,000-call chat, with the view / without",
            ratio,
            "x",
            "<= 1.5x",
            ratio <= 1.5,
            f"cpu {viewed * 1000:.1f} ms vs {bare * 1000:.1f} ms (kernel process, median); "
            f"on a 10-call chat {small_viewed * 1000:.1f} vs {small_bare * 1000:.1f} ms "
            f"({small_viewed / small_bare:.2f}x); {loads}",
        ),
        Result(
            "the view's own cost a round, 1,000-call chat / 10-call chat",
            growth,
            "x",
            "<= 1.5x (proposed)",
            growth <= 1.5,
            f"the view adds {added * 1000:.2f} ms a round at 1,000 calls, "
            f"{small_added * 1000:.2f} ms at 10 (kernel CPU, medians)",
        ),
    ]
