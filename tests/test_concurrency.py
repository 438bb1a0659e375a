"""Concurrent tool execution and the async API (sequential / threads / async)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import nbagent
from nbagent import Chat, ChatCancelled, ToolCall, ToolExecutionError, ToolResultMessage, tool
from nbagent._runner import abandoned_threads
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

MODES = ["sequential", "threads", "async"]
active = 0
peak = 0
_lock = threading.Lock()
log: list[str] = []


def _enter() -> None:
    global active, peak
    with _lock:
        active += 1
        peak = max(peak, active)


def _leave() -> None:
    global active
    with _lock:
        active -= 1


@tool
def slow(name: str, delay: float = 0.05) -> str:
    """Sleeps (sync, I/O-like)."""
    _enter()
    try:
        time.sleep(delay)
        log.append(name)
        return f"{name} done"
    finally:
        _leave()


@tool
async def aslow(name: str, delay: float = 0.05) -> str:
    """Sleeps (async)."""
    _enter()
    try:
        await asyncio.sleep(delay)
        log.append(name)
        return f"{name} done"
    finally:
        _leave()


@tool
def fail(name: str) -> str:
    """Raises."""
    raise ValueError(f"{name} failed")


# What a stuck sync tool waits for: only the test lets it go, after ``ask`` returned, so an
# ``ask`` that waited for the thread it abandoned would hang (and time out) instead of
# passing on a fast machine.
unstick = threading.Event()


@tool(timeout=0.05)
def stuck(name: str) -> str:
    """Takes far longer than its timeout (until the test lets it go)."""
    unstick.wait(30)
    return "too late"


@tool(timeout=0.05)
async def astuck(name: str) -> str:
    """Async, takes far longer than its timeout (cancellable)."""
    await asyncio.sleep(5)
    return "too late"


# Gates for ``held``/``aheld``: a call blocks until the test opens its gate, so the test
# decides the order in which calls finish instead of racing sleeps of different lengths.
gates: dict[str, threading.Event] = {}
started: list[str] = []


def _gate(name: str) -> threading.Event:
    with _lock:
        started.append(name)
        return gates.setdefault(name, threading.Event())


@tool
def held(name: str) -> str:
    """Blocks (sync) until the test opens its gate."""
    _enter()
    try:
        if not _gate(name).wait(30):
            raise TimeoutError(f"the test never opened {name}'s gate")
        log.append(name)
        return f"{name} done"
    finally:
        _leave()


@tool
async def aheld(name: str) -> str:
    """Blocks (async: the event loop keeps running) until the test opens its gate."""
    _enter()
    try:
        gate, deadline = _gate(name), time.monotonic() + 30
        while not gate.is_set():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the test never opened {name}'s gate")
            await asyncio.sleep(0.002)
        log.append(name)
        return f"{name} done"
    finally:
        _leave()


@tool
def whoami(tool_call: ToolCall) -> str:
    """Returns its own call id, from injection and from the context."""
    ctx = nbagent.current_tool_call()
    assert ctx is tool_call
    return tool_call.id


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    global active, peak
    active = peak = 0
    log.clear()
    gates.clear()
    started.clear()
    unstick.clear()
    yield
    unstick.set()
    for gate in list(gates.values()):
        gate.set()
    # A timed-out sync tool's thread runs on (abandoned) and may still write to `log`:
    # let it finish before the next test starts, so it cannot pollute that test.
    deadline = time.monotonic() + 5
    while abandoned_threads() and time.monotonic() < deadline:
        time.sleep(0.01)


def make_chat(mode: str, *script: Any, **kwargs: Any) -> tuple[Chat, ScriptedProvider]:
    provider = ScriptedProvider(script)
    chat = Chat(provider=provider, **kwargs).with_tools(
        slow, aslow, held, aheld, fail, stuck, astuck, whoami
    )
    chat.with_tool_options(concurrency=mode)
    return chat, provider


def results(chat: Chat) -> list[ToolResultMessage]:
    return [m for m in chat.transcript if isinstance(m, ToolResultMessage)]


def _open_in_order(order: list[str], finished: list[str]) -> threading.Thread:
    """Opens the gates one by one in ``order``, each once its call is running and the
    previous one has finished, from a thread of its own (``ask`` blocks the test's)."""

    def run() -> None:
        deadline = time.monotonic() + 30
        for i, name in enumerate(order):
            while name not in started or (i and order[i - 1] not in finished):
                if time.monotonic() > deadline:
                    return
                time.sleep(0.002)
            gates.setdefault(name, threading.Event()).set()

    opener = threading.Thread(target=run, daemon=True)
    opener.start()
    return opener


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["held", "aheld"])
def test_completion_order_events_and_call_order_transcript(mode: str, name: str) -> None:
    """Concurrent calls finish in the order their work ends (events), and the transcript
    keeps the model's order; sequential calls run one after another. The test opens the
    gates, so the order does not depend on how busy the machine is."""
    chat, _ = make_chat(
        mode,
        call_tools(
            (name, {"name": "a"}, "a"), (name, {"name": "b"}, "b"), (name, {"name": "c"}, "c")
        ),
        reply("done"),
    )
    finished: list[str] = []
    chat.on(nbagent.ToolCallFinished, lambda e: finished.append(e.call.id))  # type: ignore[attr-defined]
    if mode == "sequential":
        # One at a time: each call starts only after the one before it finished.
        opener = _open_in_order(["a", "b", "c"], finished)
        chat.ask("go")
        assert finished == ["a", "b", "c"] and peak == 1
    else:
        # All three run at once (each waits for its gate); they finish as opened.
        def all_started_then_b_c_a() -> None:
            deadline = time.monotonic() + 30
            while len(started) < 3 and time.monotonic() < deadline:
                time.sleep(0.002)
            _open_in_order(["b", "c", "a"], finished).join()

        opener = threading.Thread(target=all_started_then_b_c_a, daemon=True)
        opener.start()
        chat.ask("go")
        assert finished == ["b", "c", "a"] and peak == 3
    opener.join(5)
    assert [r.tool_call_id for r in results(chat)] == ["a", "b", "c"]
    assert log == finished


@pytest.mark.parametrize("mode", ["threads", "async"])
def test_max_concurrency_bounds_simultaneous_calls(mode: str) -> None:
    chat, _ = make_chat(
        mode,
        call_tools(*[("slow", {"name": str(i), "delay": 0.03}) for i in range(8)]),
        reply("ok"),
    )
    chat.with_tool_options(max_concurrency=3)
    chat.ask("go")
    assert peak == 3
    assert len(log) == 8


def test_global_default_and_per_chat_override() -> None:
    nbagent.configure(tool_concurrency="threads")
    chat, _ = make_chat("async")
    assert chat.tool_options.effective_concurrency == "async"
    chat.with_tool_options(concurrency=None)
    assert chat.tool_options.effective_concurrency == "threads"
    nbagent.configure(tool_concurrency=True)
    assert chat.tool_options.effective_concurrency == "threads"
    nbagent.configure(tool_concurrency=False)
    assert chat.tool_options.effective_concurrency == "sequential"
    with pytest.raises(TypeError, match="unknown option"):
        nbagent.configure(tool_concurency=True)


@pytest.mark.parametrize("mode", MODES)
def test_timeouts_become_error_results(mode: str) -> None:
    chat, _ = make_chat(
        mode,
        call_tools(
            ("slow", {"name": "ok", "delay": 0.01}, "ok"),
            ("stuck", {"name": "s"}, "s"),
            ("astuck", {"name": "a"}, "a"),
        ),
        reply("ok"),
    )
    chat.ask("go")
    # ``ask`` returned while the stuck sync tool still blocks: its thread is abandoned,
    # not waited for (waiting would have hung until the test's 30 s gate).
    assert not unstick.is_set() and abandoned_threads()
    statuses = {r.tool_call_id: r.status for r in results(chat)}
    assert statuses == {"s": "timed_out", "a": "timed_out", "ok": "ok"}
    timed_out = results(chat)[1:]
    assert "timed out after 0.05 s" in timed_out[0].content
    for r in timed_out:  # never "not completed": it may have done its work
        assert r.content.startswith("Timed out: "), r.content
        assert "Not completed" not in r.content
    assert "not retried" in timed_out[0].content
    # one at a time, the async call waited for the stuck call's thread and never ran; beside
    # it, it ran and was stopped
    if mode == "sequential":
        assert "before it started" in timed_out[1].content
    else:
        assert "not retried" in timed_out[1].content


# A round that runs its calls one at a time (``concurrency=False``, or ``max_concurrency=1``):
# a sync call that timed out keeps its slot until its thread ends (the thread cannot be killed).
# Before, the round started the next call at once, beside the abandoned thread: three calls of a
# tool that is not thread-safe (or guards a rate limit) all ran at the same time.
ONE_AT_A_TIME = [("sequential", 8), ("threads", 1), ("async", 1)]


@pytest.mark.parametrize(("mode", "limit"), ONE_AT_A_TIME)
def test_a_timed_out_calls_thread_keeps_its_slot_so_calls_never_overlap(
    mode: str, limit: int
) -> None:
    """The next call waits for the thread, at most its own timeout: the thread still running
    then, it is answered ``timed_out`` without having run (so retrying it cannot run it twice),
    and the round never hangs on a thread that never ends."""
    ran: list[int] = []

    @tool(timeout=0.1)
    def export(part: int) -> str:
        """Export one part (not thread-safe)."""
        _enter()
        try:
            ran.append(part)
            unstick.wait(30)  # opened by the test once ask() returned: a thread still running
            return "exported"
        finally:
            _leave()

    chat, _ = make_chat(
        mode, call_tools(*[("export", {"part": i}, f"e{i}") for i in range(3)]), reply("ok")
    )
    chat.with_tools(export).with_tool_options(max_concurrency=limit)
    chat.ask("export all")
    assert (peak, ran) == (1, [0])  # the other calls never started beside the stuck one
    first, *rest = results(chat)
    assert first.status == "timed_out" and "could not be stopped" in first.content
    for r in rest:
        assert r.status == "timed_out", r.content
        assert "before it started" in r.content and "it was not run" in r.content, r.content
        assert "timed out and its thread still runs" in r.content, r.content


def _stall_then_quick(mode: str, limit: int, rounds: str) -> None:
    global peak
    peak = 0
    order: list[str] = []
    freed = threading.Event()

    @tool(timeout=0.1)
    def stall() -> str:
        """Takes longer than its timeout."""
        _enter()
        try:
            freed.wait(30)
            return "late"
        finally:
            order.append("stall ended")
            _leave()

    @tool(timeout=10)
    def quick() -> str:
        """Fast."""
        _enter()
        try:
            order.append("quick started")
            return "quick"
        finally:
            _leave()

    calls = [("stall", {}, "s"), ("quick", {}, "q")]
    script = (
        [call_tools(*calls), reply("ok")]
        if rounds == "one round"
        else [call_tools(calls[0]), call_tools(calls[1]), reply("ok")]
    )
    chat, _ = make_chat(mode, *script)
    chat.with_tools(stall, quick).with_tool_options(max_concurrency=limit)
    # the stalled call's thread ends once its timeout was recorded (the next call is due)
    chat.on("tool_call_finished", lambda e: e.call.id == "s" and freed.set())
    chat.ask("go")
    statuses = {r.tool_call_id: (r.status, r.content) for r in results(chat)}
    assert statuses["s"][0] == "timed_out"
    assert statuses["q"] == ("ok", "quick")
    if rounds == "one round":
        assert order == ["stall ended", "quick started"] and peak == 1


@pytest.mark.parametrize(("mode", "limit"), ONE_AT_A_TIME)
@pytest.mark.parametrize("rounds", ["one round", "two rounds"])
def test_the_next_call_runs_once_the_timed_out_calls_thread_ends(
    mode: str, limit: int, rounds: str
) -> None:
    """Its own timeout counts from when it starts: the wait for the slot is not part of it. A
    slot is the round's: a call of the next round (the model trying again) is not held. The
    thread's end racing the waiting call's turn, ten times over."""
    for _ in range(10 if rounds == "one round" else 1):
        _stall_then_quick(mode, limit, rounds)


@pytest.mark.parametrize(("mode", "limit"), ONE_AT_A_TIME)
def test_cancel_frees_a_round_waiting_for_a_timed_out_calls_thread(mode: str, limit: int) -> None:
    """A call with no timeout waits for the slot as long as the thread runs; ``chat.cancel()``
    (or the stop button) ends the wait: it is cancelled before it ran, and the turn returns
    without waiting for the thread."""
    ran: list[str] = []

    @tool
    def untimed() -> str:
        """No timeout of its own."""
        ran.append("untimed")
        return "ran"

    chat, _ = make_chat(
        mode, call_tools(("stuck", {"name": "s"}, "s"), ("untimed", {}, "u")), reply("ok")
    )
    chat.with_tools(untimed).with_tool_options(max_concurrency=limit)
    runner = chat._runner

    def cancel_once_waiting() -> None:
        deadline = time.monotonic() + 30
        while runner.waiting == 0 and time.monotonic() < deadline:
            time.sleep(0.002)
        chat.cancel()

    canceller = threading.Thread(target=cancel_once_waiting, daemon=True)
    canceller.start()
    with pytest.raises(ChatCancelled):
        chat.ask("go")
    canceller.join()
    assert not unstick.is_set()  # the stuck thread still runs: it was not waited for
    statuses = {r.tool_call_id: (r.status, r.content) for r in results(chat)}
    assert statuses["s"][0] == "timed_out"
    assert statuses["u"] == ("cancelled", "Not completed (cancelled): cancelled before it ran")
    assert ran == [] and runner.waiting == 0


@pytest.mark.parametrize("mode", MODES)
def test_default_timeout_option(mode: str) -> None:
    chat, _ = make_chat(mode, call_tools(("slow", {"name": "x", "delay": 0.3}, "x")), reply("ok"))
    chat.with_tool_options(timeout=0.05)
    chat.ask("go")
    assert results(chat)[0].status == "timed_out"


@pytest.mark.parametrize("mode", MODES)
def test_every_failure_is_its_own_error_result(mode: str) -> None:
    chat, _ = make_chat(
        mode,
        call_tools(
            ("fail", {"name": "x"}, "x"),
            ("slow", {"name": "ok", "delay": 0.01}, "ok"),
            ("fail", {"name": "y"}, "y"),
        ),
        reply("ok"),
    )
    chat.ask("go")
    assert [(r.tool_call_id, r.status) for r in results(chat)] == [
        ("x", "error"),
        ("ok", "ok"),
        ("y", "error"),
    ]
    assert "ValueError: y failed" in results(chat)[2].content


@pytest.mark.parametrize("mode", MODES)
def test_raise_mode_surfaces_all_errors_together_and_keeps_results(mode: str) -> None:
    chat, _ = make_chat(
        mode,
        call_tools(
            ("fail", {"name": "x"}, "x"),
            ("slow", {"name": "ok", "delay": 0.01}, "ok"),
            ("fail", {"name": "y"}, "y"),
        ),
        reply("recovered"),
        on_tool_error="raise",
    )
    with pytest.raises(ExceptionGroup) as group:
        chat.ask("go")
    errors = group.value.exceptions
    assert all(isinstance(e, ToolExecutionError) for e in errors)
    assert sorted(e.call.id for e in errors) == ["x", "y"]  # type: ignore[attr-defined]
    assert [r.status for r in results(chat)] == ["error", "ok", "error"]
    assert log == ["ok"]
    assert chat.complete().content == "recovered"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
def test_injection_and_current_call_in_every_mode(mode: str) -> None:
    chat, _ = make_chat(mode, call_tools(("whoami", {}, "w1"), ("whoami", {}, "w2")), reply("ok"))
    chat.ask("who")
    assert [r.content for r in results(chat)] == ["w1", "w2"]


@pytest.mark.parametrize("mode", MODES)
def test_callbacks_never_run_concurrently(mode: str) -> None:
    chat, _ = make_chat(
        mode,
        call_tools(*[("slow", {"name": str(i), "delay": 0.02}) for i in range(5)]),
        reply("ok"),
    )
    inside = 0
    overlaps = 0
    seen_threads: set[str] = set()

    def cb(_: Any) -> None:
        nonlocal inside, overlaps
        inside += 1
        overlaps += inside > 1
        seen_threads.add(threading.current_thread().name)
        time.sleep(0.005)
        inside -= 1

    chat.before_tool_call(cb).after_tool_result(cb)
    chat.ask("go")
    assert overlaps == 0
    assert not any(name.startswith("nbagent-tool") for name in seen_threads)


@pytest.mark.parametrize("mode", MODES)
def test_cancel_lets_running_calls_settle_and_cancels_the_rest(mode: str) -> None:
    chat, provider = make_chat(
        mode,
        call_tools(*[("slow", {"name": str(i), "delay": 0.1}, f"c{i}") for i in range(4)]),
        reply("resumed"),
    )
    chat.with_tool_options(max_concurrency=2)
    chat.before_tool_call(lambda call: chat.cancel() if call.id == "c0" else None)
    with pytest.raises(ChatCancelled):
        chat.ask("go")
    statuses = [r.status for r in results(chat)]
    # running calls finished for real; calls not yet started were cancelled
    assert statuses[0] == "ok"
    assert "cancelled" in statuses
    assert len(statuses) == 4  # the round is closed: the transcript is valid
    assert chat.complete().content == "resumed"  # type: ignore[union-attr]
    assert len(provider.requests) == 2


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_cancel_during_the_model_request_cancels_the_calls_of_its_answer(
    driver: str, tmp_path: Any
) -> None:
    """``chat.cancel()`` while the model answers: the answer is kept, the calls it asked for
    that would run now are answered ``cancelled`` (none runs), a gated one still waits for its
    person, and the run stops. Before, the calls were left unanswered: ``ask()`` refused a new
    question until ``complete()`` ran them, the very calls the user had cancelled."""
    gated: list[str] = []

    @tool(requires_approval=True)
    def refund(order_id: int) -> str:
        """Refunds an order (asks first)."""
        gated.append(str(order_id))
        return "refunded"

    chat: Chat | None = None

    def answered_while_cancelling(request: Any) -> Any:
        assert chat is not None
        chat.cancel()  # from a button or another thread, while the response streams in
        return call_tools(
            ("slow", {"name": "a"}, "a"), ("slow", {"name": "b"}, "b"), ("refund", {"order_id": 4})
        )

    store = nbagent.open_store(tmp_path / "s.db")
    provider = ScriptedProvider([answered_while_cancelling, reply("ok")])
    chat = Chat(provider=provider, store=store).with_tools(slow, refund)
    with pytest.raises(ChatCancelled):
        if driver == "sync":
            chat.ask("go")
        else:
            asyncio.run(chat.ask_async("go"))
    assert log == [] and gated == []
    assert [c.status for c in chat.tool_calls] == ["cancelled", "cancelled", "awaiting_approval"]
    again = Chat.load(chat.id, store=store, provider=ScriptedProvider([]))
    assert [c.status for c in again.tool_calls] == ["cancelled", "cancelled", "awaiting_approval"]
    chat.deny(chat.tool_calls[2].id, reason="not now")
    assert chat.ask("never mind").content == "ok"  # type: ignore[union-attr]
    assert log == [] and gated == []
    assert "before it ran" in results(chat)[0].content


def test_keyboard_interrupt_in_sequential_tool_leaves_valid_transcript() -> None:
    @tool
    def interrupted() -> str:
        """Simulates the notebook's stop button."""
        raise KeyboardInterrupt

    provider = ScriptedProvider(
        [call_tools(("interrupted", {}, "i"), ("slow", {"name": "later"}, "l")), reply("resumed")]
    )
    chat = Chat(provider=provider).with_tools(interrupted, slow)
    with pytest.raises(KeyboardInterrupt):
        chat.ask("go")
    assert [r.status for r in results(chat)] == ["cancelled", "cancelled"]
    stopped, not_started = results(chat)
    # the model is not told the stopped call did nothing: it may have done part of its work
    assert "interrupted while it ran; whether it did anything is unknown" in stopped.content
    assert "before it ran" in not_started.content
    assert log == []
    assert chat.complete().content == "resumed"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", [False, "threads", "async"])
def test_the_stop_button_while_a_thread_runs_a_call_stops_the_round_there(mode: Any) -> None:
    """A sync tool run on a worker thread (it has a timeout) when the stop button is pressed:
    its thread cannot be stopped, so its real outcome is waited for and kept; then the round
    stops (the next call is cancelled before it ran), nothing is asked of the model, and
    ``ask`` raises ``KeyboardInterrupt``. Before, one after another (``concurrency=False``),
    the cancellation was swallowed with the kept outcome: the next call ran and the chat went
    on to the model as if stop had never been pressed."""
    import _thread
    import signal

    ran: list[str] = []

    @tool(timeout=30)
    def stop_pressed(name: str) -> str:
        """Presses the notebook's stop button while it runs, then finishes its work."""
        ran.append(name)
        if name == "a":
            _thread.interrupt_main()  # SIGINT, as the kernel gets it
            time.sleep(0.3)  # still running when the main thread takes the interrupt
        return f"done {name}"

    provider = ScriptedProvider(
        [call_tools(("stop_pressed", {"name": "a"}, "a"), ("stop_pressed", {"name": "b"}, "b"))]
    )
    chat = Chat(provider=provider).with_tools(stop_pressed)
    chat.with_tool_options(concurrency=mode, max_concurrency=1)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a worker may ignore it
    try:
        with pytest.raises(KeyboardInterrupt):
            chat.ask("go")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert ran == ["a"]
    a, b = results(chat)
    assert (a.status, a.content) == ("ok", "done a")  # its real outcome, kept
    assert b.status == "cancelled" and "before it ran" in b.content
    assert len(provider.requests) == 1  # the model was not asked again


def test_an_answer_that_came_with_the_stop_button_is_kept() -> None:
    """An async tool bound to another loop (as an MCP server's calls are: nbagent's
    background loop) answers just as the stop button is pressed: the answer wakes the
    driver, which takes the interrupt first. The answer stands (``ok``: it did its work, the
    model must not be told otherwise), the round stops and ``ask`` raises. Before, the
    answer was dropped and the call reported cancelled, as if never done."""
    import _thread
    import signal

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    @tool(loop=loop)
    async def charge(amount: int) -> str:
        """Charges, and the stop button is pressed as it answers."""
        _thread.interrupt_main()  # the driver's loop sleeps: it wakes with the answer
        return f"charged {amount}"

    provider = ScriptedProvider([call_tools(("charge", {"amount": 7}, "c"))])
    chat = Chat(provider=provider).with_tools(charge)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            chat.ask("charge 7")
    finally:
        signal.signal(signal.SIGINT, previous)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
    (answer,) = results(chat)
    assert (answer.status, answer.content) == ("ok", "charged 7")
    assert len(provider.requests) == 1


def test_keyboard_interrupt_while_a_call_is_being_started_does_not_leave_it_running() -> None:
    """The stop button after a call was marked running (claimed, its start being heard by
    the store and the views) and before its tool ran: the call stayed "running" for ever,
    the chat could not go on, and a store reloading it found it in doubt. It is answered
    as cancelled, as the round's calls not started yet are, and the chat goes on."""
    pressed: list[str] = []

    def stop_button(event: Any) -> None:
        if not pressed:
            pressed.append(event.call.id)
            raise KeyboardInterrupt

    provider = ScriptedProvider([call_tools(("slow", {"name": "a"}, "s")), reply("resumed")])
    chat = Chat(provider=provider).with_tools(slow).on("tool_call_started", stop_button)
    with pytest.raises(KeyboardInterrupt):
        chat.ask("go")
    assert pressed == ["s"]
    (call,) = chat.tool_calls
    assert call.status == "cancelled" and log == []  # not left running; never ran
    assert "interrupted before it ran" in str(call.result)
    assert chat.complete().content == "resumed"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
def test_sync_api_inside_a_running_event_loop(mode: str) -> None:
    """What Jupyter does: a loop runs in this thread while the cell calls chat.ask()."""
    chat, _ = make_chat(
        mode,
        call_tools(("aslow", {"name": "a", "delay": 0.01}), ("slow", {"name": "b", "delay": 0.01})),
        reply("works in Jupyter"),
    )

    async def cell() -> Any:
        return chat.ask("go")  # sync call, loop running

    answer = asyncio.run(cell())
    assert answer.content == "works in Jupyter"
    assert sorted(log) == ["a", "b"]


def test_a_sync_tool_driven_on_nbagents_own_loop_runs_on_a_worker() -> None:
    """A chat driven async on nbagent's background loop (a click's continuation, a batch in a
    kernel) runs its sync tools on a worker: one that drives a sub-chat (whose round needs an
    event loop) finishes instead of waiting forever for the loop it blocks."""
    from nbagent import _aio

    inner = Chat(
        provider=ScriptedProvider([call_tools(("aslow", {"name": "inner"})), reply("pong")])
    ).with_tools(aslow)
    seen: list[str] = []

    @tool
    def ask_inner(question: str) -> str:
        """Asks the sub-agent."""
        seen.append(threading.current_thread().name)
        return inner.ask(question).content  # type: ignore[union-attr]

    outer = Chat(
        provider=ScriptedProvider([call_tools(("ask_inner", {"question": "ping"})), reply("ok")])
    ).with_tools(ask_inner)
    out: list[Any] = []

    async def cell() -> None:  # a running loop here: run_sync drives on nbagent's loop
        out.append(_aio.run_sync(outer.ask_async("go")))

    driver = threading.Thread(target=asyncio.run, args=(cell(),), daemon=True)
    driver.start()
    driver.join(30)
    assert not driver.is_alive(), "the sub-chat waited forever for nbagent's loop"
    assert out[0].content == "ok" and inner.last_assistant_message.content == "pong"
    assert seen and seen[0] != "nbagent-loop"
    assert log == ["inner"]


@pytest.mark.parametrize("mode", MODES)
def test_async_api_shares_the_loop(mode: str) -> None:
    chat, _ = make_chat(
        mode,
        call_tools(
            ("aslow", {"name": "a", "delay": 0.05}), ("aslow", {"name": "b", "delay": 0.05})
        ),
        reply("async"),
    )

    async def main() -> Any:
        ticks = 0
        at_start: list[int] = []
        chat.before_tool_call(lambda _call: at_start.append(ticks))

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1

        t = asyncio.ensure_future(ticker())
        answer = await chat.ask_async("go")
        t.cancel()
        return answer, ticks - at_start[0]

    answer, during = asyncio.run(main())
    assert answer.content == "async"
    # The caller's loop ran the ticker while the tools awaited: its 5 ms timer comes due
    # before a 50 ms tool ends, however loaded the machine (a blocked loop counts none).
    assert during >= 1


def test_step_async_and_events_stream() -> None:
    chat, _ = make_chat("async", call_tools(("aslow", {"name": "a", "delay": 0.01})), reply("ok"))

    async def main() -> list[str]:
        return [e.type async for e in chat.astream_events("go")]

    types = asyncio.run(main())
    assert types[0] == "message_added" and "tool_call_finished" in types
    assert chat.is_complete


def test_a_finished_threads_runner_is_closed_even_where_a_loop_runs() -> None:
    """A thread that drove chats sync keeps a private loop, closed when its Thread object is
    collected; the collector may do that on a thread running a loop (the MCP loop, a kernel),
    where the runner's loop cannot be run: it is closed without an unraisable error."""
    import gc
    import sys

    from nbagent import _aio

    loops: list[asyncio.AbstractEventLoop] = []

    async def where() -> None:
        loops.append(asyncio.get_running_loop())

    thread = threading.Thread(target=lambda: _aio.run_sync(where()))
    thread.start()
    thread.join()
    holder = [thread]
    del thread
    errors: list[Any] = []
    hook, sys.unraisablehook = sys.unraisablehook, errors.append
    try:

        async def collect() -> None:
            holder.clear()  # the last reference: finalized here, inside a running loop
            gc.collect()

        asyncio.run(collect())
    finally:
        sys.unraisablehook = hook
    assert errors == []
    assert loops and loops[0].is_closed()


@pytest.mark.parametrize(
    ("mode", "timeout"), [("threads", None), ("async", None), ("sequential", 5)]
)
def test_a_call_its_worker_pool_refuses_was_not_started_and_runs_once_later(
    monkeypatch: pytest.MonkeyPatch, mode: str, timeout: float | None
) -> None:
    """The pools take no more work once the interpreter exits (the background loop running
    an approved call as a script ends: tests/test_aio.py). Refused once the call was marked
    running, it was answered as an error though it never ran, the model told so, and a
    resumed chat never ran what the person approved. It is now refused before it starts:
    no start, no result, still approved; the round stops with the pool's error; continued
    with a pool that takes work, each call runs once."""
    import concurrent.futures

    from nbagent import _runner
    from nbagent._events import ToolCallFinished, ToolCallStarted
    from nbagent._record import fold

    ran: list[str] = []

    @tool(requires_approval=True, timeout=timeout)
    def refund(item: str) -> str:
        """Refund an item.

        Args:
            item: The item.
        """
        ran.append(item)
        return f"refunded {item}"

    refusing = concurrent.futures.ThreadPoolExecutor(1)
    refusing.shutdown()
    monkeypatch.setattr(_runner, "_pool", refusing)
    script = [call_tools(("refund", {"item": "a"}, "c1"), ("refund", {"item": "b"}, "c2"))]
    chat = Chat(provider=ScriptedProvider([*script, reply("done")]), display=False)
    chat.with_tools(refund).with_tool_options(concurrency=mode)
    chat.ask("refund a and b")
    chat.approve("c1")
    chat.approve("c2")
    with pytest.raises(RuntimeError, match="cannot schedule new futures"):
        chat.complete()
    assert ran == []
    assert [c.status for c in chat.tool_calls] == ["approved", "approved"]
    assert not [e for e in chat.events if isinstance(e, ToolCallStarted | ToolCallFinished)]
    assert fold(chat.events) == chat.record
    monkeypatch.setattr(_runner, "_pool", None)  # made again, taking work
    assert chat.complete().content == "done"
    assert sorted(ran) == ["a", "b"]
    assert [(m.tool_call_id, m.content) for m in results(chat)] == [
        ("c1", "refunded a"),
        ("c2", "refunded b"),
    ]
