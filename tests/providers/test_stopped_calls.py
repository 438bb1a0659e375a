"""A tool call in a response the provider stopped (refused, content-filtered, incomplete for any
reason) never runs.

Chat Completions ``finish_reason="content_filter"``, Anthropic ``stop_reason="refusal"`` and a
Responses response with ``status="incomplete"`` (``content_filter``, or a reason nbagent does
not know, read as ``"other"``) are responses the provider did not let finish: their calls ran
all the same (``delete_records`` deleted), unlike a ``max_tokens`` stop. Now the chat answers
each such call ``skipped`` with a message naming the stop, and ``complete_with_tools`` raises
``ToolArgumentsError`` as it does for a cut-off response. Through the real SDK clients against
the strict loopback fake server, which accepts the follow-up request.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _provider_harness import KINDS, Harness, make_provider

from nbagent import Chat, ChatMessage, ToolArgumentsError, ToolResultMessage, tool
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

DELETE = {
    "name": "delete_records",
    "description": "Delete the records matching a filter.",
    "input_schema": {"type": "object", "properties": {"where": {"type": "string"}}},
}


def _stop(kind: str) -> str:
    return "refusal" if kind == "anthropic" else "content_filter"


def _deleter(ran: list[str]) -> Any:
    @tool
    def delete_records(where: str) -> str:
        """Delete the records matching a filter."""
        ran.append(where)
        return "deleted"

    return delete_records


def _stopped_turn(kind: str) -> Turn:
    return Turn(
        tool_calls=[FakeToolCall("delete_records", {"where": "id = 4"}, id="call_del")],
        stop=_stop(kind),  # type: ignore[arg-type]
    )


def test_a_refused_or_filtered_response_s_call_is_skipped_never_run(harness: Harness) -> None:
    ran: list[str] = []
    harness.script(_stopped_turn(harness.kind), Turn(text="I will not delete it."))
    chat = Chat(provider=harness.provider, stream=harness.stream).with_tools(_deleter(ran))
    reply = chat.ask("Delete record 4.")
    assert ran == []
    assert reply.content == "I will not delete it."
    (result,) = [m for m in chat.transcript if isinstance(m, ToolResultMessage)]
    assert result.status == "skipped"
    assert "the provider stopped this response" in result.content
    assert "stop reason refusal" in result.content
    assert _stop(harness.kind) in result.content  # the provider's own word: content_filter
    # the record says what happened: the step's stop, the call skipped, never started
    steps = chat.steps
    assert steps["stop_reason"].tolist() == ["refusal", "end"]
    assert steps["raw_stop_reason"].iloc[0] == _stop(harness.kind)
    log = chat.log
    assert log["status"].tolist() == ["skipped"]
    assert log["started_at"].isna().all()
    # the strict server took the follow-up with the skipped call answered
    requests = harness.server.requests
    assert len(requests) == 2
    sent = json.dumps(requests[1].body)
    assert "the provider stopped this response" in sent


def test_complete_with_tools_raises_for_a_refused_or_filtered_response(harness: Harness) -> None:
    harness.script(_stopped_turn(harness.kind))
    with pytest.raises(ToolArgumentsError) as info:
        harness.provider.complete_with_tools(
            messages=[ChatMessage(role="user", content="Delete record 4.")],
            tools=[DELETE],
            stream=harness.stream,
        )
    error = info.value
    (call,) = error.calls
    assert call.name == "delete_records" and call.arguments == {"where": "id = 4"}
    assert error.response.stop_reason == "refusal"
    problem = error.problems[call.id]
    assert "the provider stopped the response" in problem and _stop(harness.kind) in problem
    assert "nothing was run" in str(error) and "raise max_tokens" not in str(error)


def _incomplete(reason: str) -> dict[str, Any]:
    """A Responses response the provider left incomplete, with a call in it."""
    return {
        "id": "resp_9",
        "object": "response",
        "created_at": 1_750_000_000,
        "status": "incomplete",
        "incomplete_details": {"reason": reason},
        "model": "gpt-4.1-mini",
        "output": [
            {
                "type": "function_call",
                "id": "fc_9",
                "call_id": "call_9",
                "name": "delete_records",
                "arguments": '{"where":"id = 4"}',
                "status": "completed",
            }
        ],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("reason", ["content_filter", "a_reason_nbagent_does_not_know"])
def test_an_incomplete_responses_response_s_call_never_runs(
    server: FakeLLMServer, stream: bool, reason: str
) -> None:
    body = _incomplete(reason)
    raw = json.dumps(
        {"type": "response.incomplete", "sequence_number": 0, "response": body} if stream else body
    )
    server.script([Turn(raw_body=raw), Turn(text="ok"), Turn(raw_body=raw)])
    provider = make_provider("openai-responses", server)
    ran: list[str] = []
    chat = Chat(provider=provider, stream=stream).with_tools(_deleter(ran))
    assert chat.ask("Delete record 4.").content == "ok"
    assert ran == []
    (result,) = [m for m in chat.transcript if isinstance(m, ToolResultMessage)]
    assert result.status == "skipped" and reason in result.content
    assert chat.steps["raw_stop_reason"].iloc[0] == reason
    with pytest.raises(ToolArgumentsError, match=reason):
        provider.complete_with_tools(
            messages=[ChatMessage(role="user", content="Delete record 4.")],
            tools=[DELETE],
            stream=stream,
        )
    provider.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_cut_off_response_still_says_token_limit(server: FakeLLMServer, kind: str) -> None:
    """The max_tokens answer is unchanged (its message tells the model to call again)."""
    cut = FakeToolCall("delete_records", raw_arguments='{"where": "id = 4')
    server.script([Turn(tool_calls=[cut], stop="max_tokens"), Turn(text="ok")])
    provider = make_provider(kind, server)
    ran: list[str] = []
    chat = Chat(provider=provider).with_tools(_deleter(ran))
    chat.ask("Delete record 4.")
    (result,) = [m for m in chat.transcript if isinstance(m, ToolResultMessage)]
    assert ran == [] and result.status == "skipped"
    assert "cut off by the token limit" in result.content
    provider.close()
