"""Level 2: a Ray batch in a real kernel (nbclient), on the session's Ray.

``batch(..., backend="ray")`` returns while rows await approval; decided
afterwards in the notebook, through the store (what the inbox does for chats
that live elsewhere), they continue on Ray workers by themselves while the
kernel is idle: the driver's watch runs on nbagent's loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbclient
import nbformat
import pytest

pytestmark = pytest.mark.notebook

CELLS = [
    '''
import os
import nbagent
from nbagent import Chat, tool
from nbagent.store import SQLiteStore

@tool
def order_status(order_id: int) -> str:
    """Look up an order's status.

    Args:
        order_id: The order number.
    """
    return "delivered"

@tool(requires_approval=True)
def issue_refund(order_id: int) -> str:
    """Refund an order.

    Args:
        order_id: The order number.
    """
    return f"refunded order {order_id} in process {os.getpid()}"

make_chat = lambda: Chat("demo").with_tools(order_status, issue_refund)
prompts = ["Check the status of order 41", "Refund order 42", "Refund order 43"]
''',
    """
result = nbagent.batch(prompts, make_chat, store="batch.db", progress=False, poll_interval=0.2,
                       backend="ray", backend_options={"address": ADDRESS})
print(list(result["status"]))
""",
    """
store = SQLiteStore("batch.db")          # what the inbox does for chats that live elsewhere
for call in store.pending_approvals():
    store.approve(call, by="inbox")
""",
    """
import asyncio
for _ in range(600):
    fresh = nbagent.batch_results(result)
    if (fresh["status"] == "done").all():
        break
    await asyncio.sleep(0.05)
print(list(fresh["status"]))
refunds = [c for c in store.calls() if c.name == "issue_refund"]
print(len(refunds), all(f":{os.getpid()}:" not in c.claimed_by for c in refunds))
print(sorted(nbagent.read_log(fresh)["tool"]))
""",
]


def test_a_ray_batch_in_a_kernel_continues_its_parked_rows_on_workers(
    ray_cluster: Any, tmp_path: Path
) -> None:
    nb = nbformat.v4.new_notebook()
    cells = [src.replace("ADDRESS", repr(ray_cluster.address)) for src in CELLS]
    nb.cells = [nbformat.v4.new_code_cell(src.strip()) for src in cells]
    nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outs = [cell.get("outputs", []) for cell in nb.cells]
    for cell_outs in outs:
        for out in cell_outs:
            assert out.get("output_type") != "error", "\n".join(out.get("traceback", []))
    printed = [
        "".join(o.get("text", "") for o in cell if o.get("name") == "stdout") for cell in outs
    ]
    assert printed[1].strip() == str(["done", "awaiting_approval", "awaiting_approval"])
    lines = printed[3].strip().splitlines()
    assert lines[0] == str(["done"] * 3)
    assert lines[1] == "2 True"  # each refund ran once, on a worker: not in the kernel
    assert lines[2] == str(["issue_refund", "issue_refund", "order_status"])
