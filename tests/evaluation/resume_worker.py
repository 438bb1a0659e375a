"""One process resuming a stored evaluation (run by test_evaluate_races.py as a script).

Usage: ``python resume_worker.py <db> <decide or none> <runs file>``; prints the
scorecard's rows as JSON lines (case, status, passed, detail, error). Each refund that
runs appends ``<pid> <order>`` to the runs file.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

import nbagent
from nbagent import Chat, tool
from nbagent.evaluation import tool_called

DB, DECIDE, RUNS = sys.argv[1], sys.argv[2], sys.argv[3]


@tool(requires_approval=True)
def issue_refund(order_id: int) -> str:
    """Refund an order.

    Args:
        order_id: The order number.
    """
    with open(RUNS, "a") as f:
        f.write(f"{os.getpid()} {order_id}\n")
    time.sleep(0.05)
    return f"refunded order {order_id}"


def make_chat() -> Chat:
    return Chat("demo", display=False).with_tools(issue_refund)


warnings.simplefilter("ignore")
card = nbagent.evaluate(
    [f"Refund order {i}" for i in range(6)], make_chat,
    [tool_called("issue_refund", status="ok")], store=DB, name="ev", progress=False,
    decide=None if DECIDE == "none" else DECIDE,
)  # fmt: skip
for row in card.to_dict("records"):
    print(json.dumps({k: (None if row[k] is None or row[k] != row[k] else row[k])
                      for k in ("case", "status", "passed", "detail", "error")}))  # fmt: skip
