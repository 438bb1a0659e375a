"""The strict fake server refuses the tool definitions the real APIs refuse, in their shapes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from nbagent.testing import FakeLLMServer

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(["ok"], cycle=True) as fake:
        yield fake


def _post(server: FakeLLMServer, api: str, tools: list[Any]) -> httpx2.Response:
    if api == "chat":
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools}
        return httpx2.post(server.openai_base_url + "/chat/completions", content=json.dumps(body))
    if api == "responses":
        body = {"model": "m", "input": "hi", "tools": tools}
        return httpx2.post(server.openai_base_url + "/responses", content=json.dumps(body))
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": tools,
    }
    return httpx2.post(
        server.anthropic_base_url + "/v1/messages",
        content=json.dumps(body),
        headers={"anthropic-version": "2023-06-01"},
    )


def _chat(name: str, parameters: Any = SCHEMA) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def _responses(name: str, parameters: Any = SCHEMA) -> dict[str, Any]:
    return {"type": "function", "name": name, "parameters": parameters}


def _anthropic(name: str, schema: Any = SCHEMA) -> dict[str, Any]:
    return {"name": name, "description": "d", "input_schema": schema}


OPENAI_CASES = {
    "newline": ("lookup\n", SCHEMA, "string does not match pattern", "invalid_value", "name"),
    "dot": ("a.b", SCHEMA, "string does not match pattern", "invalid_value", "name"),
    "long": ("a" * 65, SCHEMA, "string too long", "string_above_max_length", "name"),
    "not object": ("f", {"type": "string"}, "schema must be a JSON Schema of 'type: \"object\"'",
                   "invalid_function_parameters", "parameters"),
}  # fmt: skip


@pytest.mark.parametrize("case", OPENAI_CASES)
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_openai_refuses_bad_function_tools(server: FakeLLMServer, api: str, case: str) -> None:
    name, params, message, code, field = OPENAI_CASES[case]
    make = _chat if api == "chat" else _responses
    reply = _post(server, api, [make("ok_tool"), make(name, params)])
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert message in error["message"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == code
    where = "tools[1].function" if api == "chat" else "tools[1]"
    assert error["param"] == f"{where}.{field}"


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_openai_takes_good_function_tools(server: FakeLLMServer, api: str) -> None:
    make = _chat if api == "chat" else _responses
    bare = {"name": "no_params"}  # parameters may be left out
    tools = [make("a" * 64), make("get-weather_2")]
    tools.append(
        {"type": "function", "function": bare} if api == "chat" else {"type": "function", **bare}
    )
    assert _post(server, api, tools).status_code == 200


ANTHROPIC_CASES = {
    "newline": ([_anthropic("lookup\n")], "tools.0.custom.name: String should match pattern"),
    "long": ([_anthropic("a" * 129)], "tools.0.custom.name: String should have at most 128"),
    "not object": ([_anthropic("f", {"type": "string"})],
                   "tools.0.custom.input_schema.type: Input should be 'object'"),
    "no schema": ([{"name": "f"}], "tools.0.custom.input_schema: Field required"),
    "unicode key": ([_anthropic("f", {"type": "object", "properties": {"größe": {}}})],
                    "tools.0.custom.input_schema.properties: Property keys should match pattern "
                    "'^[a-zA-Z0-9_.-]{1,64}$'"),
    "odata key": ([_anthropic("f", {"type": "object", "properties": {"$top": {}}})],
                  "Property keys should match pattern"),
    "long key": ([_anthropic("f", {"type": "object", "properties": {"k" * 65: {}}})],
                 "Property keys should match pattern"),
    "duplicate": ([_anthropic("f"), _anthropic("f")], "tools: Tool names must be unique."),
}  # fmt: skip


@pytest.mark.parametrize("case", ANTHROPIC_CASES)
def test_anthropic_refuses_bad_tools(server: FakeLLMServer, case: str) -> None:
    tools, message = ANTHROPIC_CASES[case]
    reply = _post(server, "anthropic", tools)
    assert reply.status_code == 400
    body = reply.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert message in body["error"]["message"]


def test_anthropic_takes_good_tools(server: FakeLLMServer) -> None:
    keys = {"type": "object", "properties": {"a.b": {}, "top-n": {}, "k" * 64: {}}}
    tools = [_anthropic("a" * 128), _anthropic("x", keys), _anthropic("filter_id-x_1")]
    assert _post(server, "anthropic", tools).status_code == 200


def test_a_lenient_server_lets_bad_tools_through() -> None:
    with FakeLLMServer(["ok"], strict=False) as fake:
        assert _post(fake, "anthropic", [_anthropic("f"), _anthropic("f")]).status_code == 200
