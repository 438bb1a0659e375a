"""``complete_with_tools()`` never hands back a call whose arguments did not arrive whole as
if the model had sent ``{}``.

The Ragrails loop runs ``run_my_tool(call.name, call.arguments)``: a ``delete_records`` call
whose ``{"where": "id = 4`` was cut off (or ``not json``, or a JSON list) came back with
``arguments == {}`` (only the undocumented ``parse_error`` told), and the loop deleted
everything. Such a response now comes on a ``ToolArgumentsError`` (a ``ProviderError``)
naming each call, why, and the text the model sent; the whole response is on the error, so
the loop can answer the calls with an error result and go on. Through the real SDK clients
against the loopback fake server; the docs' own-loop check runs here as written.
"""

from __future__ import annotations

import asyncio
import json
import pickle
from typing import Any

import pytest
from _docs import DOCS, blocks
from _provider_harness import KEY, KINDS, Harness, make_provider

import nbagent
from nbagent import (
    AssistantToolCallMessage,
    ChatMessage,
    ProviderError,
    ToolArgumentsError,
    ToolResultMessage,
)
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

DELETE = {
    "name": "delete_records",
    "description": "Delete the records matching a filter (all of them without one).",
    "input_schema": {"type": "object", "properties": {"where": {"type": "string"}}},
}
ASK = [ChatMessage(role="user", content="Delete record 4.")]


def _ask(h: Harness, **kwargs: Any) -> Any:
    return h.provider.complete_with_tools(messages=ASK, tools=[DELETE], stream=h.stream, **kwargs)


def test_a_call_cut_off_by_the_token_limit_is_an_error_carrying_the_response(
    harness: Harness,
) -> None:
    """``finish_reason="length"`` mid-arguments (Anthropic's ``max_tokens``: a non-streamed
    ``input`` is then an object, possibly ``{}``): never returned as a runnable call."""
    cut = FakeToolCall("delete_records", id="call_cut", raw_arguments='{"where": "id = 4')
    harness.script(Turn(text="Deleting it.", tool_calls=[cut], stop="max_tokens"))
    with pytest.raises(ToolArgumentsError) as info:
        _ask(harness)
    error = info.value
    assert isinstance(error, ProviderError)
    (call,) = error.response.tool_calls
    assert error.calls == (call,) and call.name == "delete_records"
    assert set(error.problems) == {call.id}
    assert error.response.stop_reason == "max_tokens" and error.response.text == "Deleting it."
    assert error.response.output_tokens > 0  # usage kept: nothing of the response is lost
    text = str(error)
    assert f"delete_records ({call.id})" in text and "nothing was run" in text
    assert "raise max_tokens" in text and "cut off" in error.problems[call.id]
    if call.parse_error is not None:  # the text arrived as text: quoted, not an empty dict
        assert call.raw_arguments == '{"where": "id = 4'
        assert repr('{"where": "id = 4') in text
    assert error.provider == harness.provider.name


BROKEN = {
    "not_json": ("not json", "invalid JSON"),
    "a_list": ('["id = 4"]', "expected a JSON object, got list"),
    "unclosed": ('{"where": "id = 4"', "invalid JSON"),
    "nan": ('{"where": NaN}', "NaN is not a JSON number"),
}


# a non-streamed Anthropic call's input is a JSON object on the wire: no text to break
TEXT_WIRES = [(k, s) for k in KINDS for s in (False, True) if s or k != "anthropic"]


@pytest.mark.parametrize("raw", list(BROKEN), ids=list(BROKEN))
@pytest.mark.parametrize(
    "harness",
    TEXT_WIRES,
    ids=[f"{k}-{'stream' if s else 'json'}" for k, s in TEXT_WIRES],
    indirect=True,
)
def test_arguments_that_are_not_a_json_object_are_an_error_naming_the_call_and_the_text(
    harness: Harness, raw: str
) -> None:
    text, why = BROKEN[raw]
    harness.script(Turn(tool_calls=[FakeToolCall("delete_records", raw_arguments=text)]))
    with pytest.raises(ToolArgumentsError) as info:
        _ask(harness)
    (call,) = info.value.response.tool_calls
    assert call.arguments == {} and call.raw_arguments == text
    assert why in info.value.problems[call.id] and why in str(info.value)
    assert repr(text) in str(info.value) and call.id in str(info.value)
    assert "raise max_tokens" not in str(info.value)


def test_the_async_twin_raises_the_same(harness: Harness) -> None:
    harness.script(
        Turn(
            tool_calls=[FakeToolCall("delete_records", raw_arguments='{"where"')], stop="max_tokens"
        )
    )

    async def go() -> Any:
        return await harness.provider.complete_with_tools_async(
            messages=ASK, tools=[DELETE], stream=harness.stream
        )

    with pytest.raises(ToolArgumentsError) as info:
        asyncio.run(go())
    assert [c.name for c in info.value.calls] == ["delete_records"]


@pytest.mark.parametrize("kind", ["openai-chat", "openai-responses", "openai-compatible"])
def test_a_whole_call_beside_a_broken_one_is_not_named_and_the_loop_goes_on(
    server: FakeLLMServer, kind: str
) -> None:
    """The error names only the broken call; answering it with an error result (the text
    sent back as the model wrote it) and running the other, the next request goes through."""
    provider = make_provider(kind, server)
    server.script(
        [
            Turn(
                tool_calls=[
                    FakeToolCall("delete_records", {"where": "id = 5"}, id="call_ok"),
                    FakeToolCall("delete_records", raw_arguments="not json", id="call_bad"),
                ]
            ),
            Turn(text="Record 5 is deleted; say which other record."),
        ]
    )
    with pytest.raises(ToolArgumentsError) as info:
        provider.complete_with_tools(messages=ASK, tools=[DELETE])
    error = info.value
    assert [c.id for c in error.calls] == ["call_bad"]
    assert [c.arguments for c in error.response.tool_calls] == [{"where": "id = 5"}, {}]
    messages: list[Any] = [
        *ASK,
        AssistantToolCallMessage(content=error.response.text, tool_calls=error.response.tool_calls),
        ToolResultMessage(tool_call_id="call_ok", content="deleted 1"),
        ToolResultMessage(tool_call_id="call_bad", content=f"Error: {error.problems['call_bad']}"),
    ]
    response = provider.complete_with_tools(messages=messages, tools=[DELETE])
    assert response.text.startswith("Record 5")
    sent = json.dumps(server.last_request.body)
    assert '"not json"' in sent  # the call goes back as the model wrote it
    provider.close()


def test_the_message_hides_a_key_the_model_wrote_and_clips_long_text(server: FakeLLMServer) -> None:
    provider = make_provider("openai-chat", server)
    raw = '{"where": "key = ' + KEY + " " + "x" * 500
    server.script([Turn(tool_calls=[FakeToolCall("delete_records", raw_arguments=raw)])])
    with pytest.raises(ToolArgumentsError) as info:
        provider.complete_with_tools(messages=ASK, tools=[DELETE])
    text = str(info.value)
    assert KEY not in text and "***" in text
    assert "x" * 300 not in text and f"({len(raw)} characters)" in text
    assert info.value.response.tool_calls[0].raw_arguments == raw  # the response keeps it all
    again = pickle.loads(pickle.dumps(info.value))  # a batch's worker sends it back whole
    assert again.problems == info.value.problems and str(again) == text
    provider.close()


def test_a_chat_still_answers_a_broken_call_with_an_error_result(server: FakeLLMServer) -> None:
    """The chat's path is unchanged: the call is answered, the tool never runs."""
    ran: list[Any] = []

    @nbagent.tool
    def delete_records(where: str = "") -> str:
        """Delete the records matching a filter."""
        ran.append(where)
        return "deleted"

    server.script(
        [
            Turn(tool_calls=[FakeToolCall("delete_records", raw_arguments='{"where": "id')]),
            Turn(text="Sorry, which record?"),
        ]
    )
    chat = nbagent.Chat(provider=make_provider("openai-chat", server)).with_tools(delete_records)
    reply = chat.ask("Delete record 4.")
    assert ran == [] and reply.content == "Sorry, which record?"
    assert list(chat.log["status"]) == ["error"]
    chat.close()


# -- the docs' own-loop check, as written -------------------------------------------------
PAGE = DOCS / "controlling-tool-execution.md"


def _check_block() -> str:
    found = [b for b in blocks(PAGE) if b.run_by == "test_broken_call_arguments.py"]
    assert len(found) == 1
    return found[0].code


@pytest.mark.parametrize("kind", ["openai-chat", "openai-responses", "anthropic"])
def test_the_docs_loop_answers_a_broken_call_and_runs_the_retried_one(
    server: FakeLLMServer, kind: str
) -> None:
    server.script(
        [
            Turn(
                tool_calls=[FakeToolCall("delete_records", raw_arguments='{"where": "id')],
                stop="max_tokens",
            ),
            Turn(tool_calls=[FakeToolCall("delete_records", {"where": "id = 4"})]),
            Turn(text="Record 4 is deleted."),
        ]
    )
    ran: list[tuple[str, dict[str, Any]]] = []
    llm = make_provider(kind, server)
    namespace: dict[str, Any] = {
        "llm": llm,
        "delete_records": DELETE,
        "run_tool": lambda name, arguments: ran.append((name, arguments)) or "deleted 1",
    }
    exec(compile(_check_block(), str(PAGE), "exec"), namespace)
    assert ran == [("delete_records", {"where": "id = 4"})]  # the broken call never ran
    assert namespace["response"].text == "Record 4 is deleted."
    answered = [m for m in namespace["messages"] if isinstance(m, ToolResultMessage)]
    assert answered[0].content.startswith("Error: the response was cut off")
    llm.close()
