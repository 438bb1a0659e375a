"""One driver at a time: a second driver waits for the first and returns the settled result.

The race of the issue: approve a slow gated call, start ``chat.complete()`` in a
thread, call a driver again while the tool runs. The second driver must neither
return the old reply nor interleave its message with the running turn.
Synchronisation is by events (the tool holds until the second driver is seen
waiting, or has returned), never by sleeping.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from nbagent import Chat, ChatCancelled, ChatMessage, DriverError, Tool, tool
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

REPEAT = 20
WAIT = 30.0  # a bound on waiting for a thread, so a failure cannot hang the suite


class Gate:
    """Holds the slow tool until the test lets it go; counts its runs."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.runs = 0


def slow_chat(gate: Gate, *answers: str) -> Chat:
    class Slow(Tool):
        """A slow tool that needs approval."""

        requires_approval = True

        def execute(self, key: str) -> str:
            gate.started.set()
            assert gate.release.wait(WAIT)
            gate.runs += 1
            return f"did {key}"

    script = [call_tools(("slow", {"key": "k"})), *(reply(a) for a in answers)]
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(Slow)
    chat.ask("go")
    assert chat.status == "awaiting_approval"
    chat.approve(chat.pending_approvals[0])
    return chat


def first_driver(chat: Chat, gate: Gate) -> tuple[threading.Thread, list[Any]]:
    """``chat.complete()`` in a thread, stopped inside the approved tool."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(chat.complete())
        except ChatCancelled as exc:
            out.append(exc)

    thread = threading.Thread(target=run, name="first-driver")
    thread.start()
    assert gate.started.wait(WAIT)
    return thread, out


def release_once_waiting(chat: Chat, gate: Gate, done: threading.Event) -> threading.Thread:
    """Let the tool finish once the second driver waits for its turn (or has returned)."""

    def run() -> None:
        while not done.is_set():
            if getattr(chat, "_drive", None) is not None and chat._drive.waiting:
                break
            done.wait(0.001)
        gate.release.set()

    thread = threading.Thread(target=run, name="releaser")
    thread.start()
    return thread


def _second(chat: Chat, entry: str) -> Any:
    if entry == "complete":
        return chat.complete()
    if entry == "ask":
        return chat.ask("again")
    if entry == "step":
        return chat.step()
    if entry == "complete_async":
        return asyncio.run(chat.complete_async())
    if entry == "ask_async":
        return asyncio.run(chat.ask_async("again"))
    return asyncio.run(chat.step_async())


ENTRIES = ["complete", "ask", "step", "complete_async", "ask_async", "step_async"]


@pytest.mark.parametrize("rep", range(REPEAT))
@pytest.mark.parametrize("entry", ENTRIES)
def test_a_second_driver_waits_for_the_first_and_returns_the_settled_result(
    entry: str, rep: int
) -> None:
    gate = Gate()
    chat = slow_chat(gate, "final", "second answer")
    first, first_out = first_driver(chat, gate)
    done = threading.Event()
    releaser = release_once_waiting(chat, gate, done)
    try:
        result = _second(chat, entry)
    finally:
        done.set()
        gate.release.set()
        releaser.join(WAIT)
        first.join(WAIT)
    assert not first.is_alive() and gate.runs == 1  # the approved call ran exactly once
    assert first_out[0].content == "final"
    if entry.startswith("ask"):  # its turn came after the first turn ended, never inside it
        assert result.content == "second answer"
        users = [m for m in chat.transcript if isinstance(m, ChatMessage) and m.role == "user"]
        assert [m.content for m in users] == ["go", "again"]
        assert [m.content for m in chat.transcript[-3:]] == ["final", "again", "second answer"]
    elif entry.startswith("step"):  # one step from where the chat stands: the turn is answered
        assert result.kind == "complete" and result.message.content == "final"
    else:
        assert result.content == "final"
    assert chat.status == "complete" and not chat.is_running


@pytest.mark.parametrize("rep", range(REPEAT))
def test_an_async_waiter_keeps_its_event_loop_running(rep: int) -> None:
    """The waiter awaits: the releaser is a coroutine on the waiter's own loop."""
    gate = Gate()
    chat = slow_chat(gate, "final")
    first, _ = first_driver(chat, gate)

    async def release_when_waiting(second: asyncio.Future[Any]) -> None:
        while not second.done() and not getattr(getattr(chat, "_drive", None), "waiting", 0):
            await asyncio.sleep(0)
        gate.release.set()

    async def main() -> Any:
        second = asyncio.ensure_future(chat.complete_async())
        await release_when_waiting(second)
        return await second

    try:
        assert asyncio.run(main()).content == "final"
    finally:
        gate.release.set()
        first.join(WAIT)
    assert gate.runs == 1 and chat.status == "complete"


@pytest.mark.parametrize("rep", range(REPEAT))
def test_a_sync_caller_waits_for_an_async_driver_on_another_loop(rep: int) -> None:
    gate = Gate()
    chat = slow_chat(gate, "final")
    out: list[Any] = []
    first = threading.Thread(target=lambda: out.append(asyncio.run(chat.complete_async())))
    first.start()
    assert gate.started.wait(WAIT)
    done = threading.Event()
    releaser = release_once_waiting(chat, gate, done)
    try:
        second = chat.complete()
    finally:
        done.set()
        gate.release.set()
        releaser.join(WAIT)
        first.join(WAIT)
    assert second.content == "final" and out[0].content == "final" and gate.runs == 1


@pytest.mark.parametrize("rep", range(3))
def test_cancel_sends_waiting_drivers_back_with_what_is_settled(rep: int) -> None:
    """ask() and step() at once; complete() (and its twin) once the driver at work stopped,
    with what is settled then: read at once, it was the running round's message, its call
    still running."""
    gate = Gate()
    chat = slow_chat(gate, "final")
    first, first_out = first_driver(chat, gate)
    results: dict[str, Any] = {}

    def settled(reply: Any) -> Any:
        return reply, [c.status for c in reply.tool_calls], chat.is_running

    def wait_with(name: str, fn: Callable[[], Any]) -> threading.Thread:
        def run() -> None:
            try:
                results[name] = fn()
            except BaseException as exc:
                results[name] = exc

        t = threading.Thread(target=run)
        t.start()
        return t

    completes = [
        wait_with("complete", lambda: settled(chat.complete())),
        wait_with("complete_async", lambda: settled(asyncio.run(chat.complete_async()))),
    ]
    others = [wait_with("step", chat.step), wait_with("ask", lambda: chat.ask("later"))]
    while getattr(getattr(chat, "_drive", None), "waiting", 4) < 4:
        gate.started.wait(0.001)
    chat.cancel()
    for t in others:
        t.join(WAIT)
    # Back while the tool still runs: nothing of theirs ran.
    assert not gate.release.is_set() and gate.runs == 0
    assert isinstance(results["step"], ChatCancelled)
    assert isinstance(results["ask"], ChatCancelled)
    assert "later" not in [getattr(m, "content", None) for m in chat.transcript]
    assert "complete" not in results and "complete_async" not in results  # still waiting
    gate.release.set()
    first.join(WAIT)
    for t in completes:
        t.join(WAIT)
    assert gate.runs == 1 and isinstance(first_out[0], ChatCancelled)  # stopped after the call
    for name in ("complete", "complete_async"):
        reply, statuses, running = results[name]
        assert reply is chat.transcript[1]  # the response asking for the call, its round done
        assert statuses == ["ok"] and not running, (name, statuses, running)
    assert chat.complete().content == "final"  # and complete() resumes
    assert gate.runs == 1


@pytest.mark.parametrize("mode", ["sequential", "threads", "async"])
def test_a_tool_driving_its_own_chat_gets_a_clear_error_not_a_deadlock(mode: str) -> None:
    seen: list[str] = []

    @tool
    def recurse(key: str) -> str:
        """Calls complete() on its own chat."""
        try:
            chat.complete()
        except DriverError as exc:
            seen.append(str(exc))
        return "ok"

    @tool
    async def arecurse(key: str) -> str:
        """Awaits complete_async() on its own chat."""
        try:
            await chat.complete_async()
        except DriverError as exc:
            seen.append(str(exc))
        return "ok"

    script = [call_tools(("recurse", {"key": "a"}), ("arecurse", {"key": "b"})), reply("done")]
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(recurse, arecurse)
    chat.with_tool_options(concurrency=False if mode == "sequential" else mode)
    assert chat.ask("go").content == "done"
    assert len(seen) == 2 and all("wait for itself" in s for s in seen)


def test_a_blocking_call_on_the_loop_an_async_driver_runs_on_is_refused() -> None:
    """It could never wait (the driver needs this very thread): told to await instead."""
    gate = asyncio.Event()
    started = asyncio.Event()

    @tool
    async def hold(key: str) -> str:
        """Waits on the test's event."""
        started.set()
        await gate.wait()
        return "held"

    script = [call_tools(("hold", {"key": "a"})), reply("done")]
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(hold)

    async def main() -> None:
        task = asyncio.ensure_future(chat.ask_async("go"))
        await started.wait()
        with pytest.raises(DriverError, match=r"await chat\.complete_async"):
            chat.complete()
        with pytest.raises(DriverError, match=r"ask_later\(\) has no async twin"):
            chat.ask_later("then")
        gate.set()
        assert (await task).content == "done"

    asyncio.run(main())
    assert chat.status == "complete"


def test_a_tool_driving_another_chat_is_fine() -> None:
    inner = Chat(provider=ScriptedProvider([reply("inner answer")]), display=False)

    @tool
    def delegate(question: str) -> str:
        """Asks another chat."""
        return inner.ask(question).content  # type: ignore[union-attr]

    script = [call_tools(("delegate", {"question": "q"})), reply("outer answer")]
    outer = Chat(provider=ScriptedProvider(script), display=False).with_tools(delegate)
    assert outer.ask("go").content == "outer answer"
    assert inner.transcript[-1].content == "inner answer"


def test_is_running_says_whether_a_driver_is_at_work() -> None:
    gate = Gate()
    chat = slow_chat(gate, "final")
    assert not chat.is_running
    first, _ = first_driver(chat, gate)
    assert chat.is_running
    gate.release.set()
    first.join(WAIT)
    assert not chat.is_running


def test_closing_a_chat_another_thread_drives_stops_it_and_loses_nothing(tmp_path: Any) -> None:
    """Closed under a running call, the chat's sources were shut and the run went on: it
    asked the model again, and neither the call's result nor the answer was written."""
    started, release, done = threading.Event(), threading.Event(), threading.Event()

    @tool
    def slow(x: int) -> str:
        """Slow."""
        started.set()
        release.wait(10)
        done.set()
        return "slow done"

    provider = ScriptedProvider([call_tools(("slow", {"x": 1}, "c1")), reply("never asked")])
    chat = Chat(provider=provider, store=tmp_path / "s.db", display=False).with_tools(slow)
    raised: list[BaseException] = []

    def drive() -> None:
        try:
            chat.ask("go")
        except BaseException as exc:
            raised.append(exc)

    driver = threading.Thread(target=drive)
    driver.start()
    assert started.wait(10)
    threading.Timer(0.2, release.set).start()
    chat.close()  # waits for the running call to settle, stops the run there
    assert done.is_set() and not chat.is_running
    driver.join(10)
    assert [type(e) for e in raised] == [ChatCancelled]
    assert len(provider.requests) == 1  # the model was not asked again
    again = Chat.load(chat.id, store=tmp_path / "s.db", tools=[slow], provider=ScriptedProvider([]))
    (call,) = again.tool_calls
    assert call.status == "ok" and call.result is not None and call.result.content == "slow done"
    again.close()


def test_a_tool_closing_its_own_chat_is_refused() -> None:
    holder: list[Chat] = []

    @tool
    def closer() -> str:
        """Closes its own chat."""
        holder[0].close()
        return "closed"

    chat = Chat(
        provider=ScriptedProvider([call_tools(("closer", {}, "c1")), reply("ok")]), display=False
    ).with_tools(closer)
    holder.append(chat)
    chat.ask("go")
    (call,) = chat.tool_calls
    assert call.status == "error" and "DriverError" in call.result.content  # type: ignore[union-attr]


def test_an_async_chat_never_waits_on_its_loops_default_executor() -> None:
    """Its tool sources were listed (an MCP server connecting: seconds) on the loop's default
    executor, a few threads nbagent's own background work shares on its background loop: a
    busy one stalled the chat. They run on the shared tool pool."""
    import concurrent.futures

    from nbagent import ToolSource

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    class Source(ToolSource):
        def source_tools(self) -> tuple[Any, ...]:
            return (ping,)

    chat = Chat(
        provider=ScriptedProvider([call_tools(("ping", {}, "p")), reply("ok")]), display=False
    ).with_tools(Source())
    release = threading.Event()

    async def main() -> str:
        loop = asyncio.get_running_loop()
        busy = concurrent.futures.ThreadPoolExecutor(1)
        loop.set_default_executor(busy)
        stuck = loop.run_in_executor(None, release.wait, 30)  # the default executor is busy
        try:
            answer = await asyncio.wait_for(chat.ask_async("go"), 10)
        finally:
            release.set()
            await stuck
        return answer.content

    assert asyncio.run(main()) == "ok"
