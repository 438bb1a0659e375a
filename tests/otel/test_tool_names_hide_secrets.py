"""A tool name the model (or a provider's hosted item) wrote reaches a trace as the model reads
it: a call to an unknown tool named ``password=hunter2-very-secret`` or ``use_sk-proj-...``
was exported whole in the span's name and ``gen_ai.tool.name``, with or without content,
while the model itself read ``password=***``. Read back from the SDK's in-memory exporter;
the record keeps the name as sent."""

from __future__ import annotations

import string
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import nbagent
from nbagent import Chat, HostedMCP, ToolResultMessage, tool
from nbagent.providers import OpenAIProvider
from nbagent.testing import (
    FakeLLMServer,
    ScriptedProvider,
    Turn,
    call_tools,
    mcp_approval_request,
    mcp_call,
    reply,
)

PASSWORD = "hunter2-very-secret"
KEY = "sk-proj-Zq81xYb27TvWm3aQ9rLk5PdE4sHj6UcN"
NAMES = (f"password={PASSWORD}", f"use_{KEY}")
LEAKS = (PASSWORD, KEY, KEY[len("sk-proj-") :])


@tool
def lookup(q: str) -> str:
    """Look something up.

    Args:
        q: The query.
    """
    return "x"


@tool
def login(user: str, password: str) -> str:
    """Log in.

    Args:
        user: The user.
        password: The password.
    """
    return "in"


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


def exported_texts(exporter: InMemorySpanExporter) -> list[str]:
    """Every text a span carries: its name, attributes, events' attributes, links' attributes
    and status (not its ids: hex that a drawn secret could be part of)."""
    texts: list[str] = []

    def add(attrs: Any) -> None:
        for k, v in (attrs or {}).items():
            texts.append(str(k))
            texts.extend(map(str, v) if isinstance(v, tuple | list) else [str(v)])

    for s in exporter.get_finished_spans():
        texts.append(s.name)
        add(s.attributes)
        for e in s.events:
            texts.append(e.name)
            add(e.attributes)
        for link in s.links:
            add(link.attributes)
        texts.append(s.status.description or "")
    return texts


def tool_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool ")]


def test_an_unknown_tools_name_leaves_as_the_model_reads_it(spans: InMemorySpanExporter) -> None:
    provider = ScriptedProvider(
        [call_tools((NAMES[0], {"q": "a"}), (NAMES[1], {"q": "b"}), ("lookup", {"q": "c"})),
         reply("done")]
    )  # fmt: skip
    chat = Chat(provider=provider, display=False).with_tools(lookup)
    chat.ask("go")
    read = [m.content for m in provider.requests[-1].messages if isinstance(m, ToolResultMessage)]
    assert "unknown tool 'password=***'" in str(read[0])  # what the model reads
    for text in exported_texts(spans):
        for leak in LEAKS:
            assert leak not in text, text[:2000]
    shown = sorted((s.name, s.attributes["gen_ai.tool.name"]) for s in tool_spans(spans))
    assert shown == [
        ("execute_tool lookup", "lookup"),
        ("execute_tool password=***", "password=***"),
        ("execute_tool use_sk-***", "use_sk-***"),
    ]
    assert [c.name for c in chat.tool_calls] == [*NAMES, "lookup"]  # the record keeps them


@pytest.mark.parametrize("content", [False, True], ids=["no-content", "content"])
def test_a_tool_that_asks_for_its_span_while_it_runs_is_named_so_too(content: bool) -> None:
    """A span opened as the call starts (its tool made one of its own) is named then: a
    registered tool's name may hold a key too."""
    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = tracing.get_tracer("tool")

    def shout(q: str) -> str:
        """Shout.

        Args:
            q: The query.
        """
        with tracer.start_as_current_span("inner"):
            return q

    registered = tool(name=NAMES[1])(shout)
    provider = ScriptedProvider([call_tools((NAMES[1], {"q": "a"})), reply("done")])
    nbagent.instrument(tracing, content=content)
    try:
        Chat(provider=provider, display=False).with_tools(registered).ask("go")
    finally:
        nbagent.uninstrument()
    [span] = tool_spans(exporter)
    assert span.name == "execute_tool use_sk-***"
    assert span.attributes["gen_ai.tool.name"] == "use_sk-***"
    assert span.attributes["nbagent.call.status"] == "ok"
    [inner] = [s for s in exporter.get_finished_spans() if s.name == "inner"]
    assert inner.parent is not None  # the span opened as the call started
    assert inner.parent.span_id == span.context.span_id
    for text in exported_texts(exporter):
        for leak in LEAKS:
            assert leak not in text, text[:2000]


def hosted_turns(server: FakeLLMServer) -> Chat:
    server.script(
        [
            Turn(
                hosted=[
                    mcp_approval_request("wiki", NAMES[0], {"q": "x"}, id="mcpr_1"),
                    mcp_approval_request("wiki", NAMES[1], {"q": "y"}, id="mcpr_2"),
                ]
            ),
            Turn(
                hosted=[
                    mcp_call(
                        "wiki", NAMES[0], {"q": "x"}, output="1", approval_request_id="mcpr_1"
                    ),
                    mcp_call(
                        "wiki", NAMES[1], {"q": "y"}, output="2", approval_request_id="mcpr_2"
                    ),
                ]
            ),
            "done",
        ]
    )
    provider = OpenAIProvider(
        "gpt-4.1-mini", api="responses", base_url=server.openai_base_url, api_key="sk-test-1"
    )
    return Chat(provider=provider, display=False).with_tools(
        HostedMCP("wiki", server_url="https://wiki.example/mcp")
    )


def test_a_hosted_items_name_and_the_rule_that_approved_it_leave_masked(
    spans: InMemorySpanExporter,
) -> None:
    """A provider's hosted approval request and call name a tool the model chose; a rule
    always allowing that name is recorded as decided by ``policy:always_allow:<name>``."""
    with FakeLLMServer() as server:
        chat = hosted_turns(server)
        chat.always_allow(NAMES[0])
        chat.always_allow(NAMES[1])
        chat.ask("q")
        assert chat.status == "complete"
    shown = [s for s in tool_spans(spans) if s.attributes.get("nbagent.call.hosted")]
    assert sorted(s.name for s in shown) == [
        "execute_tool password=***",
        "execute_tool password=***",
        "execute_tool use_sk-***",
        "execute_tool use_sk-***",
    ]  # each request, and the call the provider ran after it
    bys = sorted(
        e.attributes["nbagent.decision.by"]
        for s in shown
        for e in s.events
        if e.name == "nbagent.approval.decided"
    )
    assert bys == ["policy:always_allow:password=***"] * 2 + ["policy:always_allow:use_sk-***"] * 2
    for text in exported_texts(spans):
        for leak in LEAKS:
            assert leak not in text, text[:2000]
    assert chat.always_allowed == NAMES  # the rules keep the names as sent


def test_a_tool_name_quoting_an_arguments_secret_leaves_masked(
    spans: InMemorySpanExporter,
) -> None:
    """The chat's own secrets (a value given under a secret's name) are masked in a name
    too, as in every other text the tracer exports."""
    secret = "Tr0ub4dorZ3xyz"
    provider = ScriptedProvider(
        [call_tools(("login", {"user": "bob", "password": secret}), (secret, {"q": "a"})),
         reply("done")]
    )  # fmt: skip
    Chat(provider=provider, display=False).with_tools(login, lookup).ask("go")
    assert {s.name for s in tool_spans(spans)} == {"execute_tool login", "execute_tool ***"}
    for text in exported_texts(spans):
        assert secret not in text, text[:2000]


def test_a_long_name_is_bounded(spans: InMemorySpanExporter) -> None:
    name = "x" * 5000
    provider = ScriptedProvider([call_tools((name, {})), reply("done")])
    Chat(provider=provider, display=False).ask("go")
    [span] = tool_spans(spans)
    assert len(span.name) < 300 and len(span.attributes["gen_ai.tool.name"]) < 300


_SECRET = st.text(string.ascii_letters + string.digits + "-_.~+/", min_size=6, max_size=30).map(
    lambda s: "Zq" + s
)  # "Zq": never part of a span's own words, never hex


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(secret=_SECRET, field=st.sampled_from(["password", "api_key", "token", "secret"]))
def test_no_secret_named_value_reaches_a_span_through_a_tool_name(
    spans: InMemorySpanExporter, secret: str, field: str
) -> None:
    """A value given under a secret's name, and one written as ``<name>=<value>`` in a tool's
    name, is in no span's name, attribute, event or status, however the model names tools."""
    spans.clear()
    names = [f"{field}={secret}", secret, f"{field}: {secret}", f"call {secret}"]
    provider = ScriptedProvider(
        [call_tools(("login", {"user": "bob", "password": secret}),
                    *[(n, {"q": "a"}) for n in names]),
         reply("done")]
    )  # fmt: skip
    Chat(provider=provider, display=False).with_tools(login, lookup).ask("go")
    assert len(tool_spans(spans)) == 1 + len(names)
    for text in exported_texts(spans):
        assert secret not in text, (names, text[:2000])
