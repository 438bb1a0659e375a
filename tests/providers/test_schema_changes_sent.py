"""A tool schema changed in place between requests goes out as it now is.

The adapters keep the tool list's wire JSON and reused it while each schema was the same
*object*: a Tool class whose ``parameters`` gained an ``enum`` value (a table was created)
was validated against the new schema but the model was still sent the old one. The cache
now compares each schema with a copy taken when it built the wire form (still reused,
unrebuilt, while nothing changed). Through the real SDK clients
against the loopback fake server.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from _provider_harness import KINDS, make_provider

from nbagent import Chat, ChatMessage, Tool, ToolSpec
from nbagent.testing import FakeLLMServer, Turn

HI = [ChatMessage("user", "hi")]


def _schemas(body: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for t in body["tools"]:
        fn = t.get("function", t)
        out[fn["name"]] = fn.get("input_schema") or fn.get("parameters")
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_a_schema_changed_in_place_is_sent_changed(server: FakeLLMServer, kind: str) -> None:
    provider = make_provider(kind, server)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"table": {"type": "string", "enum": ["users"]}},
        "required": ["table"],
    }
    spec = ToolSpec("query_table", "Query a table.", schema)
    server.script(["one", "two", "three"])
    provider.complete_with_tools(messages=HI, tools=[spec])
    schema["properties"]["table"]["enum"].append("orders")
    provider.complete_with_tools(messages=HI, tools=[spec])
    schema["properties"]["limit"] = {"type": "integer"}
    provider.complete_with_tools(messages=HI, tools=[spec])
    sent = [_schemas(r.body)["query_table"] for r in server.requests]
    assert [s["properties"]["table"]["enum"] for s in sent] == [
        ["users"],
        ["users", "orders"],
        ["users", "orders"],
    ]
    assert "limit" not in sent[1]["properties"] and "limit" in sent[2]["properties"]
    provider.close()


@pytest.mark.parametrize("kind", ["openai-chat", "anthropic"])
def test_a_tool_class_whose_parameters_change_between_turns(
    server: FakeLLMServer, kind: str
) -> None:
    class QueryTable(Tool):
        """Query one of the existing tables."""

        parameters = {  # noqa: RUF012  (changed in place below: what the test is about)
            "type": "object",
            "additionalProperties": False,
            "required": ["table"],
            "properties": {"table": {"type": "string", "enum": ["users"]}},
        }

        def execute(self, table: str) -> str:
            return f"rows of {table}"

    server.script([Turn(text="one"), Turn(text="two")])
    chat = Chat(provider=make_provider(kind, server)).with_tools(QueryTable)
    chat.ask("first")
    QueryTable.parameters["properties"]["table"]["enum"] = ["users", "orders"]  # a new table
    chat.ask("second")
    sent = [_schemas(r.body)["query_table"]["properties"]["table"]["enum"] for r in server.requests]
    assert sent == [["users"], ["users", "orders"]]
    chat.close()


@pytest.mark.parametrize("kind", KINDS)
def test_unchanged_tools_reuse_the_wire_json(server: FakeLLMServer, kind: str) -> None:
    """The speed the cache is for: an equal schema (the same object, unchanged) is not
    serialised again; a changed one is, once."""
    provider = make_provider(kind, server)
    schema: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}}
    spec = ToolSpec("get_weather", "Weather.", schema)
    built: list[int] = []
    cache = provider._tools  # type: ignore[attr-defined]
    build = cache._build
    cache._build = lambda tools: built.append(len(tools)) or build(tools)
    for _ in range(3):
        provider.preview_request(messages=HI, tools=[spec])
    schema["properties"]["unit"] = {"type": "string"}
    for _ in range(3):
        provider.preview_request(messages=HI, tools=[spec])
    assert built == [1, 1]
    provider.close()


@pytest.mark.parametrize("kind", ["openai-chat", "anthropic"])
def test_threads_sharing_a_provider_each_send_their_own_tools(
    server: FakeLLMServer, kind: str
) -> None:
    """Two tool lists on many threads: each request carries its own list. (The cache's key
    and JSON are one entry, read and replaced together; the old cache wrote them one after
    the other, a gap no thread switch falls into on CPython with the GIL, so this guards
    the new cache rather than reproducing a failure of the old.)"""
    provider = make_provider(kind, server)
    lists = [
        [
            ToolSpec(f"tool_{n}_{i}", "A tool.", {"type": "object", "properties": {}})
            for i in range(3)
        ]
        for n in range(2)
    ]
    wrong: list[str] = []
    barrier = threading.Barrier(4)

    def work(n: int) -> None:
        barrier.wait()
        for _ in range(300):
            names = sorted(_schemas(provider.preview_request(messages=HI, tools=lists[n])))
            if names != sorted(t.name for t in lists[n]):
                wrong.append(f"thread {n} sent {names}")

    threads = [threading.Thread(target=work, args=(i % 2,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
    provider.close()
