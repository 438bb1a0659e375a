"""A comparison calls "shared history" only the requests a fork copied from its parent (asked
and paid once); the leading steps two runs asked each on their own and got the same answer
to are "identical", not shared: a fork at step 1 sampling a deterministic model again, or
two separate chats of one prompt."""

from __future__ import annotations

from typing import Any

from nbagent import Chat, tool
from nbagent.comparison import Comparison
from nbagent.comparison._runs import run_of
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool
def lookup(order_id: int) -> str:
    """Look an order up.

    Args:
        order_id: The order.
    """
    return f"order {order_id}: paid"


def _answer(request: Any) -> Any:
    done = sum(1 for m in request.messages if getattr(m, "role", "") == "assistant")
    if done < 3:
        return call_tools(("lookup", {"order_id": done}, f"c{done}"))
    return reply("done")


def _chat() -> Chat:
    chat = Chat(provider=ScriptedProvider([_answer], repeat_last=True), display=False)
    chat.with_tools(lookup).ask("q")
    return chat


def _shown(a: Chat, b: Chat) -> dict[str, str]:
    runs = [run_of(a, "a"), run_of(b, "b")]
    for run in runs:  # a scripted answer's latency is noise (0 or 1 ms): the same answers
        for step in run.steps:
            step.values["latency_ms"] = 0
    bundle: dict[str, str] = Comparison(runs)._repr_mimebundle_()
    return bundle


def test_a_fork_resampling_the_same_answers_shares_only_the_steps_it_copied() -> None:
    chat = _chat()
    fork = chat.fork(step=1)
    fork.complete()  # its steps 2-4 asked anew (replay="off"), answered the same
    assert [s for s in fork.record.steps if s.shared] and len(fork.record.steps) == 4
    shown = _shown(chat, fork)
    for mime in ("text/plain", "text/html", "text/markdown"):
        text = shown[mime]
        assert "step 1 is the same in both runs (shared history)" in text, (mime, text)
        assert "steps 1–4 are the same" not in text, (mime, text)
        assert "steps 2–4 are identical in both runs (asked in each)" in text, (mime, text)


def test_two_separate_chats_answered_the_same_share_nothing() -> None:
    shown = _shown(_chat(), _chat())
    for mime in ("text/plain", "text/html", "text/markdown"):
        text = shown[mime]
        assert "shared history" not in text, (mime, text)
        assert "steps 1–4 are identical in both runs (asked in each)" in text, (mime, text)


def test_a_fork_compared_with_its_parent_after_the_fork_point_shares_its_history() -> None:
    chat = _chat()
    fork = chat.fork(step=4)  # two model steps and two tool rounds copied, not driven
    shown = _shown(chat, fork)
    for mime in ("text/plain", "text/html", "text/markdown"):
        text = shown[mime]
        assert "steps 1–2 are the same in both runs (shared history)" in text, (mime, text)
        assert "identical" not in text, (mime, text)
