"""A hosted approval request obeys the tool choice and a stopped response like a function call.

Two gaps beside the calls limit (see test_hosted_calls_count_toward_the_limit.py):

- ``choice="none"`` (no tool may be called) and a named choice (``choice="get_weather"``)
  left an OpenAI Responses ``mcp_approval_request`` out: the request was put to the person
  (and an ``always_allow`` policy approved it), so the provider ran a tool the choice did
  not allow, while a function call in the same place was skipped. The seed's rule: the model
  may call only the chosen tool, or none. A request outside the choice is now denied at once
  (``approve: false``, the skipped call's off-choice text as its reason), nobody asked and no
  policy consulted, and it does not spend a forced choice.
- A response the provider stopped (cut off at ``max_tokens``, a content filter) has its
  function calls skipped ("Not executed: ..."), but its approval request was still asked
  about; it is now denied at once with that same text.

``required``: a hosted approval request is a tool call the model made, so once someone
decides it (approved, the provider runs it; a denial too, as for a function call) it spends
the choice; one nbagent denied itself does not.

The record says so: status ``denied``, no decision (the log's ``decision`` is ``none``),
also after the chat is loaded from its store. Through the real OpenAI SDK against the
loopback fake server, streamed and not.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from nbagent import ApprovalRequested, Chat, HostedMCP, tool
from nbagent.providers import OpenAIProvider
from nbagent.store import SQLiteStore
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn, mcp_approval_request

KEY = "sk-test-SECRET-0123456789"
NONE_TEXT = "Not executed: no tool calls were allowed in this response (tool choice 'none')."
NAMED_TEXT = "Not executed: this response was to call get_weather only (tool choice)."
CUT_TEXT = "Not executed: the response was cut off by the token limit"
STOPPED_TEXT = "Not executed: the provider stopped this response (stop reason refusal"

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


STREAM = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])


def _provider(server: FakeLLMServer) -> OpenAIProvider:
    return OpenAIProvider(
        "gpt-4.1-mini",
        api="responses",
        base_url=server.openai_base_url,
        api_key=KEY,
        compatible=False,
        max_retries=0,
    )


def _chat(server: FakeLLMServer, stream: bool, store: Any = None, **options: Any) -> Chat:
    ran.clear()
    wiki = HostedMCP("wiki", server_url="https://mcp.example.com/mcp", require_approval="always")
    chat = Chat(provider=_provider(server), display=False, stream=stream, store=store)
    return chat.with_tools(get_weather, wiki).with_tool_options(**options)


def _ask(id: str = "mcpr_1") -> Any:
    return mcp_approval_request("wiki", "ask", {"q": "a"}, id=id)


def _weather(city: str = "Oslo") -> FakeToolCall:
    return FakeToolCall("get_weather", {"city": city}, id=f"call_{city}")


def _approval_responses(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        i["approval_request_id"]: i
        for i in body["input"]
        if i.get("type") == "mcp_approval_response"
    }


def _forced(body: dict[str, Any]) -> str:
    sent = body.get("tool_choice", "auto")
    return sent if isinstance(sent, str) else str(sent.get("name") or sent["type"])


def _refused_unasked(chat: Chat, asked: list[Any], text: str, id: str = "mcpr_1") -> None:
    """The request was denied by nbagent itself: nobody asked, no decision, ``text`` why."""
    assert asked == [] and not chat.pending_approvals
    call = chat.get_call(id)
    assert call.hosted and call.status == "denied" and call.decision is None
    assert call.result is not None and json.loads(call.result.content)["reason"].startswith(text)
    row = chat.log.set_index("call_id").loc[id]
    assert row["status"] == "denied" and row["decision"] == "none"


def _sent_denied(server: FakeLLMServer, text: str, id: str = "mcpr_1") -> None:
    """The request went back to the provider once, as ``approve: false`` with ``text``."""
    sent = _approval_responses(server.requests[-1].body)
    assert sent[id]["approve"] is False and sent[id]["reason"].startswith(text)


# -- choice="none": no tool, hosted or not -------------------------------------------


@STREAM
def test_choice_none_denies_a_hosted_request_unasked(server: FakeLLMServer, stream: bool) -> None:
    """The probe's ``[appr none]``: the request was put to the person; now it is denied at
    once, even with a policy that would approve it, like the function call beside it."""
    server.script([Turn(hosted=[_ask()], tool_calls=[_weather()]), "done"])
    chat = _chat(server, stream, choice="none").always_allow("ask")
    asked: list[Any] = []
    chat.on(ApprovalRequested, asked.append)
    assert chat.ask("go").content == "done" and chat.status == "complete"
    _refused_unasked(chat, asked, NONE_TEXT)
    assert ran == [] and chat.get_call("call_Oslo").status == "skipped"
    _sent_denied(server, NONE_TEXT)


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_a_chat_with_hosted_tools_only_keeps_its_own_choice(
    server: FakeLLMServer, choice: str
) -> None:
    """No tool of the chat's own: the chat's choice is sent with the hosted tool (see
    test_hosted_only_choice_is_sent.py); a hosted request the provider makes anyway stands
    under it, asked about with ``auto``, denied unasked with ``none``."""
    server.script([Turn(hosted=[_ask()]), "done"])
    wiki = HostedMCP("wiki", server_url="https://mcp.example.com/mcp", require_approval="always")
    chat = Chat(provider=_provider(server), display=False).with_tools(wiki)
    chat.with_tool_options(choice=choice)
    asked: list[Any] = []
    chat.on(ApprovalRequested, asked.append)
    chat.ask("go")
    assert server.requests[0].body["tool_choice"] == choice
    if choice == "auto":
        assert [c.id for c in chat.pending_approvals] == ["mcpr_1"] and len(asked) == 1
        chat.approve("mcpr_1")
        chat.complete()
        assert _approval_responses(server.requests[-1].body)["mcpr_1"]["approve"] is True
    else:
        _refused_unasked(chat, asked, NONE_TEXT)
        _sent_denied(server, NONE_TEXT)


# -- a named choice: only that tool --------------------------------------------------


@STREAM
def test_a_named_choice_denies_a_hosted_request_for_another_tool(
    server: FakeLLMServer, stream: bool
) -> None:
    server.script([Turn(hosted=[_ask()], tool_calls=[_weather()]), "done"])
    chat = _chat(server, stream, choice="get_weather").always_allow("ask")
    asked: list[Any] = []
    chat.on(ApprovalRequested, asked.append)
    assert chat.ask("go").content == "done"
    _refused_unasked(chat, asked, NAMED_TEXT)
    assert ran == ["Oslo"]  # the chosen tool ran
    _sent_denied(server, NAMED_TEXT)
    assert [_forced(r.body) for r in server.requests] == ["get_weather", "auto"]


def test_an_off_choice_hosted_request_does_not_spend_the_choice(server: FakeLLMServer) -> None:
    """A response holding only a request for another tool: denied, and the next request is
    still forced to the named tool (the model never called it)."""
    server.script([Turn(hosted=[_ask()]), Turn(tool_calls=[_weather()]), "done"])
    chat = _chat(server, False, choice="get_weather")
    assert chat.ask("go").content == "done"
    assert chat.get_call("mcpr_1").status == "denied" and ran == ["Oslo"]
    assert [_forced(r.body) for r in server.requests] == ["get_weather", "get_weather", "auto"]
    assert _approval_responses(server.requests[1].body)["mcpr_1"]["approve"] is False


def test_an_off_choice_request_leaves_the_limit_to_the_chosen_tool(server: FakeLLMServer) -> None:
    """Not counted toward ``calls`` either (the limit counts only the named tool's calls)."""
    server.script([Turn(hosted=[_ask()], tool_calls=[_weather()]), "done"])
    chat = _chat(server, False, choice="get_weather", calls="one")
    chat.ask("go")
    assert ran == ["Oslo"] and chat.get_call("mcpr_1").status == "denied"


# -- required: a hosted request is a tool call -------------------------------------


@pytest.mark.parametrize("verdict", ["approve", "deny"])
def test_a_decided_hosted_request_spends_required(server: FakeLLMServer, verdict: str) -> None:
    server.script([Turn(hosted=[_ask()]), "done"])
    chat = _chat(server, False, choice="required")
    chat.ask("go")
    assert [c.id for c in chat.pending_approvals] == ["mcpr_1"]
    getattr(chat, verdict)("mcpr_1")
    assert chat.complete().content == "done"
    assert [_forced(r.body) for r in server.requests] == ["required", "auto"]
    assert _approval_responses(server.requests[1].body)["mcpr_1"]["approve"] is (
        verdict == "approve"
    )


def test_a_hosted_request_denied_by_the_limit_leaves_required_in_force(
    server: FakeLLMServer,
) -> None:
    """Two requests, ``calls="one"``: the first is asked about; the second, denied by the
    limit, is nobody's decision. Both denied by the person: the first spends the choice."""
    server.script([Turn(hosted=[_ask("mcpr_1"), _ask("mcpr_2")]), "done"])
    chat = _chat(server, False, choice="required", calls="one")
    chat.ask("go")
    assert [c.id for c in chat.pending_approvals] == ["mcpr_1"]
    assert chat.get_call("mcpr_2").status == "denied"
    chat.deny("mcpr_1")
    chat.complete()
    assert [_forced(r.body) for r in server.requests] == ["required", "auto"]


# -- a response the provider stopped ---------------------------------------------


@STREAM
@pytest.mark.parametrize(
    ("stop", "text"), [("max_tokens", CUT_TEXT), ("content_filter", STOPPED_TEXT)]
)
def test_a_hosted_request_in_a_stopped_response_is_denied_unasked(
    server: FakeLLMServer, stream: bool, stop: str, text: str
) -> None:
    server.script([Turn(hosted=[_ask()], tool_calls=[_weather()], stop=stop), "done"])
    chat = _chat(server, stream).always_allow("ask")
    asked: list[Any] = []
    chat.on(ApprovalRequested, asked.append)
    assert chat.ask("go").content == "done"
    _refused_unasked(chat, asked, text)
    fn = chat.get_call("call_Oslo")
    assert ran == [] and fn.status == "skipped" and fn.result is not None
    assert fn.result.content == json.loads(chat.get_call("mcpr_1").result.content)["reason"]
    _sent_denied(server, text)


# -- the record ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "turn", "text"),
    [
        ({"choice": "none"}, Turn(hosted=[_ask()]), NONE_TEXT),
        ({"choice": "get_weather"}, Turn(hosted=[_ask()], tool_calls=[_weather()]), NAMED_TEXT),
        ({}, Turn(hosted=[_ask()], stop="max_tokens"), CUT_TEXT),
    ],
    ids=["none", "named", "cut-off"],
)
def test_the_denial_survives_a_store_reload(
    server: FakeLLMServer, tmp_path: Any, options: dict[str, Any], turn: Turn, text: str
) -> None:
    path = os.fspath(tmp_path / "chats.db")
    server.script([turn, "done", "again"])
    chat = _chat(server, False, store=SQLiteStore(path), **options)
    chat.ask("go")
    loaded = Chat.load(
        chat.id, store=SQLiteStore(path), provider=_provider(server), tools=[get_weather]
    )
    asked: list[Any] = []
    loaded.on(ApprovalRequested, asked.append)
    _refused_unasked(loaded, asked, text)
    assert not SQLiteStore(path).pending_approvals()
    assert loaded.ask("more").content == "again"  # nothing waits: the chat goes on
    _sent_denied(server, text)
