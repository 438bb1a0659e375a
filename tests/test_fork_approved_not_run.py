"""``fork(call, decision="approved")`` of a call approved but not run yet.

A fork asks again for an approval whose call has not run (one approval runs a call
once, in the chat it was given in): ``chat.fork()`` shows such a call awaiting
approval. ``fork(call, decision="approved")`` of it is refused, and says why: the call
may still run in the original, or may have run in another process a stale copy has not
heard from (allowing it ran a stored refund twice); the person decides it in the fork.
It said "already approved; nothing would change", which was not the reason.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from nbagent import Chat, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


def _chat(runs: Counter[int]) -> Chat:
    @tool(requires_approval=True)
    def refund(order_id: int) -> str:
        """Issue a refund."""
        runs[order_id] += 1
        return f"refunded {order_id}"

    def answer(request: Any) -> Any:
        if len(request.messages) == 1:
            return call_tools(("refund", {"order_id": 1}, "c1"))
        return reply("done")

    provider = ScriptedProvider([answer], repeat_last=True)
    return Chat(provider=provider, display=False).with_tools(refund)


def test_approving_in_a_fork_a_call_approved_but_not_run() -> None:
    runs: Counter[int] = Counter()
    chat = _chat(runs)
    chat.ask("go")
    chat.approve("c1")  # approved; complete() not called yet
    with pytest.raises(ValueError, match="has not run there yet"):
        chat.fork("c1", decision="approved")
    fork = chat.fork()
    assert fork.get_call("c1").status == "awaiting_approval"  # asked again
    fork.approve("c1")  # a person decides it in the fork
    fork.complete()
    assert runs[1] == 1  # once, in the fork
    chat.complete()
    assert runs[1] == 2  # once, in the original: one run per approval
    with pytest.raises(ValueError, match="nothing would change"):
        chat.fork("c1", decision="approved")  # it ran: that approval stands
