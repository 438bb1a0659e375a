"""Ragrails' "Tool Calling" guide runs on nbagent as written.

The guide's Python block is kept below verbatim (only its import line names
nbagent) and executed against every provider nbagent ships: OpenAI Chat
Completions, OpenAI Responses, Anthropic and an OpenAI-compatible server (the
official SDKs against the strict loopback ``FakeLLMServer``), the offline demo
model and ``ScriptedProvider``. Then the guide's loop pattern ("call again
until ``response.tool_calls`` is empty"), its types table, its tool schema
shape, the async twin, and what a provider that cannot call tools does.

Nothing here reads the guide from disk: the code lives in this file.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testing"))
from test_fake_server import validate_payload

import nbagent
from nbagent import (
    AssistantToolCallMessage,
    ChatMessage,
    DemoProvider,
    LLMToolResponse,
    ModelNotSupportedError,
    ModelRequest,
    Provider,
    StreamDelta,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
)
from nbagent.providers import AnthropicProvider, OpenAIProvider, lookup_model
from nbagent.testing import FakeLLMServer, FakeToolCall, ScriptedProvider, Turn, call_tools, reply

KEY = "sk-test-SECRET-ragrails-0123456789"

# The guide's "Core API" block, verbatim but for its first line (the guide imports
# from ragrails.models.llm). `llm` and `run_my_tool` come from the test.
SEED_BLOCK = """\
from nbagent import ChatMessage, AssistantToolCallMessage, ToolResultMessage

messages = [ChatMessage(role="user", content="What is the weather in Lagos?")]

response = llm.complete_with_tools(
    messages=messages,
    system="You are a helpful assistant.",
    tools=[
        {
            "name": "get_weather",
            "description": "Get current weather for a city.",
            "input_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        }
    ],
)

if response.tool_calls:
    messages.append(AssistantToolCallMessage(content=response.text, tool_calls=response.tool_calls))
    for call in response.tool_calls:
        tool_output = run_my_tool(call.name, call.arguments)
        messages.append(ToolResultMessage(tool_call_id=call.id, content=tool_output))
else:
    print(response.text)
"""

# The guide's "Tool schema shape" block (JSON).
SEED_SCHEMA_JSON = """\
{
  "name": "get_weather",
  "description": "Get current weather for a city.",
  "input_schema": {
    "type": "object",
    "properties": {
      "city": {"type": "string"}
    },
    "required": ["city"],
    "additionalProperties": false
  }
}
"""
SEED_TOOL: dict[str, Any] = json.loads(SEED_SCHEMA_JSON)
SYSTEM = "You are a helpful assistant."

SDK_KINDS = ("openai-chat", "openai-responses", "anthropic", "openai-compatible")
ALL_KINDS = (*SDK_KINDS, "demo", "scripted")
WIRE = {"openai-responses": "responses", "anthropic": "anthropic"}


def validate(api: str, kind: str, payload: dict[str, Any]) -> None:
    """Every payload the fake sends is checked against the SDK's own types."""
    if kind != "error":
        validate_payload(api, kind, payload)


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(validator=validate) as fake:  # strict by default
        yield fake
    assert not fake.errors, fake.errors


def sdk_provider(kind: str, server: FakeLLMServer, **kwargs: Any) -> Any:
    kwargs.setdefault("max_retries", 0)
    if kind == "anthropic":
        return AnthropicProvider(
            kwargs.pop("model", "claude-sonnet-4-5"),
            base_url=server.anthropic_base_url,
            api_key=KEY,
            **kwargs,
        )
    if kind == "openai-compatible":
        return OpenAIProvider(
            kwargs.pop("model", "llama3.1"), base_url=server.openai_base_url, **kwargs
        )
    return OpenAIProvider(
        kwargs.pop("model", "gpt-4.1-mini"),
        api="responses" if kind == "openai-responses" else "chat",
        base_url=server.openai_base_url,
        api_key=KEY,
        compatible=False,
        **kwargs,
    )


@dataclasses.dataclass
class Model:
    """One provider under test, scripted with the same conversation whatever it is.

    ``turns`` are what the model says, in order: a text, or a list of
    ``(tool, arguments)`` calls. SDK providers get them from the fake server;
    ``ScriptedProvider`` from its script; the demo model decides by itself
    (``script`` is then a no-op and the tests check what it chose).
    """

    kind: str
    llm: Any
    server: FakeLLMServer | None = None

    def script(self, *turns: str | list[tuple[str, dict[str, Any]]]) -> None:
        if self.kind == "demo":
            return
        if self.kind == "scripted":
            self.llm.add(*(reply(t) if isinstance(t, str) else call_tools(*t) for t in turns))
            return
        assert self.server is not None
        self.server.script(
            [
                Turn(text=t)
                if isinstance(t, str)
                else Turn(
                    tool_calls=[FakeToolCall(n, a) for n, a in t],
                    repeat_ids_in_stream=self.kind == "openai-compatible",
                )
                for t in turns
            ]
        )

    @property
    def wire_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.server.requests] if self.server else []

    def wire_tools(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The tools of one request, back in the guide's neutral shape."""
        out = []
        for t in body.get("tools", []):
            if self.kind == "anthropic":
                out.append(t)
            elif self.kind == "openai-responses":
                out.append(
                    {
                        "name": t["name"],
                        "description": t["description"],
                        "input_schema": t["parameters"],
                    }
                )
            else:
                f = t["function"]
                out.append(
                    {
                        "name": f["name"],
                        "description": f["description"],
                        "input_schema": f["parameters"],
                    }
                )
        return out

    def wire_results(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        """``(call id, content)`` of every tool result one request sent, in order."""
        if self.kind == "anthropic":
            return [
                (
                    b["tool_use_id"],
                    b["content"] if isinstance(b["content"], str) else b["content"][0]["text"],
                )
                for m in body["messages"]
                if isinstance(m["content"], list)
                for b in m["content"]
                if b.get("type") == "tool_result"
            ]
        if self.kind == "openai-responses":
            return [
                (i["call_id"], i["output"])
                for i in body["input"]
                if i.get("type") == "function_call_output"
            ]
        return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]


@pytest.fixture(params=ALL_KINDS)
def model(request: pytest.FixtureRequest, server: FakeLLMServer) -> Iterator[Model]:
    kind = request.param
    if kind == "demo":
        yield Model(kind, DemoProvider())
    elif kind == "scripted":
        yield Model(kind, ScriptedProvider())
    else:
        llm = sdk_provider(kind, server)
        try:
            yield Model(kind, llm, server)
        finally:
            llm.close()


def run_seed_block(llm: Any, run_my_tool: Callable[[str, Any], Any]) -> dict[str, Any]:
    """Execute the guide's block with ``llm`` and ``run_my_tool``; return its namespace."""
    printed: list[str] = []
    namespace: dict[str, Any] = {
        "llm": llm,
        "run_my_tool": run_my_tool,
        "print": lambda *args: printed.append(" ".join(map(str, args))),
    }
    exec(compile(SEED_BLOCK, "ragrails-tool-calling.md", "exec"), namespace)
    namespace["printed"] = printed
    return namespace


class Weather:
    """The test's ``run_my_tool``: records every call it gets."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def __call__(self, name: str, arguments: Any) -> str:
        self.calls.append((name, arguments))
        assert name == "get_weather", name
        return json.dumps({"city": arguments["city"], "temp_c": 31})


# ---------------------------------------------------------------- the Core API block


def test_core_api_block_runs_unchanged_and_appends_the_round(model: Model) -> None:
    """The block asks, gets a call with parsed arguments, runs it through the app's own
    function, and appends one AssistantToolCallMessage and one ToolResultMessage."""
    model.script([("get_weather", {"city": "Lagos"})])
    run_my_tool = Weather()
    ns = run_seed_block(model.llm, run_my_tool)
    response = ns["response"]

    assert isinstance(response, LLMToolResponse)
    assert [c.name for c in response.tool_calls] == ["get_weather"]
    assert run_my_tool.calls == [("get_weather", {"city": "Lagos"})]  # parsed JSON: a dict
    assert ns["printed"] == []
    call = response.tool_calls[0]
    assert ns["messages"] == [
        ChatMessage(role="user", content="What is the weather in Lagos?"),
        AssistantToolCallMessage(content=response.text, tool_calls=(call,)),
        ToolResultMessage(tool_call_id=call.id, content='{"city": "Lagos", "temp_c": 31}'),
    ]
    assert response.provider == model.llm.name and response.model
    assert response.input_tokens > 0 and response.output_tokens > 0

    if model.server is not None:  # what the API received: the system text and the tool
        (body,) = model.wire_requests
        assert model.wire_tools(body) == [SEED_TOOL]
        sent_system = (
            body["system"]
            if model.kind == "anthropic"
            else body.get("instructions")
            if model.kind == "openai-responses"
            else body["messages"][0]["content"]
        )
        assert sent_system == SYSTEM
    if model.kind == "scripted":
        (sent,) = model.llm.requests
        assert sent.system == SYSTEM and sent.tools == (ToolSpec(**SEED_TOOL),)


@pytest.mark.parametrize("model", [k for k in ALL_KINDS if k != "demo"], indirect=True)
def test_core_api_block_prints_a_text_answer(model: Model) -> None:
    """When the model answers without calling a tool, the block's ``else`` prints the text
    (not for the demo model, which calls the tool matching the request)."""
    model.script("Lagos is sunny, 31°C.")
    run_my_tool = Weather()
    ns = run_seed_block(model.llm, run_my_tool)
    assert ns["printed"] == ["Lagos is sunny, 31°C."]
    assert run_my_tool.calls == []
    assert len(ns["messages"]) == 1


# ---------------------------------------------------------------- the loop pattern


def own_loop(
    llm: Any, run_my_tool: Callable[[str, Any], Any], limit: int = 8
) -> tuple[str, list[Any]]:
    """The guide's "Loop pattern", in its own spelling: call again until no tool calls."""
    messages: list[Any] = [ChatMessage(role="user", content="Weather in Lagos and in Accra?")]
    for _ in range(limit):
        response = llm.complete_with_tools(messages=messages, system=SYSTEM, tools=[SEED_TOOL])
        if not response.tool_calls:
            return response.text, messages
        messages.append(
            AssistantToolCallMessage(content=response.text, tool_calls=response.tool_calls)
        )
        for call in response.tool_calls:
            messages.append(
                ToolResultMessage(
                    tool_call_id=call.id, content=run_my_tool(call.name, call.arguments)
                )
            )
    raise AssertionError(f"no final text after {limit} requests")


def test_the_loop_pattern_reaches_a_final_text(model: Model) -> None:
    """Two rounds (one call, then two parallel calls), then a final text; every result goes
    back linked to its call, in call order, and the strict server accepts each transcript."""
    model.script(
        [("get_weather", {"city": "Lagos"})],
        [("get_weather", {"city": "Accra"}), ("get_weather", {"city": "Abuja"})],
        "Lagos 31°C, Accra 31°C, Abuja 31°C.",
    )
    run_my_tool = Weather()
    text, messages = own_loop(model.llm, run_my_tool)

    asked = [c for m in messages if isinstance(m, AssistantToolCallMessage) for c in m.tool_calls]
    answered = [m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)]
    assert answered == [c.id for c in asked] and len(set(answered)) == len(answered)
    assert [args for _, args in run_my_tool.calls] == [c.arguments for c in asked]
    if model.kind == "demo":
        assert "Lagos" in text and run_my_tool.calls  # it decided by itself, then answered
        return
    assert text == "Lagos 31°C, Accra 31°C, Abuja 31°C."
    assert [args["city"] for _, args in run_my_tool.calls] == ["Lagos", "Accra", "Abuja"]
    if model.server is not None:
        bodies = model.wire_requests
        assert len(bodies) == 3
        assert [cid for cid, _ in model.wire_results(bodies[-1])] == answered
        assert [json.loads(c)["city"] for _, c in model.wire_results(bodies[-1])] == [
            "Lagos",
            "Accra",
            "Abuja",
        ]


def test_the_async_twin_runs_the_same_loop(model: Model) -> None:
    model.script([("get_weather", {"city": "Lagos"})], "Lagos is sunny.")
    run_my_tool = Weather()

    async def loop() -> str:
        messages: list[Any] = [ChatMessage(role="user", content="What is the weather in Lagos?")]
        while True:
            response = await model.llm.complete_with_tools_async(
                messages=messages, system=SYSTEM, tools=[SEED_TOOL]
            )
            if not response.tool_calls:
                return str(response.text)
            messages.append(
                AssistantToolCallMessage(content=response.text, tool_calls=response.tool_calls)
            )
            for call in response.tool_calls:
                output = run_my_tool(call.name, call.arguments)
                messages.append(ToolResultMessage(tool_call_id=call.id, content=output))

    text = asyncio.run(loop())
    assert run_my_tool.calls == [("get_weather", {"city": "Lagos"})]
    assert text == "Lagos is sunny." or model.kind == "demo"


@pytest.mark.parametrize("kind", ["openai-responses", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_thinking_models_reasoning_goes_back_with_its_calls(
    kind: str, stream: bool, server: FakeLLMServer
) -> None:
    """The guide's AssistantToolCallMessage has no place for the reasoning a thinking model
    gave before its calls, yet Anthropic (thinking first in the turn a tool_result answers)
    and stateless Responses (the reasoning item before its function_call) refuse a request
    without it. The calls carry it back: the guide's loop runs unchanged."""
    server.script(
        [
            Turn(
                tool_calls=[FakeToolCall("get_weather", {"city": "Lagos"})],
                reasoning="Use the tool.",
            ),
            Turn(text="31°C in Lagos.", reasoning="Answer now."),
        ]
    )
    model = "o4-mini" if kind == "openai-responses" else "claude-sonnet-4-5"
    with sdk_provider(kind, server, model=model) as llm:
        messages: list[Any] = [ChatMessage(role="user", content="Weather in Lagos?")]
        while True:
            response = llm.complete_with_tools(
                messages=messages, tools=[SEED_TOOL], reasoning="low", stream=stream
            )
            if not response.tool_calls:
                break
            messages.append(
                AssistantToolCallMessage(content=response.text, tool_calls=response.tool_calls)
            )
            for call in response.tool_calls:
                messages.append(ToolResultMessage(tool_call_id=call.id, content="31°C"))
    assert response.text == "31°C in Lagos."
    assert messages[1].items == ()  # the user's own message is not changed
    sent = server.requests[1].body
    wire = sent["input"] if kind == "openai-responses" else sent["messages"][1]["content"]
    kinds = [i.get("type") for i in wire]
    first = "reasoning" if kind == "openai-responses" else "thinking"
    call_type = "function_call" if kind == "openai-responses" else "tool_use"
    assert first in kinds and kinds.index(first) < kinds.index(call_type)


# ---------------------------------------------------------------- types and schema shape


def test_the_provider_neutral_types_have_the_guides_fields() -> None:
    """The guide's types table: each type has (at least) the fields it lists, by keyword."""
    table = {
        ChatMessage: ("role", "content"),
        ToolCall: ("id", "name", "arguments"),
        AssistantToolCallMessage: ("tool_calls", "content"),
        ToolResultMessage: ("tool_call_id", "content"),
        LLMToolResponse: (
            "text",
            "tool_calls",
            "input_tokens",
            "output_tokens",
            "model",
            "provider",
        ),
    }
    for cls, names in table.items():
        fields = {f.name for f in dataclasses.fields(cls)}
        assert set(names) <= fields, (cls.__name__, set(names) - fields)
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Lagos"})
    response = LLMToolResponse(
        text="", tool_calls=(call,), input_tokens=3, output_tokens=4, model="m", provider="p"
    )
    assert AssistantToolCallMessage(tool_calls=response.tool_calls, content=None).tool_calls == (
        call,
    )
    assert ToolResultMessage(tool_call_id=call.id, content="31").tool_call_id == "call_1"
    for name in (
        "ChatMessage",
        "ToolCall",
        "AssistantToolCallMessage",
        "ToolResultMessage",
        "LLMToolResponse",
    ):
        assert name in nbagent.__all__


@pytest.mark.parametrize("kind", SDK_KINDS)
def test_arguments_are_parsed_json(kind: str, server: FakeLLMServer) -> None:
    """Nested arguments arrive as Python values, whatever the wire sent (a string or an object)."""
    args = {"city": "Lagos", "days": 3, "units": {"temp": "c"}, "hours": [6, 12], "ok": True}
    server.script([Turn(tool_calls=[FakeToolCall("get_weather", args)])])
    with sdk_provider(kind, server) as llm:
        response = llm.complete_with_tools(
            messages=[ChatMessage(role="user", content="Lagos?")], tools=[SEED_TOOL]
        )
    assert response.tool_calls[0].arguments == args


@pytest.mark.parametrize("kind", SDK_KINDS)
@pytest.mark.parametrize("stream", [False, True])
def test_the_seed_schema_goes_on_each_wire_in_its_native_shape(
    kind: str, stream: bool, server: FakeLLMServer
) -> None:
    """Each adapter converts the neutral definition to its API's own wire format, and the
    further ModelRequest fields pass as keywords (choice, calls, stream, max_tokens)."""
    server.script([Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Lagos"})])])
    deltas: list[StreamDelta] = []
    with sdk_provider(kind, server) as llm:
        response = llm.complete_with_tools(
            messages=[ChatMessage(role="user", content="Lagos?")],
            system=SYSTEM,
            tools=[SEED_TOOL],
            tool_choice="get_weather",
            calls="one",
            stream=stream,
            on_delta=deltas.append,
            max_tokens=300,
        )
    assert response.tool_calls[0].arguments == {"city": "Lagos"}
    body = server.last_request.body
    (tool,) = body["tools"]
    if kind == "anthropic":
        assert tool == SEED_TOOL
        assert body["tool_choice"] == {
            "type": "tool",
            "name": "get_weather",
            "disable_parallel_tool_use": True,
        }
        assert body["max_tokens"] == 300
    elif kind == "openai-responses":
        assert tool["type"] == "function" and tool["name"] == "get_weather"
        assert tool["parameters"] == SEED_TOOL["input_schema"]
        assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
        assert body["parallel_tool_calls"] is False and body["max_output_tokens"] == 300
    else:
        assert tool["type"] == "function"
        assert tool["function"]["name"] == "get_weather"
        assert tool["function"]["parameters"] == SEED_TOOL["input_schema"]
        assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
        assert body["parallel_tool_calls"] is False
    assert bool(body.get("stream")) is stream
    assert bool(deltas) is stream


# ---------------------------------------------------------------- what it accepts


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_bad_input_is_a_clear_type_error_before_any_request(
    kind: str, server: FakeLLMServer
) -> None:
    llm = (
        DemoProvider()
        if kind == "demo"
        else ScriptedProvider()
        if kind == "scripted"
        else sdk_provider(kind, server)
    )
    user = [ChatMessage(role="user", content="Lagos?")]
    cases: list[tuple[dict[str, Any], str]] = [
        ({"tools": [{"description": "no name", "input_schema": {}}]}, "needs 'name'"),
        ({"tools": ["get_weather"]}, "needs 'name'"),
        ({"tools": SEED_TOOL}, "tools must be a list"),
        (
            {"messages": [{"role": "user", "content": "hi"}]},
            r"messages\[0\] is a dict.*ChatMessage\(role=",
        ),
        ({"messages": [*user, "and Accra?"]}, r"messages\[1\] is a str"),
        ({"messages": "Lagos?"}, "messages must be a list"),
        (
            {
                "messages": [
                    *user,
                    AssistantToolCallMessage(content=None, tool_calls=({"id": "x"},)),
                ]
            },  # type: ignore[arg-type]
            r"messages\[1\]: AssistantToolCallMessage.tool_calls holds ToolCall",
        ),
        ({"temperature": 0}, "unknown option temperature"),
        ({"calls": 2}, "calls must be 'one'"),
        ({"tool_choice": SEED_TOOL}, "tool_choice must be"),
    ]
    for kwargs, match in cases:
        kwargs = {"messages": user, "tools": [SEED_TOOL], **kwargs}
        with pytest.raises(TypeError, match=match):
            llm.complete_with_tools(**kwargs)
        with pytest.raises(TypeError, match=match):
            asyncio.run(llm.complete_with_tools_async(**kwargs))
    assert server.requests == []
    if kind == "scripted":
        assert len(llm.requests) == 0
    if hasattr(llm, "close"):
        llm.close()


def test_tool_results_and_tool_calls_in_other_shapes_are_accepted() -> None:
    """A dict returned by ``run_my_tool`` goes as compact JSON; a list of calls, a ToolSpec
    and an nbagent tool are accepted too."""
    llm = ScriptedProvider([reply("ok")])

    @nbagent.tool
    def get_time(city: str) -> str:
        """Get the time in a city."""
        return "noon"

    call = ToolCall("call_1", "get_weather", {"city": "Lagos"})
    llm.complete_with_tools(
        messages=[
            ChatMessage(role="user", content="Lagos?"),
            AssistantToolCallMessage(content="", tool_calls=[call]),  # type: ignore[arg-type]
            ToolResultMessage(tool_call_id=call.id, content={"temp_c": 31, "sky": "clear"}),  # type: ignore[arg-type]
        ],
        tools=[ToolSpec(**SEED_TOOL), get_time],
    )
    (sent,) = llm.requests
    assert sent.messages[1].tool_calls == (call,)
    assert sent.messages[2].content == '{"temp_c":31,"sky":"clear"}'
    assert [t.name for t in sent.tools] == ["get_weather", "get_time"]
    llm.add(reply("ok"))
    llm.complete_with_tools(messages=[ChatMessage("user", "hi")], tools=[SEED_TOOL], calls=1)
    assert llm.requests[1].calls == "one"  # as with_tool_options(calls=1)
    assert sent.tools[1].input_schema["required"] == ["city"]


@settings(max_examples=60, deadline=None)
@given(
    args=st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=10),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=5), inner, max_size=3)
            ),
            max_leaves=8,
        ),
        max_size=4,
    )
)
def test_a_responses_tool_calls_go_back_unchanged(args: dict[str, Any]) -> None:
    """Property: the ToolCall values of any response are accepted back in an
    AssistantToolCallMessage unchanged (same objects, same arguments)."""
    call = ToolCall("call_1", "get_weather", args)
    llm = ScriptedProvider([call_tools(call), reply("done")])
    first = llm.complete_with_tools(messages=[ChatMessage("user", "go")], tools=[SEED_TOOL])
    messages = [
        ChatMessage("user", "go"),
        AssistantToolCallMessage(content=first.text, tool_calls=first.tool_calls),
        ToolResultMessage(tool_call_id=first.tool_calls[0].id, content="ok"),
    ]
    llm.complete_with_tools(messages=messages, tools=[SEED_TOOL])
    sent = llm.requests[1].messages
    assert sent[1] is messages[1]
    assert sent[1].tool_calls[0] is first.tool_calls[0]
    assert sent[1].tool_calls[0].arguments == args


# ---------------------------------------------------------------- providers that cannot call tools


@pytest.mark.parametrize("model_name", ["o1-mini", "chatgpt-4o-latest"])
def test_a_model_that_cannot_call_tools_raises_not_implemented(
    model_name: str, server: FakeLLMServer
) -> None:
    """The guide: a provider without tool calling raises NotImplementedError. nbagent raises
    ModelNotSupportedError (a NotImplementedError too) for a model known not to call tools,
    before anything is sent; the same provider still answers without tools."""
    info = lookup_model(model_name)  # the guide's "check supports_tools before selecting"
    assert info is not None and info.supports_tools is False
    with sdk_provider("openai-chat", server, model=model_name) as llm:
        with pytest.raises(NotImplementedError, match="does not support tools") as info:
            llm.complete_with_tools(messages=[ChatMessage("user", "Lagos?")], tools=[SEED_TOOL])
        assert isinstance(info.value, ModelNotSupportedError)
        with pytest.raises(ModelNotSupportedError):
            asyncio.run(
                llm.complete_with_tools_async(
                    messages=[ChatMessage("user", "Lagos?")], tools=[SEED_TOOL]
                )
            )
        assert server.requests == []
        server.script(["fine without tools"])
        assert (
            llm.complete_with_tools(messages=[ChatMessage("user", "hi")]).text
            == "fine without tools"
        )


def test_gemini_is_a_clear_error_naming_the_way_to_reach_it() -> None:
    with pytest.raises(ValueError, match=r"no Gemini adapter.*OpenAI-compatible"):
        nbagent.Chat(model="gemini-2.5-flash")
    with pytest.raises(ValueError, match="no Gemini adapter"):
        nbagent.Chat(provider="gemini")


# ---------------------------------------------------------------- third-party providers


class OnlyComplete:
    """A provider of someone else's: ``complete`` and its twin, nothing more."""

    name = "mine"
    model = "mine-1"

    def complete(self, request: ModelRequest) -> LLMToolResponse:
        return LLMToolResponse(
            text=f"{len(request.messages)} messages", provider="mine", model="mine-1"
        )

    async def complete_async(self, request: ModelRequest) -> LLMToolResponse:
        return self.complete(request)


def test_a_provider_with_only_complete_is_still_a_provider_and_the_mixin_adds_the_call() -> None:
    """``complete_with_tools`` is not part of the Provider protocol: a provider implementing
    ``complete`` alone still passes ``isinstance`` and drives a chat; inheriting the mixin
    gives it Ragrails' call."""
    plain = OnlyComplete()
    assert isinstance(plain, Provider)
    assert nbagent.Chat(provider=plain).ask("hi").content == "1 messages"
    assert not hasattr(plain, "complete_with_tools")
    from nbagent.providers import CompleteWithToolsMixin

    class WithMixin(CompleteWithToolsMixin, OnlyComplete):
        pass

    mine = WithMixin()
    response = mine.complete_with_tools(messages=[ChatMessage("user", "hi")], tools=[SEED_TOOL])
    assert response.text == "1 messages"
    assert (
        asyncio.run(mine.complete_with_tools_async(messages=[ChatMessage("user", "hi")])).provider
        == "mine"
    )
