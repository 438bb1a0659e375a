"""chat.record's rows for what the provider did on its side, and the citations it sent.

- A provider item's ``arguments`` and a message's ``citations`` are read-only copies:
  an edit through ``chat.log`` / ``chat.messages`` used to change the item itself, so
  the next request sent the edit while the store kept the original.
- A provider item's row has the step whose response carried it (it had none, so its
  tokens and cost were NA on a priced model).
- An Anthropic ``*_tool_use`` block and the ``*_tool_result`` answering it are one
  row (they were two: the use with no status, the result under a made-up id).

Through the real SDK clients and the fake server (Responses and Anthropic, JSON and
SSE), and a property over generated Anthropic responses folded from scratch.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, HostedMCP, tool
from nbagent._record import fold
from nbagent.providers import AnthropicProvider, OpenAIProvider
from nbagent.providers._anthropic_wire import provider_items
from nbagent.store import SQLiteStore
from nbagent.testing import (
    FakeLLMServer,
    FakeToolCall,
    ScriptedProvider,
    Turn,
    call_tools,
    mcp_call,
    mcp_list_tools,
    raw_item,
    reply,
)

KEY = "sk-test-0123456789abcdefghij"
STREAM = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
ARGS = {"q": "x", "nested": {"a": 1, "list": [1, {"b": 2}]}}
SEARCH_USE = {
    "type": "server_tool_use",
    "id": "srvtoolu_1",
    "name": "web_search",
    "input": {"query": "capital of France"},
}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://x.example",
            "title": "X",
            "encrypted_content": "abc",
            "page_age": None,
        }
    ],
}
WEB = {
    "type": "web_search_result_location",
    "cited_text": "Paris is the capital of France.",
    "encrypted_index": "Eo8BCioIAhgBIiQ",
    "title": "Paris",
    "url": "https://en.wikipedia.org/wiki/Paris",
}


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake
    assert not fake.errors, fake.errors


def provider(server: FakeLLMServer, api: str) -> Any:
    if api == "anthropic":
        return AnthropicProvider(
            "claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key=KEY, max_retries=0
        )
    return OpenAIProvider(
        "gpt-4.1-mini",
        api="responses",
        base_url=server.openai_base_url,
        api_key=KEY,
        compatible=False,
        max_retries=0,
    )


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    return f"{city}: 21 C"


def hosted() -> HostedMCP:
    return HostedMCP("wiki", server_url="https://wiki.example/mcp", require_approval="never")


def refuses(value: Any) -> None:
    """Every way to change ``value`` (a dict or list, and those inside) in place fails."""
    with pytest.raises(TypeError, match="read-only"):
        if isinstance(value, dict):
            value["new"] = 1
        else:
            value.append(1)
    for inner in value.values() if isinstance(value, dict) else value:
        if isinstance(inner, (dict, list)):
            refuses(inner)


def sent_back(server: FakeLLMServer, api: str, item_type: str) -> list[dict[str, Any]]:
    body = server.last_request.body
    if api == "anthropic":
        return [
            b
            for m in body["messages"]
            if m["role"] == "assistant" and isinstance(m["content"], list)
            for b in m["content"]
            if b["type"] == item_type
        ]
    return [i for i in body["input"] if isinstance(i, dict) and i.get("type") == item_type]


# ------------------------------------------------------------ read-only through the frames


@STREAM
@pytest.mark.parametrize("api", ["responses", "anthropic"])
def test_a_provider_calls_arguments_cannot_be_edited_through_the_log(
    server: FakeLLMServer, api: str, stream: bool
) -> None:
    server.script([Turn(hosted=[mcp_call("wiki", "ask", ARGS, output="ans x")], text="done"), "ok"])
    with tempfile.TemporaryDirectory() as d:
        store = SQLiteStore(Path(d) / "s.db")
        try:
            chat = Chat(provider=provider(server, api), display=False, stream=stream, store=store)
            chat.with_tools(hosted())
            chat.ask("q")
            (row,) = [r for r in chat.record.calls if r.tool == "ask"]
            refuses(row.arguments)
            logged = chat.log.set_index("call_id").loc[row.call_id, "arguments"]
            assert logged == ARGS
            refuses(logged)
            thawed = copy.deepcopy(logged)  # a copy to change, as with a call's arguments
            thawed["nested"]["a"] = 999
            assert type(thawed) is dict and type(thawed["nested"]) is dict
            assert chat.log.set_index("call_id").loc[row.call_id, "arguments"] == ARGS
            item = chat.transcript[-1].items[0]  # (Anthropic: its mcp_tool_result next)
            wire = item.raw["input"] if api == "anthropic" else json.loads(item.raw["arguments"])
            assert wire == ARGS  # the item itself: untouched, and never handed out
            if api == "anthropic":
                assert item.raw["input"] is not row.arguments
                refuses(item.raw["input"])  # the item in the transcript is read-only too
            assert json.loads(json.dumps(row.arguments)) == ARGS
            chat.ask("again")
            kind = "mcp_tool_use" if api == "anthropic" else "mcp_call"
            (back,) = sent_back(server, api, kind)
            got = back["input"] if api == "anthropic" else json.loads(back["arguments"])
            assert got == ARGS
            assert fold(chat.events) == chat.record
            loaded = Chat.load(chat.id, store=store, provider=provider(server, api))
            assert loaded.log.set_index("call_id").loc[row.call_id, "arguments"] == ARGS
            assert fold(loaded.events) == loaded.record
        finally:
            store.close()


@STREAM
def test_an_anthropic_server_tools_input_cannot_be_edited_through_the_log(
    server: FakeLLMServer, stream: bool
) -> None:
    server.script(
        [Turn(hosted=[raw_item(SEARCH_USE), raw_item(SEARCH_RESULT)], text="Paris."), "ok"]
    )
    chat = Chat(provider=provider(server, "anthropic"), display=False, stream=stream)
    chat.ask("Capital of France?")
    args = chat.log.set_index("call_id").loc["srvtoolu_1", "arguments"]
    with pytest.raises(TypeError, match="read-only"):
        args["query"] = "EDITED IN THE LOG"
    chat.ask("Thanks")
    (back,) = sent_back(server, "anthropic", "server_tool_use")
    assert back == SEARCH_USE


@STREAM
def test_a_messages_citations_cannot_be_edited_through_the_frame(
    server: FakeLLMServer, stream: bool
) -> None:
    server.script([Turn(text="Paris is the capital.", citations=[WEB]), "You're welcome."])
    with tempfile.TemporaryDirectory() as d:
        store = SQLiteStore(Path(d) / "s.db")
        try:
            chat = Chat(
                provider=provider(server, "anthropic"), display=False, stream=stream, store=store
            )
            chat.ask("Capital of France?")
            m = chat.messages
            cited = m.loc[m["role"] == "assistant", "citations"].iloc[0]
            assert cited == [WEB]
            refuses(cited)
            with pytest.raises(TypeError, match="read-only"):
                cited[0]["cited_text"] = "EDITED BY ANALYST"
            refuses(chat.record.messages[-1].citations)
            assert chat.transcript[-1].citations == (WEB,)
            refuses(chat.transcript[-1].citations[0])  # the transcript's item: read-only too
            chat.ask("Thanks")
            (back,) = sent_back(server, "anthropic", "text")
            assert back["citations"][0]["cited_text"] == WEB["cited_text"]
            loaded = Chat.load(chat.id, store=store, provider=provider(server, "anthropic"))
            assert loaded.messages.loc[1, "citations"] == [WEB]
            assert fold(loaded.events) == loaded.record
        finally:
            store.close()


# ------------------------------------------------------------ the step that carried an item


@STREAM
@pytest.mark.parametrize("api", ["responses", "anthropic"])
def test_a_provider_items_row_has_the_step_whose_response_carried_it(
    server: FakeLLMServer, api: str, stream: bool
) -> None:
    items = [mcp_call("wiki", "ask", {"q": "x"}, output="ans x")]
    if api == "responses":
        items.insert(0, mcp_list_tools("wiki", "ask"))
    server.script(
        [
            Turn(tool_calls=[FakeToolCall("lookup", {"city": "Paris"})]),
            Turn(hosted=items, text="done"),
        ]
    )
    chat = Chat(provider=provider(server, api), display=False, stream=stream)
    chat.with_tools(lookup, hosted())
    chat.ask("q")
    answered = chat.record.steps[-1].step  # the second request (a tool round between)
    assert answered > chat.record.steps[0].step
    rows = [r for r in chat.record.calls if r.hosted]
    assert len(rows) == len(items)
    assert {r.step for r in rows} == {answered}
    log = chat.log
    assert set(log.loc[log["hosted"].fillna(False), "step"]) == {answered}
    spent = nbagent.log.summary(chat).loc["ask"]  # a priced model: its share is known
    assert spent["tokens"] > 0 and spent["cost_usd"] > 0
    assert fold(chat.events) == chat.record


# ------------------------------------------------------------ one hosted call, one row

MCP_USE = {
    "type": "mcp_tool_use",
    "id": "mcptoolu_1",
    "name": "ask",
    "server_name": "wiki",
    "input": {"q": "x"},
}


def mcp_result(is_error: bool, text: str) -> dict[str, Any]:
    return {
        "type": "mcp_tool_result",
        "tool_use_id": "mcptoolu_1",
        "is_error": is_error,
        "content": [{"type": "text", "text": text}],
    }


@pytest.mark.parametrize(
    ("use", "result", "status", "error", "preview"),
    [
        (MCP_USE, mcp_result(True, "backend down"), "error", "backend down", "backend down"),
        (MCP_USE, mcp_result(False, "42"), "ok", None, "42"),
        (SEARCH_USE, SEARCH_RESULT, "ok", None, json.dumps(SEARCH_RESULT["content"])[:40]),
        (
            SEARCH_USE,
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_1",
                "content": {"type": "web_search_tool_result_error", "error_code": "max_uses"},
            },
            "error",
            "max_uses",
            "",
        ),
    ],
    ids=["mcp-error", "mcp-ok", "search-ok", "search-error"],
)
def test_an_anthropic_hosted_call_and_its_result_are_one_row(
    server: FakeLLMServer,
    use: dict[str, Any],
    result: dict[str, Any],
    status: str,
    error: str | None,
    preview: str,
) -> None:
    server.script([Turn(hosted=[raw_item(use), raw_item(result)], text="Sorry."), "ok"])
    chat = Chat(provider=provider(server, "anthropic"), display=False)
    chat.ask("q")
    (row,) = chat.record.calls
    assert (row.call_id, row.tool, row.item_type, row.status) == (
        use["id"],
        use["name"],
        use["type"],
        status,
    )
    assert row.arguments == use["input"]
    assert (row.error is None) if error is None else (error in (row.error or ""))
    assert (row.result_preview or "").startswith(preview)
    assert row.step == chat.record.steps[0].step
    counts = nbagent.log.summary(chat).loc[use["name"]]
    assert (counts["calls"], counts["ok"], counts["errors"]) == (
        1,
        int(status == "ok"),
        int(status == "error"),
    )
    chat.ask("again")  # both blocks still go back, as they came
    assert sent_back(server, "anthropic", use["type"]) == [use]
    assert sent_back(server, "anthropic", result["type"]) == [result]
    assert fold(chat.events) == chat.record


# ------------------------------------------------------------ property: folded from scratch

KINDS = [("mcp_tool_use", "mcp_tool_result"), ("server_tool_use", "web_search_tool_result")]

block_st = st.one_of(
    st.tuples(st.just("use"), st.integers(0, 3), st.sampled_from(KINDS)),
    st.tuples(st.just("result"), st.integers(0, 4), st.booleans()),
)


def _use(n: int, kinds: tuple[str, str]) -> dict[str, Any]:
    block: dict[str, Any] = {"type": kinds[0], "id": f"u{n}", "name": f"t{n}", "input": {"n": n}}
    if kinds[0] == "mcp_tool_use":
        block["server_name"] = "wiki"
    return block


def _result(n: int, kind: str, failed: bool) -> dict[str, Any]:
    if kind == "web_search_tool_result":
        content: Any = (
            {"type": "web_search_tool_result_error", "error_code": "unavailable"}
            if failed
            else [{"type": "web_search_result", "url": f"https://{n}.example", "title": "t"}]
        )
        return {"type": kind, "tool_use_id": f"u{n}", "content": content}
    return {
        "type": kind,
        "tool_use_id": f"u{n}",
        "is_error": failed,
        "content": [{"type": "text", "text": f"out {n}"}],
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses=st.lists(st.lists(block_st, max_size=4), min_size=1, max_size=4))
def test_hosted_rows_folded_from_scratch_are_one_per_call_with_its_step_and_outcome(
    responses: list[list[tuple[Any, ...]]],
) -> None:
    """Anthropic blocks over several responses (a result may come a response after its use,
    as after a ``pause_turn``; one may answer a use never seen): one row per call id, the
    use's step, the first result's outcome, read-only arguments; ``fold(events)`` equal."""
    kinds: dict[int, tuple[str, str]] = {}
    seen: set[int] = set()
    expected: dict[str, dict[str, Any]] = {}
    script: list[Any] = []
    for k, blocks in enumerate(responses):
        raw: list[dict[str, Any]] = []
        for b in blocks:
            if b[0] == "use":
                n, pair = b[1], kinds.setdefault(b[1], b[2])
                if n in seen:
                    continue  # an id is used once
                seen.add(n)
                raw.append(_use(n, pair))
                # after a result that answered it unseen: that result's row stands
                expected.setdefault(f"u{n}", {"response": k, "status": None, "type": pair[0]})
            else:
                n, failed = b[1], b[2]
                kind = kinds.setdefault(n, KINDS[0])[1]
                raw.append(_result(n, kind, failed))
                want = expected.setdefault(f"u{n}", {"response": k, "status": None, "type": kind})
                if want["status"] is None:
                    want["status"] = "error" if failed else "ok"
        last = k == len(responses) - 1
        base = reply("done") if last else call_tools(("lookup", {"city": f"c{k}"}, f"c{k}"))
        script.append(dataclasses.replace(base, items=provider_items(raw)))
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(lookup)
    chat.ask("go")
    record = chat.record
    assert fold(chat.events) == record
    hosted = [r for r in record.calls if r.hosted]
    assert [r.call_id for r in hosted] == list(expected)  # one row per call, in order
    steps = [s.step for s in record.steps]
    for r in hosted:
        want = expected[r.call_id]
        assert (r.item_type, r.status) == (want["type"], want["status"])
        assert r.step == steps[want["response"]]
        if r.item_type.endswith("_use"):
            assert r.arguments == {"n": int(r.call_id[1:])}
            refuses(r.arguments)


def test_a_provider_items_raw_in_the_transcript_is_read_only() -> None:
    """The item itself (``chat.transcript``'s, not only the log's copy) refuses an edit: what
    goes back to the API is what came, as the store keeps it."""
    from nbagent import ProviderItem

    item = ProviderItem("anthropic", "server_tool_use", {"id": "s1", "input": {"q": "capital"}})
    with pytest.raises(TypeError, match="goes back to the provider as it came"):
        item.raw["input"]["q"] = "EDITED"  # not a tool call's "use chat.approve(...)"
    with pytest.raises(TypeError):
        item.raw["id"] = "s2"
    assert item.raw == {"id": "s1", "input": {"q": "capital"}}
    assert pickle.loads(pickle.dumps(item)) == item and json.loads(json.dumps(item.raw)) == item.raw
