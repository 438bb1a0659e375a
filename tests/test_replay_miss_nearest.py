"""A ``replay="only"`` miss names the recording nearest the request: one with the same
messages (a request asked again with another option) before a later step of the same run,
whose longer history shares only the first message with it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from nbagent import Chat, ReplayMissError, tool
from nbagent._replay import PROCESS
from nbagent.testing import ScriptedProvider, call_tools, reply


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    PROCESS.clear()
    yield
    PROCESS.clear()


@tool
def lookup(order_id: int) -> str:
    """Look an order up.

    Args:
        order_id: The order.
    """
    return f"order {order_id}: paid"


def _answer(request: Any) -> Any:
    done = sum(1 for m in request.messages if getattr(m, "role", "") == "assistant")
    if done < 2:
        return call_tools(("lookup", {"order_id": done}, f"c{done}"))
    return reply("done")


def test_a_miss_by_an_option_names_the_request_with_the_same_messages(tmp_path: Any) -> None:
    # a run of three requests, and its fork asking the later two with calls="one"
    run = Chat(provider=ScriptedProvider([_answer], repeat_last=True), display=False)
    run.with_tools(lookup)
    run.ask("look up the orders")
    fork = run.fork(step=1, tool_options={"calls": "one"})
    fork.complete()
    assert len(PROCESS) == 5

    # the first request with calls="one": recorded with calls="many" only (the fork's
    # requests with calls="one" came later, with more messages)
    again = Chat(provider=ScriptedProvider([]), replay="only", display=False)
    again.with_tools(lookup).with_tool_options(calls="one")
    with pytest.raises(ReplayMissError) as caught:
        again.ask("look up the orders")
    text = str(caught.value)
    assert "The nearest recording (step 1 of chat" in text, text
    assert "the number of messages" not in text, text
    assert "differs in the options: calls (recorded 'many', now 'one')." in text, text
