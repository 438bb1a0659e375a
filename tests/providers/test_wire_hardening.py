"""Hardening (issue 13) at the wire: every API, JSON and streaming, through the real SDK
clients and the strict fake server (which refuses what the real APIs refuse).

Repeated call ids (item 1), keys in error texts (item 6), absurdly deep arguments
(item 9), NaN and Infinity (item 11), lone surrogates (item 5).
"""

from __future__ import annotations

import json
import traceback
from pathlib import Path
from typing import Any

import httpx2
import pytest
from _provider_harness import Harness, make_provider

import nbagent
from nbagent import (
    AssistantToolCallMessage,
    Chat,
    ChatMessage,
    ModelRequestFailed,
    ProviderError,
    ToolResultMessage,
)
from nbagent.providers._openai_wire import ChatStream
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

ran: list[Any] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


@nbagent.tool(requires_approval=True)
def refund(order_id: int) -> str:
    """Refund an order.

    Args:
        order_id: The order.
    """
    ran.append(order_id)
    return f"refunded {order_id}"


@nbagent.tool
def take(x: Any = None) -> str:
    """Takes anything.

    Args:
        x: Anything.
    """
    ran.append(x)
    return "taken"


@nbagent.tool
def echo(text: str) -> str:
    """Echo text back.

    Args:
        text: The text.
    """
    ran.append(text)
    return f"you said {text}"


def _chat(h: Harness, *tools: Any, store: Path | None = None) -> Chat:
    return Chat(provider=h.provider, stream=h.stream, store=store, display=False).with_tools(*tools)


def _results(chat: Chat) -> list[ToolResultMessage]:
    return [m for m in chat.transcript if isinstance(m, ToolResultMessage)]


def _sent_ids(body: dict[str, Any]) -> tuple[list[list[str]], list[str]]:
    """The call ids of each assistant message of a wire request, and the ids results answer."""
    calls: list[list[str]] = []
    results: list[str] = []
    if "input" in body:  # Responses: a run of function_call items is one assistant message
        previous = None
        for item in body["input"]:
            kind = item.get("type")
            if kind == "function_call":
                if previous != "function_call":
                    calls.append([])
                calls[-1].append(item["call_id"])
            elif kind == "function_call_output":
                results.append(item["call_id"])
            previous = kind
        return calls, results
    for m in body["messages"]:
        if m["role"] == "assistant" and m.get("tool_calls"):  # Chat Completions
            calls.append([c["id"] for c in m["tool_calls"]])
        elif m["role"] == "tool":
            results.append(m["tool_call_id"])
        elif isinstance(m.get("content"), list):  # Anthropic
            uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
            if uses:
                calls.append(uses)
            results += [b["tool_use_id"] for b in m["content"] if b["type"] == "tool_result"]
    return calls, results


# ------------------------------------------------------------- item 1: repeated ids
@pytest.mark.parametrize("stored", [False, True], ids=["memory", "store"])
def test_repeated_wire_ids_stay_apart_end_to_end(
    harness: Harness, stored: bool, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    chat = _chat(harness, refund, store=db if stored else None)
    harness.script(
        Turn(
            tool_calls=[
                FakeToolCall("refund", {"order_id": 1}, id="dup"),
                FakeToolCall("refund", {"order_id": 2}, id="dup"),
            ]
        ),
        Turn(tool_calls=[FakeToolCall("refund", {"order_id": 3}, id="dup")]),
        Turn(text="Refunded 1 and 3."),
        Turn(text="Still here."),
    )
    chat.ask("Refund orders 1 and 2.")
    first, second = chat.pending_approvals
    assert (first.id, first.arguments) == ("dup", {"order_id": 1})
    assert (second.id, second.arguments) == ("dup_2", {"order_id": 2})
    chat.approve(chat.pending_approvals[0])
    chat.deny(second, reason="not this one")
    chat.complete()
    assert ran == [1]  # the first call, with its own arguments
    third = chat.pending_approvals[0]
    assert (third.id, third.arguments) == ("dup_3", {"order_id": 3})
    chat.approve(third)
    assert chat.complete().content == "Refunded 1 and 3."  # type: ignore[union-attr]
    assert ran == [1, 3]
    # the ids went back on the wire as the chat knows them, and the strict server took them
    calls, results = _sent_ids(harness.body)
    assert calls == [["dup", "dup_2"], ["dup_3"]]
    assert results == ["dup", "dup_2", "dup_3"]
    assert len(chat.log) == 3
    assert list(chat.log["call_id"]) == ["dup", "dup_2", "dup_3"]
    contents = [r.content for r in _results(chat)]
    assert [r.tool_call_id for r in _results(chat)] == ["dup", "dup_2", "dup_3"]
    assert "refunded 1" in contents[0] and "not this one" in contents[1]
    assert "refunded 3" in contents[2]
    if stored:
        chat.close()
        again = Chat.load(chat.id, store=db, tools=[refund], provider=harness.provider)
        assert [(c.id, c.arguments, c.status) for c in again.tool_calls] == [
            ("dup", {"order_id": 1}, "ok"),
            ("dup_2", {"order_id": 2}, "denied"),
            ("dup_3", {"order_id": 3}, "ok"),
        ]
        assert [r.content for r in _results(again)] == contents
        assert again.ask("Anything else?").content == "Still here."  # type: ignore[union-attr]
        assert _sent_ids(harness.body) == (calls, results)
        again.close()


def _chunk(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"tool_calls": list(calls)}}]}


def _fragment(index: int, arguments: str) -> dict[str, Any]:
    # a server that repeats the id and name in every fragment, the same id for both calls
    return {
        "index": index,
        "id": "dup",
        "type": "function",
        "function": {"name": "refund", "arguments": arguments},
    }


def test_chat_stream_keeps_two_calls_with_one_id_apart_by_index() -> None:
    acc = ChatStream(None, model="m", provider="p")
    acc.feed(_chunk(_fragment(0, '{"order_')))
    acc.feed(_chunk(_fragment(1, '{"order_id"')))
    acc.feed(_chunk(_fragment(0, 'id": 1}'), _fragment(1, ": 2}")))
    acc.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    r = acc.finish()
    assert [(c.id, c.name, c.arguments) for c in r.tool_calls] == [
        ("dup", "refund", {"order_id": 1}),
        ("dup", "refund", {"order_id": 2}),
    ]


# ------------------------------------------------------------- item 6: keys never leak
OPENAI_KEY = "sk-proj-Kq7TtY2vN9xLm4Rb8Zc1Wd6Ps3Hf0Ja5"
ANTHROPIC_KEY = "sk-ant-api03-Zx8Cv7Bn6Mm5Ll4Kk3Jj2Hh1Gg0Ff9Dd8Ss7Aa6"
OTHER_KEY = "sk-ant-api03-Qw1Er2Ty3Ui4Op5As6Df7Gh8Jk9Lz0Xc1Vb2"
"""A key-like string that is not the configured key (an echo of another credential)."""


def _keyed(harness: Harness) -> str:
    """Give the harness a provider holding a realistic key; returns the key."""
    key = ANTHROPIC_KEY if harness.api == "anthropic" else OPENAI_KEY
    harness.provider.close()
    harness.provider = make_provider(harness.kind, harness.server, api_key=key)
    return key


LEAKS = {
    "http status": Turn(status=401, error={"message": "Incorrect API key provided: {key}."}),
    "200 error body or stream error event": Turn(
        text="Partial answer",
        inline_error={"message": "upstream rejected {key} and {other}", "type": "api_error"},
    ),
    "unparseable answer": Turn(raw_body="<html>502 bad gateway for key={key} {other}</html>"),
}


def _assert_nowhere(secrets: tuple[str, ...], *texts: str) -> None:
    for text in texts:
        for secret in secrets:
            assert secret not in text


@pytest.mark.parametrize("path", LEAKS)
def test_keys_never_leave_a_failed_request(harness: Harness, path: str, tmp_path: Path) -> None:
    key = _keyed(harness)
    turn = LEAKS[path]
    template = turn.error or turn.inline_error
    if template is not None:
        message = template["message"].format(key=key, other=OTHER_KEY)
        if turn.error is not None:
            turn = Turn(status=turn.status, error={**template, "message": message})
        else:
            turn = Turn(text=turn.text, inline_error={**template, "message": message})
    else:
        turn = Turn(raw_body=(turn.raw_body or "").format(key=key, other=OTHER_KEY))
    db = tmp_path / "s.db"
    chat = _chat(harness, echo, store=db)
    failures: list[ModelRequestFailed] = []
    chat.on(ModelRequestFailed, failures.append)  # type: ignore[arg-type]
    harness.script(turn)
    with pytest.raises(ProviderError) as info:
        chat.ask("hello")
    err = info.value
    shown = str(err) + repr(err) + "".join(traceback.format_exception(err))
    assert "***" in str(err)  # the message is kept, the key is not
    assert len(failures) == 1
    steps = chat.steps.to_string() + repr(chat.steps.to_dict())
    chat.close()
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*"))
    secrets = (key, OTHER_KEY)
    _assert_nowhere(secrets, shown, failures[0].error, repr(failures[0]), steps)
    assert not any(s.encode() in stored for s in secrets)
    assert failures[0].error in stored.decode("utf-8", "replace")  # the scrubbed text is stored


@pytest.mark.parametrize("kind", ["openai-chat", "openai-responses", "anthropic"])
def test_keys_never_leave_a_connection_error(kind: str, server: FakeLLMServer) -> None:
    key = ANTHROPIC_KEY if kind == "anthropic" else OPENAI_KEY

    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError(f"proxy http://me:{key}@proxy.local refused {key}")

    provider = make_provider(
        kind, server, api_key=key, http_client=httpx2.Client(transport=httpx2.MockTransport(refuse))
    )
    chat = Chat(provider=provider, display=False)
    failures: list[ModelRequestFailed] = []
    chat.on(ModelRequestFailed, failures.append)  # type: ignore[arg-type]
    with pytest.raises(nbagent.ProviderConnectionError) as info:
        chat.ask("hello")
    err = info.value
    assert "refused ***" in str(err)
    shown = str(err) + repr(err) + "".join(traceback.format_exception(err))
    _assert_nowhere((key,), shown, failures[0].error, chat.steps.to_string())
    provider.close()


def test_the_scrubber() -> None:
    from nbagent.providers._errors import scrub

    assert scrub(f"key {OPENAI_KEY}!", (OPENAI_KEY,)) == "key ***!"
    assert scrub(f"also {OTHER_KEY}.", ()) == "also sk-ant-***."  # shaped like a key
    assert scrub("Authorization: Bearer abc123def456ghi789", ()) == "Authorization: Bearer ***"
    assert scrub("http://me:pw@host/v1", ()) == "http://***@host/v1"
    for prose in ("Bearer authentication failed", "a desk-1234567890123456 lamp", "sk-short1"):
        assert scrub(prose, ()) == prose


def test_keys_never_leave_async_requests(harness: Harness) -> None:
    key = _keyed(harness)
    harness.script(Turn(inline_error={"message": f"bad key {key}", "type": "api_error"}))
    with pytest.raises(ProviderError) as info:
        harness.ask_async([ChatMessage("user", "hi")])
    assert key not in str(info.value) + "".join(traceback.format_exception(info.value))


# ----------------------------------------------------- items 9 and 11: unusable arguments
DEEP = '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}"

UNUSABLE = {
    "100,000 deep": (DEEP, "nested more than 200 levels deep"),
    "NaN": ('{"x": NaN}', "NaN is not a JSON number"),
    "Infinity": ('{"x": [1, Infinity]}', "Infinity is not a JSON number"),
    "-Infinity": ('{"x": {"y": -Infinity}}', "-Infinity is not a JSON number"),
    "1e999": ('{"x": 1e999}', "Infinity is not a JSON number"),
}


@pytest.mark.parametrize("case", UNUSABLE)
def test_unusable_arguments_are_a_parse_error_at_the_adapter(harness: Harness, case: str) -> None:
    text, problem = UNUSABLE[case]
    harness.script(Turn(tool_calls=[FakeToolCall("take", raw_arguments=text)]))
    (call,) = harness.ask([ChatMessage("user", "go")]).tool_calls
    assert call.arguments == {}
    assert call.parse_error is not None and problem in call.parse_error


@pytest.mark.parametrize("case", UNUSABLE)
def test_unusable_arguments_are_answered_not_run_and_never_resent(
    harness: Harness, case: str, tmp_path: Path
) -> None:
    text, problem = UNUSABLE[case]
    chat = _chat(harness, take, store=tmp_path / "s.db")
    harness.script(
        Turn(
            tool_calls=[
                FakeToolCall("take", raw_arguments=text),
                FakeToolCall("take", {"x": 1}),
            ]
        ),
        Turn(text="done"),
    )
    assert chat.ask("go").content == "done"  # type: ignore[union-attr]
    assert ran == [1]  # only the usable call ran
    bad, good = chat.tool_calls
    assert bad.status == "error" and good.status == "ok"
    assert problem in (bad.result.content or "")  # type: ignore[union-attr]
    # the next request was strict JSON (the server refuses NaN and Infinity) and small
    sent = harness.server.requests[-1]
    assert len(json.dumps(sent.body)) < 10_000
    chat.close()


def test_server_json_too_deep_for_python_still_parses_around_it() -> None:
    from nbagent.providers._sdk import loads, make_call

    deep = "[" * 100_000 + "]" * 100_000
    body = loads(('{"a": "[{\\"", "input": {"x": ' + deep + '}, "c": [2]}').encode())
    assert body["a"] == '[{"' and body["c"] == [2]  # brackets inside strings are text
    call = make_call("id", "take", body["input"])
    assert call.parse_error == "the arguments are nested more than 200 levels deep"
    assert (call.arguments, call.raw_arguments) == ({}, "(not shown)")
    shallow = {"x": [[[1.5]]], "y": {"z": [True, None, "NaN"]}}
    assert make_call("id", "take", shallow).arguments == shallow
    nan = make_call("id", "take", {"x": float("nan")})
    assert (nan.raw_arguments, nan.parse_error) == (
        '{"x": NaN}',
        "invalid JSON: NaN is not a JSON number",
    )


# --------------------------------------------------------- item 5: lone surrogates
@pytest.mark.parametrize("stored", [False, True], ids=["memory", "store"])
def test_lone_surrogates_from_the_server_never_break_the_next_request(
    harness: Harness, stored: bool, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    chat = _chat(harness, echo, store=db if stored else None)
    harness.script(
        Turn(text="Let me \ud800 check.", tool_calls=[FakeToolCall("echo", {"text": "a\udc80b"})]),
        Turn(text="You said a\ufffdb \udfff."),
        Turn(text="Fine."),
    )
    reply = chat.ask("Say something odd")
    assert reply.content == "You said a\ufffdb \ufffd."  # type: ignore[union-attr]
    assert ran == ["a\ufffdb"]
    first, _ = _sent_ids(harness.body)
    assert len(first) == 1  # the second request went through (strict UTF-8, no lone escapes)
    assert chat.ask("Again").content == "Fine."  # type: ignore[union-attr]
    for m in chat.transcript:
        json.dumps(getattr(m, "content", None), ensure_ascii=False).encode("utf-8")
    if stored:
        chat.close()
        again = Chat.load(chat.id, store=db, tools=[echo], provider=harness.provider)
        assert [getattr(m, "content", None) for m in again.transcript] == [
            getattr(m, "content", None) for m in chat.transcript
        ]
        assert isinstance(again.transcript[1], AssistantToolCallMessage)
        harness.script(Turn(text="Loaded."))
        assert again.ask("And now?").content == "Loaded."  # type: ignore[union-attr]
        again.close()
