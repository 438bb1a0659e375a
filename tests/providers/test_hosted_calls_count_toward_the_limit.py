"""A hosted approval request counts toward ``calls=`` like any call, and one beyond the
limit is answered ``approve: false`` at once.

With ``calls="one"``, a response holding an OpenAI Responses ``mcp_approval_request`` and
a function call was handled by their order: the approval request first skipped the
function call, but the function call first ran *and* the approval request was still put to
the person, and once approved it was sent ``approve: true``: two calls ran for one
response. Now the calls of a response are counted in order whatever their kind: an
approval request within the limit is asked about; one beyond it is denied without asking
anyone (status ``denied``, its reason the skipped call's limit text, sent to the provider
as ``approve: false``). What the provider already ran on its own (an ``mcp_call`` it did
not ask about, a ``web_search_call``) cannot be stopped and is not counted. Through the
real OpenAI SDK against the loopback fake server, streamed and not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import ApprovalRequested, Chat, HostedMCP, tool
from nbagent.providers import OpenAIProvider
from nbagent.testing import (
    FakeLLMServer,
    FakeToolCall,
    Turn,
    mcp_approval_request,
    mcp_call,
    raw_item,
    render,
)

KEY = "sk-test-SECRET-0123456789"
LIMIT_TEXT = "Not executed: only one tool call per response is allowed."

ran: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Get the weather for a city.

    Args:
        city: The city.
    """
    ran.append(city)
    return f"{city}: 18 C"


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake
    assert not fake.errors, fake.errors


def _chat(
    server: FakeLLMServer, stream: bool, calls: Any = "one", require_approval: str = "always"
) -> Chat:
    ran.clear()
    provider = OpenAIProvider(
        "gpt-4.1-mini",
        api="responses",
        base_url=server.openai_base_url,
        api_key=KEY,
        compatible=False,
        max_retries=0,
    )
    wiki = HostedMCP(
        "wiki", server_url="https://mcp.example.com/mcp", require_approval=require_approval
    )
    chat = Chat(provider=provider, display=False, stream=stream).with_tools(get_weather, wiki)
    return chat.with_tool_options(calls=calls)


Kind = Literal["fn", "ask"]


def _response(kinds: list[Kind], stream: bool) -> Turn:
    """One response whose output holds function calls and approval requests in this order
    (the fake renders hosted items first: the order is made here, as a provider may send it)."""
    asks = [
        mcp_approval_request("wiki", "ask", {"q": str(i)}, id=f"mcpr_{i}")
        for i, k in enumerate(kinds)
        if k == "ask"
    ]
    fns = [
        FakeToolCall("get_weather", {"city": f"city{i}"}, id=f"call_{i}")
        for i, k in enumerate(kinds)
        if k == "fn"
    ]
    turn = Turn(hosted=asks, tool_calls=fns)
    request = {"model": "gpt-4.1-mini", "input": [], "tools": [{"type": "function"}]}
    if stream:  # the stream's last event carries the whole response: sent alone
        final = render("responses", turn, request, stream=True)[-1]
        body = final["response"]
    else:
        final = body = render("responses", turn, request, stream=False)[0]
    by_id = {o.get("call_id") or o["id"]: o for o in body["output"]}
    body["output"] = [by_id[f"{'call' if k == 'fn' else 'mcpr'}_{i}"] for i, k in enumerate(kinds)]
    return Turn(raw_body=json.dumps(final))


def _approval_responses(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        i["approval_request_id"]: i
        for i in body["input"]
        if i.get("type") == "mcp_approval_response"
    }


STREAM = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])


@STREAM
def test_a_function_call_first_leaves_no_room_for_the_approval_request(
    server: FakeLLMServer, stream: bool
) -> None:
    """The probe's case: the function runs, the request is denied at once, not asked."""
    server.script([_response(["fn", "ask"], stream), "done"])
    chat = _chat(server, stream)
    asked: list[Any] = []
    chat.on(ApprovalRequested, asked.append)
    reply = chat.ask("go")
    assert reply.content == "done" and chat.status == "complete"
    assert ran == ["city0"] and asked == [] and not chat.pending_approvals
    call = chat.get_call("mcpr_1")
    assert call.hosted and call.status == "denied" and call.decision is None
    assert call.result is not None and LIMIT_TEXT in call.result.content
    sent = _approval_responses(server.requests[1].body)
    assert sent["mcpr_1"]["approve"] is False
    assert sent["mcpr_1"]["reason"].startswith(LIMIT_TEXT)


@STREAM
def test_an_approval_request_first_skips_the_function_call(
    server: FakeLLMServer, stream: bool
) -> None:
    server.script([_response(["ask", "fn"], stream), "done"])
    chat = _chat(server, stream)
    chat.ask("go")
    assert [c.id for c in chat.pending_approvals] == ["mcpr_0"]
    assert chat.get_call("call_1").status == "skipped"
    chat.approve("mcpr_0")
    chat.complete()
    assert ran == []
    assert _approval_responses(server.requests[1].body)["mcpr_0"]["approve"] is True


def test_an_always_allowed_request_beyond_the_limit_is_still_denied(
    server: FakeLLMServer,
) -> None:
    """The limit comes before any policy: a request beyond it is never approved."""
    server.script([_response(["fn", "ask"], False), "done"])
    chat = _chat(server, False).always_allow("ask")
    chat.ask("go")
    assert ran == ["city0"] and chat.get_call("mcpr_1").status == "denied"
    assert _approval_responses(server.requests[1].body)["mcpr_1"]["approve"] is False


def test_what_the_provider_ran_itself_is_not_counted(server: FakeLLMServer) -> None:
    """An ``mcp_call`` it did not ask about and a web search ran before nbagent saw them:
    nothing can stop them, and they leave the function call its place."""
    search = raw_item(
        {
            "type": "web_search_call",
            "id": "ws_1",
            "status": "completed",
            "action": {"type": "search", "query": "x"},
        }
    )
    done = mcp_call("wiki", "ask", {"q": "b"}, output="answer")
    turn = Turn(hosted=[search, done], tool_calls=[FakeToolCall("get_weather", {"city": "Oslo"})])
    server.script([turn, "done"])
    chat = _chat(server, False, require_approval="never")
    chat.ask("go")
    assert ran == ["Oslo"] and chat.status == "complete"


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    kinds=st.lists(st.sampled_from(["fn", "ask"]), min_size=1, max_size=5),
    limit=st.integers(min_value=1, max_value=3),
    stream=st.booleans(),
)
def test_at_most_limit_calls_of_a_response_run_or_are_approved(
    kinds: list[Kind], limit: int, stream: bool
) -> None:
    """Whatever the order: the first ``limit`` calls are the ones handled (a function runs,
    a request is asked about and, approved, sent ``approve: true``); every later one is
    skipped or sent ``approve: false``, nobody asked."""
    with FakeLLMServer() as server:
        server.script([_response(kinds, stream), "done"])
        chat = _chat(server, stream, calls=limit)
        chat.ask("go")
        for c in list(chat.pending_approvals):
            chat.approve(c)
        chat.complete()
        sent = _approval_responses(server.requests[-1].body)
        assert not server.errors, server.errors
    within = list(enumerate(kinds))[:limit]
    assert ran == [f"city{i}" for i, k in within if k == "fn"]
    approved = {rid for rid, r in sent.items() if r["approve"]}
    assert approved == {f"mcpr_{i}" for i, k in within if k == "ask"}
    assert set(sent) == {f"mcpr_{i}" for i, k in enumerate(kinds) if k == "ask"}
    assert len(ran) + len(approved) <= limit
