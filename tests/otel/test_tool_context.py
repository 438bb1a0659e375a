"""A tool runs in its caller's context: the context variables the code asking the chat set
(a request id, OpenTelemetry's current span) reach it in every concurrency mode, with or
without a timeout, sync or async, from ``ask`` or ``ask_async``; traced, what the tool makes
(its own spans, an instrumented client's, a sub-agent's chat) is a child of its call's
``execute_tool`` span, under the turn, in the caller's trace."""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import nbagent
from nbagent import Chat, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

REQUEST = contextvars.ContextVar("REQUEST", default="unset")
MODES = ("sequential", "threads", "async")


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    nbagent.instrument(tracing)
    yield tracing, exporter
    nbagent.uninstrument()


def _tools(seen: list[tuple[int, str]], tracer: Any, timeout: float | None) -> list[Any]:
    """A sync and an async tool that note the request id they read, set their own (which
    must reach nobody else) and, when ``tracer`` is given, make a span of their own."""

    def body(n: int) -> str:
        seen.append((n, REQUEST.get()))
        REQUEST.set(f"set by call {n}")
        if tracer is not None:
            with tracer.start_as_current_span("db.query", attributes={"n": n}):
                pass
        return "ok"

    @tool(timeout=timeout)
    def look(n: int) -> str:
        """Look.

        Args:
            n: Which.
        """
        return body(n)

    @tool(timeout=timeout)
    async def fetch(n: int) -> str:
        """Fetch.

        Args:
            n: Which.
        """
        await asyncio.sleep(0)
        return body(n)

    return [look, fetch]


def _round(kinds: tuple[str, ...]) -> ScriptedProvider:
    calls = [("look" if k == "sync" else "fetch", {"n": n}) for n, k in enumerate(kinds)]
    return ScriptedProvider([call_tools(*calls), reply("done")])


def _run(chat: Chat, driver: str) -> None:
    if driver == "ask":
        chat.ask("go")
    else:

        async def main() -> None:
            await chat.ask_async("go")

        asyncio.run(main())  # a copy of this context: the request id goes with it


cases = st.tuples(
    st.sampled_from(MODES),
    st.sampled_from([None, 5.0]),
    st.lists(st.sampled_from(["sync", "async"]), min_size=1, max_size=3).map(tuple),
    st.sampled_from(["ask", "ask_async"]),
)


@settings(max_examples=40, deadline=None)
@given(case=cases)
def test_every_tool_reads_its_callers_context_variables_and_keeps_its_own(
    case: tuple[str, float | None, tuple[str, ...], str],
) -> None:
    """Tracing off: a plain context variable. In threads, in async mode, with a timeout, or
    under ``ask_async`` it read ``unset`` (a worker thread or a task on another context);
    a value a tool sets is seen neither by the caller nor by the round's other calls."""
    mode, timeout, kinds, driver = case
    seen: list[tuple[int, str]] = []
    chat = Chat(provider=_round(kinds), display=False).with_tools(*_tools(seen, None, timeout))
    chat.with_tool_options(concurrency=mode)  # type: ignore[arg-type]
    token = REQUEST.set("request-42")
    try:
        _run(chat, driver)
        assert REQUEST.get() == "request-42"  # no tool's value leaked back
    finally:
        REQUEST.reset(token)
    assert sorted(seen) == [(n, "request-42") for n in range(len(kinds))], (case, seen)
    assert [c.status for c in chat.tool_calls] == ["ok"] * len(kinds)


def _by_id(spans: tuple[ReadableSpan, ...]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in spans}


def _parent_of(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> ReadableSpan:
    assert span.parent is not None, f"{span.name} is a root"
    return by_id[span.parent.span_id]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=cases)
def test_a_span_made_in_a_tool_is_a_child_of_its_calls_span_under_the_users(
    case: tuple[str, float | None, tuple[str, ...], str],
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """The tool's own span (a database client's, an HTTP client's) was the root of a trace
    of its own, or (in the user's span, sequentially) the user's span's child beside the
    agent's spans: it is its call's ``execute_tool`` span's child, under the turn."""
    tracing, exporter = provider
    exporter.clear()
    mode, timeout, kinds, driver = case
    mine = tracing.get_tracer("my-app")
    seen: list[tuple[int, str]] = []
    chat = Chat(provider=_round(kinds), display=False).with_tools(*_tools(seen, mine, timeout))
    chat.with_tool_options(concurrency=mode)  # type: ignore[arg-type]
    with mine.start_as_current_span("my evaluation") as evaluation:
        _run(chat, driver)
    spans = exporter.get_finished_spans()
    by_id = _by_id(spans)
    queries = [s for s in spans if s.name == "db.query"]
    assert len(queries) == len(kinds)
    calls = {c.arguments["n"]: c.id for c in chat.tool_calls}
    for q in queries:
        call = _parent_of(q, by_id)
        assert call.name.startswith("execute_tool "), (case, call.name)
        assert call.attributes["gen_ai.tool.call.id"] == calls[q.attributes["n"]]
        turn = _parent_of(call, by_id)
        assert turn.name == "invoke_agent nbagent"
        assert _parent_of(turn, by_id).context.span_id == evaluation.get_span_context().span_id
        assert q.context.trace_id == evaluation.get_span_context().trace_id


def test_a_sub_agent_run_in_a_tool_nests_under_the_tools_span(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    _, exporter = provider

    @tool
    def research(topic: str) -> str:
        """Ask the research agent.

        Args:
            topic: The topic.
        """
        sub = Chat(provider=ScriptedProvider([reply(f"notes on {topic}")]), display=False)
        return sub.ask(f"research {topic}").content or ""

    chat = Chat(
        provider=ScriptedProvider([call_tools(("research", {"topic": "otel"})), reply("done")]),
        display=False,
    ).with_tools(research)
    chat.ask("go")
    spans = exporter.get_finished_spans()
    by_id = _by_id(spans)
    (sub_turn,) = [
        s
        for s in spans
        if s.name == "invoke_agent nbagent" and s.attributes["gen_ai.conversation.id"] != chat.id
    ]
    call = _parent_of(sub_turn, by_id)
    assert call.name == "execute_tool research"
    assert _parent_of(call, by_id).attributes["gen_ai.conversation.id"] == chat.id
    assert len({s.context.trace_id for s in spans}) == 1  # one trace: the agent and its helper


def test_a_tools_attribute_on_the_current_span_lands_on_its_calls_span(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    _, exporter = provider

    @tool
    def query(sql: str) -> str:
        """Run SQL.

        Args:
            sql: The query.
        """
        trace.get_current_span().set_attribute("app.rows", 3)
        return "3 rows"

    chat = Chat(
        provider=ScriptedProvider([call_tools(("query", {"sql": "select"})), reply("done")]),
        display=False,
    ).with_tools(query)
    chat.ask("go")
    (call,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool query"]
    assert call.attributes["app.rows"] == 3
    assert call.attributes["nbagent.call.status"] == "ok"  # the record's, set at its end


def test_a_tool_that_makes_no_span_leaves_the_turns_spans_to_one_burst(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """The call's span is current in its tool without being made there: nothing is exported
    while the tool runs (the turn's spans are made together when the run ends)."""
    _, exporter = provider
    during: list[int] = []

    @tool
    def quiet(n: int) -> str:
        """Quiet.

        Args:
            n: n.
        """
        trace.get_current_span()  # looked at, not asked for its context
        during.append(len(exporter.get_finished_spans()))
        return "ok"

    chat = Chat(
        provider=ScriptedProvider([call_tools(("quiet", {"n": 1})), reply("done")]),
        display=False,
    ).with_tools(quiet)
    chat.ask("go")
    assert during == [0]
    assert len(exporter.get_finished_spans()) == 4  # turn, two requests, the call


CHILD = """
import json, sys, threading, time
import nbagent
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from nbagent import Chat, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

class ToFile(SpanExporter):
    def export(self, spans):
        with open(sys.argv[1], "a") as f:
            for s in spans:
                f.write(json.dumps({"name": s.name, "id": s.context.span_id,
                    "parent": s.parent.span_id if s.parent else None,
                    "outcome": s.attributes.get("nbagent.outcome"),
                    "status": s.attributes.get("nbagent.call.status")}) + "\\n")
        return SpanExportResult.SUCCESS

if sys.argv[2] == "again":  # instrumented before the provider that exports was made
    nbagent.instrument(TracerProvider())
if sys.argv[2] == "global":  # the global provider, made and set after instrument()
    from opentelemetry import trace
    nbagent.instrument()
tracing = TracerProvider()
tracing.add_span_processor(BatchSpanProcessor(ToFile()))
if sys.argv[2] == "global":
    trace.set_tracer_provider(tracing)
else:
    nbagent.instrument(tracing)
started = threading.Event()

@tool
def work(n: int) -> str:
    '''Work.

    Args:
        n: n.
    '''
    if n == 2:
        started.set()
        time.sleep(60)
    return "ok"

chat = Chat(provider=ScriptedProvider([call_tools(("work", {"n": 1})),
    call_tools(("work", {"n": 2})), reply("x")]), display=False).with_tools(work)
threading.Thread(target=chat.ask, args=("go",), daemon=True).start()
started.wait(30)
sys.exit(0)
"""


@pytest.mark.parametrize("instrumented", ["once", "again", "global"])
def test_a_process_exiting_mid_turn_exports_the_turn_its_spans_hang_from(
    instrumented: str, tmp_path: Path
) -> None:
    """The kernel shut down while a turn ran: the spans made so far were exported, their
    turn's was not (it ends with the run), so each hung from a parent never sent. At exit
    the open turn ends ``interrupted`` (its running call ``running``) and is flushed, before
    the provider's own shutdown, also when ``instrument()`` was called again with a provider
    made after the first call (its shutdown hook is newer than the first call's), and when
    it was called with none and the global provider was made afterwards (the SDK shut down
    first: the interrupted spans were dropped)."""
    out = tmp_path / "spans.jsonl"
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    here = str(Path(nbagent.__file__).parents[1])  # the nbagent this test imports
    env = {**os.environ, "PYTHONPATH": here + os.pathsep + os.environ.get("PYTHONPATH", "")}
    subprocess.run(
        [sys.executable, str(script), str(out), instrumented], check=True, timeout=120, env=env
    )
    text = out.read_text() if out.exists() else ""  # nothing exported: no file
    rows = [json.loads(line) for line in text.splitlines()]
    ids = {r["id"] for r in rows}
    for r in rows:
        assert r["parent"] is None or r["parent"] in ids, r
    (turn,) = [r for r in rows if r["name"] == "invoke_agent nbagent"]
    assert turn["outcome"] == "interrupted"
    calls = sorted(r["status"] for r in rows if r["name"] == "execute_tool work")
    assert calls == ["ok", "running"]


def test_a_run_that_parks_on_inputs_and_its_rerun_are_a_span_each(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """A call whose run asks for inputs (``InputsRequired``, a 2026 MCP server's way) parks
    and is run again once answered: each run is a span, the first ``awaiting_input``, and
    what each run makes is that run's child."""
    from nbagent import current_input_asker
    from nbagent._tools import InputsRequired

    tracing, exporter = provider
    mine = tracing.get_tracer("my-app")
    form = {"type": "object", "properties": {"name": {"type": "string"}}}

    @tool
    def signup(plan: str) -> str:
        """Sign up.

        Args:
            plan: The plan.
        """
        asker = current_input_asker()
        assert asker is not None
        again = asker.resume() is not None
        with mine.start_as_current_span("db.query", attributes={"again": again}):
            pass
        if not again:
            raise InputsRequired([("name", "elicitation", "Your name?", {}, form)], None)
        return "signed up"

    chat = Chat(
        provider=ScriptedProvider([call_tools(("signup", {"plan": "pro"})), reply("done")]),
        display=False,
    ).with_tools(signup)
    chat.ask("go")
    chat.answer(chat.pending_inputs[0], {"name": "Jane"})
    chat.complete()
    assert chat.tool_calls[0].status == "ok"
    spans = exporter.get_finished_spans()
    by_id = _by_id(spans)
    runs = sorted(
        (s for s in spans if s.name == "execute_tool signup"), key=lambda s: s.start_time or 0
    )
    assert [s.attributes["nbagent.call.status"] for s in runs] == ["awaiting_input", "ok"]
    assert runs[0].end_time <= runs[1].start_time  # type: ignore[operator]
    for q in (s for s in spans if s.name == "db.query"):
        assert _parent_of(q, by_id) is runs[int(q.attributes["again"])]
