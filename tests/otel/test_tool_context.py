"""A tool runs in its caller's context: the context variables the code asking the chat set
(a request id, OpenTelemetry's current span) reach it in every concurrency mode, with or
without a timeout, sync or async, from ``ask`` or ``ask_async``."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
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
