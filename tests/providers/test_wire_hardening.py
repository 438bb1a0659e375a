"""Hardening (issue 13) at the wire: every API, JSON and streaming, through the real SDK
clients and the strict fake server (which refuses what the real APIs refuse).

Repeated call ids (item 1), lone surrogates (item 5).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _provider_harness import Harness

import nbagent
from nbagent import AssistantToolCallMessage, Chat, ToolResultMessage
from nbagent.providers._openai_wire import ChatStream
from nbagent.testing import FakeToolCall, Turn

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
