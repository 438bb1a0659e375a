"""Level 2: a batch in a real kernel (nbclient). ``batch()`` returns while rows await
approval; decided afterwards (as the inbox does, on the live chats), they continue by
themselves on nbagent's loop while the kernel is idle, and the progress output ends as
the static final bar (updated through its display id)."""

from __future__ import annotations

import nbclient
import nbformat
import pytest

pytestmark = pytest.mark.notebook

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

CELLS = [
    '''
import pandas as pd
import nbagent
from nbagent import Chat, tool

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
    return f"refunded order {order_id}"

tickets = pd.DataFrame({"order_id": [41, 42, 43, 44],
                        "ask": ["Check the status of", "Refund", "Check the status of", "Refund"]})
''',
    """
result = nbagent.batch(tickets, lambda: Chat("demo").with_tools(order_status, issue_refund),
                       prompt="{ask} order {order_id}")
print(list(result["status"]))
""",
    """
run = result.attrs["nbagent_batch"]
print(run.running)
print(run.display.static()["text/plain"])  # the bar while the rows wait
for chat in run.chats.values():
    for call in chat.pending_approvals:
        chat.approve(call, by="inbox")
""",
    """
import asyncio
for _ in range(100):
    fresh = nbagent.batch_results(result)
    if (fresh["status"] == "done").all() and not run.running:  # its last rows and its end
        break
    await asyncio.sleep(0.05)
print(list(fresh["status"]), run.running)
""",
]


def test_a_batch_in_a_kernel_returns_with_parked_rows_that_then_continue(tmp_path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src.strip()) for src in CELLS]
    nbclient.NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    outs = [cell.get("outputs", []) for cell in nb.cells]
    for cell_outs in outs:
        for out in cell_outs:
            assert out.get("output_type") != "error", "\n".join(out.get("traceback", []))
    printed = [
        "".join(o.get("text", "") for o in cell if o.get("name") == "stdout") for cell in outs
    ]
    assert printed[1].strip() == str(["done", "awaiting_approval", "done", "awaiting_approval"])
    watching, bar = printed[2].strip().split("\n")
    assert watching == "True"  # still watching the parked rows after the cell ended
    # the bar says how they continue, with the count then (no separate line to go stale)
    assert "2 rows await approval and continue by themselves" in bar
    assert printed[3].strip() == str(["done"] * 4) + " False"
    # the progress output of the batch's cell: the final static bar, no widget left
    bars = [o for o in outs[1] if "nba-batch" in o.get("data", {}).get("text/html", "")]
    assert len(bars) == 1
    data = bars[0]["data"]
    assert WIDGET_MIME not in data
    assert "done 4/4" in data["text/plain"]
    assert "continue by themselves" not in data["text/plain"]  # none waits any more
    # no separate notice, which would still say "2 rows await" under the final bar
    assert not any("nba-notice" in o.get("data", {}).get("text/html", "") for o in outs[1])
    assert not any(o.get("name") == "stderr" for o in outs[1])
