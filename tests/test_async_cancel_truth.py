"""The async API and cancellation tell the truth: what a record says happened, happened.

A call that ran to its end is recorded ``ok`` with its result however its round is
cancelled; one that never started is never said to have run; nothing of a turn goes on
after the call that drove it returned; sub-agents asked with the sync API never hang.
Races are repeated at random moments, with real cancellation (``Task.cancel``, timeouts).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from nbagent import Chat, ToolCallStarted, ToolResultMessage, current_tool_call, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


def _results(chat: Chat) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in chat.transcript if isinstance(m, ToolResultMessage)}


def _on_a_thread(fn: Callable[[], Any], timeout: float) -> Any:
    """``fn()`` on a daemon thread; a hang fails the test instead of hanging it."""
    out: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"still running after {timeout} s: hung"
    if errors:
        raise errors[0]
    return out[0]


# -- astream_events: leaving the iteration ends the turn ------------------------------------


@pytest.mark.parametrize("how", ["timeout", "break", "raise"])
def test_leaving_astream_events_stops_the_turn_before_going_on(how: str) -> None:
    """Left early, the iteration left the turn running as an orphan task: its tool ran on
    after the caller's timeout, and a failure of the turn was reported nowhere."""
    ran: list[str] = []

    @tool
    async def charge(amount: int) -> str:
        """Charge a card."""
        await asyncio.sleep(0.3)
        ran.append("charged")
        return f"charged {amount}"

    async def main() -> tuple[list[asyncio.Task[Any]], str]:
        chat = Chat(
            provider=ScriptedProvider([call_tools(("charge", {"amount": 5}, "c")), reply("ok")])
        ).with_tools(charge)
        stream = chat.astream_events("charge 5")
        try:
            if how == "timeout":
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(0.1):
                        async for _ in stream:
                            pass
            elif how == "break":
                async for _ in stream:
                    break
            else:
                with pytest.raises(ValueError):
                    async for _ in stream:
                        raise ValueError("the consumer failed")
        finally:
            await stream.aclose()  # (what `async for` leaves to the garbage collector)
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        await asyncio.sleep(0.5)
        call = chat.tool_calls[0] if chat.tool_calls else None
        return left, call.status if call else "never asked"

    left, status = asyncio.run(main())
    assert left == [], "the turn's task was left running"
    assert ran == [], "the tool ran on after the caller left the iteration"
    assert status in ("cancelled", "never asked")


def test_astream_events_run_to_its_end_still_yields_every_event() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    async def main() -> list[str]:
        chat = Chat(
            provider=ScriptedProvider([call_tools(("add", {"a": 1, "b": 2}, "c")), reply("3")])
        ).with_tools(add)
        return [type(e).__name__ async for e in chat.astream_events("add")]

    names = asyncio.run(main())
    assert "ToolCallFinished" in names
    assert names.count("MessageAdded") >= 4


# -- sub-agents asked with the sync API from async tools, at any depth ------------------------


def _agent(level: int, depth: int) -> Chat:
    if level == depth:
        return Chat(provider=ScriptedProvider([reply(f"leaf {level}")]))

    @tool(name=f"delegate{level}")
    async def delegate(q: str) -> str:
        """Ask a sub-agent, with the sync API."""
        answer = _agent(level + 1, depth).ask(q)
        assert answer is not None
        return answer.content

    provider = ScriptedProvider([call_tools((f"delegate{level}", {"q": "sub"})), reply(f"{level}")])
    return Chat(provider=provider).with_tools(delegate)


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("how", ["script", "async", "cell"])
def test_sub_agents_asked_with_the_sync_api_never_hang(how: str, depth: int) -> None:
    """Three deep in a cell (a sync ask() while the kernel's loop runs), four in a script, the
    innermost ask() was scheduled on nbagent's background loop while a sync ask() above it
    blocked that loop waiting for it: it hung for ever."""
    top = _agent(0, depth)

    def run() -> Any:
        if how == "script":
            return top.ask("go")
        if how == "async":
            return asyncio.run(top.ask_async("go"))

        async def cell() -> Any:
            return top.ask("go")

        return asyncio.run(cell())

    answer = _on_a_thread(run, timeout=20)
    assert answer.content == "0"
    assert _results(top)[top.tool_calls[0].id].content == ("leaf 1" if depth == 1 else "1")


# -- a cancelled round records what really happened -------------------------------------------

began: dict[str, int] = {}
returned: dict[str, int] = {}


@pytest.fixture(autouse=True)
def _fresh_tallies() -> None:
    began.clear()
    returned.clear()


def _tally(into: dict[str, int], call_id: str) -> None:
    into[call_id] = into.get(call_id, 0) + 1


def _check_record(chat: Chat) -> None:
    """A call whose tool returned is recorded ok with its result; one whose tool never began
    is never said to have run; none ran twice or is left running."""
    answers = _results(chat)
    for call in chat.tool_calls:
        text = answers[call.id].content if call.id in answers else ""
        assert began.get(call.id, 0) <= 1, f"{call.id} ran twice"
        assert call.status != "running", f"{call.id} left running"
        if returned.get(call.id):
            assert call.status == "ok", f"{call.id} returned, yet recorded {call.status}: {text}"
            assert text == f"done {call.id}"
        elif not began.get(call.id):
            assert "while it ran" not in text, f"{call.id} never began, yet the model reads {text}"
            assert call.status in ("cancelled", "requested"), (call.id, call.status)


def test_a_tool_that_returned_as_its_turn_was_cancelled_is_recorded_ok() -> None:
    """Cancelled in the same turn of the loop as the tool returned (before the task awaiting
    it resumed), the call was recorded "cancelled while it ran; whether it did anything is
    unknown", its result dropped: the model was told to wonder about a charge that was made."""
    asked: list[asyncio.Future[Any]] = []

    @tool
    async def charge(amount: int) -> str:
        """Charge a card."""
        _tally(began, current_tool_call().id)
        asyncio.get_running_loop().call_soon(asked[0].cancel)  # a timeout firing right now
        _tally(returned, current_tool_call().id)
        return f"done {current_tool_call().id}"

    async def main(mode: Any) -> Chat:
        chat = Chat(
            provider=ScriptedProvider([call_tools(("charge", {"amount": 5})), reply("ok")])
        ).with_tools(charge)
        chat.with_tool_options(concurrency=mode)
        asked[:] = [asyncio.ensure_future(chat.ask_async("charge 5"))]
        with pytest.raises(asyncio.CancelledError):
            await asked[0]
        return chat

    for mode in (False, "async"):
        chat = asyncio.run(main(mode))
        assert chat.tool_calls[0].status == "ok"
        _check_record(chat)


def test_a_tool_cancelled_before_its_task_began_is_said_not_to_have_run() -> None:
    """Cancelled after the call was marked running and before its task took a step, the tool
    never ran, yet the model read "cancelled while it ran; whether it did anything is
    unknown"."""
    asked: list[asyncio.Future[Any]] = []

    @tool
    async def charge(amount: int) -> str:
        """Charge a card."""
        _tally(began, current_tool_call().id)
        return "charged"

    async def main(mode: Any) -> Chat:
        chat = Chat(
            provider=ScriptedProvider([call_tools(("charge", {"amount": 5})), reply("ok")])
        ).with_tools(charge)
        chat.with_tool_options(concurrency=mode)
        chat.before_tool_call(lambda c: asyncio.get_running_loop().call_soon(asked[0].cancel))
        asked[:] = [asyncio.ensure_future(chat.ask_async("charge 5"))]
        with pytest.raises(asyncio.CancelledError):
            await asked[0]
        return chat

    for mode in (False, "async"):
        chat = asyncio.run(main(mode))
        call = chat.tool_calls[0]
        assert not began.get(call.id)
        assert call.status == "cancelled"
        assert _results(chat)[call.id].content.endswith("cancelled before it ran")


@pytest.mark.parametrize("mode", [False, "async", "threads"])
def test_cancelling_ask_async_at_random_moments_records_every_call_truly(mode: Any) -> None:
    """The driving task cancelled at a random moment of a round of async tools: every call
    that returned is recorded ok with its result (10-17% of such races recorded one
    "cancelled while it ran"), and none that never began is said to have run."""
    n = 0

    @tool
    async def work(i: int) -> str:
        """Work a little."""
        call_id = current_tool_call().id
        _tally(began, call_id)
        await asyncio.sleep(random.uniform(0, 0.01))
        _tally(returned, call_id)
        return f"done {call_id}"

    async def one() -> Chat:
        nonlocal n
        n += 1
        calls = [("work", {"i": i}, f"r{n}c{i}") for i in range(3)]
        chat = Chat(provider=ScriptedProvider([call_tools(*calls), reply("ok")])).with_tools(work)
        chat.with_tool_options(concurrency=mode)
        asked = asyncio.ensure_future(chat.ask_async("go"))
        await asyncio.sleep(random.uniform(0, 0.012))
        asked.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asked
        return chat

    async def main() -> None:
        for _ in range(60):
            _check_record(await one())

    random.seed(1234)
    asyncio.run(main())


# -- concurrency="async"/"threads" offloads a response's one sync call -----------------------


@pytest.mark.parametrize("mode", ["async", "threads"])
def test_one_sync_call_under_the_async_api_runs_off_the_loop(mode: str) -> None:
    """A response with one call ran its sync tool on the event loop's own thread (reported
    ``mode='sequential'``): 0.3 s of blocking held up every coroutine there, and gathered chats
    ran their calls one after another."""
    threads: list[str] = []
    spans: list[tuple[float, float]] = []

    @tool
    def lookup(n: int) -> str:
        """A blocking lookup (a sync HTTP client)."""
        threads.append(threading.current_thread().name)
        t = time.perf_counter()
        time.sleep(0.3)
        spans.append((t, time.perf_counter()))
        return f"found {n}"

    def chat() -> Chat:
        provider = ScriptedProvider([call_tools(("lookup", {"n": 1})), reply("ok")])
        made = Chat(provider=provider).with_tools(lookup).with_tool_options(concurrency=mode)
        made.on(ToolCallStarted, lambda e: modes.append(e.mode))
        return made

    modes: list[str] = []

    async def main() -> tuple[float, float]:
        lags: list[float] = []
        stop = asyncio.Event()

        async def ticker() -> None:
            while not stop.is_set():
                t = time.perf_counter()
                await asyncio.sleep(0.01)
                lags.append(time.perf_counter() - t)

        ticking = asyncio.ensure_future(ticker())
        t0 = time.perf_counter()
        await asyncio.gather(*(chat().ask_async("go") for _ in range(4)))
        took = time.perf_counter() - t0
        stop.set()
        await ticking
        return max(lags), took

    lag, _ = asyncio.run(main())
    loop_thread = threading.current_thread().name
    assert loop_thread not in threads, "the sync tool ran on the event loop's thread"
    assert modes == [mode] * 4
    # the calls overlapped (on the loop's thread they ran one after another), and the
    # loop's ticker ran while they did (told by order, not by a bound on time)
    assert max(start for start, _ in spans) < min(end for _, end in spans), spans
    assert lag < 0.3 * 4, f"the loop was held up {lag:.2f} s"  # held for all four: 1.2 s


def test_one_sync_call_under_the_sync_api_still_runs_on_the_callers_thread() -> None:
    threads: list[str] = []

    @tool
    def lookup(n: int) -> str:
        """A lookup."""
        threads.append(threading.current_thread().name)
        return f"found {n}"

    modes: list[str] = []

    def ask(mode: str) -> None:
        chat = Chat(provider=ScriptedProvider([call_tools(("lookup", {"n": 1})), reply("ok")]))
        chat.with_tools(lookup).with_tool_options(concurrency=mode)
        chat.on(ToolCallStarted, lambda e: modes.append(e.mode))
        assert chat.ask("go") is not None

    async def cell(mode: str) -> None:  # a sync ask() while the kernel's loop runs
        ask(mode)

    for mode in ("async", "threads"):
        ask(mode)
        asyncio.run(cell(mode))
    assert modes == ["sequential"] * 4
    assert threads == [threading.current_thread().name] * 4


# -- a tool bound to another loop is waited for when its round is cancelled ------------------


@pytest.fixture
def other_loop() -> Any:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_cancelling_a_round_waits_for_a_tool_bound_to_another_loop(other_loop: Any) -> None:
    """``ask_async`` cancelled returned at once while a ``@tool(loop=other)`` call still ran
    there (its cleanup, or all of its work, came after the chat had moved on)."""
    log: list[str] = []

    @tool(loop=other_loop)
    async def charge(amount: int) -> str:
        """Charge a card."""
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            await asyncio.sleep(0.3)  # rolls back
            log.append("rolled back")
            raise
        return "charged"

    async def main() -> Chat:
        chat = Chat(
            provider=ScriptedProvider([call_tools(("charge", {"amount": 5})), reply("ok")])
        ).with_tools(charge)
        asked = asyncio.ensure_future(chat.ask_async("go"))
        await asyncio.sleep(0.1)
        asked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asked
        assert log == ["rolled back"], "ask_async returned before the tool had stopped"
        return chat

    chat = asyncio.run(main())
    assert chat.tool_calls[0].status == "cancelled"


@pytest.mark.parametrize("mode", [False, "async", "threads"])
def test_cancelling_rounds_of_tools_bound_to_another_loop_records_them_truly(
    other_loop: Any, mode: Any
) -> None:
    """Cancelled at random moments: a bound call that returned is recorded ok with its result
    (its answer came as the round was cancelled), and nothing runs there once ``ask_async``
    returned."""
    n = 0
    late: list[str] = []
    over = threading.Event()

    @tool(loop=other_loop)
    async def work(i: int) -> str:
        """Work a little, there."""
        call_id = current_tool_call().id
        _tally(began, call_id)
        try:
            await asyncio.sleep(random.uniform(0, 0.01))
        finally:
            if over.is_set():
                late.append(call_id)
        _tally(returned, call_id)
        return f"done {call_id}"

    async def one() -> Chat:
        nonlocal n
        n += 1
        calls = [("work", {"i": i}, f"r{n}c{i}") for i in range(3)]
        chat = Chat(provider=ScriptedProvider([call_tools(*calls), reply("ok")])).with_tools(work)
        chat.with_tool_options(concurrency=mode)
        over.clear()
        asked = asyncio.ensure_future(chat.ask_async("go"))
        await asyncio.sleep(random.uniform(0, 0.012))
        asked.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asked
        over.set()
        return chat

    async def main() -> None:
        for _ in range(40):
            _check_record(await one())
        await asyncio.sleep(0.05)

    random.seed(99)
    asyncio.run(main())
    assert late == [], f"{late} went on after ask_async returned"


# -- concurrency="threads": async tools are stopped when the turn is cancelled ----------------


def test_a_timeout_around_ask_async_stops_async_tools_on_worker_threads() -> None:
    """With ``concurrency="threads"`` an async tool runs on a worker thread's own loop; the
    turn cancelled (``asyncio.timeout(0.2)``), it ran on to its end (3 s) while the caller
    waited, where the other modes stop it at once."""
    stopped: list[str] = []

    @tool
    async def crawl(n: int) -> str:
        """Crawl for a while."""
        try:
            await asyncio.sleep(3)
        except asyncio.CancelledError:
            stopped.append(current_tool_call().id)
            raise
        return f"crawled {n}"

    async def main() -> tuple[Chat, float]:
        calls = [("crawl", {"n": 1}, "a"), ("crawl", {"n": 2}, "b")]
        chat = Chat(provider=ScriptedProvider([call_tools(*calls), reply("ok")])).with_tools(crawl)
        chat.with_tool_options(concurrency="threads")
        t0 = time.perf_counter()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await chat.ask_async("go")
        return chat, time.perf_counter() - t0

    chat, took = asyncio.run(main())
    assert took < 1.5, f"the turn's timeout was overrun by {took - 0.2:.1f} s"
    assert sorted(stopped) == ["a", "b"]
    for call in chat.tool_calls:
        assert call.status == "cancelled"
        assert "while it ran" in _results(chat)[call.id].content


# -- sync ask() from short-lived threads leaves no event loop behind ----------------------------


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
def test_threads_that_asked_with_the_sync_api_leave_no_event_loop_open() -> None:
    """Each thread's private event loop (3 file descriptors) was closed only once its Thread
    object was collected: kept in a list of finished workers, 400 of them ran a process
    under ``ulimit -n 1024`` out of descriptors."""

    @tool
    async def work(n: int) -> str:
        """Work."""
        return "w"

    def job() -> None:
        chat = Chat(provider=ScriptedProvider([call_tools(("work", {"n": 1})), reply("ok")]))
        assert chat.with_tools(work).ask("go") is not None

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    job()  # this thread's own loop, kept for its next ask (not a leak)
    before = fds()
    kept = []  # finished workers, kept as an app may keep them
    for _ in range(60):
        thread = threading.Thread(target=job)
        thread.start()
        thread.join()
        kept.append(thread)
    assert fds() - before < 10, f"{fds() - before} more descriptors after 60 finished threads"


# -- the async driver's store writes do not wait behind the app's own threads ----------------


def test_store_writes_under_the_async_api_never_wait_behind_the_apps_to_thread_calls(
    tmp_path: Any,
) -> None:
    """The async driver's writes went to the loop's default executor: while the app's own
    ``asyncio.to_thread`` calls filled it, every turn waited for them (1 ms became 2 s)."""
    from nbagent.store import SQLiteStore

    release = threading.Event()

    async def main() -> float:
        store = SQLiteStore(str(tmp_path / "s.db"), synchronous="FULL")  # writes off the loop
        chat = Chat(model="demo", store=store)
        await chat.ask_async("hello")
        workers = min(32, (os.cpu_count() or 1) + 4)  # the default executor's size
        busy = [asyncio.ensure_future(asyncio.to_thread(release.wait, 30)) for _ in range(workers)]
        await asyncio.sleep(0.05)
        t0 = time.perf_counter()
        try:
            await asyncio.wait_for(chat.ask_async("and again"), 20)
            return time.perf_counter() - t0
        finally:
            release.set()
            await asyncio.gather(*busy)
            chat.close()
            store.close()

    took = asyncio.run(main())
    # behind them it waited until they ended (30 s; the wait_for gives up at 20 s): done
    # well before, it never queued behind them
    assert took < 10.0, f"a turn took {took:.1f} s behind the app's own threads"
