"""A batch row parked on a pending input (an external tool's result) continues when answered.

The row parks like an approval (``awaiting_approval``, no slot held) and the live chat's
``InputAnswered`` wakes it, as an ``ApprovalDecided`` does.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pandas as pd

import nbagent
from nbagent import Chat, tool
from nbagent.batch._run import get_run
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool(external=True)
def ship(order: str) -> str:
    """Shipped by the warehouse, outside nbagent.

    Args:
        order: The order.
    """


def make(row: dict[str, Any]) -> Chat:
    script = [call_tools(("ship", {"order": row["order"]})), reply(f"shipped {row['order']}")]
    return Chat(provider=ScriptedProvider(script)).with_tools(ship)


def test_a_row_parked_on_an_input_continues_once_answered() -> None:
    frame = pd.DataFrame({"order": ["o1", "o2"]})

    async def main() -> pd.DataFrame:
        task = asyncio.ensure_future(
            nbagent.batch_async(
                frame,
                make,
                prompt="Ship {order}",
                name="inputs-live",
                wait_for_decisions=60,
                progress=False,
            )
        )
        for _ in range(6000):  # a loaded machine is slow to start the rows
            run = get_run("inputs-live")
            if run is not None and all(r.status == "awaiting_approval" for r in run.rows.values()):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the rows never parked")
        for chat in run.chats.values():
            for pending in chat.pending_inputs:
                chat.answer(pending, "tracking 123", by="warehouse")
        return await task

    result = asyncio.run(main())
    assert list(result["status"]) == ["done", "done"]
    assert list(result["reply"]) == ["shipped o1", "shipped o2"]


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refunded here, once approved.

    Args:
        order: The order.
    """
    return "refunded"


def test_pending_counts_what_a_parked_row_waits_for_inputs_too(
    capsys: Any,
) -> None:
    """``pending`` said 0 for a row parked on an input, as if nothing held it up."""

    def make_either(row: dict[str, Any]) -> Chat:
        name = "ship" if row["order"] == "o1" else "refund"
        script = [call_tools((name, {"order": row["order"]})), reply("done")]
        return Chat(provider=ScriptedProvider(script)).with_tools(ship, refund)

    frame = pd.DataFrame({"order": ["o1", "o2", "o3"]})
    result = nbagent.batch(frame, make_either, prompt="Handle {order}", progress=False)
    assert list(result["status"]) == ["awaiting_approval"] * 3
    assert list(result["pending"]) == [1, 1, 1]
    assert list(nbagent.batch_results(result)["pending"]) == [1, 1, 1]
    out = capsys.readouterr()
    said = out.err + out.out
    assert "2 row(s) await approval, 1 row(s) await an input" in said
