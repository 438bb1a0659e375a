"""Level 2: the inbox in a real kernel (nbclient): its outputs, its saved widget state, the
chats' own cards after the inbox decided, and the chats continuing once the cell ends."""

from __future__ import annotations

import json

import nbclient
import nbformat

SETUP = '''\
import asyncio
import nbagent
from nbagent import Chat, Tool

class Deploy(Tool):
    """Deploy a service."""
    requires_approval = True

    def execute(self, service: str) -> str:
        return f"deployed {service}"

chats = [Chat(model="demo").with_tools(Deploy) for _ in range(2)]
for chat, svc in zip(chats, ["api", "<web>"]):
    chat.ask(f"Deploy the service {svc}")
'''

DECIDE = """\
out = box.approve(box.filter(where={"service": "api"}).pending)
print("waited:", box.wait(5))
print("outcomes:", out.outcome.tolist())
"""

AFTER = """\
for _ in range(400):
    if chats[0].status == "complete":
        break
    await asyncio.sleep(0.05)
print("statuses:", [c.status for c in chats])
"""


def _run(cells: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", store_widget_state=True
    ).execute()
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error", "\n".join(out.get("traceback", []))
    return nb


def _text(cell: nbformat.NotebookNode) -> str:
    return "".join(
        o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell.outputs
    )


def test_the_inbox_in_a_kernel() -> None:
    nb = _run([SETUP, "box = nbagent.inbox(chats)\nbox", DECIDE, AFTER])
    shown, twin = nb.cells[1].outputs
    data = shown["data"]
    assert "application/vnd.jupyter.widget-view+json" in data  # the live widget...
    # ...and its twin: the rows, for a notebook reopened without this kernel
    assert "application/vnd.jupyter.widget-view+json" not in twin["data"]
    assert "kernel session that has ended" in twin["data"]["text/plain"]
    # (as the cells left it: the filtered "api" call was approved in a later cell)
    assert "".join(twin["data"]["text/plain"]).startswith("Approvals inbox: 0 pending")
    assert data["text/plain"].startswith("Approvals inbox: 2 pending (2 live chats)")  # ...and
    assert (
        "&lt;web&gt;" in data["text/html"] and "<web>" not in data["text/html"]
    )  # fallbacks (the title)
    # a cell cannot wait for the chats: they continue on the kernel's loop when it ends
    assert "waited: False" in _text(nb.cells[2])
    assert "the chats continue when this cell ends" in json.dumps(nb.cells[2].outputs)
    assert "outcomes: ['approved']" in _text(nb.cells[2])
    assert "statuses: ['complete', 'awaiting_approval']" in _text(nb.cells[3])

    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    models = [m["state"] for m in state.values() if m["model_name"] == "AnyModel"]
    (inbox,) = [m for m in models if "rows" in m]
    assert [r["chat"].split(" · ")[1] for r in inbox["rows"]] == ["Deploy the service <web>"]
    assert inbox["decided"][0]["words"] == "approved in this inbox"
    # the chat's own view: the card the inbox decided says so (its output, saved static)
    view = nb.cells[0].outputs[0]["data"]["text/plain"]
    assert "approved by inbox" in view
