"""A call decided after its turn parked, with no run continuing the turn (a sweep's retired
first-run call, an inbox denial of a chat no one resumes): when the run that asked for it
was traced here, the call's span is exported at the decision, under that run, with its
approval events; it was held until tracing stopped (lost to a kill -9). Read back from the
SDK's in-memory exporter."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _scenario import refund
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import nbagent
from nbagent import Chat
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply


def _tracing(content: bool) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    nbagent.instrument(provider, content=content)
    try:
        yield exporter
    finally:
        nbagent.uninstrument()


@pytest.fixture(params=[False, True], ids=["no-content", "content"])
def spans(request: pytest.FixtureRequest) -> Iterator[InMemorySpanExporter]:
    yield from _tracing(request.param)


def calls(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == "execute_tool refund"]


def turns(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return sorted(
        (s for s in exporter.get_finished_spans() if s.name == "invoke_agent nbagent"),
        key=lambda s: s.start_time or 0,
    )


def parked(*script: Any, n: int = 1, **kw: Any) -> Chat:
    """A chat whose first turn parked on ``n`` gated refunds (then ``script``)."""
    asks = call_tools(*[("refund", {"order_id": i}) for i in range(n)])
    chat = Chat(provider=ScriptedProvider([asks, *script]), display=False, **kw)
    chat.with_tools(refund)
    chat.ask("refund them")
    assert len(chat.pending_approvals) == n
    return chat


def assert_denied_under(span: ReadableSpan, run: ReadableSpan, call_id: str, by: str) -> None:
    """The call's span: a child of the run that asked for it, denied, with both events."""
    assert span.parent is not None and span.parent.span_id == run.context.span_id
    assert span.context.trace_id == run.context.trace_id
    a = span.attributes
    assert a["gen_ai.tool.call.id"] == call_id
    assert a["nbagent.call.status"] == "denied"
    assert a["nbagent.call.decision"] == "denied"
    assert a["nbagent.call.requires_approval"] is True
    assert [e.name for e in span.events] == [
        "nbagent.approval.requested",
        "nbagent.approval.decided",
    ]
    decided = span.events[1].attributes
    assert decided["nbagent.decision.verdict"] == "denied"
    assert decided["nbagent.decision.by"] == by
    assert decided["nbagent.decision.reason"] == "needs a manager"
    assert decided["nbagent.decision.wait_ms"] >= 0.0
    assert span.status.status_code.name != "ERROR"  # a denial is no failure


def test_a_denied_call_no_run_continues_is_exported_at_the_decision(
    spans: InMemorySpanExporter,
) -> None:
    chat = parked()
    (run,) = turns(spans)  # the run that parked
    call = chat.pending_approvals[0]
    assert calls(spans) == []  # waiting: no span yet
    chat.deny(call, reason="needs a manager")
    (span,) = calls(spans)  # at once: not at uninstrument(), not at exit
    assert_denied_under(span, run, call.id, "user")
    nbagent.uninstrument()
    assert len(calls(spans)) == 1  # and nothing more when tracing stops


def test_a_denial_then_a_continuation_exports_the_call_once(spans: InMemorySpanExporter) -> None:
    chat = parked(reply("not refunded"))
    call = chat.pending_approvals[0]
    chat.deny(call, reason="needs a manager")
    (early,) = calls(spans)
    chat.complete()
    first, continued = turns(spans)
    assert continued.attributes.get("nbagent.continued") is True
    (span,) = calls(spans)  # the continuing run made no second one
    assert span.context.span_id == early.context.span_id
    assert_denied_under(span, first, call.id, "user")
    chat.close()
    nbagent.uninstrument()
    assert len(calls(spans)) == 1


def test_an_approval_without_a_continuation_makes_no_span_until_the_call_runs(
    spans: InMemorySpanExporter,
) -> None:
    chat = parked(reply("refunded"))
    call = chat.pending_approvals[0]
    chat.approve(call, reason="ok")
    time.sleep(0.1)
    assert calls(spans) == []  # approved is not final: it runs later
    chat.complete()
    first, _continued = turns(spans)
    (span,) = calls(spans)
    assert span.attributes["nbagent.call.status"] == "ok"
    assert span.attributes["nbagent.call.decision"] == "approved"
    assert span.parent is not None and span.parent.span_id == first.context.span_id
    assert [e.name for e in span.events] == [
        "nbagent.approval.requested",
        "nbagent.approval.decided",
    ]


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(verdicts=st.lists(st.booleans(), min_size=1, max_size=4), continued=st.booleans())
def test_each_call_is_one_span_whether_or_not_the_turn_is_continued(
    spans: InMemorySpanExporter, verdicts: list[bool], continued: bool
) -> None:
    """Whatever the decisions, and whether a run continues the turn: a denied call is
    exported once, at its decision, under the run that asked for it; an approved one only
    once it runs (never, if no run continues)."""
    spans.clear()
    chat = parked(reply("done"), n=len(verdicts))
    (run,) = turns(spans)
    for call, ok in zip(list(chat.pending_approvals), verdicts, strict=True):
        (chat.approve if ok else chat.deny)(call, reason="needs a manager")
    denied = {c.call_id for c, ok in zip(chat.record.calls, verdicts, strict=True) if not ok}
    now = {s.attributes["gen_ai.tool.call.id"] for s in calls(spans)}
    assert now == denied  # before any run: the denied ones, and only them
    for s in calls(spans):
        assert_denied_under(s, run, s.attributes["gen_ai.tool.call.id"], "user")
    if continued:
        chat.complete()
    ids = [s.attributes["gen_ai.tool.call.id"] for s in calls(spans)]
    assert len(ids) == len(set(ids))  # never twice
    assert set(ids) == (set(r.call_id for r in chat.record.calls) if continued else denied)
    for s in calls(spans):
        assert s.parent is not None and s.parent.span_id == run.context.span_id


def test_a_sweeps_retired_first_run_calls_are_exported_as_it_denies_them() -> None:
    """``sweep`` denies the calls its first run left waiting, and no run continues them:
    they are exported then, under that run, with the sweep's decision."""
    from nbagent.evaluation import sweep, tool_called

    for exporter in _tracing(False):
        sweep(
            ["Refund order 5"],
            lambda: Chat("demo", display=False).with_tools(refund),
            [tool_called("refund", status="ok")],
            progress=False,
        )
        denied = [s for s in calls(exporter) if s.attributes["nbagent.call.status"] == "denied"]
        assert denied, [s.name for s in exporter.get_finished_spans()]
        runs = {s.context.span_id for s in turns(exporter)}
        for s in denied:
            assert s.parent is not None and s.parent.span_id in runs
            (decided,) = [e for e in s.events if e.name == "nbagent.approval.decided"]
            assert decided.attributes["nbagent.decision.by"] == "evaluate"
        held = len(calls(exporter))
        nbagent.uninstrument()
        assert len(calls(exporter)) == held  # nothing was held for tracing to stop


@pytest.mark.parametrize("how", ["refresh", "follower"])
def test_a_denial_made_through_the_store_is_exported_when_the_chat_applies_it(
    spans: InMemorySpanExporter, tmp_path: Path, how: str
) -> None:
    """Another process denies through the store (``store.deny``); the chat applies it (its
    ``refresh()``, or the store's follower calling it on its own thread): the call's span
    is exported then, under the run that asked for it, saying who decided."""
    db = tmp_path / "chats.db"
    chat = parked(reply("not refunded"), store=db)
    (run,) = turns(spans)
    call = chat.pending_approvals[0]
    applied = threading.Event()
    sub = None
    if how == "follower":
        (ext,) = [e for e in chat.extensions if type(e).__name__ == "StoreExtension"]

        def news() -> None:
            if chat.refresh():
                applied.set()

        sub = ext.follow_decisions(news)
    with SQLiteStore(db) as elsewhere:
        elsewhere.deny(call.id, chat_id=chat.id, reason="needs a manager", by="ops")
    if how == "refresh":
        chat.refresh()
    else:
        assert applied.wait(20)
    try:
        deadline = time.monotonic() + 5
        while not calls(spans) and time.monotonic() < deadline:
            time.sleep(0.02)
        (span,) = calls(spans)
        assert_denied_under(span, run, call.id, "ops")
        chat.complete()  # the turn continued: still one span for the call
        assert len(calls(spans)) == 1
    finally:
        if sub is not None:
            sub.close()
        chat.close()


def test_a_call_denied_in_a_loaded_chat_still_waits_for_the_run_that_continues(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    """A call whose run was not traced here (a loaded chat's) has no parent to hang under
    at its decision: it still waits, and is the continuing run's child."""
    db = tmp_path / "chats.db"
    first = parked(store=db)
    first.close()
    spans.clear()
    chat = Chat.load(
        first.id, store=db, provider=ScriptedProvider([reply("not refunded")]), display=False
    )
    chat.with_tools(refund)
    chat.deny(chat.pending_approvals[0], reason="needs a manager")
    assert calls(spans) == []
    chat.complete()
    (run,) = turns(spans)
    (span,) = calls(spans)
    assert span.parent is not None and span.parent.span_id == run.context.span_id
    chat.close()
