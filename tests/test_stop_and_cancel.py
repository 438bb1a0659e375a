"""The notebook's stop button, cancellation and escaping interrupts, pressed the real way.

The stop button is a SIGINT sent to the process (``os.kill``), taken by the main thread with
Python's default handler (as a kernel runs a cell): it wakes a main thread blocked on a lock
(waiting for the round on nbagent's background loop), which ``_thread.interrupt_main()``
cannot do. Races are repeated at random moments; each round checks the promise: an approved
call runs exactly once, a call recorded as not run never ran, a finished call keeps its real
outcome, nothing is left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from nbagent import Chat, ToolCall, ToolResultMessage, _aio, current_tool_call, tool
from nbagent._runner import abandoned_threads
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

_lock = threading.Lock()
runs: dict[str, int] = {}
finished: dict[str, int] = {}


def _count(into: dict[str, int], call_id: str) -> None:
    with _lock:
        into[call_id] = into.get(call_id, 0) + 1


def press_stop() -> None:
    """The notebook's stop button: SIGINT to this process (the main thread takes it)."""
    os.kill(os.getpid(), signal.SIGINT)


@pytest.fixture(autouse=True)
def _stop_button_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in the main thread (a kernel's cell), and nothing of
    one test is left for the next."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    runs.clear()
    finished.clear()
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    deadline = time.monotonic() + 10
    while abandoned_threads() and time.monotonic() < deadline:
        time.sleep(0.01)


def in_cell(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` as a notebook cell does: on the main thread, an event loop running, the
    stop button raising ``KeyboardInterrupt`` wherever the thread is (a kernel's handler)."""

    async def cell() -> Any:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        return fn()

    return asyncio.run(cell())


def tool_results(chat: Chat) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in chat.transcript if isinstance(m, ToolResultMessage)}


def check_promise(chat: Chat) -> None:
    """Every call ran at most once; one that ran kept its real outcome (sync tools are waited
    for); one recorded as not run never ran; none is left running."""
    answers = tool_results(chat)
    for call in chat.tool_calls:
        n = runs.get(call.id, 0)
        assert n <= 1, f"{call.id} ran {n} times"
        assert call.status != "running", f"{call.id} left running"
        text = answers[call.id].content if call.id in answers else ""
        if "before it ran" in text:
            assert n == 0, f"{call.id} ran, yet the model reads {text!r}"
        if finished.get(call.id):
            assert call.status == "ok", f"{call.id} finished, yet recorded {call.status}: {text}"
            assert text == f"done {call.id}"
        elif n == 0:
            assert call.status in ("cancelled", "requested"), (call.id, call.status)


# -- 1. the stop button in a notebook: ask waits for the round, a next cell is safe ---------


@pytest.mark.parametrize("mode", [False, "threads", "async"])
def test_after_the_stop_button_a_next_cell_never_runs_a_call_recorded_as_not_run(
    mode: Any,
) -> None:
    """Cell 1: ``chat.ask()``, stop pressed while a call runs. Cell 2, right after:
    ``chat.complete()``. Before, ``ask`` raised at once while the round still ran on the
    background loop (``chat.is_running`` already False); the next cell started a second
    round that ran the next call, and the old round then recorded that call "cancelled
    before it ran", which the model read. Now ``ask`` returns only once the round settled:
    nothing left running, the stopped call's real outcome kept, the others cancelled before
    they ran and never run."""
    rng = random.Random(1)
    for attempt in range(12):
        runs.clear()
        finished.clear()
        linger = rng.uniform(0.0, 0.08)

        @tool(timeout=10)
        def charge(amount: int, linger: float = linger) -> str:
            """Charges a card (sync)."""
            me = current_tool_call()
            assert me is not None
            _count(runs, me.id)
            if amount == 1:
                press_stop()  # while it runs: the main thread waits for the round
            time.sleep(linger)
            _count(finished, me.id)
            return f"done {me.id}"

        provider = ScriptedProvider(
            [
                call_tools(*[("charge", {"amount": i}, f"c{i}") for i in (1, 2, 3)]),
                reply("ok"),
                reply("ok again"),
            ]
        )
        chat = Chat(provider=provider).with_tools(charge)
        chat.with_tool_options(concurrency=mode, max_concurrency=1)
        with pytest.raises(KeyboardInterrupt):
            in_cell(lambda chat=chat: chat.ask("charge them"))
        # The round is over when ask raises: nothing of it goes on behind the next cell.
        # (A call after it may have started before the main thread took the press: it
        # finished too, and is kept.)
        assert not chat.is_running, attempt
        settled = [(c.id, c.status) for c in chat.tool_calls]
        assert settled[0] == ("c1", "ok"), (attempt, settled)
        assert all(s in ("ok", "cancelled") for _, s in settled), (attempt, settled)
        check_promise(chat)
        in_cell(chat.complete)  # the next cell
        time.sleep(linger + 0.02)  # an old round still going would record now
        assert [(c.id, c.status) for c in chat.tool_calls] == settled, attempt
        assert sorted(runs) == [i for i, s in settled if s == "ok"], (attempt, runs, settled)
        check_promise(chat)
        assert len(provider.requests) == 2


@pytest.mark.parametrize("mode", [False, "threads", "async"])
def test_the_stop_button_pressed_again_still_waits_for_the_round(mode: Any) -> None:
    """Pressed twice while a sync call's thread runs: ``ask`` still returns only once that
    call ended, its outcome kept (each press cancels; none gives up waiting)."""

    @tool(timeout=30)  # on a worker thread, one call at a time too
    def work(name: str) -> str:
        """Sync work, during which stop is pressed twice."""
        _count(runs, name)
        press_stop()
        time.sleep(0.05)
        press_stop()
        time.sleep(0.1)
        _count(finished, name)
        return f"done {name}"

    provider = ScriptedProvider(
        [call_tools(("work", {"name": "w"}, "w"), ("work", {"name": "x"}, "x"))]
    )
    chat = Chat(provider=provider).with_tools(work)
    chat.with_tool_options(concurrency=mode, max_concurrency=1)
    with pytest.raises(KeyboardInterrupt):
        in_cell(lambda: chat.ask("go"))
    assert finished == {"w": 1} and runs == {"w": 1}
    assert [c.status for c in chat.tool_calls] == ["ok", "cancelled"]
    assert not chat.is_running
    check_promise(chat)


# -- 2. stop while several sync calls run: each keeps its real outcome ----------------------


def _several_running(
    rng: random.Random, n: int, on_all_started: Callable[[], None]
) -> tuple[Any, list[tuple[str, dict[str, Any], str]]]:
    """A sync tool; ``n`` calls of it: once all of them run, ``on_all_started`` presses stop
    (from one of them, at a random moment); each then works a random while and finishes."""
    all_started = threading.Barrier(n, action=on_all_started, timeout=10)
    delays = {f"c{i}": rng.uniform(0.0, 0.1) for i in range(n)}

    @tool
    def work(name: str) -> str:
        """Sync work on a worker thread."""
        me = current_tool_call()
        assert me is not None
        _count(runs, me.id)
        all_started.wait()
        time.sleep(delays[me.id])
        _count(finished, me.id)
        return f"done {me.id}"

    return work, [("work", {"name": str(i)}, f"c{i}") for i in range(n)]


@pytest.mark.parametrize("mode", ["threads", "async"])
@pytest.mark.parametrize("driver", ["script", "notebook", "await_cancelled"])
def test_stop_with_several_sync_calls_running_keeps_every_real_outcome(
    mode: str, driver: str
) -> None:
    """The stop button while several sync calls run on worker threads: each thread is waited
    for and its real outcome kept. Before, once one call's task ended cancelled, the round
    cancelled the others a second time and gave up waiting for their threads: a call that
    finished its work was recorded "cancelled while it ran" (with max_concurrency=1 only one
    ran, so the existing test never saw it)."""
    rng = random.Random(2)
    for attempt in range(15):
        runs.clear()
        finished.clear()
        n = rng.randint(2, 4)
        loop_box: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = []

        def stop(loop_box: list[Any] = loop_box) -> None:
            if driver == "await_cancelled":  # ipykernel cancels the awaited cell's task
                loop, task = loop_box[0]
                loop.call_soon_threadsafe(task.cancel)
            else:
                press_stop()

        work, calls = _several_running(rng, n, stop)
        provider = ScriptedProvider([call_tools(*calls), reply("ok")])
        chat = Chat(provider=provider).with_tools(work)
        chat.with_tool_options(concurrency=mode, max_concurrency=n)
        if driver == "script":
            with pytest.raises(KeyboardInterrupt):
                chat.ask("go")
        elif driver == "notebook":
            with pytest.raises(KeyboardInterrupt):
                in_cell(lambda chat=chat: chat.ask("go"))
        else:

            async def cell(chat: Chat = chat, loop_box: list[Any] = loop_box) -> None:
                task = asyncio.ensure_future(chat.ask_async("go"))
                loop_box.append((asyncio.get_running_loop(), task))
                await task

            with pytest.raises(asyncio.CancelledError):
                asyncio.run(cell())
        assert sorted(finished) == sorted(runs) == [c[2] for c in calls], attempt
        statuses = [(c.id, c.status) for c in chat.tool_calls]
        assert all(s == "ok" for _, s in statuses), (attempt, statuses)
        check_promise(chat)


# -- 3. a tool's own KeyboardInterrupt, a callback's SystemExit: nothing left behind --------


def _on_a_thread(fn: Callable[[], None], timeout: float = 30) -> None:
    """Run ``fn`` on a thread of its own (its own reused runner: a scenario that poisoned it
    cannot leak into the next test) and re-raise what it raised; it must end in time."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "it never ended (a loop was stopped or blocked)"
    if failure:
        raise failure[0]


@contextlib.contextmanager
def no_loose_ends(caplog: pytest.LogCaptureFixture) -> Iterator[list[Any]]:
    """Nothing asyncio complains of (a task's exception never retrieved, a task destroyed
    pending), nothing unraisable."""
    unraisable: list[Any] = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            yield unraisable
            gc.collect()
    finally:
        sys.unraisablehook = hook
    assert unraisable == []
    assert not [r for r in caplog.records if r.name == "asyncio"], [
        r.getMessage() for r in caplog.records
    ]


@pytest.mark.parametrize("mode", [False, "threads", "async"])
@pytest.mark.parametrize("where", ["thread", "notebook"])
def test_a_tool_raising_keyboard_interrupt_stops_its_round_and_leaves_nothing_behind(
    mode: Any, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A tool raising ``KeyboardInterrupt`` itself (a library passing on a child's SIGINT),
    with another call of the round running: the round stops as for the stop button (the
    call recorded interrupted, the other's real outcome kept, ``ask`` raises), and nothing of
    it is left. Before, with threads or async, the interrupt escaped its task: the other
    call stayed "running" though it finished, ``complete()`` returned None with the chat
    stuck, and the next chat asked on that thread raised the old interrupt while the old
    chat's record changed under it (in a notebook, nbagent's background loop died)."""

    @tool
    def stop_inside() -> str:
        """Raises KeyboardInterrupt itself."""
        _count(runs, "k")
        time.sleep(0.02)
        raise KeyboardInterrupt

    @tool
    def other(x: str) -> str:
        """Slow sync work."""
        me = current_tool_call()
        assert me is not None
        _count(runs, me.id)
        time.sleep(0.1)
        _count(finished, me.id)
        return f"done {me.id}"

    def drive(fn: Callable[[], Any]) -> Any:
        if where == "thread":
            return fn()

        async def cell() -> Any:  # a running loop: the rounds run on nbagent's loop
            return fn()

        return asyncio.run(cell())

    def scenario() -> None:
        chat = Chat(
            provider=ScriptedProvider(
                [call_tools(("stop_inside", {}, "k"), ("other", {"x": "1"}, "o")), reply("done")]
            )
        ).with_tools(stop_inside, other)
        chat.with_tool_options(concurrency=mode)
        with pytest.raises(KeyboardInterrupt):
            drive(lambda: chat.ask("go"))
        before = [(c.id, c.status) for c in chat.tool_calls]
        assert before[0] == ("k", "cancelled")
        assert before[1] == ("o", "ok" if mode else "cancelled")
        assert "interrupted while it ran" in tool_results(chat)["k"].content
        assert not chat.is_running
        answer = drive(chat.complete)
        assert answer is not None and answer.content == "done" and chat.is_complete
        chat2 = Chat(
            provider=ScriptedProvider(
                [call_tools(("other", {"x": "2"}, "p"), ("other", {"x": "3"}, "q")), reply("ok")]
            )
        ).with_tools(other)
        chat2.with_tool_options(concurrency=mode)
        assert drive(lambda: chat2.ask("go")).content == "ok"
        assert [c.status for c in chat2.tool_calls] == ["ok", "ok"]
        assert [(c.id, c.status) for c in chat.tool_calls] == before  # unchanged by chat2
        check_promise(chat)
        check_promise(chat2)

    with no_loose_ends(caplog):
        _on_a_thread(scenario)


@pytest.mark.parametrize("mode", [False, "threads", "async"])
@pytest.mark.parametrize("hook", ["before_tool_call", "tool_call_started", "after_tool_result"])
def test_a_callback_raising_system_exit_leaves_no_call_running(
    mode: Any, hook: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A callback raising ``SystemExit``: ``ask`` raises it, every call of the round is
    settled (none left "running": one whose start was heard is answered cancelled, never
    run), the chat goes on with ``complete()``, and a next chat on the thread is untouched.
    Before, from ``before_tool_call`` or a ``tool_call_started`` listener the call stayed
    running for ever (even one call at a time); from ``after_tool_result`` on threads the
    exception escaped the call's task and poisoned the thread's event loop."""

    @tool
    def work(x: str) -> str:
        """Sync work."""
        me = current_tool_call()
        assert me is not None
        _count(runs, me.id)
        time.sleep(0.02)
        _count(finished, me.id)
        return f"done {me.id}"

    def scenario() -> None:
        raised: list[str] = []

        def boom(*_: Any) -> None:
            if not raised:
                raised.append("once")
                raise SystemExit(3)

        chat = Chat(
            provider=ScriptedProvider(
                [call_tools(("work", {"x": "1"}, "a"), ("work", {"x": "2"}, "b")), reply("done")]
            )
        ).with_tools(work)
        chat.with_tool_options(concurrency=mode)
        if hook == "before_tool_call":
            chat.before_tool_call(boom)
        elif hook == "after_tool_result":
            chat.after_tool_result(boom)
        else:
            chat.on(hook, boom)
        with pytest.raises(SystemExit):
            chat.ask("go")
        assert not chat.is_running
        assert all(c.status in ("ok", "cancelled") for c in chat.tool_calls), [
            (c.id, c.status) for c in chat.tool_calls
        ]
        check_promise(chat)
        answer = chat.complete()
        assert answer is not None and answer.content == "done"
        chat2 = Chat(
            provider=ScriptedProvider(
                [call_tools(("work", {"x": "3"}, "p"), ("work", {"x": "4"}, "q")), reply("ok")]
            )
        ).with_tools(work)
        chat2.with_tool_options(concurrency=mode)
        assert chat2.ask("go").content == "ok"  # type: ignore[union-attr]
        check_promise(chat2)

    with no_loose_ends(caplog):
        _on_a_thread(scenario)


# -- 4. a sync inner.ask() in an async tool of a chat asked from a cell ----------------------


@pytest.mark.parametrize("mode", [False, "threads", "async"])
def test_an_async_tool_asking_another_chat_sync_in_a_notebook_finishes(mode: Any) -> None:
    """``chat.ask()`` in a cell runs the round on nbagent's background loop; an async tool
    there asking a helper chat with the sync API (whose round has an async tool) waited for
    ever: the helper's round was scheduled on the very loop the tool was blocking."""

    @tool
    async def lookup(q: str) -> str:
        """Inner async tool."""
        await asyncio.sleep(0)
        return "found " + q

    @tool
    async def helper(q: str) -> str:
        """Asks a helper chat, with the sync API."""
        inner = Chat(
            provider=ScriptedProvider([call_tools(("lookup", {"q": q})), reply("inner: " + q)])
        ).with_tools(lookup)
        answer = inner.ask(q)
        assert answer is not None
        return answer.content

    chat = Chat(
        provider=ScriptedProvider([call_tools(("helper", {"q": "hi"}, "h")), reply("done")])
    ).with_tools(helper)
    chat.with_tool_options(concurrency=mode)
    out: list[Any] = []

    async def cell() -> None:
        out.append(chat.ask("go"))

    _on_a_thread(lambda: asyncio.run(cell()), timeout=20)
    assert out[0].content == "done"
    assert tool_results(chat)["h"].content == "inner: hi"


# -- 5. threads mode: a timed-out async tool is stopped ---------------------------------------


def test_a_timed_out_async_tool_on_a_worker_thread_is_stopped() -> None:
    """``concurrency="threads"``: an async tool over its timeout is cancelled in its thread
    (as in the other modes), so it does nothing after being reported timed out. Before, it
    ran to its end in the background: its side effect came after "timed out"."""
    events: list[str] = []

    @tool(timeout=0.2)
    async def slow_write(x: str) -> str:
        """Writes after a long wait (async)."""
        try:
            await asyncio.sleep(1.0)
        except asyncio.CancelledError:
            events.append(f"stopped {x}")
            raise
        events.append(f"wrote {x}")
        return "late"

    chat = Chat(
        provider=ScriptedProvider(
            [
                call_tools(("slow_write", {"x": "1"}, "a"), ("slow_write", {"x": "2"}, "b")),
                reply("ok"),
            ]
        )
    ).with_tools(slow_write)
    chat.with_tool_options(concurrency="threads")
    chat.ask("go")
    assert [c.status for c in chat.tool_calls] == ["timed_out", "timed_out"]
    for text in (r.content for r in tool_results(chat).values()):
        assert "timed out after 0.2 s and was stopped" in text, text
        assert "whether it did anything is unknown, so it was not retried" in text
    time.sleep(1.2)  # past the tool's own end: a call left running would write now
    assert sorted(events) == ["stopped 1", "stopped 2"]
    assert abandoned_threads() == 0


def test_an_async_tool_blocking_its_worker_loop_is_abandoned_with_its_thread() -> None:
    """An async tool that blocks its loop (a sync sleep inside) cannot be stopped at its
    timeout: after a short grace its thread is abandoned, and the message says it may still
    do what it was asked (never "was stopped")."""
    release = threading.Event()

    @tool(timeout=0.1)
    async def blocks(x: str) -> str:
        """Blocks its event loop."""
        release.wait(5)
        return "late"

    chat = Chat(
        provider=ScriptedProvider(
            [call_tools(("blocks", {"x": "1"}, "a"), ("blocks", {"x": "2"}, "b")), reply("ok")]
        )
    ).with_tools(blocks)
    chat.with_tool_options(concurrency="threads")
    try:
        t0 = time.monotonic()
        chat.ask("go")
        assert time.monotonic() - t0 < 4
        assert [c.status for c in chat.tool_calls] == ["timed_out", "timed_out"]
        for text in (r.content for r in tool_results(chat).values()):
            assert "could not be stopped" in text and "may still do what it was asked" in text
        assert abandoned_threads() == 2
    finally:
        release.set()


# -- 6. one call at a time: timed sync tools use the shared pool ----------------------------


def test_stuck_timed_sync_calls_one_at_a_time_never_starve_later_calls_or_nbagent() -> None:
    """``concurrency=False`` in a notebook: a sync tool with a timeout ran on the background
    loop's default executor (a few threads, the ones nbagent's own background work uses).
    Once that many calls were stuck past their timeout, every later timed tool failed "before
    it started (every worker thread was busy)" and the store's background work stalled. They
    run on the shared pool (256 threads) like the other modes'."""
    release = threading.Event()
    stuck = min(32, (os.cpu_count() or 1) + 4) + 1  # the default executor's size, and one

    @tool(timeout=0.05)
    def fetch(url: str) -> str:
        """A call to a dead server (hangs)."""
        release.wait(30)
        return "late"

    @tool(timeout=2)
    def quick(x: str) -> str:
        """Fast."""
        return "quick " + x

    chat = Chat(
        provider=ScriptedProvider(
            [
                call_tools(*[("fetch", {"url": f"u{i}"}, f"f{i}") for i in range(stuck)]),
                reply("hmm"),
                call_tools(("quick", {"x": "1"}, "q")),
                reply("done"),
            ]
        )
    ).with_tools(fetch, quick)
    background: list[Any] = []

    def cells() -> None:
        chat.ask("fetch them")
        chat.ask("now something quick")
        t0 = time.monotonic()
        work = _aio.spawn(_aio.in_worker(lambda: "background work done"))
        background.append((work.result(timeout=5), time.monotonic() - t0))

    try:
        in_cell(cells)
        assert tool_results(chat)["q"].content == "quick 1"
        assert background[0][0] == "background work done" and background[0][1] < 1
    finally:
        release.set()


# -- 7. a thread waited for after the stop button is not counted as abandoned ----------------


@pytest.mark.parametrize("mode", [False, "threads"])
def test_a_thread_waited_for_after_the_stop_button_is_not_counted_abandoned(mode: Any) -> None:
    """The stop button while a timed sync call's thread runs: the thread is waited for (its
    outcome kept), so it is not one "abandoned" (the count timed-out calls' messages quote)."""
    seen: list[int] = []

    @tool(timeout=30)
    def work(tool_call: ToolCall) -> str:
        """Sync work during which stop is pressed."""
        _count(runs, tool_call.id)
        press_stop()
        time.sleep(0.2)  # the main thread took the press and is waiting for this thread
        seen.append(abandoned_threads())
        _count(finished, tool_call.id)
        return f"done {tool_call.id}"

    chat = Chat(provider=ScriptedProvider([call_tools(("work", {}, "w"))])).with_tools(work)
    chat.with_tool_options(concurrency=mode)
    with pytest.raises(KeyboardInterrupt):
        in_cell(lambda: chat.ask("go"))
    assert seen == [0]
    check_promise(chat)


# -- 9. the stop button during a round of async tools: every record true, none left running -----


@pytest.mark.parametrize("mode", [False, "threads", "async"])
def test_the_stop_button_during_async_tools_keeps_what_returned_and_stops_the_rest(
    mode: Any,
) -> None:
    """The stop button pressed in a cell while async tools run, at random moments: a call whose
    tool returned as the press arrived is recorded ok with its result (it was "cancelled while
    it ran; whether it did anything is unknown"), and with ``"threads"`` the long call on its
    worker's loop is stopped at once (it ran its whole 3 s before ``ask`` gave up)."""
    rng = random.Random(7)
    for attempt in range(150):
        runs.clear()
        finished.clear()
        linger = rng.uniform(0.0, 0.0005)  # returns about as the press reaches its loop

        @tool
        async def work(n: int, linger: float = linger) -> str:
            """Works (async)."""
            me = current_tool_call()
            assert me is not None
            _count(runs, me.id)
            if n == 1:
                press_stop()  # while it runs: the main thread waits for the round
            await asyncio.sleep(3 if n == 3 else linger)
            _count(finished, me.id)
            return f"done {me.id}"

        provider = ScriptedProvider(
            [call_tools(*[("work", {"n": i}, f"c{i}") for i in (1, 2, 3)]), reply("ok")]
        )
        chat = Chat(provider=provider).with_tools(work)
        chat.with_tool_options(concurrency=mode)
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            in_cell(lambda chat=chat: chat.ask("work"))
        assert time.monotonic() - t0 < 2.0, (attempt, "a running async tool was not stopped")
        assert not chat.is_running, attempt
        check_promise(chat)
        assert chat.tool_calls[2].status == "cancelled", attempt


# -- 10. the stop button's signal taken by another thread still stops the round at once -------


@pytest.mark.parametrize("mode", [False, "threads", "async"])
def test_the_stop_button_taken_by_another_thread_is_seen_by_the_waiting_cell(mode: Any) -> None:
    """The kernel gives a process's SIGINT to any of its threads (often not the main one).
    Taken by the tool's own thread here (``pthread_kill``, the case that happened at random),
    it only flags the main thread, which waits on a lock for the round: that wait must still
    end at once (before, ``ask`` raised only when the 3 s call had run to its end)."""

    @tool
    async def work(n: int) -> str:
        """Works (async)."""
        me = current_tool_call()
        assert me is not None
        _count(runs, me.id)
        if n == 1:
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # this thread takes it
        await asyncio.sleep(3 if n == 2 else 0)
        _count(finished, me.id)
        return f"done {me.id}"

    provider = ScriptedProvider([call_tools(("work", {"n": 1}, "c1"), ("work", {"n": 2}, "c2"))])
    chat = Chat(provider=provider).with_tools(work)
    chat.with_tool_options(concurrency=mode)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        in_cell(lambda: chat.ask("work"))
    assert time.monotonic() - t0 < 2.0, "the press was taken only when the round ended"
    assert not chat.is_running
    check_promise(chat)
    assert chat.tool_calls[1].status == "cancelled"
    assert "c2" not in finished
