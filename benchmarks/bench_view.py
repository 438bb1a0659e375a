"""The notebook view: one more round in a kernel, building a view of a long chat, one event.

Target (issue 28, item 5): one more round on a 1,000-call chat in a real kernel costs at
most 1.5x with the view what it costs without (``bench_saved.round_result``; both numbers,
the same on a 10-call chat and the load average in its line). A second line says how what
the view adds a round grows from the 10-call chat to the 1,000-call one (proposed: 1.5x).

Targets (issue 6): constructing the view of a chat with 1,000 tool calls takes
under 1 s, and the per-event update cost stays flat as the chat grows
(measured at 10, 100 and 1,000 calls; reported as the 1,000 / 10 ratio).

The chats are real: a scripted provider asks for one tool call per response
(``n`` calls, then an answer), driven by ``Chat.complete()``, with the view's
display state subscribed from the start as it is in a kernel. Widgets are real
ipywidgets/anywidget objects; outside a kernel their comms are no-ops, so the
numbers are the kernel-side Python cost (the comm message a kernel would send
per update is the same size whatever the chat's length).

An event is fed exactly as the chat's event bus delivers it: folded into the
chat's record, whose change reaches the view's state (``ChatState.on_change``).
"update" events change an existing card (a call started / finished again);
"append" events add a new call card.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Any

import ipywidgets

from benchmarks._common import Result, interleaved
from nbagent import (
    Approval,
    Chat,
    LLMToolResponse,
    ModelRequest,
    ToolCall,
    ToolCallFinished,
    ToolCallRequested,
    ToolCallStarted,
    ToolResultMessage,
    tool,
)
from nbagent._events import Event
from nbagent._record import keeper
from nbagent.notebook import ChatView
from nbagent.notebook._fallback import bundle_for
from nbagent.notebook._state import ChatState, _states, state_for

SIZES = (10, 100, 1000)


class ScriptedProvider:
    """One tool call per response until ``n`` calls were made, then an answer."""

    name = "bench"
    model = "bench-model"

    def __init__(self, n: int):
        self.n = n
        self.made = 0

    def complete(self, request: ModelRequest) -> LLMToolResponse:
        if self.made < self.n:
            self.made += 1
            call = ToolCall(f"call_{self.made:05d}", "lookup", {"key": f"item-{self.made}"})
            return LLMToolResponse("", (call,), 120, 12, self.model, self.name, "tool_use")
        return LLMToolResponse(f"Looked up {self.n} items.", (), 150, 20, self.model, self.name)

    async def complete_async(self, request: ModelRequest) -> LLMToolResponse:
        return self.complete(request)


@tool
def lookup(key: str) -> dict[str, Any]:
    """Look up an item by key.

    Args:
        key: The item's key.
    """
    return {"key": key, "value": len(key), "note": "x" * 80}


def build_chat(n: int) -> Chat:
    chat = Chat(provider=ScriptedProvider(n), max_steps=2 * n + 5, display=False, stream=False)
    chat.with_tools(lookup)
    state_for(chat)  # as in a kernel: the display state follows the chat from the start
    chat.ask(f"Look up {n} items")
    assert chat.status == "complete", chat.status
    assert len(chat.tool_calls) == n
    return chat


def rebuild_state(chat: Chat) -> ChatState:
    """Drop the chat's display state so the next view rebuilds it from the chat's record."""
    old = _states.forget(chat)
    if old is not None:
        chat.record.unsubscribe(old.on_change)
        chat.off(old.on_fragment)
    return state_for(chat)


def live_entries(view: ChatView) -> int:
    """Entries the view shows as widgets: the HTML widgets of entries in its widget tree."""
    count, stack = 0, [view.widget]
    while stack:
        widget = stack.pop()
        stack.extend(getattr(widget, "children", ()))
        count += isinstance(widget, ipywidgets.HTML) and widget.value.startswith(
            '<div class="nba-entry'
        )
    return count


def _events_for_new_call(chat: Chat, i: int, turn: int) -> list[Event]:
    call = ToolCall(f"extra_{i:06d}", "lookup", {"key": f"extra-{i}"})
    result = ToolResultMessage(call.id, '{"key": "x", "value": 1}', False, "ok", "lookup", turn)
    return [
        ToolCallRequested(chat_id=chat.id, call=call, step=1, turn=turn, approval=Approval(False)),
        ToolCallStarted(
            chat_id=chat.id,
            call=call,
            step=1,
            turn=turn,
            mode="sequential",
            arguments=call.arguments,
        ),
        ToolCallFinished(
            chat_id=chat.id,
            call=call,
            step=1,
            turn=turn,
            status="ok",
            result=result,
            error=None,
            duration_ms=1.5,
            started_at=None,
            mode="sequential",
        ),
    ]


def _update_events(chat: Chat, n: int) -> list[Event]:
    """Started + finished again for the chat's last call, ``n`` times, each with a new
    duration, so every event really changes the card's HTML (and would send it)."""
    call = chat.tool_calls[-1]
    assert call.result is not None
    events: list[Event] = []
    for i in range(n):
        events += [
            ToolCallStarted(
                chat_id=chat.id,
                call=call,
                step=1,
                turn=1,
                mode="sequential",
                arguments=call.arguments,
            ),
            ToolCallFinished(
                chat_id=chat.id,
                call=call,
                step=1,
                turn=1,
                status="ok",
                result=call.result,
                error=None,
                duration_ms=2.0 + i,
                started_at=None,
                mode="sequential",
            ),
        ]
    return events


def run(quick: bool) -> list[Result]:
    from benchmarks.bench_saved import round_result

    # Issue 28, item 5: a turn's view in a real kernel costs a round at most 1.5x without it.
    results: list[Result] = round_result(quick)
    repeat = 3 if quick else 7
    t0 = time.perf_counter()
    chats = {n: build_chat(n) for n in SIZES}
    build_s = time.perf_counter() - t0
    big = chats[1000]

    # -- construction of the view of a 1,000-call chat
    built: list[ChatView] = []  # closed after timing, so they stop following the chat
    live = interleaved({"live": lambda: built.append(ChatView(big))}, repeat=repeat, warmup=1)[
        "live"
    ]
    results.append(
        Result(
            "construct ChatView, 1,000 tool calls (state recorded live)",
            live[0] * 1000,
            "ms",
            "< 1000 ms",
            live[0] < 1.0,
            f"cpu {live[1] * 1000:.0f} ms; chats built in {build_s:.1f} s",
        )
    )

    def rebuilt() -> None:
        rebuild_state(big)
        built.append(ChatView(big))

    rb = interleaved({"rebuilt": rebuilt}, repeat=repeat, warmup=1)["rebuilt"]
    results.append(
        Result(
            "construct ChatView, 1,000 tool calls (state rebuilt)",
            rb[0] * 1000,
            "ms",
            "< 1000 ms",
            rb[0] < 1.0,
            "display(chat) on a chat that had no view",
        )
    )
    for v in built:
        v.close()
    view = ChatView(big)
    results.append(
        Result(
            "live widgets in that view",
            float(live_entries(view)),
            "",
            detail=f"of {len(view.state.entries):,} entries; "
            "older pages fold behind 'Show earlier'",
        )
    )
    view.close()
    html = interleaved({"html": lambda: bundle_for(state_for(big))}, repeat=repeat, warmup=1)[
        "html"
    ]
    results.append(
        Result(
            "static fallback bundle (html+md+text), 1,000 calls",
            html[0] * 1000,
            "ms",
            detail="rendered when the chat settles and after each cell, not per event",
        )
    )

    # -- per-event cost at 10 / 100 / 1,000 calls, sizes interleaved round by round.
    # The cyclic GC is paused while timing (as timeit does): a full collection
    # walks every live object, so it would charge each event for the size of
    # the whole heap rather than for what the view does.
    per_event: dict[str, dict[int, list[float]]] = {
        "update": {n: [] for n in SIZES},
        "append": {n: [] for n in SIZES},
    }
    setups = {}
    batch = 200 if quick else 500
    counter = 0
    for n in SIZES:
        chat = chats[n]
        views = [ChatView(chat), ChatView(chat, turn=1)]  # a display(chat) and the turn's view
        state = state_for(chat)
        feed = keeper([], chat.record)  # what the bus's first subscriber does with an event
        # Steady state: enough appended cards that every view is folding old pages.
        for _ in range(3 * views[0].page_size):
            counter += 1
            for e in _events_for_new_call(chat, counter, 1):
                feed(e)
        setups[n] = (feed, state, views, _update_events(chat, batch // 2))
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            for n in SIZES:
                feed, state, _views, updates = setups[n]
                w0 = time.perf_counter()
                for e in updates:
                    feed(e)
                per_event["update"][n].append((time.perf_counter() - w0) / len(updates))
                events: list[Event] = []
                for _ in range(20):
                    counter += 1
                    events += _events_for_new_call(chats[n], counter, 1)
                w0 = time.perf_counter()
                for e in events:
                    feed(e)
                per_event["append"][n].append((time.perf_counter() - w0) / len(events))
            gc.collect()
    finally:
        if gc_was_enabled:
            gc.enable()
    for _feed, _state, views, _updates in setups.values():
        for v in views:
            v.close()
    medians = {
        k: {n: statistics.median(v) for n, v in by_n.items()} for k, by_n in per_event.items()
    }

    for kind, by_n in medians.items():
        for n in SIZES:
            results.append(
                Result(
                    f"per-event cost ({kind}), chat of {n:,} calls, 2 views", by_n[n] * 1e6, "us"
                )
            )
        ratio = by_n[1000] / by_n[10]
        results.append(
            Result(
                f"per-event cost ({kind}): 1,000 calls / 10 calls",
                ratio,
                "x",
                "<= 2.0x (flat)",
                ratio <= 2.0,
                f"{by_n[10] * 1e6:.0f} us -> {by_n[1000] * 1e6:.0f} us",
            )
        )
    return results
