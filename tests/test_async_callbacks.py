"""An ``async def`` callback or subscriber is refused when it is registered.

Callbacks (``before_tool_call``, ``after_tool_result``) and subscribers (``on``, an
extension's ``on_event``) are called on the thread driving the chat, never awaited: an
async one only made a coroutine ("never awaited"), so a guard raising ``SkipToolCall`` in
it let a refund of 5,000 run. Refused with a ``TypeError`` at registration, it cannot be
mistaken for a guard; a plain guard keeps skipping what it should, in every mode.
"""

from __future__ import annotations

import asyncio
import functools
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, SkipToolCall, tool
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply


async def async_guard(call: Any) -> None:
    if call.arguments["amount"] > 100:
        raise SkipToolCall("too big")


async def async_gen(x: Any) -> Any:
    yield x


class AsyncCallable:
    async def __call__(self, x: Any) -> None:
        return None


class Guard:
    async def check(self, call: Any) -> None:
        return None


ASYNC_CALLABLES: dict[str, Callable[[], Any]] = {
    "async def": lambda: async_guard,
    "partial of an async def": lambda: functools.partial(async_guard),
    "async __call__": AsyncCallable,
    "bound async method": lambda: Guard().check,
    "async generator function": lambda: async_gen,
}

REGISTRATIONS: dict[str, Callable[[Chat, Any], Any]] = {
    "before_tool_call": lambda chat, fn: chat.before_tool_call(fn),
    "after_tool_result": lambda chat, fn: chat.after_tool_result(fn),
    "on(None)": lambda chat, fn: chat.on(None, fn),
    "on('tool_call_finished')": lambda chat, fn: chat.on("tool_call_finished", fn),
}


def refund_chat(amount: int, ran: list[int]) -> Chat:
    @tool
    async def refund(amount: int) -> str:
        """Refund an amount."""
        ran.append(amount)
        return f"refunded {amount}"

    script = [call_tools(("refund", {"amount": amount})), reply("done")]
    return Chat(provider=ScriptedProvider(script), display=False).with_tools(refund)


@pytest.mark.parametrize("kind", list(ASYNC_CALLABLES))
@pytest.mark.parametrize("where", list(REGISTRATIONS))
def test_an_async_callback_is_refused_at_registration_and_never_half_added(
    where: str, kind: str
) -> None:
    ran: list[int] = []
    chat = refund_chat(5000, ran)
    with pytest.raises(TypeError, match=r"plain function.*async callable.*never awaited"):
        REGISTRATIONS[where](chat, ASYNC_CALLABLES[kind]())
    # Nothing of it was kept: the turn runs without a callback that never runs.
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no "never awaited"
        assert chat.ask("refund 5000").content == "done"
    assert ran == [5000] and chat.tool_calls[0].status == "ok"


def test_an_extension_with_an_async_on_event_is_refused_and_not_plugged_in() -> None:
    class Audit(nbagent.Extension):
        async def on_event(self, event: Any) -> None:  # type: ignore[override]
            return None

    chat = refund_chat(1, [])
    with pytest.raises(TypeError, match=r"Audit\.on_event.*async callable"):
        chat.extend(Audit())
    assert chat.extensions == ()


@pytest.mark.parametrize(
    "fn",
    [lambda x: None, print, functools.partial(lambda x, y: None, 1), type("C", (), {})],
    ids=["lambda", "builtin", "partial", "class"],
)
def test_plain_callables_are_still_taken(fn: Any) -> None:
    chat = refund_chat(1, [])
    chat.before_tool_call(fn).after_tool_result(fn).on(None, fn)
    chat.off(fn)


MODES = [False, "threads", "async"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(amount=st.integers(min_value=-(10**6), max_value=10**6), mode=st.sampled_from(MODES))
def test_a_guard_skips_every_big_refund_and_only_those_in_every_mode(
    amount: int, mode: Any
) -> None:
    """The guard a refused async one was meant to be, written plainly: honoured by the sync
    and the async driver, in every concurrency mode."""
    for driver in ("sync", "async"):
        ran: list[int] = []
        chat = refund_chat(amount, ran).with_tool_options(concurrency=mode)

        def guard(call: Any) -> None:
            if call.arguments["amount"] > 100:
                raise SkipToolCall("too big")

        chat.before_tool_call(guard)
        if driver == "sync":
            chat.ask("refund")
        else:
            asyncio.run(chat.ask_async("refund"))
        status = chat.tool_calls[0].status
        if amount > 100:
            assert ran == [] and status == "skipped"
        else:
            assert ran == [amount] and status == "ok"


def _refund_chat(amounts: list[int]) -> tuple[Chat, list[int]]:
    ran: list[int] = []

    @tool
    def refund(amount: int) -> str:
        """Refund.

        Args:
            amount: Dollars.
        """
        ran.append(amount)
        return "refunded"

    calls = [("refund", {"amount": a}) for a in amounts]
    script = [call_tools(*calls), reply("done")]
    return Chat(provider=ScriptedProvider(script), display=False).with_tools(refund), ran


def test_a_plain_callback_that_returns_a_coroutine_fails_closed() -> None:
    """``lambda call: async_guard(call)`` is a plain function, so registration takes it; it
    returns a coroutine nothing awaits, so the guard's verdict never came and the 5,000
    refund ran. A before_tool_call callback's unawaited result now keeps the call from
    running (as one that raises does); after_tool_result and subscribers say so in a
    CallbackWarning; the coroutine is closed, never left 'never awaited'."""
    chat, ran = _refund_chat([5000, 50])
    chat.before_tool_call(lambda call: async_guard(call))
    chat.after_tool_result(lambda result: async_guard(result.call))
    chat.on("tool_call_finished", lambda event: async_guard(event.call))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        chat.ask("refund")
    assert ran == []  # neither ran: nothing awaited the guard's verdict on either
    statuses = [(c.arguments["amount"], c.status) for c in chat.tool_calls]
    assert statuses == [(5000, "skipped"), (50, "skipped")]
    result = chat.tool_calls[0].result
    assert result is not None and "which nothing awaits" in str(result.content)
    said = [str(w.message) for w in seen]
    assert not any("never awaited" in s for s in said)
    assert any("after_tool_result" in s and "which nothing awaits" in s for s in said)
    assert any("subscriber" in s and "which nothing awaits" in s for s in said)


def test_a_callback_scheduling_a_task_is_left_alone() -> None:
    """Fire-and-forget on the async driver's loop (``loop.create_task(audit(call))``) runs by
    itself: no warning, and the call runs (only a bare coroutine is nothing's)."""
    audited: list[str] = []

    async def audit(name: str) -> None:
        audited.append(name)

    async def main() -> tuple[list[int], list[str]]:
        chat, ran = _refund_chat([50])
        loop = asyncio.get_running_loop()
        chat.before_tool_call(lambda call: loop.create_task(audit(call.name)))
        chat.on("tool_call_finished", lambda event: loop.create_task(audit("finished")))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            await chat.ask_async("refund")
            await asyncio.sleep(0.05)
        return ran, [str(w.message) for w in seen if "nothing awaits" in str(w.message)]

    ran, said = asyncio.run(main())
    assert ran == [50] and said == [] and audited == ["refund", "finished"]
