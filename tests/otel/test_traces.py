"""nbagent.instrument(): chats as OpenTelemetry GenAI spans, read back from the SDK's
in-memory exporter (the attributes, the approval events, the links), through the real
OpenAI SDK against the strict fake server and a real MCP server (the notes server)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _scenario import KEY, SECRETS, issue_turn, refund
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

import nbagent
from nbagent import Chat, ServerError, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    nbagent.instrument(provider)
    yield exporter
    nbagent.uninstrument()


@pytest.fixture
def content_spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    nbagent.instrument(provider, content=True)
    yield exporter
    nbagent.uninstrument()


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return f"{city}: 21 C"


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def one(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    (span,) = [s for s in exporter.get_finished_spans() if s.name == name]
    return span


def everything(exporter: InMemorySpanExporter) -> str:
    """Every exported span as the JSON an exporter would send (attributes, events, links)."""
    return "\n".join(s.to_json() for s in exporter.get_finished_spans())


def scripted_chat(*script: Any, **kw: Any) -> Chat:
    return Chat(provider=ScriptedProvider(list(script)), display=False, **kw).with_tools(
        lookup, refund
    )


# ------------------------------------------------------------------ the issue's Done when
def test_a_turn_with_a_denied_a_hosted_and_an_mcp_call_has_the_genai_attributes(
    content_spans: InMemorySpanExporter,
) -> None:
    """One response asks for a gated local call (denied), an MCP server's tool (runs on the
    real notes server) and carries a hosted MCP call the provider ran; every one is an
    ``execute_tool`` span with the right attributes, under the turn's ``invoke_agent``."""
    chat = issue_turn()

    agents = named(content_spans, "invoke_agent")
    assert len(agents) == 2  # the run that parked on the approval, and its continuation
    first, second = sorted(agents, key=lambda s: s.start_time or 0)
    assert first.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert first.attributes["gen_ai.provider.name"] == "openai"
    assert first.attributes["gen_ai.conversation.id"] == chat.id
    assert first.attributes["nbagent.outcome"] == "awaiting_approval"
    assert second.attributes["nbagent.outcome"] == "complete"
    assert second.attributes["nbagent.continued"] is True
    assert [link.context.span_id for link in second.links] == [first.context.span_id]

    requests = named(content_spans, "chat ")
    assert [s.name for s in requests] == ["chat gpt-4.1-mini"] * 2
    for s in requests:
        a = s.attributes
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.request.model"] == "gpt-4.1-mini"
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert a["gen_ai.response.finish_reasons"]
        assert "nbagent.cost_usd" in a
    assert {s.parent.span_id for s in requests} == {first.context.span_id, second.context.span_id}

    denied = one(content_spans, "execute_tool refund")
    a = denied.attributes
    assert a["gen_ai.tool.name"] == "refund" and a["gen_ai.tool.type"] == "function"
    assert a["gen_ai.tool.call.id"] == chat.tool_calls[0].id
    assert a["nbagent.call.status"] == "denied" and a["nbagent.call.decision"] == "denied"
    assert denied.parent.span_id == first.context.span_id
    requested, decided = denied.events
    assert requested.name == "nbagent.approval.requested"
    assert decided.name == "nbagent.approval.decided"
    assert decided.attributes["nbagent.decision.verdict"] == "denied"
    assert decided.attributes["nbagent.decision.by"] == "user"
    assert decided.attributes["nbagent.decision.reason"] == "refunds need a manager"
    assert decided.attributes["nbagent.decision.wait_ms"] >= 0

    mcp = one(content_spans, "execute_tool notes_read_note")
    a = mcp.attributes
    assert a["nbagent.call.server"] == "notes" and a["mcp.method.name"] == "tools/call"
    assert a["gen_ai.tool.type"] == "extension" and "nbagent.call.hosted" not in a  # not hosted
    assert a["nbagent.call.status"] == "ok" and a["gen_ai.tool.call.result"] == "buy milk"

    ran = one(content_spans, "execute_tool ask_question")
    a = ran.attributes
    assert a["nbagent.call.hosted"] is True and a["nbagent.call.server"] == "deepwiki"
    assert a["nbagent.call.item_type"] == "mcp_call" and a["gen_ai.provider.name"] == "openai"
    first_request = min(requests, key=lambda s: s.start_time or 0)
    assert ran.parent.span_id == first_request.context.span_id  # the response that reported it
    # it ran while that request did (it was after it: told by the message that followed)
    assert first_request.start_time <= ran.start_time <= ran.end_time <= first_request.end_time

    exported = everything(content_spans)
    for secret in SECRETS:
        assert secret not in exported


# ------------------------------------------------------------------ content and secrets
def test_without_content_no_prompt_answer_argument_or_result_leaves(
    spans: InMemorySpanExporter,
) -> None:
    chat = scripted_chat(
        call_tools(("lookup", {"city": "Zanzibar-PRIVATE"})), reply("It is ANSWER-PRIVATE.")
    )
    chat.ask("Weather in PROMPT-PRIVATE?")
    exported = everything(spans)
    assert named(spans, "execute_tool lookup") and named(spans, "chat ")
    for text in ("PROMPT-PRIVATE", "Zanzibar-PRIVATE", "ANSWER-PRIVATE"):
        assert text not in exported
    assert "gen_ai.input.messages" not in exported and "gen_ai.tool.call" + ".arguments" not in (
        exported
    )


def test_with_content_the_messages_follow_the_conventions_shape(
    content_spans: InMemorySpanExporter,
) -> None:
    chat = scripted_chat(call_tools(("lookup", {"city": "Oslo"})), reply("Oslo is 21 C."))
    chat.ask("Weather in Oslo?")
    agent = one(content_spans, "invoke_agent nbagent")
    inputs = json.loads(agent.attributes["gen_ai.input.messages"])
    assert inputs == [{"role": "user", "parts": [{"type": "text", "content": "Weather in Oslo?"}]}]
    (output,) = json.loads(agent.attributes["gen_ai.output.messages"])
    assert output["role"] == "assistant"
    assert output["parts"] == [{"type": "text", "content": "Oslo is 21 C."}]
    second = max(named(content_spans, "chat "), key=lambda s: s.start_time or 0)
    sent = json.loads(second.attributes["gen_ai.input.messages"])
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["parts"][0]["type"] == "tool_call"
    # the conventions' finish reasons, not nbagent's own ("end", "tool_use")
    assert (sent[1]["finish_reason"], output["finish_reason"]) == ("tool_call", "stop")
    call = one(content_spans, "execute_tool lookup")
    assert json.loads(call.attributes["gen_ai.tool.call.arguments"]) == {"city": "Oslo"}


def test_key_shaped_text_in_content_is_masked(content_spans: InMemorySpanExporter) -> None:
    chat = scripted_chat(reply(f"your key is {KEY}"))
    chat.ask(f"remember {KEY} and https://user:DSN-PASSWORD-77@db.example/x")
    exported = everything(content_spans)
    assert KEY not in exported and "DSN-PASSWORD-77" not in exported
    assert "remember" in exported  # the content itself is there


def test_a_postgres_dsn_password_never_reaches_a_span(
    content_spans: InMemorySpanExporter, postgres_dsn: str
) -> None:
    from _postgres import PASSWORD

    from nbagent.store import PostgresStore

    assert PASSWORD in postgres_dsn
    store = PostgresStore(postgres_dsn)
    try:
        chat = Chat(provider=ScriptedProvider([reply("stored")]), store=store, display=False)
        chat.ask(f"hello from {store!r}")
        chat.close()
    finally:
        store.close()
    assert named(content_spans, "invoke_agent")
    assert PASSWORD not in everything(content_spans)


# ------------------------------------------------------------------ costs nothing when off
def test_off_no_chat_has_a_listener_and_nothing_is_exported() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    before = scripted_chat(reply("a"), reply("b"))
    assert before.record._hooks == [] and before.extensions == ()
    nbagent.instrument(provider)
    assert len(before.record._hooks) == 1  # a chat made before instrument() is traced too
    before.ask("one")
    assert named(exporter, "invoke_agent")
    assert nbagent.uninstrument() is True
    assert before.record._hooks == []  # off again: no per-event work for it
    assert before.extensions == ()  # nor a tracer kept (with its provider) per on and off
    for _ in range(3):
        nbagent.instrument(provider)
    assert len(before.extensions) == 1  # instrumented again: one tracer, not one per call
    nbagent.uninstrument()
    after = scripted_chat(reply("c"))
    assert after.record._hooks == [] and after.extensions == ()
    exporter.clear()
    before.ask("two")
    after.ask("three")
    assert exporter.get_finished_spans() == ()
    assert nbagent.uninstrument() is False


def test_the_missing_extra_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)
    with pytest.raises(ModuleNotFoundError) as raised:
        nbagent.instrument()
    assert str(raised.value) == (
        "nbagent.instrument() needs opentelemetry, which is not installed: "
        "pip install 'nbagent[otel]'"
    )
    assert not nbagent.otel.instrumented()


def test_a_tracer_provider_that_is_not_one_is_refused_and_tracing_stays(
    spans: InMemorySpanExporter,
) -> None:
    """Before: ``instrument(tracer_provider=5)`` failed inside OpenTelemetry with
    ``AttributeError: 'int' object has no attribute 'get_tracer'``."""
    for wrong in (5, "otlp", InMemorySpanExporter()):
        with pytest.raises(TypeError, match="tracer_provider is an OpenTelemetry TracerProvider"):
            nbagent.instrument(wrong)
    assert nbagent.otel.instrumented()
    scripted_chat(reply("a")).ask("one")
    assert named(spans, "invoke_agent")  # still going where it went


# ------------------------------------------------------------------ statuses
def test_a_timed_out_call_is_an_error_span(spans: InMemorySpanExporter) -> None:
    release = threading.Event()

    @tool(timeout=0.05)
    def slow(city: str) -> str:
        """Slow.

        Args:
            city: The city.
        """
        release.wait(10)
        return "late"

    chat = Chat(
        provider=ScriptedProvider([call_tools(("slow", {"city": "x"})), reply("gave up")]),
        display=False,
    ).with_tools(slow)
    try:
        chat.ask("go")
    finally:
        release.set()
    span = one(spans, "execute_tool slow")
    assert span.attributes["nbagent.call.status"] == "timed_out"
    assert span.attributes["error.type"] == "timed_out"
    assert span.status.status_code.name == "ERROR"


def test_an_approved_call_has_both_approval_events_and_runs_under_the_continuation(
    spans: InMemorySpanExporter,
) -> None:
    chat = scripted_chat(call_tools(("refund", {"order_id": 7})), reply("refunded"))
    chat.ask("refund 7")
    chat.approve(chat.pending_approvals[0])
    chat.complete()
    span = one(spans, "execute_tool refund")
    assert span.attributes["nbagent.call.status"] == "ok"
    assert span.attributes["nbagent.call.decision"] == "approved"
    assert [e.name for e in span.events] == [
        "nbagent.approval.requested",
        "nbagent.approval.decided",
    ]
    assert span.events[1].attributes["nbagent.decision.verdict"] == "approved"
    first = min(named(spans, "invoke_agent"), key=lambda s: s.start_time or 0)
    assert span.parent.span_id == first.context.span_id  # the run that asked for it


def exported_whole(exporter: InMemorySpanExporter) -> None:
    """Every exported span's parent was exported too: no span waits on one never sent."""
    finished = exporter.get_finished_spans()
    ids = {s.context.span_id for s in finished}
    for s in finished:
        if s.name != "my evaluation":
            assert s.parent is None or s.parent.span_id in ids, s.name


class Answer(BaseModel):
    n: int


def _stopped(chat: Chat) -> None:
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        chat.ask("go")
    finally:
        signal.signal(signal.SIGINT, previous)


@tool(timeout=30)
def press_stop(n: int) -> str:
    """Presses the stop button while it runs.

    Args:
        n: A number.
    """
    import _thread

    _thread.interrupt_main()
    time.sleep(0.3)
    return "done"


@pytest.mark.parametrize(
    "how",
    ["request fails", "stop button", "chat.cancel()", "invalid answer", "tool error raised"],
)
def test_a_run_that_raises_is_exported_when_it_stops(how: str, spans: InMemorySpanExporter) -> None:
    """A run that ends by raising has no step event to end its turn: its spans waited for
    the next question (forever, if none came), then showed the stop as ``next_turn`` with
    the idle time. They are exported as the run stops, the turn ``failed`` (with the error's
    type) or ``cancelled``, and no span's parent is missing."""
    from nbagent import ChatCancelled, OutputValidationError, ToolExecutionError

    go: Any = None
    outcome = "failed"
    raised: type[BaseException]
    if how == "request fails":
        chat = scripted_chat(call_tools(("lookup", {"city": "Oslo"})), ServerError("boom 500"))
        raised = ServerError
    elif how == "stop button":
        chat = scripted_chat(call_tools(("press_stop", {"n": 1})), reply("never"))
        chat.with_tools(press_stop)
        go, outcome, raised = _stopped, "cancelled", KeyboardInterrupt
    elif how == "chat.cancel()":
        chat = scripted_chat(call_tools(("lookup", {"city": "Oslo"})), reply("never"))
        chat.before_tool_call(lambda call: chat.cancel())
        outcome, raised = "cancelled", ChatCancelled
    elif how == "invalid answer":
        chat = scripted_chat(reply("not json"), reply("still not json"))
        go, raised = (lambda c: c.ask("go", output=Answer)), OutputValidationError
    else:
        chat = scripted_chat(call_tools(("boom", {})), reply("never"), on_tool_error="raise")
        chat.with_tools(boom)
        raised = ToolExecutionError
    with pytest.raises(raised):
        (go or (lambda c: c.ask("go")))(chat)
    (turn,) = named(spans, "invoke_agent")  # now, not at the next question
    assert turn.attributes["nbagent.outcome"] == outcome
    if outcome == "failed":
        assert turn.status.status_code.name == "ERROR"
        assert turn.attributes["error.type"] == raised.__name__
        assert turn.status.description == raised.__name__  # no content: the type, not the text
    assert named(spans, "chat ")
    exported_whole(spans)
    spans.clear()
    chat.with_tool_options(choice=None)
    with contextlib.suppress(BaseException):
        chat.complete()  # the next run is a turn span of its own, not the stop's
    for later in named(spans, "invoke_agent"):
        assert later.attributes["nbagent.outcome"] != "next_turn"


@tool
def boom() -> str:
    """Fails."""
    raise KeyError("no record for Jane PRIVATE Doe")


def test_without_content_no_error_text_leaves(spans: InMemorySpanExporter) -> None:
    """A tool's error (and a failed request's) may quote the arguments or the prompt: without
    content a span's error status says the status or the error's type, never the text."""
    chat = scripted_chat(call_tools(("boom", {})), ServerError("bad request: PRIVATE prompt"))
    chat.with_tools(boom)
    with pytest.raises(ServerError):
        chat.ask("go")
    assert "no record for Jane PRIVATE Doe" in chat.tool_calls[0].result.content  # type: ignore[union-attr]
    assert "PRIVATE" not in everything(spans)
    call = one(spans, "execute_tool boom")
    assert call.status.status_code.name == "ERROR" and call.status.description == "error"
    (failed,) = [s for s in named(spans, "chat ") if s.status.status_code.name == "ERROR"]
    assert failed.status.description == "ServerError"


def test_with_content_an_error_text_leaves_masked(content_spans: InMemorySpanExporter) -> None:
    chat = scripted_chat(call_tools(("boom", {})), reply("sorry"))
    chat.with_tools(boom)
    chat.ask("go")
    call = one(content_spans, "execute_tool boom")
    assert "no record for Jane PRIVATE Doe" in (call.status.description or "")


def test_a_call_denied_in_a_loaded_chat_is_a_child_of_the_run_that_continues(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    """A chat loaded from a store (another process parked it), its call denied here, then
    continued: the call's span was a root in a trace of its own; it is the continuing run's
    child, as an approved call is."""
    db = tmp_path / "chats.db"
    parked = scripted_chat(call_tools(("refund", {"order_id": 7})), store=db)
    parked.ask("refund 7")
    parked.close()
    spans.clear()
    chat = Chat.load(
        parked.id, store=db, provider=ScriptedProvider([reply("not refunded")]), display=False
    )
    chat.with_tools(lookup, refund)
    chat.deny(chat.pending_approvals[0], reason="no")
    chat.complete()
    chat.close()
    call = one(spans, "execute_tool refund")
    (run,) = named(spans, "invoke_agent")
    assert call.attributes["nbagent.call.status"] == "denied"
    assert call.parent is not None and call.parent.span_id == run.context.span_id
    assert call.context.trace_id == run.context.trace_id


def test_a_denied_call_no_run_continues_is_still_exported(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    db = tmp_path / "chats.db"
    parked = scripted_chat(call_tools(("refund", {"order_id": 7})), store=db)
    parked.ask("refund 7")
    parked.close()
    spans.clear()
    chat = Chat.load(parked.id, store=db, provider=ScriptedProvider([]), display=False)
    chat.with_tools(lookup, refund)
    chat.deny(chat.pending_approvals[0])
    nbagent.uninstrument()  # the tracer stops: what it held leaves
    assert one(spans, "execute_tool refund").attributes["nbagent.call.status"] == "denied"


@pytest.mark.parametrize("content", [False, True])
def test_a_run_in_the_users_span_is_its_child_though_the_decision_was_made_outside(
    content: bool,
) -> None:
    """Park, decide with no span current, then ``complete()`` inside the user's span: the run
    is the span's child (it was a root when the decision came first; with content, always)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    nbagent.instrument(provider, content=content)
    try:
        for verdict in ("approve", "deny"):
            exporter.clear()
            chat = scripted_chat(call_tools(("refund", {"order_id": 7})), reply("ok"))
            chat.ask("refund 7")
            getattr(chat, verdict)(chat.pending_approvals[0])
            tracer = provider.get_tracer("test")
            with tracer.start_as_current_span("my evaluation") as mine:
                chat.complete()
            (run,) = [
                s
                for s in named(exporter, "invoke_agent")
                if s.attributes["nbagent.turn"] == 1 and s.attributes.get("nbagent.continued")
            ]
            assert run.parent is not None, verdict
            assert run.parent.span_id == mine.get_span_context().span_id, verdict
    finally:
        nbagent.uninstrument()


def test_a_request_span_is_named_after_the_model_asked_for(spans: InMemorySpanExporter) -> None:
    """The conventions name it ``chat {gen_ai.request.model}``; a real API answers with a
    dated snapshot (``gpt-4o-2024-08-06``), which split one model's spans over many names."""
    answer = dataclasses.replace(reply("hi"), model="gpt-4o-2024-08-06")
    Chat(provider=ScriptedProvider([answer], model="gpt-4o"), display=False).ask("hello")
    (span,) = named(spans, "chat ")
    assert span.name == "chat gpt-4o"
    assert span.attributes["gen_ai.response.model"] == "gpt-4o-2024-08-06"


def test_a_call_a_rule_denied_says_which_rule_on_its_span(spans: InMemorySpanExporter) -> None:
    chat = scripted_chat(call_tools(("refund", {"order_id": 700})), reply("not refunded"))
    chat.add_rule(nbagent.Rule.deny("refund", ("order_id", ">", 500)))
    chat.ask("refund 700")
    span = one(spans, "execute_tool refund")
    assert span.attributes["nbagent.call.status"] == "denied"
    decided = span.events[-1].attributes
    assert (decided["nbagent.decision.by"], decided["nbagent.decision.reason"]) == (
        "rule", "Denied by rule: tool refund, order_id > 500",
    )  # fmt: skip
    (request,) = [s for s in named(spans, "chat ") if s.attributes["nbagent.step"] == 1]
    assert request.attributes["gen_ai.usage.input_tokens"] > 0  # set once, at the end


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(verdicts=st.lists(st.booleans(), min_size=1, max_size=5))
def test_every_final_call_is_one_span_whose_status_is_the_records(
    spans: InMemorySpanExporter, verdicts: list[bool]
) -> None:
    """Whatever the decisions, each call is exported once, as its record says it ended,
    with exactly one decided event carrying the verdict given."""
    spans.clear()
    calls = [("refund", {"order_id": n}) for n in range(len(verdicts))]
    chat = scripted_chat(call_tools(*calls), reply("done"))
    chat.ask("refund them")
    for call, ok in zip(list(chat.pending_approvals), verdicts, strict=True):
        (chat.approve if ok else chat.deny)(call)
    chat.complete()
    exported = named(spans, "execute_tool")
    assert len(exported) == len(verdicts)
    by_id = {s.attributes["gen_ai.tool.call.id"]: s for s in exported}
    for r in chat.record.calls:
        s = by_id[r.call_id]
        assert s.attributes["nbagent.call.status"] == r.status
        (decided,) = [e for e in s.events if e.name == "nbagent.approval.decided"]
        assert decided.attributes["nbagent.decision.verdict"] == r.decided.verdict
    assert {r.status for r in chat.record.calls} <= {"ok", "denied"}


# the attributes left out at their defaults: absent means this value
DEFAULTS = {
    "nbagent.call.decision": "auto",
    "nbagent.call.requires_approval": False,
    "nbagent.call.hosted": False,
    "nbagent.call.replayed": False,
    "nbagent.call.mode": "sequential",
    "nbagent.request.tool_choice": "auto",
    "nbagent.tool_calls": 0,
    "nbagent.replayed": False,
    "nbagent.decision.edited": False,
}


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(gated=st.lists(st.sampled_from([None, True, False]), min_size=1, max_size=4))
def test_no_attribute_is_at_its_default_and_absent_reads_back_as_the_record(
    spans: InMemorySpanExporter, gated: list[bool | None]
) -> None:
    """A mix of ungated calls and gated ones (approved, denied): no span or event carries
    an attribute at its default value (each would cost the SDK a build and an encoding
    for nothing), and reading an absent one as its default gives back the record."""
    spans.clear()
    calls = [("refund" if g is not None else "lookup", {"order_id": n} if g is not None
              else {"city": f"c{n}"}) for n, g in enumerate(gated)]  # fmt: skip
    chat = scripted_chat(call_tools(*calls), reply("done"))
    chat.ask("go")
    verdicts = iter(g for g in gated if g is not None)
    for call in list(chat.pending_approvals):
        (chat.approve if next(verdicts) else chat.deny)(call)
    chat.complete()
    for s in spans.get_finished_spans():
        for attributes in [s.attributes, *(e.attributes for e in s.events)]:
            for k, v in (attributes or {}).items():
                assert not (k in DEFAULTS and v == DEFAULTS[k]), (s.name, k, v)
    tools = named(spans, "execute_tool")
    by_id = {s.attributes["gen_ai.tool.call.id"]: s.attributes for s in tools}
    assert len(by_id) == len(gated)
    for r in chat.record.calls:
        a = by_id[r.call_id]
        read = {k: a.get(f"nbagent.call.{k}", DEFAULTS[f"nbagent.call.{k}"])
                for k in ("decision", "requires_approval", "hosted", "replayed")}  # fmt: skip
        assert read == {
            "decision": r.decision,
            "requires_approval": bool(r.requires_approval),
            "hosted": bool(r.hosted),
            "replayed": bool(r.replayed),
        }
        if r.concurrency is not None:  # it ran (a denied call never did: no mode at all)
            assert a.get("nbagent.call.mode", "sequential") == r.concurrency
        assert a["nbagent.call.status"] == r.status  # always there: never a default
    for request in named(spans, "chat "):
        assert request.attributes.get("nbagent.tool_calls", 0) == (
            request.attributes["nbagent.step"] == 1 and len(gated)
        )


@pytest.mark.parametrize("bound", ["KEEP_MAX", "KEEP_SECONDS"])
def test_a_long_turns_spans_are_made_as_it_runs_under_their_turn(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, bound: str
) -> None:
    """A turn's changes are made into spans together when its run ends; a long turn (too
    many changes kept, or kept too long) has them made as it runs, each still a child of
    the turn, with the times it really started and ended."""
    from nbagent.otel import _spans

    monkeypatch.setattr(_spans, bound, {"KEEP_MAX": 5, "KEEP_SECONDS": 0.0}[bound])
    seen: list[int] = []

    @tool
    def count(n: int) -> str:
        """Count.

        Args:
            n: The number.
        """
        seen.append(len(named(spans, "chat ")))
        return str(n)

    rounds = 4
    script = [call_tools(("count", {"n": n})) for n in range(rounds)] + [reply("done")]
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(count)
    chat.ask("count")
    assert seen[-1] >= rounds - 1  # the requests before the last call: made already
    (turn,) = named(spans, "invoke_agent")
    children = [s for s in spans.get_finished_spans() if s is not turn]
    assert len(children) == 2 * rounds + 1  # every request and every call, once
    assert {s.parent.span_id for s in children} == {turn.context.span_id}
    requests = sorted(named(spans, "chat "), key=lambda s: s.attributes["nbagent.step"])
    calls = sorted(named(spans, "execute_tool"), key=lambda s: s.attributes["nbagent.step"])
    for request, call in zip(requests, calls, strict=False):  # the request asked, then it ran
        assert request.start_time <= request.end_time <= call.end_time
    assert all(turn.start_time <= s.start_time <= s.end_time <= turn.end_time for s in children)


def test_a_change_that_fails_to_trace_loses_none_of_its_bursts_other_spans(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn's changes are made into spans together: one that raises is warned about
    (as the record warns of any failing subscriber) and every other span is still made."""
    from nbagent._events import ToolCallRequested
    from nbagent.otel import _spans

    def broken(tracer: Any, key: Any, e: Any) -> None:
        raise RuntimeError("tracing broke")

    monkeypatch.setitem(_spans._HANDLERS, ToolCallRequested, broken)
    chat = scripted_chat(call_tools(("lookup", {"city": "Oslo"})), reply("cold"))
    with pytest.warns(nbagent.CallbackWarning, match="tracing broke"):
        chat.ask("Weather in Oslo?")
    assert chat.status == "complete"
    (turn,) = named(spans, "invoke_agent")
    assert turn.attributes["nbagent.outcome"] == "complete"
    assert len(named(spans, "chat ")) == 2
    (call,) = named(spans, "execute_tool lookup")
    assert call.parent.span_id == turn.context.span_id


# ------------------------------------------------------------------ links
def test_a_fork_links_to_its_parent_and_does_not_trace_the_shared_history_again(
    spans: InMemorySpanExporter,
) -> None:
    chat = scripted_chat(
        call_tools(("refund", {"order_id": 1})), reply("not refunded"), reply("refunded")
    )
    chat.ask("refund 1")
    call = chat.pending_approvals[0]
    chat.deny(call)
    chat.complete()
    parent_turn = min(named(spans, "invoke_agent"), key=lambda s: s.start_time or 0)
    n_requests = len(named(spans, "chat "))
    spans.clear()
    fork = chat.fork(call, decision="approved")
    assert spans.get_finished_spans() == ()  # the shared history is not traced again
    fork.complete()
    (agent,) = named(spans, "invoke_agent")
    assert agent.attributes["gen_ai.conversation.id"] == fork.id
    assert agent.attributes["nbagent.fork.parent_chat_id"] == chat.id
    assert agent.attributes["nbagent.fork.call_id"] == call.id
    assert [link.context.span_id for link in agent.links] == [parent_turn.context.span_id]
    assert len(named(spans, "chat ")) == 1 and n_requests == 2  # only the fork's own request
    (ran,) = named(spans, "execute_tool refund")
    assert ran.attributes["nbagent.call.status"] == "ok"


def test_a_replayed_request_links_to_the_run_that_recorded_it(
    spans: InMemorySpanExporter,
) -> None:
    live = scripted_chat(
        call_tools(("lookup", {"city": "Rome"})), reply("Rome: 21 C"), replay="auto"
    )
    live.ask("Weather in Rome?")
    recorded = {s.attributes["nbagent.step"]: s for s in named(spans, "chat ")}
    spans.clear()
    rerun = scripted_chat(replay="only")
    rerun.ask("Weather in Rome?")
    replayed = named(spans, "chat ")
    assert len(replayed) == 2
    for s in replayed:
        assert s.attributes["nbagent.replayed"] is True
        assert s.attributes["nbagent.replay.chat_id"] == live.id
        assert [link.context.trace_id for link in s.links] == [
            recorded[s.attributes["nbagent.step"]].context.trace_id
        ]


def test_a_batchs_chats_are_children_of_the_batch_span(spans: InMemorySpanExporter) -> None:
    result = nbagent.batch(
        ["a", "b", "c"],
        lambda: Chat(provider=ScriptedProvider([reply("ok")])),
        progress=False,
        name="traced",
    )
    assert list(result["status"]) == ["done"] * 3
    (run,) = named(spans, "invoke_workflow")
    assert run.attributes["nbagent.batch.id"] == "traced"
    assert run.attributes["gen_ai.workflow.name"] == "nbagent.batch"  # the conventions'
    assert run.attributes["nbagent.batch.rows"] == 3
    agents = named(spans, "invoke_agent")
    assert len(agents) == 3
    assert {a.parent.span_id for a in agents} == {run.context.span_id}
    assert {a.context.trace_id for a in agents} == {run.context.trace_id}


def test_an_async_batch_inside_the_users_span_nests_under_it(
    spans: InMemorySpanExporter,
) -> None:
    from opentelemetry import trace

    tracer = nbagent.otel._instrument.current().tracer  # the provider the test gave

    async def go() -> Any:
        with tracer.start_as_current_span("my evaluation") as mine:
            await nbagent.batch_async(
                ["x", "y"], lambda: Chat(provider=ScriptedProvider([reply("ok")])), progress=False
            )
            return mine.get_span_context()

    mine = asyncio.run(go())
    (run,) = named(spans, "invoke_workflow")
    assert run.parent.span_id == mine.span_id
    assert trace.get_current_span() is trace.INVALID_SPAN  # nothing left attached


# ------------------------------------------------------------------ a turn stepped through
def _stepped(**kw: Any) -> Chat:
    """A turn driven with ``step()`` and left in the middle: two requests and a call made,
    the second call not run yet (a person reading each result)."""
    chat = scripted_chat(
        call_tools(("lookup", {"city": "Oslo"})),
        call_tools(("lookup", {"city": "Rome"})),
        reply("sunny"),
        **kw,
    )
    chat.ask_later("weather?")
    for _ in range(3):
        chat.step()
    return chat


@pytest.mark.parametrize("how", ["close", "drop"])
def test_a_turn_stepped_through_ends_when_its_chat_is_closed_or_dropped(
    how: str, spans: InMemorySpanExporter
) -> None:
    """A turn driven with ``step()`` has no event ending it between steps: closed then (or
    dropped: a cell making the chat run again), its turn's span never ended, or nothing of
    it was exported at all, so its spans hung from a parent never sent. The turn ends
    ``closed`` (``dropped``), with every span made so far under it."""
    import gc

    from opentelemetry.sdk.trace import SpanProcessor

    ended = threading.Event()

    class Turns(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            if span.name.startswith("invoke_agent"):
                ended.set()

    nbagent.otel._instrument.current().provider.add_span_processor(Turns())  # type: ignore[union-attr]
    chat = _stepped()
    if how == "close":
        chat.close()
    else:
        del chat
        gc.collect()  # its finalizer ends its run, on a worker thread
    assert ended.wait(10)
    (turn,) = named(spans, "invoke_agent")
    assert turn.attributes["nbagent.outcome"] == {"close": "closed", "drop": "dropped"}[how]
    assert len(named(spans, "chat ")) == 2
    assert [s.attributes["nbagent.call.status"] for s in named(spans, "execute_tool")] == ["ok"]
    exported_whole(spans)
    assert {s.parent.span_id for s in spans.get_finished_spans() if s is not turn} == {
        turn.context.span_id
    }


def test_a_closed_chat_stepped_on_continues_its_turn_in_a_span_of_its_own(
    spans: InMemorySpanExporter,
) -> None:
    chat = _stepped()
    chat.close()
    chat.complete()
    first, second = sorted(named(spans, "invoke_agent"), key=lambda s: s.start_time or 0)
    assert first.attributes["nbagent.outcome"] == "closed"
    assert second.attributes["nbagent.outcome"] == "complete"
    assert second.attributes["nbagent.continued"] is True
    exported_whole(spans)


def test_a_stepped_turns_spans_leave_without_waiting_for_its_next_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a ``step()`` made waited for the next event to be made into spans: a person
    reading the result, or a kernel that dies then, kept them from the exporter. They are
    made at most ``KEEP_SECONDS`` after the first was kept, with no event needed."""
    from opentelemetry.sdk.trace import SpanProcessor

    from nbagent.otel import _spans

    monkeypatch.setattr(_spans, "KEEP_SECONDS", 0.05)
    ended: set[str] = set()
    all_ended = threading.Event()

    class Requests(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            if span.name.startswith("chat "):
                ended.add(str(span.attributes["gen_ai.conversation.id"]))
                if len(ended) == 3:
                    all_ended.set()

    provider = TracerProvider()
    provider.add_span_processor(Requests())
    nbagent.instrument(provider)
    try:  # three chats, each left after its first request: the one check serves them all
        chats = [
            scripted_chat(call_tools(("lookup", {"city": "Oslo"})), reply("sunny"))
            for _ in range(3)
        ]
        for chat in chats:
            chat.ask_later("weather?")
            chat.step()  # the first request: nothing follows it
        assert all_ended.wait(10)
        assert ended == {chat.id for chat in chats}
        for chat in chats:
            chat.complete()
    finally:
        nbagent.uninstrument()


def test_a_chat_dropped_mid_turn_still_has_its_providers_key_masked(
    content_spans: InMemorySpanExporter,
) -> None:
    """The turn of a chat garbage-collected mid-turn is exported after the chat is gone: its
    provider's key (of no known shape) is masked as it was seen while the chat lived."""
    import gc

    key = "custom-key-0123456789abcdef"

    class Keyed(ScriptedProvider):
        def secrets(self) -> tuple[str, ...]:
            return (key,)

    ended = threading.Event()

    class Turns(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            if span.name.startswith("invoke_agent"):
                ended.set()

    nbagent.otel._instrument.current().provider.add_span_processor(Turns())  # type: ignore[union-attr]
    chat = Chat(
        provider=Keyed([call_tools(("lookup", {"city": "Oslo"})), reply("sunny")]), display=False
    ).with_tools(lookup)
    chat.ask_later(f"my key is {key}, weather?")
    chat.step()
    del chat
    gc.collect()
    assert ended.wait(10)
    (turn,) = named(content_spans, "invoke_agent")
    assert turn.attributes["nbagent.outcome"] == "dropped"
    assert "my key is ***, weather?" in turn.attributes["gen_ai.input.messages"]
    assert key not in everything(content_spans)


def test_turns_that_end_hop_to_no_other_thread_per_chat(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each traced chat cost two hops to other threads (issue 27's budget: tracing on within
    5% of the SDK's own spans): its turn's first kept change started a check of its own on
    the background loop, and its finalizer sent it to a worker thread as it went, though
    its turn had ended and nothing was left to end. A batch's chats and back-to-back turns
    share one pending check; a chat dropped with nothing open needs none."""
    import gc

    from nbagent.otel import _spans

    hops: list[object] = []

    def counted(coro: Any) -> Any:
        hops.append(coro)
        coro.close()  # never run: what is counted is the hop
        return None

    monkeypatch.setattr(_spans, "spawn", counted)
    monkeypatch.setattr(_spans, "KEEP_SECONDS", 30.0)  # no check wakes during the test
    _spans._DUE_AT = None  # no check pending: the first kept change starts one
    try:
        for n in range(6):
            chat = scripted_chat(
                call_tools(("lookup", {"city": f"city {n}"})), reply("sunny"), reply("cloudy")
            )
            chat.ask("weather?")
            chat.ask("and tomorrow?")
            del chat
            gc.collect()
    finally:
        _spans._DUE_AT = None  # the check counted never ran: the next kept change starts one
    assert len(named(spans, "invoke_agent")) == 12
    assert len(hops) == 1


# ------------------------------------------------------------------ secrets a tool quotes
PASSWORD, API_KEY, TOKEN, PIN = "hunter2-Zq9", "zzAPIKEYzz-0042-value", "opaque-tok-77777", 480213


@tool
def login(user: str, password: str, api_key: str, config: dict[str, Any]) -> str:
    """Log in.

    Args:
        user: Who.
        password: The password.
        api_key: The key.
        config: More settings.
    """
    raise RuntimeError(f"login failed for {user} with {password} and {api_key} / {config}")


@pytest.mark.parametrize("on_error", ["result", "raise"])
def test_a_tool_error_quoting_its_secret_arguments_leaves_them_masked(
    on_error: str, content_spans: InMemorySpanExporter
) -> None:
    """With content, a tool's error quoting its secret-named arguments (``password``,
    ``api_key``, a nested ``access_token``, a number under ``passcode``) left verbatim in
    its call's error status, the turn's and the tool message the next request sent, though
    the arguments attribute masked them."""
    arguments = {
        "user": "bob",
        "password": PASSWORD,
        "api_key": API_KEY,
        "config": {"access_token": TOKEN, "passcode": PIN},
    }
    chat = Chat(
        provider=ScriptedProvider([call_tools(("login", arguments)), reply("done")]),
        display=False,
        on_tool_error=on_error,
    ).with_tools(login)
    with contextlib.suppress(nbagent.ToolExecutionError):
        chat.ask("log in")
    exported = everything(content_spans)
    for secret in (PASSWORD, API_KEY, TOKEN, str(PIN)):
        assert secret not in exported
    call = one(content_spans, "execute_tool login")
    assert call.status.description == (
        "RuntimeError: login failed for bob with *** and *** / "
        "{'access_token': '***', 'passcode': '***'}"  # a number under a secret's name: a
    )  # quoted ***, so the repr still parses
    if on_error == "raise":
        (turn,) = named(content_spans, "invoke_agent")
        assert "login failed for bob with ***" in (turn.status.description or "")
    else:
        sent = max(named(content_spans, "chat "), key=lambda s: s.attributes["nbagent.step"])
        assert "login failed for bob with ***" in sent.attributes["gen_ai.input.messages"]


@tool
def unlock(door: str, passcode: int, password: str = "") -> str:
    """Unlock a door.

    Args:
        door: Which door.
        passcode: Its code.
        password: The user's password.
    """
    return f"the latest test run opened {door} at 2026-05-04 (year 2026)"


@tool
def report(year: int, amount: int, note: str = "") -> str:
    """Report an amount.

    Args:
        year: The year.
        amount: The amount.
        note: A note.
    """
    return f"{year}: {amount}"


def test_a_short_secret_argument_is_masked_only_as_a_whole_token(
    content_spans: InMemorySpanExporter,
) -> None:
    """A value under a secret's name (``passcode=2026``, ``password="test"``) was masked as a
    substring of all exported text: another call's arguments read ``{"year": ***, "amount":
    1***0}`` (no longer JSON), its result ``***: 1***0``, and the prompt, results and answer
    "la*** *** run". It is masked only where it stands as a whole token, and inside a call's
    arguments only in their strings, which stay JSON."""
    chat = Chat(
        provider=ScriptedProvider(
            [
                call_tools(("unlock", {"door": "front", "passcode": 2026, "password": "test"})),
                call_tools(("report", {"year": 2026, "amount": 120260, "note": "test, latest"})),
                reply("Done: the latest test run passed; 120260 reported for 2026."),
            ]
        ),
        display=False,
    ).with_tools(unlock, report)
    chat.ask("Run the latest test, then report 120260 for 2026")
    exported = everything(content_spans)
    assert "la***" not in exported and "1***0" not in exported
    call = one(content_spans, "execute_tool report")
    arguments = call.attributes["gen_ai.tool.call.arguments"]
    assert json.loads(arguments) == {"year": 2026, "amount": 120260, "note": "***, latest"}
    assert call.attributes["gen_ai.tool.call.result"] == "***: 120260"
    opened = one(content_spans, "execute_tool unlock")
    assert opened.attributes["gen_ai.tool.call.result"] == (
        "the latest *** run opened front at ***-05-04 (year ***)"
    )
    (turn,) = named(content_spans, "invoke_agent")
    (asked,) = json.loads(turn.attributes["gen_ai.input.messages"])
    assert asked["parts"][0]["content"] == "Run the latest ***, then report 120260 for ***"
    (answer,) = json.loads(turn.attributes["gen_ai.output.messages"])
    assert answer["parts"][0]["content"] == (
        "Done: the latest *** run passed; 120260 reported for ***."
    )
    sent = max(named(content_spans, "chat "), key=lambda s: s.attributes["nbagent.step"])
    parts = [p for m in json.loads(sent.attributes["gen_ai.input.messages"]) for p in m["parts"]]
    asked_for = {p["name"]: p["arguments"] for p in parts if p["type"] == "tool_call"}
    assert asked_for == {
        "unlock": {"door": "front", "passcode": "***", "password": "***"},
        "report": {"year": 2026, "amount": 120260, "note": "***, latest"},
    }


@tool
def sign_in(user: str, password: str) -> str:
    """Sign in.

    Args:
        user: Who.
        password: The password.
    """
    if "\\" in password:
        raise ValueError(f"bad credentials {(user, password)!r}")
    raise ValueError(f"bad credentials {json.dumps({'user': user, 'secret': password})}")


def test_a_secret_argument_quoted_escaped_is_masked(content_spans: InMemorySpanExporter) -> None:
    """A tool's error quoting a secret argument as ``repr()`` or JSON shows it escaped
    (``'C:\\\\vault\\\\hunter2'``, ``"Gr\\u00fc\\u00dfe..."``): the escaped form was
    exported as is."""
    chat = Chat(
        provider=ScriptedProvider(
            [
                call_tools(("sign_in", {"user": "alice", "password": "Grüße-Kennwort-9"})),
                call_tools(("sign_in", {"user": "bob", "password": r"C:\vault\hunter2"})),
                reply("no luck"),
            ]
        ),
        display=False,
    ).with_tools(sign_in)
    chat.ask("sign in")
    exported = everything(content_spans)
    assert "Kennwort" not in exported and "vault" not in exported
    statuses = sorted(s.status.description or "" for s in named(content_spans, "execute_tool"))
    assert statuses == [
        "ValueError: bad credentials ('bob', '***')",
        'ValueError: bad credentials {"user": "alice", "secret": "***"}',
    ]


# ------------------------------------------------------------------ settings as sent
def test_a_request_span_shows_the_instructions_it_was_sent_with(
    content_spans: InMemorySpanExporter,
) -> None:
    """A tool changing the instructions mid-run: every request span showed the instructions
    as they were when the run ended, not as that request sent them."""
    provider = ScriptedProvider([call_tools(("switch", {"n": 1})), reply("ok")])
    chat = Chat(provider=provider, display=False, system="You are FIRST.")

    @tool
    def switch(n: int) -> str:
        """Switch persona.

        Args:
            n: A number.
        """
        chat.with_instructions("You are SECOND.")
        return "switched"

    chat.with_tools(switch).ask("go")
    requests = sorted(named(content_spans, "chat "), key=lambda s: s.attributes["nbagent.step"])
    shown = [json.loads(s.attributes["gen_ai.system_instructions"]) for s in requests]
    assert [s[0]["content"] for s in shown] == ["You are FIRST.", "You are SECOND."]


def test_content_that_is_not_a_bool_is_refused_and_tracing_stays(
    spans: InMemorySpanExporter,
) -> None:
    """``instrument(content="false")`` (a value read from an environment variable) turned
    content on: every prompt left the process."""
    for wrong in ("false", "0", 1, None):
        with pytest.raises(TypeError, match="content is True or False"):
            nbagent.instrument(content=wrong)  # type: ignore[arg-type]
    assert nbagent.otel.instrumented()
    scripted_chat(reply("a")).ask("my PRIVATE question")
    assert named(spans, "invoke_agent")  # still going where it went, without content
    assert "PRIVATE" not in everything(spans)


def test_the_late_check_racing_a_running_turn_loses_no_span(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check that makes kept changes into spans runs on a worker thread while the turn
    goes on (its calls ending on threads, their tools making spans of their own): repeated,
    every request and call is one span, under its turn, and no span's parent is missing."""
    from opentelemetry import trace

    from nbagent.otel import _spans

    monkeypatch.setattr(_spans, "KEEP_SECONDS", 0.001)
    mine = trace.get_tracer("my-tools", tracer_provider=nbagent.otel._instrument.current().provider)

    @tool
    def work(n: int) -> str:
        """Work.

        Args:
            n: A number.
        """
        if n % 2:
            with mine.start_as_current_span("inner"):
                time.sleep(0.001)
        return str(n)

    for _ in range(10):
        spans.clear()
        calls = [("work", {"n": n}) for n in range(12)]
        chat = Chat(
            provider=ScriptedProvider([call_tools(*calls), call_tools(*calls), reply("done")]),
            display=False,
        ).with_tools(work)
        chat.with_tool_options(concurrency="threads")
        chat.ask("go")
        (turn,) = named(spans, "invoke_agent")
        assert turn.attributes["nbagent.outcome"] == "complete"
        assert len(named(spans, "chat ")) == 3
        tools = named(spans, "execute_tool")
        assert len({s.attributes["gen_ai.tool.call.id"] for s in tools}) == len(tools) == 24
        assert {s.parent.span_id for s in tools} == {turn.context.span_id}
        assert len(named(spans, "inner")) == 12
        exported_whole(spans)
