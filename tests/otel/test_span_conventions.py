"""What the spans say, checked against the GenAI and MCP semantic conventions and
docs/traces.md: no error text without content, no provider key in anything exported, a
stopped request is cancelled (not failed), links go to the turn that holds the step, an
edited call shows what ran, and the conventions' attributes (output type, provider name,
server, reasoning tokens, request settings, message parts, failed calls, MCP errors,
hosted call timing)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from _scenario import NOTES
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

import nbagent
from nbagent import Chat, MCPServer, tool
from nbagent.providers import AnthropicProvider, OpenAIProvider
from nbagent.testing import FakeLLMServer, FakeToolCall, ScriptedProvider, Turn, call_tools, reply


def _exporter(content: bool) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    nbagent.instrument(provider, content=content)
    yield exporter
    nbagent.uninstrument()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    yield from _exporter(False)


@pytest.fixture
def content_spans() -> Iterator[InMemorySpanExporter]:
    yield from _exporter(True)


def everything(exporter: InMemorySpanExporter) -> str:
    return "\n".join(s.to_json() for s in exporter.get_finished_spans())


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


# ------------------------------------------------------------------ privacy and secrets
IBAN = "FR7630006000011234567890189"


def _screen(call: Any) -> bool | None:
    iban = call.arguments["iban"]
    if not iban.startswith("DE"):
        raise ValueError(f"cannot screen a transfer to {iban} for {call.arguments['owner']}")
    return True


@tool(requires_approval=_screen)
def transfer(iban: str, owner: str) -> str:
    """Transfer money.

    Args:
        iban: The account.
        owner: Its owner.
    """
    return "sent"


@pytest.mark.parametrize("content", [False, True])
def test_a_resolvers_error_leaves_only_as_its_kind_without_content(content: bool) -> None:
    """The approval rule raised, quoting the arguments: its text was the approval requested
    event's reason, exported without content. Without content: the rule raised, and what."""
    gen = _exporter(content)
    exporter = next(gen)
    try:
        chat = Chat(
            provider=ScriptedProvider(
                [call_tools(("transfer", {"iban": IBAN, "owner": "Jane PRIVATE Doe"})), reply("ok")]
            ),
            display=False,
        ).with_tools(transfer)
        chat.ask("pay Jane")
        chat.deny(chat.pending_approvals[0])
        chat.complete()
        (call,) = named(exporter, "execute_tool transfer")
        requested = call.events[0]
        reason = requested.attributes["nbagent.approval.reason"]
        assert "approval rule raised ValueError" in reason
        text = everything(exporter)
        assert (IBAN in text) is content and ("PRIVATE" in text) is content
    finally:
        gen.close()


GROQ_KEY = "gsk_live9f8e7d6c5b4a39281726354"  # not shaped like an sk- key


@tool
def echo(text: str) -> str:
    """Echo.

    Args:
        text: What to say back.
    """
    return f"you said {text}"


@tool
def call_api(path: str) -> str:
    """Call the API the chat uses.

    Args:
        path: The path.
    """
    raise RuntimeError(f"401 from {path}: invalid api key {GROQ_KEY}")


def test_the_chats_provider_key_never_reaches_a_span(
    content_spans: InMemorySpanExporter,
) -> None:
    """With content, the tracer masked the hosted tools' secrets and key-shaped text only:
    the chat's own provider key (Groq's ``gsk_``, Gemini's ``AIza``...), quoted by the model
    in a call's arguments or by a tool's error, was exported."""
    with FakeLLMServer() as server:
        server.script(
            [
                Turn(
                    tool_calls=[
                        FakeToolCall("echo", {"text": f"my key is {GROQ_KEY}"}),
                        FakeToolCall("call_api", {"path": "/models"}),
                    ]
                ),
                Turn(text="done"),
            ]
        )
        provider = OpenAIProvider(
            "llama-3.3-70b",
            base_url=server.openai_base_url,
            api_key=GROQ_KEY,
            compatible=True,
            max_retries=0,
        )
        chat = Chat(provider=provider, display=False).with_tools(echo, call_api)
        try:
            chat.ask("go")
        finally:
            provider.close()  # its keep-alive socket to the server, else collected later
    assert [c.status for c in chat.tool_calls] == ["ok", "error"]
    assert named(content_spans, "execute_tool echo")[0].attributes["gen_ai.tool.call.arguments"]
    assert GROQ_KEY not in everything(content_spans)


# ------------------------------------------------------------------ stopped requests
@pytest.mark.parametrize("how", ["stop button", "task cancelled"])
def test_a_request_stopped_while_the_model_answers_is_cancelled_not_failed(
    how: str, spans: InMemorySpanExporter
) -> None:
    """docs/traces.md: the stop button and a cancelled task end a turn ``cancelled``, with
    no error. Stopped during a model request, the turn said ``failed`` with an error
    status, and so did its request."""
    if how == "stop button":
        chat = Chat(provider=ScriptedProvider([KeyboardInterrupt()]), display=False)
        with pytest.raises(KeyboardInterrupt):
            chat.ask("go")
    else:
        chat = Chat(provider=ScriptedProvider([asyncio.CancelledError()]), display=False)

        async def main() -> None:
            await chat.ask_async("go")

        with pytest.raises(asyncio.CancelledError):
            asyncio.run(main())
    (turn,) = named(spans, "invoke_agent")
    (request,) = named(spans, "chat ")
    assert turn.attributes["nbagent.outcome"] == "cancelled"
    for s in (turn, request):
        assert s.status.status_code.name == "UNSET", s.name
        assert "error.type" not in s.attributes, s.name
    assert request.attributes["nbagent.stop_reason"] == "cancelled"


# ------------------------------------------------------------------ links
def _turn_spans(exporter: InMemorySpanExporter, chat_id: str) -> dict[int, int]:
    """Span id -> turn, for ``chat_id``'s turn spans."""
    return {
        s.context.span_id: s.attributes["nbagent.turn"]
        for s in named(exporter, "invoke_agent")
        if s.attributes["gen_ai.conversation.id"] == chat_id
    }


def test_a_fork_links_to_the_parent_turn_that_holds_its_step(
    spans: InMemorySpanExporter,
) -> None:
    """Forked at turn 1's step, then asked its own second question: the link went to the
    parent's turn 2 (the fork's turn number), which happened after the fork point."""
    parent = Chat(
        provider=ScriptedProvider([reply("a1"), reply("a2"), reply("a3"), reply("f2")]),
        display=False,
    )
    for q in ("q1", "q2", "q3"):
        parent.ask(q)
    turns = _turn_spans(spans, parent.id)
    spans.clear()
    fork = parent.fork(step=1)
    fork.ask("another second question")
    (agent,) = named(spans, "invoke_agent")
    assert agent.attributes["nbagent.turn"] == 2
    assert [turns[link.context.span_id] for link in agent.links] == [1]


def test_a_replayed_request_links_to_the_turn_that_recorded_it(
    spans: InMemorySpanExporter,
) -> None:
    """It linked to the recording chat's last traced turn, whatever turn recorded it."""
    live = Chat(
        provider=ScriptedProvider([reply("Rome: 21 C"), reply("Oslo: 3 C"), reply("Lima")]),
        display=False,
        replay="auto",
    )
    for city in ("Rome", "Oslo", "Lima"):
        live.ask(f"Weather in {city}?")
    turns = _turn_spans(spans, live.id)
    spans.clear()
    rerun = Chat(provider=ScriptedProvider([]), display=False, replay="only")
    rerun.ask("Weather in Rome?")
    (request,) = named(spans, "chat ")
    assert request.attributes["nbagent.replay.step"] == 1
    assert [turns[link.context.span_id] for link in request.links] == [1]


# ------------------------------------------------------------------ what ran
def test_arguments_edited_to_nothing_show_what_ran(content_spans: InMemorySpanExporter) -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def wipe(scope: str = "cache") -> str:
        """Wipe.

        Args:
            scope: What to wipe.
        """
        ran.append(scope)
        return f"wiped {scope}"

    chat = Chat(
        provider=ScriptedProvider([call_tools(("wipe", {"scope": "EVERYTHING"})), reply("ok")]),
        display=False,
    ).with_tools(wipe)
    chat.ask("go")
    chat.approve(chat.pending_approvals[0], arguments={})
    chat.complete()
    assert ran == ["cache"]
    (call,) = named(content_spans, "execute_tool wipe")
    assert call.attributes["gen_ai.tool.call.arguments"] == "{}"


# ------------------------------------------------------------------ the conventions
class City(BaseModel):
    name: str


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return "sunny"


@tool
def broken(city: str) -> str:
    """Fails.

    Args:
        city: The city.
    """
    raise KeyError(f"no weather for {city}")


def test_a_requests_span_has_the_conventions_attributes(
    content_spans: InMemorySpanExporter,
) -> None:
    """``gen_ai.output.type`` for a structured answer, ``server.address`` / ``server.port``,
    reasoning tokens as ``gen_ai.usage.reasoning.output_tokens``, the temperature set,
    a tool call part's arguments an object (they were a JSON string inside the JSON)."""
    with FakeLLMServer() as server:
        server.script(
            [
                Turn(text='{"name": "Rome"}', usage={"reasoning_tokens": 3}),
                Turn(tool_calls=[FakeToolCall("lookup", {"city": "Oslo"})]),
                Turn(text="sunny"),
            ]
        )
        provider = OpenAIProvider(
            "gpt-4o",
            base_url=server.openai_base_url,
            api_key="sk-test-0123456789abcdef",
            compatible=False,
            max_retries=0,
            extra_body={"temperature": 0.2, "max_completion_tokens": 300},
        )
        chat = Chat(provider=provider, display=False).with_tools(lookup)
        try:
            chat.ask("Tell me about Rome", output=City)
            chat.ask("weather in Oslo")
        finally:
            provider.close()
        port = int(server.openai_base_url.split(":")[2].split("/")[0])
    structured, asked, answered = sorted(
        named(content_spans, "chat "), key=lambda s: s.attributes["nbagent.step"]
    )
    assert structured.attributes["gen_ai.output.type"] == "json"
    assert "gen_ai.output.type" not in asked.attributes  # a text answer: none asked for
    for s in (structured, asked, answered):
        a = s.attributes
        assert a["server.address"] == "127.0.0.1" and a["server.port"] == port
        assert a["gen_ai.request.temperature"] == 0.2
        assert a["gen_ai.request.max_tokens"] == 300
        assert a["gen_ai.provider.name"] == "openai"
    assert structured.attributes["gen_ai.usage.reasoning.output_tokens"] == 3
    assert not any("nbagent.usage.reasoning" in k for k in structured.attributes)
    messages = json.loads(answered.attributes["gen_ai.input.messages"])
    (part,) = [p for m in messages for p in m["parts"] if p["type"] == "tool_call"]
    assert part["arguments"] == {"city": "Oslo"}


class _Route:
    """An httpx transport sending a known provider's URL to the fake server (the real SDK,
    a real server): what a chat talking to that provider sends, answered locally."""

    def __init__(self, to: str, prefix: str):
        import httpx

        self._inner = httpx.HTTPTransport()
        self._to = httpx.URL(to)
        self._prefix = prefix

    def handle_request(self, request: Any) -> Any:
        path = request.url.path.replace(self._prefix, self._to.path, 1)
        request.url = request.url.copy_with(
            scheme=self._to.scheme, host=self._to.host, port=self._to.port, path=path
        )
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://api.groq.com/openai/v1", "groq"),
        ("https://api.deepseek.com/v1", "deepseek"),
        ("https://api.x.ai/v1", "x_ai"),
        ("https://contoso.openai.azure.com/openai/v1", "azure.ai.openai"),
        ("https://example.internal:8443/v1", "openai-compatible"),
    ],
)
def test_an_openai_compatible_endpoint_the_conventions_know_is_named_so(
    url: str, name: str, spans: InMemorySpanExporter
) -> None:
    import httpx

    prefix = url.split("://", 1)[1].split("/", 1)[1]
    with FakeLLMServer() as server:
        server.script([Turn(text="hi")])
        client = httpx.Client(transport=_Route(server.openai_base_url, "/" + prefix))  # type: ignore[arg-type]
        provider = OpenAIProvider(
            "some-model",
            base_url=url,
            api_key="sk-test-0123456789abcdef",
            compatible=True,
            max_retries=0,
            http_client=client,
        )
        try:
            Chat(provider=provider, display=False).ask("hello")
        finally:
            provider.close()
            client.close()
    (request,) = named(spans, "chat ")
    (turn,) = named(spans, "invoke_agent")
    host = url.split("://", 1)[1].split("/", 1)[0]
    assert request.attributes["gen_ai.provider.name"] == name
    assert turn.attributes["gen_ai.provider.name"] == name
    assert request.attributes["server.address"] == host.split(":")[0]
    assert request.attributes["server.port"] == (8443 if ":" in host else 443)


def test_an_anthropic_requests_token_limit_is_on_its_span(spans: InMemorySpanExporter) -> None:
    with FakeLLMServer() as server:
        server.script([Turn(text="hi")])
        provider = AnthropicProvider(
            "claude-sonnet-4-5",
            base_url=server.anthropic_base_url,
            api_key="sk-ant-test-0123456789",
            max_retries=0,
            max_tokens=777,
        )
        try:
            Chat(provider=provider, display=False).ask("hello")
        finally:
            provider.close()
    (request,) = named(spans, "chat ")
    assert request.attributes["gen_ai.request.max_tokens"] == 777
    assert request.attributes["gen_ai.provider.name"] == "anthropic"
    assert "gen_ai.request.temperature" not in request.attributes  # not set: not said


def test_a_failed_calls_span_has_no_result_and_an_ok_ones_has(
    content_spans: InMemorySpanExporter,
) -> None:
    """The conventions: ``gen_ai.tool.call.result`` is the result of a successful run; a
    failed call's error text is its error status (with content)."""
    chat = Chat(
        provider=ScriptedProvider(
            [call_tools(("lookup", {"city": "Oslo"}), ("broken", {"city": "Rome"})), reply("ok")]
        ),
        display=False,
    ).with_tools(lookup, broken)
    chat.ask("go")
    (ok,) = named(content_spans, "execute_tool lookup")
    (failed,) = named(content_spans, "execute_tool broken")
    assert ok.attributes["gen_ai.tool.call.result"] == "sunny"
    assert "gen_ai.tool.call.result" not in failed.attributes
    assert "no weather for Rome" in (failed.status.description or "")
    assert failed.attributes["error.type"] == "error"


def test_an_mcp_tools_is_error_answer_is_a_tool_error(spans: InMemorySpanExporter) -> None:
    """The MCP conventions: a ``CallToolResult`` with ``isError`` is ``error.type``
    ``tool_error`` (the real notes server, a note that does not exist)."""
    notes = MCPServer.stdio(sys.executable, [NOTES], prefix="notes")
    chat = Chat(
        provider=ScriptedProvider(
            [call_tools(("notes_read_note", {"title": "missing"})), reply("no such note")]
        ),
        display=False,
    ).with_tools(notes)
    try:
        chat.ask("read my missing note")
    finally:
        chat.close()
        notes.close()
    (call,) = named(spans, "execute_tool notes_read_note")
    assert call.attributes["nbagent.call.status"] == "error"
    assert call.attributes["mcp.method.name"] == "tools/call"
    assert call.attributes["error.type"] == "tool_error"
    assert call.status.status_code.name == "ERROR"
