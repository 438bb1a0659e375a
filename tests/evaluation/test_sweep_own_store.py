"""A sweep whose ``make_chat`` opens its own store by path forks every branch there.

The batch under the sweep closed each done row's chat (to let a per-row MCP server go), which
let go of the last lease on a store opened by path: forking the branches then failed with
"store ... is closed". A stored chat is not closed by a batch any more.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from nbagent import Chat, tool
from nbagent.evaluation import answer_contains, sweep
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: The order.
    """
    return f"refunded {order}"


def test_a_sweep_of_chats_with_their_own_store_forks_every_branch(tmp_path: Path) -> None:
    db = str(tmp_path / "sweep.db")

    def make_chat() -> Chat:
        script = [
            call_tools(("refund", {"order": "1"})),
            reply("done"),
            reply("done"),
            reply("done"),
        ]
        return Chat(provider=ScriptedProvider(script), store=db, display=False).with_tools(refund)

    card = sweep(
        pd.DataFrame({"q": ["refund 1"]}),
        make_chat,
        [answer_contains("done")],
        prompt="{q}",
        decide="approve",
        progress=False,
    )
    assert list(card["branch"]) == ["as run", "approve refund", "deny refund"]
    assert list(card["status"]) == ["done"] * 3 and card["error"].isna().all()
