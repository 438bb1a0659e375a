"""What a running call reports besides its result: ``nbagent.report_progress`` from a Python
tool (an MCP server's progress and log messages take the same path: tests/mcp_client).

The report is an event (``ToolCallProgress``), folded into the call's record (the latest
one), shown as a progress bar on the running call's card and in ``chat.log``; in every
concurrency mode; and a report that comes after the call finished changes nothing.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, ToolCallProgress, report_progress, tool
from nbagent._record import fold
from nbagent._tools import call_reporter
from nbagent.testing import ScriptedProvider, call_tools, reply

seen: dict[str, Any] = {}


@tool
def crunch(n: int) -> str:
    """Crunch n chunks, saying how far it is."""
    for i in range(1, n + 1):
        report_progress(i, n, f"<b>chunk</b> {i}")
    # heard on the thread coordinating the round, while this one goes on (at once where
    # the tool runs on that thread): the last report reaches the record before the tool ends
    assert seen["all_heard"].wait(10)
    chat = seen["chat"]
    seen["html"] = chat._repr_mimebundle_()["text/html"]
    seen["text"] = chat._repr_mimebundle_()["text/plain"]
    seen["record"] = chat.record.call("c1").progress
    seen["reporter"] = call_reporter()
    return "crunched"


@tool
async def crunch_async(n: int) -> str:
    """Crunch n chunks, asynchronously."""
    for i in range(1, n + 1):
        await asyncio.sleep(0)
        report_progress(i, n, f"chunk {i}")
    return "crunched"


DRIVES = ["ask", "ask_async", "complete_async"]
"""How the round is run: the sync API, the async API, and an approved call's round
continued by ``complete_async()``. Under the async API a sync tool of a sequential round
runs on the loop's own thread, the loop coordinating the round: its reports must be heard
there at once (handed to the loop it holds up, they waited until the call was over and were
dropped: no progress at all)."""


def run(name: str, concurrency: str, n: int = 4, drive: str = "ask") -> Chat:
    provider = ScriptedProvider([call_tools((name, {"n": n}, "c1")), reply("done")])
    tools = [crunch, crunch_async]
    if drive == "complete_async":
        tools = [tool(requires_approval=True)(t) for t in tools]
    chat = Chat(provider=provider, display=False).with_tools(*tools)
    chat.with_tool_options(concurrency=concurrency)
    seen.clear()
    seen["chat"] = chat
    seen["all_heard"] = heard = threading.Event()
    chat.on(ToolCallProgress, lambda e: e.progress == e.total and heard.set())
    if drive == "ask":
        chat.ask("crunch")
    elif drive == "ask_async":
        asyncio.run(chat.ask_async("crunch"))
    else:
        chat.ask("crunch")
        chat.approve("c1")
        asyncio.run(chat.complete_async())
    assert _results(chat) == {"c1": ("ok", "crunched")}
    return chat


@pytest.mark.parametrize("drive", DRIVES)
@pytest.mark.parametrize("concurrency", ["sequential", "threads", "async"])
def test_a_python_tools_progress_becomes_events_the_record_and_the_log(
    concurrency: str, drive: str
) -> None:
    chat = run("crunch", concurrency, drive=drive)
    progress = [e for e in chat.events if isinstance(e, ToolCallProgress)]
    assert [(e.progress, e.total, e.message) for e in progress] == [
        (float(i), 4.0, f"<b>chunk</b> {i}") for i in range(1, 5)
    ]
    assert {(e.call.id, e.step, e.turn) for e in progress} == {("c1", 2, 1)}
    r = chat.record.call("c1")
    assert (r.progress, r.progress_total, r.progress_message) == (4.0, 4.0, "<b>chunk</b> 4")
    assert seen["record"] == 4.0  # folded while the tool still ran
    row = chat.log.frame().iloc[0]
    assert (row["progress"], row["progress_total"], row["progress_message"]) == (
        4.0,
        4.0,
        "<b>chunk</b> 4",
    )
    assert fold(chat.events) == chat.record


@pytest.mark.parametrize("drive", DRIVES)
@pytest.mark.parametrize("concurrency", ["sequential", "threads", "async"])
def test_an_async_tool_reports_too(concurrency: str, drive: str) -> None:
    chat = run("crunch_async", concurrency, n=3, drive=drive)
    progress = [e for e in chat.events if isinstance(e, ToolCallProgress)]
    assert [e.message for e in progress] == ["chunk 1", "chunk 2", "chunk 3"]
    assert chat.record.call("c1").progress_message == "chunk 3"


def test_the_running_cards_progress_bar_is_escaped_and_in_the_static_forms() -> None:
    run("crunch", "sequential", n=4)
    html = seen["html"]
    assert '<progress class="nba-progress" max="1" value="1.0000"></progress>' in html
    assert "4 of 4 (100%)" in html
    assert "&lt;b&gt;chunk&lt;/b&gt; 4" in html and "<b>chunk</b>" not in html
    assert "progress: 4 of 4 (100%) · <b>chunk</b> 4" in seen["text"]


def test_a_finished_calls_card_has_no_progress_bar() -> None:
    chat = run("crunch", "sequential")
    assert "<progress" not in chat._repr_mimebundle_()["text/html"]


def test_a_report_after_the_call_finished_changes_nothing() -> None:
    chat = run("crunch", "sequential")
    n = len(chat.events)
    assert seen["reporter"].progress(9.0, 9.0, "late") is False
    assert seen["reporter"].log("info", "late", None) is False
    assert len(chat.events) == n and chat.record.call("c1").progress == 4.0


def test_outside_a_call_reporting_does_nothing_and_bad_values_are_refused() -> None:
    assert report_progress(1, 2, "alone") is False
    with pytest.raises(TypeError, match="progress must be a number"):
        report_progress("half")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="total must be a number"):
        report_progress(1, True)
    with pytest.raises(TypeError, match="message must be a string"):
        report_progress(1, 2, 3)  # type: ignore[arg-type]


reports = st.lists(
    st.tuples(
        st.integers(0, 20),
        st.sampled_from([None, 20]),
        st.sampled_from([None, "a", "b"]),
    ),
    max_size=12,
)


@settings(max_examples=30, deadline=None)
@given(reports)
def test_the_record_holds_the_last_report_kept_and_a_repeat_is_never_kept(
    steps: list[tuple[int, int | None, str | None]],
) -> None:
    kept: list[bool] = []

    @tool
    def work() -> str:
        """Report as told."""
        for p, total, message in steps:
            kept.append(report_progress(p, total, message))
        return "ok"

    provider = ScriptedProvider([call_tools(("work", {}, "c1")), reply("done")])
    chat = Chat(provider=provider, display=False).with_tools(work)
    chat.ask("go")
    events = [e for e in chat.events if isinstance(e, ToolCallProgress)]
    assert len(events) == sum(kept)
    for a, b in itertools.pairwise(events):
        assert (a.progress, a.total, a.message) != (b.progress, b.total, b.message)
    r = chat.record.call("c1")
    last = events[-1] if events else None
    assert (r.progress, r.progress_total, r.progress_message) == (
        (last.progress, last.total, last.message) if last else (None, None, None)
    )
    if steps:  # the first report is always kept
        assert kept[0]
    assert fold(chat.events) == chat.record


def test_report_progress_is_public() -> None:
    assert nbagent.report_progress is report_progress
    assert "report_progress" in nbagent.__all__


def _race_once() -> None:
    threads: list[threading.Thread] = []

    @tool
    def leaky() -> str:
        """Return while a thread keeps reporting."""
        reporter = call_reporter()
        assert reporter is not None

        def spam() -> None:
            for i in range(300):
                reporter.progress(float(i), 300.0, f"late {i}")
                reporter.log("info", f"late {i}", None)

        t = threading.Thread(target=spam)
        threads.append(t)
        t.start()
        return "returned"

    provider = ScriptedProvider([call_tools(("leaky", {}, "c1")), reply("done")])
    chat = Chat(provider=provider, display=False).with_tools(leaky)
    chat.ask("go")
    threads[0].join()
    events = list(chat.events)
    end = next(i for i, e in enumerate(events) if type(e).__name__ == "ToolCallFinished")
    before = [e for e in events[:end] if isinstance(e, ToolCallProgress)]
    r = chat.record.call("c1")
    assert r.progress == (before[-1].progress if before else None)
    assert fold(chat.events) == chat.record


def test_reports_racing_the_calls_end_are_never_folded_after_it() -> None:
    """A tool that leaves a thread reporting after it returned, raced twenty times: whatever
    lands after ``ToolCallFinished`` changes nothing, and the record is still the fold."""
    for _ in range(20):
        _race_once()


# Where a report's subscribers run. A tool on a worker thread (``"threads"``, a sync tool under
# ``"async"``, a timed sync tool in a sequential round) hands its reports to the thread
# coordinating the round, which emits them while the tool goes on: before, the subscribers ran on
# the tool's thread, inside its call, so a slow one held the tool up and a listener's
# ``SystemExit`` became the tool's error result instead of stopping the round.

OFF_THE_DRIVER = [("threads", None), ("async", None), ("sequential", 5.0)]


def _results(chat: Chat) -> dict[str, tuple[str, str]]:
    from nbagent import ToolResultMessage

    return {
        m.tool_call_id: (m.status, m.content)
        for m in chat.transcript
        if isinstance(m, ToolResultMessage)
    }


@pytest.mark.parametrize(("concurrency", "timeout"), OFF_THE_DRIVER)
def test_progress_and_log_subscribers_run_on_the_coordinating_thread_not_the_tools(
    concurrency: str, timeout: float | None
) -> None:
    tool_threads: set[int] = set()
    heard: dict[str, set[int]] = {"progress": set(), "log": set()}
    told_back = {"c1": threading.Event(), "c2": threading.Event()}  # its reports returned
    heard_log = {"c1": threading.Event(), "c2": threading.Event()}
    waited: list[bool] = []

    @tool(timeout=timeout)
    def work(n: int) -> str:
        """Report, then say so."""
        call = nbagent.current_tool_call()
        assert call is not None
        tool_threads.add(threading.get_ident())
        report_progress(1, 2, "half")
        reporter = call_reporter()
        assert reporter is not None
        reporter.log("info", "a log line", None)
        told_back[call.id].set()  # reached once the reports returned: never, had they waited
        assert heard_log[call.id].wait(5), "the log line was never heard while the tool ran"
        return "done"

    def on_progress(e: Any) -> None:
        heard["progress"].add(threading.get_ident())
        waited.append(told_back[e.call.id].wait(5))  # run inside the tool, this waits in vain

    def on_log(e: Any) -> None:
        heard["log"].add(threading.get_ident())
        heard_log[e.call.id].set()

    provider = ScriptedProvider(
        [call_tools(("work", {"n": 1}, "c1"), ("work", {"n": 2}, "c2")), reply("done")]
    )
    chat = Chat(provider=provider, display=False).with_tools(work)
    chat.with_tool_options(concurrency=concurrency)
    chat.on("tool_call_progress", on_progress).on("tool_call_log", on_log)
    chat.ask("go")
    assert _results(chat) == {"c1": ("ok", "done"), "c2": ("ok", "done")}
    assert waited == [True, True], "a subscriber ran inside the tool's call and held it up"
    assert heard["progress"] and heard["log"]
    assert not (heard["progress"] | heard["log"]) & tool_threads
    assert fold(chat.events) == chat.record


def _drive(chat: Chat, drive: str) -> None:
    """Ask ``chat`` with the sync or the async API (what ``await`` raised is raised here)."""
    if drive == "ask":
        chat.ask("go")
        return

    async def go() -> BaseException | None:
        try:
            await chat.ask_async("go")
        except BaseException as exc:  # raised out of the task, it would stop asyncio.run
            return exc
        return None

    if (exc := asyncio.run(go())) is not None:
        raise exc


@pytest.mark.parametrize(
    ("raised", "concurrency", "timeout", "drive"),
    [
        *(
            (raised, c, t, drive)
            for drive in ("ask", "ask_async")
            for raised, c, t in [
                (SystemExit, "sequential", None),
                *((SystemExit, c, t) for c, t in OFF_THE_DRIVER),
                # (a KeyboardInterrupt heard on the driving thread inside a sync tool run
                # there is the stop button's, which stops the tool where it is: below)
                *((KeyboardInterrupt, c, t) for c, t in OFF_THE_DRIVER),
            ]
        ),
    ],
)
def test_a_report_subscriber_raising_systemexit_stops_the_round_and_ask_raises_it(
    raised: type[BaseException], concurrency: str, timeout: float | None, drive: str
) -> None:
    """As a callback's ``SystemExit`` does: the running call goes on to its end and keeps its
    real outcome (the tool never sees the listener's exception), the calls not started are
    cancelled before they ran, ``ask()`` raises it, and ``complete()`` goes on."""
    ran: list[str] = []

    @tool(timeout=timeout)
    def work(n: int) -> str:
        """Report, then finish."""
        try:
            report_progress(1, 2, "half")
            report_progress(2, 2, "all")
        except BaseException as exc:  # the listener's exception must not land here
            ran.append(f"saw {type(exc).__name__}")
            raise
        ran.append(f"work {n}")
        return f"worked {n}"

    def stop(e: Any) -> None:
        raise raised("listener says stop")

    provider = ScriptedProvider(
        [call_tools(("work", {"n": 1}, "c1"), ("work", {"n": 2}, "c2")), reply("done")]
    )
    chat = Chat(provider=provider, display=False).with_tools(work)
    chat.with_tool_options(concurrency=concurrency, max_concurrency=1)
    chat.on("tool_call_progress", stop)
    with pytest.raises(raised, match="listener says stop"):
        _drive(chat, drive)
    assert ran == ["work 1"]
    results = _results(chat)
    assert results["c1"] == ("ok", "worked 1")
    assert results["c2"][0] == "cancelled" and "cancelled before it ran" in results["c2"][1]
    chat.off(stop)
    assert chat.complete().content == "done"
    assert fold(chat.events) == chat.record


@pytest.mark.parametrize("drive", ["ask", "ask_async"])
def test_a_subscribers_keyboardinterrupt_inside_a_tool_on_the_driving_thread_is_the_stop_button(
    drive: str,
) -> None:
    """A sync tool of a sequential round runs on the driving thread (under the async API, the
    loop's own); a ``KeyboardInterrupt`` its report's subscriber raises there is the stop
    button pressed as the subscriber ran: it stops the tool where it is, as the stop button
    does (the call is cancelled while it ran), the rest are not started, ``ask()`` raises."""
    ran: list[str] = []

    @tool
    def work(n: int) -> str:
        """Report, then finish."""
        try:
            report_progress(1, 2, "half")
        except KeyboardInterrupt:
            ran.append(f"stopped {n}")
            raise
        ran.append(f"work {n}")
        return f"worked {n}"

    def stop(e: Any) -> None:
        raise KeyboardInterrupt("stop pressed")

    provider = ScriptedProvider(
        [call_tools(("work", {"n": 1}, "c1"), ("work", {"n": 2}, "c2")), reply("done")]
    )
    chat = Chat(provider=provider, display=False).with_tools(work)
    chat.with_tool_options(concurrency="sequential")
    chat.on("tool_call_progress", stop)
    with pytest.raises(KeyboardInterrupt):
        _drive(chat, drive)
    assert ran == ["stopped 1"]
    results = _results(chat)
    assert results["c1"][0] == "cancelled" and "interrupted while it ran" in results["c1"][1]
    assert results["c2"][0] == "cancelled" and "cancelled before it ran" in results["c2"][1]
    assert fold(chat.events) == chat.record


@pytest.mark.parametrize("drive", ["ask", "ask_async"])
def test_a_thread_the_tool_started_and_waits_for_is_heard(drive: str) -> None:
    """A sync tool of a sequential round (under the async API: on the loop's own thread,
    holding the loop up) starts a thread that reports, and waits for it: its reports are
    heard while the call runs (handed to the loop the tool holds, they waited until the
    call was over and were dropped)."""

    @tool
    def work() -> str:
        """Report from a thread of its own."""
        reporter = call_reporter()
        assert reporter is not None
        t = threading.Thread(
            target=lambda: [reporter.progress(float(i), 3.0, f"part {i}") for i in (1, 2, 3)]
        )
        t.start()
        t.join()
        return "done"

    provider = ScriptedProvider([call_tools(("work", {}, "c1")), reply("done")])
    chat = Chat(provider=provider, display=False).with_tools(work)
    chat.with_tool_options(concurrency="sequential")
    _drive(chat, drive)
    progress = [e.message for e in chat.events if isinstance(e, ToolCallProgress)]
    assert progress == ["part 1", "part 2", "part 3"]
    assert chat.record.call("c1").progress_message == "part 3"
    assert fold(chat.events) == chat.record
