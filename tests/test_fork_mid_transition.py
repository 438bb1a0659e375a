"""A fork made from another thread while the chat emits a transition's events.

A transition (a decision and the answer a denial gives, a model response and
its calls' requests with their approval gates) is made under the chat's lock
and its events are emitted one by one after it; a subscriber may take its time
(a store's write, a dashboard). A fork copies the history from another thread:
it must never copy half of a transition. Half a denial left the fork's call
denied with no answer (driving it failed an assertion); half a response left
gated calls in the fork with no gate, and driving the fork ran them with nobody's
approval. Repeated races: a slow subscriber widens the window.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import nbagent
from nbagent import Chat, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

ROUNDS = 8


def _chat(runs: Counter[int]) -> Chat:
    @tool(requires_approval=True)
    def pay(n: int) -> str:
        """Pay."""
        runs[n] += 1
        return f"paid {n}"

    def answer(request: Any) -> Any:
        if len(request.messages) == 1:
            return call_tools(*[("pay", {"n": i}, f"p{i}") for i in range(4)])
        return reply("done")

    return Chat(provider=ScriptedProvider([answer], repeat_last=True), display=False).with_tools(
        pay
    )


def _forks_while(chat: Chat, busy: threading.Thread) -> list[Chat]:
    forks = []
    busy.start()
    while busy.is_alive():
        forks.append(chat.fork())
    busy.join()
    return forks


def test_a_fork_never_copies_half_a_denial() -> None:
    runs: Counter[int] = Counter()
    seen = 0
    for _ in range(ROUNDS):
        chat = _chat(runs)
        chat.ask("go")
        chat.on(nbagent.ApprovalDecided, lambda e: time.sleep(0.002))

        def deny_all(chat: Chat = chat) -> None:
            for c in list(chat.pending_approvals):
                chat.deny(c)

        forks = _forks_while(chat, threading.Thread(target=deny_all))
        seen += len(forks)
        for f in forks:
            for c in f.tool_calls:
                assert not (c.is_final and c.result is None), (c.id, c.status)
                assert c.status in ("denied", "awaiting_approval"), (c.id, c.status)
            for c in f.pending_approvals:
                f.deny(c)
            f.complete()  # drove to the end (it failed an assertion on half a denial)
            assert f.status == "complete"
    assert seen > ROUNDS
    assert not runs  # a denied call never runs, in the chat or a fork


def test_a_fork_never_copies_a_gated_call_without_its_gate() -> None:
    runs: Counter[int] = Counter()
    seen = 0
    for _ in range(ROUNDS):
        chat = _chat(runs)
        chat.on(nbagent.ToolCallRequested, lambda e: time.sleep(0.002))
        forks = _forks_while(chat, threading.Thread(target=chat.ask, args=("go",)))
        seen += len(forks)
        for f in forks:
            for c in f.tool_calls:
                assert c.approval is not None and c.approval.required, c.id
                assert c.status == "awaiting_approval", (c.id, c.status)
            f.complete()  # nobody approved: nothing may run
    assert seen > ROUNDS
    assert not runs, dict(runs)  # it ran the calls whose gate the fork missed


def test_a_fork_of_a_call_whose_response_is_still_being_sent_says_so() -> None:
    """A subscriber forking the call it was just told about (its response's other events
    still to come) got a bare StopIteration from deep in the fork (which an asyncio
    Future refuses to hold); it is a ValueError saying to fork once they have been sent."""
    runs: Counter[int] = Counter()
    chat = _chat(runs)
    said: list[str] = []

    def fork_it(event: Any) -> None:
        if event.call.id == "p0":
            try:
                chat.fork(event.call.id, decision="denied")
            except ValueError as exc:
                said.append(str(exc))

    chat.on(nbagent.ApprovalRequested, fork_it)
    chat.ask("pay them")
    assert said == [
        "pay(p0) is being recorded right now (its response's events are still being sent to "
        "subscribers); fork it once they have been"
    ]
    fork = chat.fork("p0", decision="denied")  # once sent, it forks
    assert fork.get_call("p0").status == "denied" and sum(runs.values()) == 0
