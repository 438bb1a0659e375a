"""The extension seam: what a wing (the store, the log, the view, yours) may rely on."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref
from datetime import UTC, datetime
from typing import Any, Literal

import pytest

from nbagent import (
    CallInDoubt,
    Chat,
    ChatHost,
    Decision,
    DecisionError,
    Event,
    Extension,
    ServerError,
    Tool,
    ToolCall,
    ToolCallFinished,
    tool,
)
from nbagent.testing import ScriptedProvider, call_tools, reply

ran: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    ran.append(key)
    return key.upper()


class Refund(Tool):
    """Refund an order."""

    requires_approval = True

    def execute(self, order_id: int) -> str:
        ran.append(f"refund {order_id}")
        return "refunded"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


class Recorder(Extension):
    """Records every hook call, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.host: ChatHost | None = None

    def attach(self, host: ChatHost) -> None:
        self.host = host
        self.seen.append("attach")

    def on_event(self, event: Event) -> None:
        self.seen.append(event.type)

    def turn_started(self) -> None:
        self.seen.append("turn_started")

    def before_step(self) -> Literal["busy"] | None:
        self.seen.append("before_step")
        return None

    def claim(self, call: ToolCall) -> bool:
        self.seen.append(f"claim {call.name}")
        return True


def scripted(*turns: Any) -> ScriptedProvider:
    return ScriptedProvider(list(turns))


def test_hooks_are_called_in_turn_order() -> None:
    chat = Chat(provider=scripted(call_tools(("lookup", {"key": "a"})), reply("done")))
    rec = Recorder()
    chat.with_tools(lookup).extend(rec)
    chat.ask("go")
    assert ran == ["a"]
    seen = rec.seen
    assert seen[0] == "attach"
    assert seen[1:3] == ["message_added", "turn_started"]  # the user message, then the turn
    # every step asks before_step first; the claim comes right before the call starts
    assert seen.count("before_step") == 4  # generate, run the tool, generate, complete
    claim = seen.index("claim lookup")
    assert seen[claim + 1] == "tool_call_started"
    assert rec in chat.extensions


def test_a_refused_claim_means_the_call_does_not_run_here() -> None:
    class Elsewhere(Extension):
        def claim(self, call: ToolCall) -> bool:
            return False

        def before_step(self) -> Literal["busy"] | None:
            return "busy" if claimed else None

    claimed: list[str] = []
    chat = Chat(provider=scripted(call_tools(("lookup", {"key": "a"})), reply("done")))
    chat.with_tools(lookup).extend(Elsewhere())
    chat.ask_later("go")
    assert chat.step().kind == "generated"
    chat.step()  # the round: the claim is refused
    assert ran == []
    assert chat.tool_calls[0].status == "requested"  # not run, not answered: someone else's
    claimed.append("x")
    assert chat.step().kind == "busy"


def test_busy_from_before_step_ends_the_step() -> None:
    class Busy(Extension):
        def before_step(self) -> Literal["busy"] | None:
            return "busy"

    chat = Chat(provider=scripted(reply("never")))
    chat.extend(Busy())
    chat.ask("hello")
    assert chat.last_step is not None and chat.last_step.kind == "busy"
    assert chat.status == "ready"


def test_extend_takes_only_extensions_and_each_once() -> None:
    chat = Chat(provider=scripted())
    with pytest.raises(TypeError, match="Extension"):
        chat.extend(object())  # type: ignore[arg-type]
    rec = Recorder()
    chat.extend(rec).extend(rec)
    assert [e for e in chat.extensions if e is rec] == [rec]
    assert rec.seen == ["attach"]
    chat.with_tool_options(calls="one")
    assert rec.seen == ["attach", "options_changed"]  # subscribed once


def test_run_stopped_hears_a_run_that_raised_and_a_removed_extension_hears_nothing() -> None:
    """A run that ends by raising has no step event: ``run_stopped`` hears it (after the
    run's events; what it raises is ignored). ``host.remove(ext)`` takes an extension out:
    no hook of it is called again."""
    stopped: list[str] = []

    class Stops(Extension):
        def attach(self, host: ChatHost) -> None:
            self.host, self.events = host, 0

        def on_event(self, event: Event) -> None:
            self.events += 1

        def run_stopped(self, error: BaseException) -> None:
            stopped.append(f"{type(error).__name__} after {self.events} events")
            raise RuntimeError("ignored")

    provider = ScriptedProvider([reply("fine"), ServerError("boom"), ServerError("again")])
    chat = Chat(provider=provider)
    ext = Stops()
    chat.extend(ext)
    chat.ask("one")
    assert stopped == []  # a run that ends well: nothing to hear
    with pytest.raises(ServerError):
        chat.ask("two")
    assert stopped == [f"ServerError after {ext.events} events"]
    ext.host.remove(ext)
    assert chat.extensions == ()
    seen = ext.events
    with pytest.raises(ServerError):
        chat.ask("three")
    assert (ext.events, len(stopped)) == (seen, 1)


def test_refresh_and_close_reach_every_extension() -> None:
    calls: list[str] = []

    class Both(Extension):
        def refresh(self) -> list[ToolCall]:
            calls.append("refresh")
            return []

        def close(self) -> None:
            calls.append("close")

    with Chat(provider=scripted()) as chat:
        chat.extend(Both())
        assert chat.refresh() == []
    assert calls == ["refresh", "close"]


def test_wait_for_decision_lets_ask_async_continue() -> None:
    class Approver(Extension):
        host: ChatHost

        def attach(self, host: ChatHost) -> None:
            self.host = host

        async def wait_for_decision(self, wait: bool | None) -> bool:
            chat = self.host.chat
            for call in chat.pending_approvals:
                chat.approve(call)
            return bool(chat.tool_calls)

    chat = Chat(provider=scripted(call_tools(("refund", {"order_id": 7})), reply("done")))
    chat.with_tools(Refund).extend(Approver())
    reply_ = asyncio.run(chat.ask_async("refund 7"))
    assert ran == ["refund 7"]
    assert reply_ is not None and reply_.content == "done"


def test_the_host_never_keeps_the_chat_alive() -> None:
    rec = Recorder()
    chat = Chat(provider=scripted())
    chat.extend(rec)
    ref = weakref.ref(chat)
    del chat
    gc.collect()
    assert ref() is None
    assert rec.host is not None and not rec.host.alive
    with pytest.raises(ReferenceError):
        rec.host.chat  # noqa: B018


def _parked(order_id: int = 7) -> tuple[Chat, ChatHost]:
    rec = Recorder()
    chat = Chat(provider=scripted(call_tools(("refund", {"order_id": order_id})), reply("ok")))
    chat.with_tools(Refund).extend(rec)
    chat.ask("refund")
    assert chat.status == "awaiting_approval"
    assert rec.host is not None
    return chat, rec.host


def test_a_decision_made_elsewhere_keeps_who_and_when_and_follows_the_rules() -> None:
    chat, host = _parked()
    call = chat.pending_approvals[0]
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    host.apply_decision(call, Decision("approved", "ops@example.com", at, "fine"))
    assert call.status == "approved"
    assert call.decision is not None
    assert (call.decision.by, call.decision.at, call.decision.reason) == (
        "ops@example.com",
        at,
        "fine",
    )
    with pytest.raises(DecisionError, match="already approved"):
        host.apply_decision(call, Decision("denied", "someone", at, None))
    with pytest.raises(DecisionError, match="invalid"):
        _, other = _parked(8)
        other.apply_decision(
            other.chat.pending_approvals[0],
            Decision("approved", "x", at, None, {"order_id": "not a number"}),
        )
    chat.complete()
    assert ran == ["refund 7"]


def test_settling_a_call_in_doubt_is_the_cores_job_and_is_announced() -> None:
    gate = threading.Event()
    release = threading.Event()

    @tool
    def slow() -> str:
        """Runs until released."""
        gate.set()
        release.wait(5)
        return "late"

    chat = Chat(provider=scripted(call_tools(("slow", {})), reply("ok")))
    rec = Recorder()
    chat.with_tools(slow).extend(rec)
    events: list[Event] = []
    chat.on(None, events.append)
    chat.ask_later("go")
    chat.step()
    worker = threading.Thread(target=chat.step)
    worker.start()
    assert gate.wait(5)
    call = chat.tool_calls[0]
    assert call.status == "running"
    host = rec.host
    assert host is not None
    settled = host.settle_in_doubt(
        call, claimed_by="elsewhere", claimed_at=None, rerun=False, content="unknown outcome"
    )
    release.set()
    worker.join(5)
    assert settled
    assert call.status == "in_doubt" and call.result is not None
    assert call.result.content == "unknown outcome"
    kinds = [type(e) for e in events if isinstance(e, (CallInDoubt, ToolCallFinished))]
    assert kinds == [CallInDoubt, ToolCallFinished]  # the late result is not recorded twice
    assert not host.settle_in_doubt(
        call, claimed_by=None, claimed_at=None, rerun=True, content=""
    )  # only a running call can be settled


def test_event_numbers_follow_emission_order_across_threads() -> None:
    """``seq`` is the order subscribers saw events in, even when a decision's thread and
    the driving thread emit at once (numbers are taken under the emission lock)."""
    chat = Chat(model="demo").with_tools(lookup)
    seen: list[int] = []

    def record(e: Event) -> None:
        seen.append(e.seq)
        time.sleep(0.0002)  # lets the other threads run mid-emission (fails reliably before)

    chat.on(None, record)
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            chat.with_tool_options(timeout=30)  # an OptionsChanged from another thread

    threads = [threading.Thread(target=churn) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(30):
            chat.ask(f"look up key{i}")
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert len(seen) > 100
    assert seen == list(range(seen[0], seen[0] + len(seen)))
