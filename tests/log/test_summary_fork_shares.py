"""A fork's own call asked for by a request it shares with its parent costs the fork 0.

``fork(call, decision=...)`` reruns a call of a response the fork shares with its
parent: the call is the fork's (it ran there), its request the parent's (shared, left
out of the fork's summary, counted in the parent's). Its share of that request was NA,
so ``log.summary`` of the fork, and of a store holding both, said the tool's tokens
and cost were unknown, as if a model had no prices.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import nbagent
from nbagent import Chat, LLMToolResponse, ToolCall, log, tool
from nbagent.testing import ScriptedProvider


@tool(requires_approval=True)
def refund(order_id: int) -> str:
    """Issue a refund."""
    return f"refunded {order_id}"


def _provider() -> ScriptedProvider:
    def answer(request: object) -> LLMToolResponse:
        first = len(request.messages) == 1  # type: ignore[attr-defined]
        return LLMToolResponse(
            text="" if first else "done",
            tool_calls=(ToolCall("c1", "refund", {"order_id": 7}),) if first else (),
            stop_reason="tool_use" if first else "end",
            input_tokens=1000 if first else 2000,
            output_tokens=100 if first else 50,
            model="claude-sonnet-4-5",
            provider="anthropic",
        )

    return ScriptedProvider([answer], repeat_last=True)


def test_a_forks_own_call_of_a_shared_request_costs_it_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "chats.db")
    chat = Chat(provider=_provider(), display=False, store=db).with_tools(refund)
    chat.ask("go")
    chat.deny("c1")
    chat.complete()
    before = log.summary(chat)
    assert before.loc["refund", "tokens"] == 1100 and before.loc["refund", "cost_usd"] > 0

    fork = chat.fork("c1", decision="approved")
    fork.complete()
    own = log.summary(fork)
    assert own.loc["refund", "calls"] == 1
    assert own.loc["refund", "tokens"] == 0  # the request's tokens were the parent's
    assert own.loc["refund", "cost_usd"] == 0.0
    with nbagent.store.open_store(db) as store:
        both = log.summary(store)
    assert both.loc["refund", "calls"] == 2
    assert both.loc["refund", "tokens"] == 1100  # counted once, in the parent
    assert both.loc["refund", "cost_usd"] == before.loc["refund", "cost_usd"]
    assert not pd.isna(both.loc["refund", "cost_usd"])
    kept = log.summary(fork, shared=True)  # the shared rows kept: the fork's whole history
    assert kept.loc["refund", "tokens"] == 1100
