"""Tools the browser tests define in their kernels, as source text for a notebook's cell."""

from __future__ import annotations

from pathlib import Path


def refund_tool(side_effect: Path) -> str:
    """The source of ``IssueRefund``: a gated tool that appends each order it refunds to
    ``side_effect``, a line per run (how a test counts what ran, and how often)."""
    return f'''\
from pathlib import Path
from nbagent import Tool

class IssueRefund(Tool):
    """Issues a refund for an order."""
    requires_approval = True

    def execute(self, order_id: int) -> str:
        with Path({str(side_effect)!r}).open("a") as f:
            f.write(f"{{order_id}}\\n")
        return f"refunded order {{order_id}}"

'''
