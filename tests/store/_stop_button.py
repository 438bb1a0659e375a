"""A worker process that presses the stop button at random moments of a stored chat.

``python _stop_button.py WHERE RUNS SEED`` runs ``RUNS`` chats, each on its own SQLite
file when ``WHERE`` is a directory, all in one PostgreSQL database when it is a
``postgresql://`` URL. A chat asks one question per verdict; the model asks for
``refund`` of that turn's order (gated: approved when the verdict is true, denied
otherwise) and an ungated ``lookup``. A timer raises ``KeyboardInterrupt`` in the main
thread after a random delay, up to how long a whole chat takes here, measured first
(``_thread.interrupt_main``: what the notebook's stop button does to a kernel), wherever
the chat is: a model request, the approval gate, a store
write, an event being handed out. The user then runs the cell again: the chat is driven
to the end. Prints one JSON line: how many runs were interrupted and every way a run
broke the promise (a denied call ran, a call ran twice, an approved one never ran, the
chat stuck, the file holding something else than the chat).

A separate process: an interrupt is raised in whatever the main thread runs, and a test
runner's main thread must never receive one.
"""

from __future__ import annotations

import _thread
import faulthandler
import json
import random
import signal
import sys
import threading
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import nbagent
from nbagent import Chat, ChatCancelled, LLMToolResponse, Tool, tool
from nbagent.providers import ModelRequest
from nbagent.store import open_store
from nbagent.testing import ScriptedProvider, call_tools, reply

effects: list[int] = []


class Refund(Tool):
    """Refund an order (a side effect: counted)."""

    name = "refund"
    requires_approval = True

    def execute(self, order_id: int) -> str:
        """Refund.

        Args:
            order_id: The order to refund.
        """
        effects.append(order_id)
        return f"refunded order {order_id}"


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return f"{city}: found"


def answer(request: ModelRequest) -> LLMToolResponse:
    """The model: asked "Turn i", it calls ``refund(i)`` and ``lookup``; given their results,
    it answers. It answers by what it is asked, not by position: a response the stop button
    cut off before the chat recorded it is asked for again, as a real model would be."""
    turn = next(m.content for m in reversed(request.messages) if m.role == "user")
    i = int(str(turn).split()[-1])
    if request.messages[-1].role == "user":
        return call_tools(("refund", {"order_id": i}), ("lookup", {"city": "Oslo"}))
    return reply(f"Turn {i} done.")


def drive(chat: Chat, verdicts: list[bool]) -> None:
    """Decide what waits and complete, until the turn is over."""
    for _ in range(20):
        if chat.status == "awaiting_approval":
            for call in list(chat.pending_approvals):
                if verdicts[call.arguments["order_id"]]:
                    chat.approve(call)
                else:
                    chat.deny(call, "not this one")
        elif chat.status in ("idle", "complete"):
            return
        else:
            chat.complete()


def turns(chat: Chat, verdicts: list[bool]) -> None:
    """Ask the questions not asked yet, each driven to its end."""
    drive(chat, verdicts)
    for i in range(sum(m.role == "user" for m in chat.transcript), len(verdicts)):
        chat.ask(f"Turn {i}")
        drive(chat, verdicts)


def _lifecycle(chat: Chat) -> list[Any]:
    return [(c.id, c.name, c.status, c.decision and c.decision.verdict) for c in chat.tool_calls]


def one(db: str, delay: float | None, verdicts: list[bool]) -> tuple[bool, list[str]]:
    effects.clear()
    model = ScriptedProvider([answer], repeat_last=True)
    store = open_store(db)
    chat = Chat(provider=model, store=store).with_tools(Refund, lookup)
    broken: list[str] = []
    interrupted = False
    timer = threading.Timer(delay or 0, _thread.interrupt_main)
    try:
        if delay is not None:
            timer.start()  # (in the try: a delay near 0 fires inside start())
        turns(chat, verdicts)
        if delay is not None:
            timer.join()  # the interrupt lands in here at the latest, never in what follows
            threading.Event().wait(0.01)
    except (KeyboardInterrupt, ChatCancelled):
        interrupted = True
    except Exception:  # the user pressed stop: anything but the interrupt is a defect
        interrupted = True
        broken.append(f"interrupted with: {traceback.format_exc(limit=-4)}")
    if timer.is_alive():
        timer.join()
    faulthandler.dump_traceback_later(30, exit=True)  # stuck: the traceback, and a crash
    for attempt in range(3):  # the user runs the cell again
        try:
            turns(chat, verdicts)
            break
        except Exception:
            broken.append(f"run again ({attempt}): {traceback.format_exc(limit=-4)}")
    faulthandler.cancel_dump_traceback_later()
    ran = Counter(effects)
    for call in chat.tool_calls:
        if call.name != "refund":
            continue
        order = call.arguments["order_id"]
        if ran[order] > 1:
            broken.append(f"{call.id} (order {order}) ran {ran[order]} times")
        if not verdicts[order] and ran[order]:
            broken.append(f"{call.id} (order {order}) was denied and ran")
        # approved: it ran once; or the stop button cancelled it (before or while it ran:
        # the model is told), and it ran at most once
        if verdicts[order] and not (
            (call.status == "ok" and ran[order] == 1) or call.status == "cancelled"
        ):
            broken.append(f"{call.id} (order {order}) approved: {call.status}, ran {ran[order]}")
    if chat.status != "complete":
        broken.append(f"the chat ended {chat.status}")
    try:
        mine = [chat.transcript, _lifecycle(chat)]
        chat.close()
        store.close()
        with open_store(db) as fresh:
            loaded = Chat.load(
                chat.id, store=fresh, tools=[Refund, lookup], provider=ScriptedProvider([])
            )
            stored = [loaded.transcript, _lifecycle(loaded)]
            loaded.close()
        if stored != mine:
            broken.append(f"the file holds {stored[1]}, the chat {mine[1]}")
    except Exception:
        broken.append(f"close and load: {traceback.format_exc(limit=-4)}")
    return interrupted, broken


def _where(target: str, k: int | str) -> str:
    return target if target.startswith("postgresql://") else str(Path(target) / f"{k}.db")


def _duration(target: str) -> float:
    """How long a 3-turn chat takes here uninterrupted (the slowest of three)."""
    slowest = 0.0
    for k in range(3):
        start = time.perf_counter()
        _, broken = one(_where(target, f"warm{k}"), None, [True, False, True])
        slowest = max(slowest, time.perf_counter() - start)
        assert not broken, broken
    return slowest


def main() -> None:
    # A process started in the background (make's, CI's) may inherit SIGINT ignored, and then
    # interrupt_main does nothing; a kernel handles it, as here.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    nbagent.configure(quiet=True, display=False)
    warnings.simplefilter("ignore")  # "could not be written ... retried": expected here
    target, runs, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    longest = _duration(target)
    interrupted = 0
    broken: list[str] = []
    for k in range(runs):
        delay = rng.uniform(0, longest)
        verdicts = [rng.random() < 0.6 for _ in range(rng.randint(1, 3))]
        hit, why = one(_where(target, k), delay, verdicts)
        interrupted += hit
        broken += [f"run {k} (after {delay * 1000:.2f} ms, verdicts {verdicts}): {w}" for w in why]
    print(
        json.dumps(
            {"runs": runs, "interrupted": interrupted, "broken": broken, "ms": longest * 1000}
        )
    )


if __name__ == "__main__":
    main()
