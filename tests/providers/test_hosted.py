"""Provider-hosted tools and remote approval, through the real SDK clients and the fake server.

OpenAI Responses: a ``HostedMCP`` is an ``mcp`` tool; an ``mcp_approval_request``
is a pending approval (a hosted ``ToolCall``) that is never run here, and the
decision goes back as one ``mcp_approval_response``; ``mcp_list_tools``,
``mcp_call`` and unknown items are kept and sent back. Anthropic's MCP connector
passes through. Every payload the fake sends is validated against the SDK's own
pydantic types; the fake is strict (it answers 400 to an approval response that
answers nothing).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pydantic
import pytest
from anthropic.types.beta import BetaMessage, BetaRawMessageStreamEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.responses import Response, ResponseStreamEvent

from nbagent import (
    BadRequestError,
    Chat,
    DecisionError,
    HostedMCP,
    ProviderError,
    ToolOptionError,
)
from nbagent.providers import AnthropicProvider, ModelRequest, OpenAIProvider
from nbagent.store import SQLiteStore
from nbagent.testing import (
    FakeLLMServer,
    FakeToolCall,
    Turn,
    mcp_approval_request,
    mcp_call,
    mcp_list_tools,
    raw_item,
    render,
)

KEY = "sk-test-SECRET-0123456789"
TOKEN = "tok-HEADER-SECRET-98765"
DEEPWIKI = "https://mcp.deepwiki.example/mcp"

# -- the fake's payloads, validated against the SDKs' own types ------------------

_SCHEMAS: dict[tuple[str, str], pydantic.TypeAdapter[Any]] = {
    ("responses", "response"): pydantic.TypeAdapter(Response),
    ("responses", "event"): pydantic.TypeAdapter(ResponseStreamEvent),
    ("anthropic", "response"): pydantic.TypeAdapter(BetaMessage),  # the MCP connector is beta
    ("anthropic", "event"): pydantic.TypeAdapter(BetaRawMessageStreamEvent),
}


def _extras(value: Any) -> list[str]:
    if isinstance(value, pydantic.BaseModel):
        found = list(value.__pydantic_extra__ or {})
        for name in type(value).model_fields:
            found += _extras(getattr(value, name))
        return found
    if isinstance(value, (list, tuple)):
        return [p for item in value for p in _extras(item)]
    return []


def validate(api: str, kind: str, payload: dict[str, Any]) -> None:
    if kind == "error":
        return
    model = _SCHEMAS[(api, kind)].validate_python(payload, strict=True)
    assert not _extras(model), f"fields the SDK does not know: {_extras(model)}"


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(validator=validate) as fake:
        yield fake
    assert not fake.errors, fake.errors


def responses(server: FakeLLMServer, **kwargs: Any) -> OpenAIProvider:
    return OpenAIProvider(
        "gpt-4.1-mini",
        api="responses",
        base_url=server.openai_base_url,
        api_key=KEY,
        compatible=False,
        max_retries=0,
        **kwargs,
    )


def deepwiki(**kwargs: Any) -> HostedMCP:
    kwargs.setdefault("headers", {"Authorization": f"Bearer {TOKEN}"})
    return HostedMCP("deepwiki", server_url=DEEPWIKI, **kwargs)


def hosted_chat(server: FakeLLMServer, stream: bool = False, **kwargs: Any) -> Chat:
    provider = responses(server)
    chat = Chat(provider=provider, display=False, stream=stream, **kwargs)
    return chat.with_tools(deepwiki())


def asks(request_id: str = "mcpr_a", **arguments: Any) -> Turn:
    return Turn(
        hosted=[
            mcp_list_tools("deepwiki", "ask_question"),
            mcp_approval_request(
                "deepwiki", "ask_question", arguments or {"q": "x"}, id=request_id
            ),
        ]
    )


def approval_items(body: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [i for i in body["input"] if isinstance(i, dict) and i.get("type") == kind]


STREAM = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])

# -- the regression: an approval request is never dropped ------------------------


@STREAM
def test_an_approval_request_is_a_pending_approval_not_an_empty_complete_reply(
    server: FakeLLMServer, stream: bool
) -> None:
    server.script([asks()])
    chat = hosted_chat(server, stream)
    chat.ask("What does the repo do?")
    assert chat.status != "complete"
    [call] = chat.pending_approvals
    assert (call.id, call.name, call.server, call.hosted) == (
        "mcpr_a",
        "ask_question",
        "deepwiki",
        True,
    )
    assert call.arguments == {"q": "x"}
    assert call.approval is not None and call.approval.source == "provider"


@STREAM
def test_the_adapter_reads_the_request_and_keeps_the_listing(
    server: FakeLLMServer, stream: bool
) -> None:
    server.script([asks()])
    provider = responses(server)
    response = provider.complete(ModelRequest((), stream=stream, hosted=(deepwiki(),)))
    assert [c.hosted for c in response.tool_calls] == [True]
    assert response.stop_reason == "tool_use"
    [listing] = response.items
    assert (listing.type, listing.server, listing.known) == ("mcp_list_tools", "deepwiki", True)


# -- approve, deny, policies: one response each, never run here ------------------


@STREAM
def test_approving_sends_one_approval_response_with_the_request_item(
    server: FakeLLMServer, stream: bool
) -> None:
    server.script(
        [
            asks(),
            Turn(
                text="It indexes wikis.",
                hosted=[
                    mcp_call(
                        "deepwiki",
                        "ask_question",
                        {"q": "x"},
                        output="42",
                        approval_request_id="mcpr_a",
                    )
                ],
            ),
        ]
    )
    chat = hosted_chat(server, stream)
    chat.ask("What does the repo do?")
    chat.approve(chat.pending_approvals[0])
    reply = chat.complete()
    assert chat.status == "complete"
    assert reply.content == "It indexes wikis."
    body = server.requests[1].body
    assert body["store"] is False
    kinds = [i.get("type") or i.get("role") for i in body["input"]]
    assert kinds == ["user", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response"]
    [response] = approval_items(body, "mcp_approval_response")
    assert response == {
        "type": "mcp_approval_response",
        "approval_request_id": "mcpr_a",
        "approve": True,
    }
    [item] = chat.transcript[-1].items
    assert (item.type, item.status, item.raw["output"]) == ("mcp_call", "ok", "42")
    log = chat.log.set_index("item_type")
    assert log.loc["mcp_call", "decision"] == "approved"
    assert log.loc["mcp_approval_request", "status"] == "ok"
    assert bool(log.loc["mcp_call", "hosted"])


def test_the_call_keeps_going_with_the_whole_history(server: FakeLLMServer) -> None:
    """A later turn still sends the listing, the request, its response and the call."""
    done = mcp_call("deepwiki", "ask_question", output="42", approval_request_id="mcpr_a")
    server.script([asks(), Turn(text="ok", hosted=[done]), "and more"])
    chat = hosted_chat(server)
    chat.ask("q")
    chat.approve("mcpr_a")
    chat.complete()
    chat.ask("again")
    kinds = [i.get("type") or i.get("role") for i in server.last_request.body["input"]]
    assert kinds == [
        "user",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "mcp_call",
        "assistant",
        "user",
    ]


def test_denying_tells_the_provider_no_with_the_reason(server: FakeLLMServer) -> None:
    server.script([asks(), "I did not ask it."])
    chat = hosted_chat(server)
    chat.ask("q")
    chat.deny("mcpr_a", reason="not on this repo")
    chat.complete()
    [response] = approval_items(server.requests[1].body, "mcp_approval_response")
    assert response["approve"] is False
    assert response["reason"] == "not on this repo"
    call = chat.get_call("mcpr_a")
    assert call.status == "denied" and call.started_at is None
    with pytest.raises(DecisionError):
        chat.approve("mcpr_a")


def test_always_allow_approves_a_hosted_call_at_once(server: FakeLLMServer) -> None:
    server.script([asks(), "done"])
    chat = hosted_chat(server).always_allow("ask_question")
    chat.ask("q")
    assert chat.status == "complete" and not chat.pending_approvals
    [response] = approval_items(server.requests[1].body, "mcp_approval_response")
    assert response["approve"] is True
    assert chat.get_call("mcpr_a").decision.by == "policy:always_allow:ask_question"


def test_a_hosted_calls_arguments_cannot_be_edited(server: FakeLLMServer) -> None:
    server.script([asks()])
    chat = hosted_chat(server)
    chat.ask("q")
    with pytest.raises(DecisionError, match="cannot be edited"):
        chat.approve("mcpr_a", {"q": "other"})
    assert chat.pending_approvals[0].status == "awaiting_approval"


def test_hosted_calls_beside_a_local_tool_in_one_response(server: FakeLLMServer) -> None:
    ran: list[str] = []

    def lookup(city: str) -> str:
        """Look a city up."""
        ran.append(city)
        return "found"

    turn = asks()
    turn.tool_calls = [FakeToolCall("lookup", {"city": "Paris"})]
    server.script([turn, "done"])
    chat = hosted_chat(server).with_tools(lookup)
    chat.ask("q")
    assert [c.name for c in chat.pending_approvals] == ["ask_question"]
    assert ran == ["Paris"]  # the local call runs; the round waits for the hosted decision
    assert server.requests[1:] == []
    chat.deny("mcpr_a")
    chat.complete()
    assert ran == ["Paris"]  # once
    body = server.requests[1].body
    assert len(approval_items(body, "function_call_output")) == 1
    assert approval_items(body, "mcp_approval_response")[0]["approve"] is False


# -- across processes: the store's first decision wins ---------------------------


def test_a_decision_from_another_process_is_sent_once(server: FakeLLMServer, tmp_path: Any) -> None:
    path = os.fspath(tmp_path / "chats.db")
    server.script([asks(), "done"])
    chat = hosted_chat(server, store=SQLiteStore(path))
    chat.ask("q")
    other = SQLiteStore(path)
    [pending] = other.pending_approvals()
    assert pending.id == "mcpr_a" and pending.server == "deepwiki" and pending.hosted
    other.deny("mcpr_a", reason="from the web form")
    with pytest.raises(DecisionError):
        chat.approve("mcpr_a")  # the first decision wins
    chat.complete()
    [response] = approval_items(server.requests[1].body, "mcp_approval_response")
    assert response["approve"] is False
    loaded = Chat.load(chat.id, store=SQLiteStore(path), provider=responses(server), display=False)
    call = loaded.get_call("mcpr_a")
    assert (call.server, call.hosted, call.status) == ("deepwiki", True, "denied")
    assert loaded.transcript[1].items[0].type == "mcp_list_tools"
    with sqlite3.connect(path) as conn:
        dump = "\n".join(conn.iterdump())
    assert TOKEN not in dump and "deepwiki" in dump


# -- unknown items: kept, shown, sent back; never dropped ------------------------


@STREAM
def test_an_unknown_output_item_is_kept_shown_and_sent_back(
    server: FakeLLMServer, stream: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    kind = f"future_gadget_{'sse' if stream else 'json'}"  # said once per process and type
    odd = {"id": "zz_1", "type": kind, "status": "completed", "payload": [1]}
    server.validator = None  # no SDK type knows it: that is the point
    server.script([Turn(text="Here.", hosted=[raw_item(odd)]), "ok"])
    chat = Chat(provider=responses(server), display=False, stream=stream)
    chat.ask("q")
    assert chat.status == "complete" and chat.transcript[-1].content == "Here."
    [item] = chat.transcript[-1].items
    assert (item.type, item.known, item.raw) == (kind, False, odd)
    assert kind in capsys.readouterr().err
    row = chat.log.set_index("item_type").loc[kind]
    assert bool(row["hosted"]) and pd.isna(row["status"])
    chat.ask("again")
    assert odd in server.last_request.body["input"]


def test_an_item_asking_this_program_to_act_fails_clearly(server: FakeLLMServer) -> None:
    server.validator = None
    shell = {"id": "ls_1", "type": "local_shell_call", "call_id": "c", "status": "completed"}
    server.script([Turn(hosted=[raw_item(shell)])])
    chat = Chat(provider=responses(server), display=False)
    with pytest.raises(ProviderError, match="local_shell_call"):
        chat.ask("q")


# -- secrets, and APIs that cannot host ------------------------------------------


def test_headers_never_reach_a_repr_a_preview_an_error_or_the_log(server: FakeLLMServer) -> None:
    hosted = deepwiki(authorization="oauth-SECRET-4242")
    assert TOKEN not in repr(hosted) and "oauth-SECRET" not in repr(hosted)
    provider = responses(server)
    preview = json.dumps(provider.preview_request(messages=(), hosted=(hosted,)))
    assert TOKEN not in preview and "oauth-SECRET" not in preview
    assert "Authorization" in preview
    echo = f"Invalid header value 'Bearer {TOKEN}' and 'oauth-SECRET-4242'"
    server.script([Turn(status=400, error={"message": echo})])
    chat = Chat(provider=provider, display=False).with_tools(hosted)
    with pytest.raises(BadRequestError) as raised:
        chat.ask("q")
    assert TOKEN not in str(raised.value) and "oauth-SECRET" not in str(raised.value)
    assert TOKEN not in chat.steps.to_csv()
    assert server.last_request.body["tools"][0]["headers"] == {
        "Authorization": f"Bearer {TOKEN}"
    }  # the provider itself does get it
    assert TOKEN not in json.dumps(provider.last_request)


def test_hosted_mcp_on_chat_completions_is_a_clear_tool_option_error(
    server: FakeLLMServer,
) -> None:
    chat_api = OpenAIProvider(
        "gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY, compatible=False
    )
    chat = Chat(provider=chat_api, display=False)
    with pytest.raises(ToolOptionError, match="Responses API"):
        chat.with_tools(deepwiki())
    with pytest.raises(ToolOptionError, match="Responses API"):
        chat_api.complete(ModelRequest((), hosted=(deepwiki(),)))
    assert server.requests == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "exactly one of"),
        ({"server_url": "u", "connector_id": "connector_gmail"}, "exactly one of"),
        ({"server_url": "u", "require_approval": "sometimes"}, "require_approval"),
        ({"server_url": "u", "require_approval": {"maybe": {}}}, "filter keys"),
        ({"server_url": "u", "allowed_tools": "ask"}, "list of tool names"),
    ],
)
def test_hosted_mcp_refuses_what_the_api_would(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ToolOptionError, match=match):
        HostedMCP("x", **kwargs)


def test_the_tool_definition_is_the_sdks_mcp_tool() -> None:
    hosted = HostedMCP(
        "gmail",
        connector_id="connector_gmail",
        authorization="oauth",
        allowed_tools=["search"],
        require_approval={"never": {"tool_names": ["search"]}},
    )
    assert hosted.openai_tool() == {
        "type": "mcp",
        "server_label": "gmail",
        "connector_id": "connector_gmail",
        "authorization": "oauth",
        "allowed_tools": ["search"],
        "require_approval": {"never": {"tool_names": ["search"]}},
    }


# -- Anthropic's MCP connector: passes through, no approval step ------------------


def anthropic(server: FakeLLMServer) -> AnthropicProvider:
    return AnthropicProvider(
        "claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key=KEY, max_retries=0
    )


@STREAM
def test_anthropic_mcp_connector_blocks_are_kept_and_sent_back(
    server: FakeLLMServer, stream: bool
) -> None:
    call = mcp_call("deepwiki", "ask_question", {"q": "x"}, output="42")
    server.script([Turn(text="It says 42.", hosted=[call]), "ok"])
    hosted = HostedMCP(
        "deepwiki", server_url=DEEPWIKI, authorization=TOKEN, require_approval="never"
    )
    chat = Chat(provider=anthropic(server), display=False, stream=stream).with_tools(hosted)
    chat.ask("q")
    first = server.requests[0]
    assert first.headers["anthropic-beta"] == "mcp-client-2025-04-04"
    assert first.body["mcp_servers"] == [
        {"type": "url", "url": DEEPWIKI, "name": "deepwiki", "authorization_token": TOKEN}
    ]
    use, result = chat.transcript[-1].items
    assert (use.type, use.server, use.name, use.raw["input"]) == (
        "mcp_tool_use",
        "deepwiki",
        "ask_question",
        {"q": "x"},
    )
    assert (result.type, result.server, result.status) == ("mcp_tool_result", "deepwiki", "ok")
    assert not chat.pending_approvals  # that API has no approval step
    chat.ask("again")
    sent = server.last_request.body["messages"][1]["content"]
    assert [b["type"] for b in sent] == ["mcp_tool_use", "mcp_tool_result", "text"]
    # the use and its result are one call, one row: the use's id and type, the result's end
    row = chat.log.set_index("item_type").loc["mcp_tool_use"]
    assert (row["result_preview"], row["status"]) == ("42", "ok")
    assert "mcp_tool_result" not in set(chat.log["item_type"])


def test_anthropic_refuses_an_approval_it_cannot_ask_for() -> None:
    with FakeLLMServer() as server:
        chat = Chat(provider=anthropic(server), display=False)
        with pytest.raises(ToolOptionError, match="no approval step"):
            chat.with_tools(HostedMCP("deepwiki", server_url=DEEPWIKI))
        with pytest.raises(ToolOptionError, match="custom headers"):
            chat.with_tools(deepwiki(require_approval="never"))


# -- the fake server: hosted items in JSON and SSE, strict about approvals -------


@STREAM
def test_the_fake_renders_every_hosted_item_as_the_sdk_types_say(stream: bool) -> None:
    turn = Turn(
        text="done",
        hosted=[
            mcp_list_tools("s", "a", "b"),
            mcp_call("s", "a", {"x": 1}, output="out"),
            mcp_call("s", "b", error="boom"),
            mcp_approval_request("s", "a", {"x": 2}),
        ],
    )
    payloads = render("responses", turn, {"model": "m"}, stream=stream)
    for payload in payloads:
        validate("responses", "event" if stream else "response", payload)
    final = payloads[-1]["response"] if stream else payloads[0]
    assert [i["type"] for i in final["output"]] == [
        "mcp_list_tools",
        "mcp_call",
        "mcp_call",
        "mcp_approval_request",
        "message",
    ]
    anthropic_turn = Turn(hosted=[mcp_call("s", "a", output="out")])
    for payload in render("anthropic", anthropic_turn, {"model": "m"}, stream=stream):
        if payload.get("type") != "ping":
            validate("anthropic", "event" if stream else "response", payload)


def _send(server: FakeLLMServer, items: list[dict[str, Any]], **body: Any) -> Any:
    import httpx2

    return httpx2.post(
        f"{server.openai_base_url}/responses",
        json={"model": "m", "input": items, **body},
        headers={"Authorization": f"Bearer {KEY}"},
    )


REQUEST = {
    "type": "mcp_approval_request",
    "id": "mcpr_1",
    "name": "a",
    "arguments": "{}",
    "server_label": "s",
}


@pytest.mark.parametrize(
    ("items", "body", "message"),
    [
        (
            [{"type": "mcp_approval_response", "approval_request_id": "mcpr_9", "approve": True}],
            {},
            "No approval request found with id 'mcpr_9'",
        ),
        (
            [{"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}],
            {},
            "No approval request found",
        ),  # stateless: the request item is missing
        (
            [
                REQUEST,
                {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
                {
                    "type": "mcp_approval_response",
                    "approval_request_id": "mcpr_1",
                    "approve": False,
                },
            ],
            {},
            "Duplicate mcp_approval_response",
        ),
        (
            [
                REQUEST,
                {
                    "type": "mcp_approval_response",
                    "approval_request_id": "mcpr_1",
                    "approve": "yes",
                },
            ],
            {},
            "expected a boolean",
        ),
    ],
)
def test_the_strict_fake_refuses_what_the_api_refuses(
    server: FakeLLMServer, items: list[dict[str, Any]], body: dict[str, Any], message: str
) -> None:
    server.script(["never sent"])
    reply = _send(server, items, **body)
    assert reply.status_code == 400
    assert message in reply.json()["error"]["message"]


def test_the_strict_fake_accepts_a_response_to_a_stored_request(server: FakeLLMServer) -> None:
    server.script(["fine"])
    item = {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}
    assert _send(server, [item], previous_response_id="resp_1").status_code == 200


# -- the property: every request gets exactly one response, with its verdict -----

Decide = st.sampled_from(["approve", "deny", "store-approve", "store-deny", "policy"])


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rounds=st.lists(st.lists(Decide, min_size=1, max_size=3), min_size=1, max_size=3),
    order=st.randoms(use_true_random=False),
    stream=st.booleans(),
)
def test_every_approval_request_gets_exactly_one_response_with_its_verdict(
    tmp_path_factory: pytest.TempPathFactory,
    rounds: list[list[str]],
    order: Any,
    stream: bool,
) -> None:
    path = os.fspath(tmp_path_factory.mktemp("hosted") / "chats.db")
    expected: dict[str, bool] = {}
    turns: list[Turn] = []
    for r, decisions in enumerate(rounds):
        turns.append(
            Turn(
                hosted=[
                    mcp_approval_request("s", f"tool{n}", {"n": n}, id=f"mcpr_{r}_{n}")
                    for n in range(len(decisions))
                ]
            )
        )
    turns.append("done")
    with FakeLLMServer(turns, validator=validate) as server:
        chat = Chat(
            provider=responses(server), display=False, stream=stream, store=SQLiteStore(path)
        ).with_tools(HostedMCP("s", server_url=DEEPWIKI))
        other = SQLiteStore(path)
        chat.ask("go")
        for r, decisions in enumerate(rounds):
            pending = {c.id: c for c in chat.pending_approvals}
            assert set(pending) == {f"mcpr_{r}_{n}" for n in range(len(decisions))}
            plan = list(enumerate(decisions))
            order.shuffle(plan)
            for n, how in plan:
                call_id = f"mcpr_{r}_{n}"
                approve = how in ("approve", "store-approve", "policy")
                expected[call_id] = approve
                if how == "approve":
                    chat.approve(call_id)
                elif how == "deny":
                    chat.deny(call_id, reason="no")
                elif how == "store-approve":
                    other.approve(call_id)
                elif how == "store-deny":
                    other.deny(call_id)
                else:
                    chat.always_allow(f"tool{n}", when=lambda c, cid=call_id: c.id == cid)
                # deciding twice the same way changes nothing; the other way is refused
                if how in ("approve", "deny"):
                    chat.approve(call_id) if approve else chat.deny(call_id)
                    with pytest.raises(DecisionError):
                        chat.deny(call_id) if approve else chat.approve(call_id)
            chat.complete()
        assert chat.status == "complete"
        assert not server.errors
        final = server.last_request.body
        answers = approval_items(final, "mcp_approval_response")
        assert sorted(a["approval_request_id"] for a in answers) == sorted(expected)
        assert {a["approval_request_id"]: a["approve"] for a in answers} == expected
        requests = [i["id"] for i in approval_items(final, "mcp_approval_request")]
        assert sorted(requests) == sorted(expected)
        for request in server.requests:  # never answered twice, never before it was asked
            ids = [
                a["approval_request_id"]
                for a in approval_items(request.body, "mcp_approval_response")
            ]
            assert len(ids) == len(set(ids))
        for call_id, approve in expected.items():
            call = chat.get_call(call_id)
            assert call.status == ("ok" if approve else "denied")
            assert call.started_at is None  # never run here


def test_the_offline_demo_model_refuses_a_hosted_tool() -> None:
    chat = Chat(model="demo", display=False)
    with pytest.raises(ToolOptionError, match="demo"):
        chat.with_tools(deepwiki())


@STREAM
def test_an_unknown_anthropic_block_is_kept_and_sent_back(
    server: FakeLLMServer, stream: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = {"type": "hologram", "id": "h_1", "frames": [1, 2]}
    server.validator = None  # no SDK type knows it
    server.script([Turn(text="Here.", hosted=[raw_item(odd)]), "ok"])
    chat = Chat(provider=anthropic(server), display=False, stream=stream)
    chat.ask("q")
    [item] = chat.transcript[-1].items
    assert (item.api, item.type, item.known, item.raw) == ("anthropic", "hologram", False, odd)
    chat.ask("again")
    assert server.last_request.body["messages"][1]["content"] == [
        odd,
        {"type": "text", "text": "Here."},
    ]


def test_a_hosted_decision_with_edited_arguments_from_the_store_is_refused(
    server: FakeLLMServer, tmp_path: Any
) -> None:
    """Edited arguments cannot reach a hosted call, from code or from another process."""
    path = os.fspath(tmp_path / "chats.db")
    server.script([asks(), "done"])
    chat = hosted_chat(server, store=SQLiteStore(path))
    chat.ask("q")
    other = SQLiteStore(path)
    with pytest.raises(DecisionError, match="cannot be edited"):
        other.approve("mcpr_a", arguments={"q": "edited"})
    assert other.call("mcpr_a").decision is None  # nothing written
    other.approve("mcpr_a")
    chat.complete()
    for request in server.requests:
        for item in approval_items(request.body, "mcp_approval_request"):
            assert json.loads(item["arguments"]) == {"q": "x"}
    assert chat.get_call("mcpr_a").effective_arguments == {"q": "x"}
    [answer] = approval_items(server.last_request.body, "mcp_approval_response")
    assert answer["approve"] is True


def test_credentials_in_the_server_url_are_secrets_too() -> None:
    hosted = HostedMCP("x", server_url="https://me:url-SECRET-77@mcp.example/mcp")
    assert "url-SECRET-77" not in repr(hosted) and "mcp.example" in repr(hosted)
    assert "url-SECRET-77" in hosted.secrets()


@STREAM
def test_a_provider_run_web_search_is_kept_and_sent_back(
    server: FakeLLMServer, stream: bool
) -> None:
    search = {
        "id": "ws_1",
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "nbagent"},
    }
    server.script([Turn(text="Found it.", hosted=[raw_item(search)]), "ok"])
    chat = Chat(provider=responses(server), display=False, stream=stream)
    chat.ask("q")
    [item] = chat.transcript[-1].items
    assert (item.type, item.known, item.status) == ("web_search_call", True, "ok")
    chat.ask("again")
    assert search in server.last_request.body["input"]
    assert chat.log.set_index("item_type").loc["web_search_call", "status"] == "ok"


def test_the_issue_as_reported_complete_with_an_empty_reply_no_more(
    server: FakeLLMServer,
) -> None:
    """The body the issue saw (a lone approval request) made the chat report ``complete``
    with an empty reply; it is a pending approval now, whatever tools the chat has."""
    body = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "gpt-4.1-mini",
        "output": [
            {
                "id": "mcpr_a",
                "type": "mcp_approval_request",
                "server_label": "deepwiki",
                "name": "ask",
                "arguments": "{}",
            }
        ],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    }
    server.script([Turn(raw_body=json.dumps(body))])
    chat = Chat(provider=responses(server), display=False, stream=False)
    chat.ask("q")
    assert chat.status == "awaiting_approval"
    assert [c.id for c in chat.pending_approvals] == ["mcpr_a"]


@STREAM
def test_the_async_api_decides_and_sends_the_same_way(server: FakeLLMServer, stream: bool) -> None:
    import asyncio

    server.script([asks(), "done"])
    chat = hosted_chat(server, stream)

    async def go() -> None:
        await chat.ask_async("q")
        assert [c.id for c in chat.pending_approvals] == ["mcpr_a"]
        chat.deny("mcpr_a", reason="async no")
        await chat.complete_async()

    asyncio.run(go())
    assert chat.status == "complete"
    [answer] = approval_items(server.last_request.body, "mcp_approval_response")
    assert (answer["approve"], answer["reason"]) == (False, "async no")
