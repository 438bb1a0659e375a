"""The notebook view with hosted calls (in-process, level 1): shown honestly, never crashing.

A hosted approval has the same decision card, with the server's label, saying
the provider runs the tool once approved (no argument editor: the core refuses
to edit a provider's call); a click sends exactly one ``mcp_approval_response``;
the decided call's line says the decision was sent to the provider; what the
provider did (a listing, a call, a web search, an unknown item) shows as folded
lines under its step, in the live view and the static HTML / markdown / text,
with everything the provider sent escaped.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _views import widgets_in

from nbagent import Chat, HostedMCP
from nbagent.notebook import ChatView, review
from nbagent.notebook._fallback import chat_mimebundle
from nbagent.notebook._widgets import ActionCard
from nbagent.providers import OpenAIProvider
from nbagent.testing import (
    FakeLLMServer,
    Turn,
    mcp_approval_request,
    mcp_call,
    mcp_list_tools,
    raw_item,
)

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


def test_a_hosted_approval_card_click_sends_one_approval(server: FakeLLMServer) -> None:
    server.script(
        [
            Turn(hosted=[mcp_approval_request("wiki", "ask", {"q": SCRIPT}, id="mcpr_1")]),
            Turn(
                text="done",
                hosted=[
                    mcp_call(
                        "wiki", "ask", {"q": SCRIPT}, output=SCRIPT, approval_request_id="mcpr_1"
                    ),
                    raw_item({"type": "future_thing", "id": "f_1", "note": SCRIPT}),
                ],
            ),
        ]
    )
    server.validator = None  # the unknown item fits no SDK type
    provider = OpenAIProvider(
        "gpt-4.1-mini", api="responses", base_url=server.openai_base_url, api_key="sk-test-1"
    )
    chat = Chat(provider=provider, display=False).with_tools(
        HostedMCP("wiki", server_url="https://wiki.example/mcp")
    )
    view = ChatView(chat)
    chat.ask("q")
    [call] = chat.pending_approvals
    [card] = [
        w
        for w in widgets_in(view)
        if isinstance(w, ActionCard) and w.kind == "approval" and w.call_id == call.id
    ]
    assert card.tool == "ask"
    card.click("approve")
    assert view.continuation.wait(10)
    assert chat.status == "complete"
    answers = [
        i for i in server.last_request.body["input"] if i.get("type") == "mcp_approval_response"
    ]
    assert answers == [
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}
    ]
    html = view._repr_mimebundle_()["text/html"]
    assert SCRIPT not in html
    static = chat_mimebundle(chat)  # the static fallback, too
    assert SCRIPT not in static["text/html"]


def test_review_at_a_prompt_decides_a_hosted_call(server: FakeLLMServer) -> None:
    server.script([Turn(hosted=[mcp_approval_request("wiki", "ask", id="mcpr_1")]), "done"])
    provider = OpenAIProvider(
        "gpt-4.1-mini", api="responses", base_url=server.openai_base_url, api_key="sk-test-1"
    )
    chat = Chat(provider=provider, display=False).with_tools(
        HostedMCP("wiki", server_url="https://wiki.example/mcp")
    )
    chat.ask("q")
    printed: list[str] = []
    review(chat, input=lambda _: "d", print=lambda *a: printed.append(" ".join(map(str, a))))
    assert chat.status == "complete"
    assert "wiki · ask (mcpr_1) needs approval" in "\n".join(printed)  # the server's label
    answers = [
        i for i in server.last_request.body["input"] if i.get("type") == "mcp_approval_response"
    ]
    assert [a["approve"] for a in answers] == [False]


def hosted_chat(server: FakeLLMServer, approval: str = "always") -> Chat:
    provider = OpenAIProvider(
        "gpt-4.1-mini", api="responses", base_url=server.openai_base_url, api_key="sk-test-1"
    )
    return Chat(provider=provider, display=False).with_tools(
        HostedMCP("wiki", server_url="https://wiki.example/mcp", require_approval=approval)
    )


def approval_card(view: ChatView, call_id: str) -> ActionCard:
    [card] = [
        w
        for w in widgets_in(view)
        if isinstance(w, ActionCard) and w.kind == "approval" and w.call_id == call_id
    ]
    return card


def test_a_hosted_card_names_the_server_says_the_provider_runs_it_and_offers_no_editor(
    server: FakeLLMServer,
) -> None:
    server.script(
        [
            Turn(
                hosted=[
                    mcp_list_tools("wiki", "ask", "read_page"),
                    mcp_approval_request("wiki", "ask", {"q": "tides"}, id="mcpr_1"),
                ]
            ),
            Turn(
                text="High tide is at noon.",
                hosted=[
                    mcp_call(
                        "wiki", "ask", {"q": "tides"}, output="noon", approval_request_id="mcpr_1"
                    )
                ],
            ),
        ]
    )
    chat = hosted_chat(server)
    view = ChatView(chat)
    chat.ask("When is high tide?")
    [call] = chat.pending_approvals
    assert (call.server, call.hosted) == ("wiki", True)
    card = approval_card(view, call.id)
    assert card.hosted and not card.editable
    assert "provider runs ask on wiki once you approve" in card.reason
    assert "nothing runs here" in card.value
    assert '<span class="nba-server" title="MCP server run by the provider wiki">wiki</span>' in (
        card.value
    )
    assert f'title="call {call.id}"' in card.value  # the id stays on hover
    # the listing the provider made before asking shows under its step, folded
    html = view._repr_mimebundle_()["text/html"]
    assert 'data-item-type="mcp_list_tools"' in html
    assert "wiki · listed tools" in html and "2 tools: ask, read_page" in html

    # editing a provider's call is refused, shown on the card; nothing is sent
    requests = len(server.requests)
    card.click("edit", arguments={"q": "other"})
    assert card.state == "pending" and card.error
    assert len(server.requests) == requests and chat.pending_approvals == [call]

    card.click("approve")
    assert view.continuation.wait(10)
    assert chat.status == "complete"
    assert card.summary == "Approved by you (sent to the provider)"
    answers = [
        i for i in server.last_request.body["input"] if i.get("type") == "mcp_approval_response"
    ]
    assert len(answers) == 1 and answers[0]["approve"] is True
    html = view._repr_mimebundle_()["text/html"]
    assert "sent to the provider" in html  # the decided call's line: no "ran here" result
    assert 'data-item-type="mcp_call"' in html
    assert "wiki · ask" in html and "&#8594; noon" in html
    bundle = chat_mimebundle(chat)
    assert "provider ran mcp call: wiki · ask" in bundle["text/plain"]
    assert "tool wiki · ask" in bundle["text/plain"]
    assert "sent to the provider" in bundle["text/plain"]
    assert "provider ran" in bundle["text/markdown"]
    assert 'data-item-type="mcp_call"' in bundle["text/html"]


def test_a_denied_hosted_call_reads_as_a_denial_sent_to_the_provider(
    server: FakeLLMServer,
) -> None:
    server.script([Turn(hosted=[mcp_approval_request("wiki", "drop", id="mcpr_9")]), "ok"])
    chat = hosted_chat(server)
    view = ChatView(chat)
    chat.ask("q")
    [call] = chat.pending_approvals
    card = approval_card(view, call.id)
    card.click("deny", reason="not today")
    assert view.continuation.wait(10)
    assert chat.status == "complete"
    assert card.summary == "Denied by you: not today (sent to the provider)"
    text = chat_mimebundle(chat)["text/plain"]
    assert "tool wiki · drop({}) -> denied" in text
    answers = [
        i for i in server.last_request.body["input"] if i.get("type") == "mcp_approval_response"
    ]
    assert [(a["approval_request_id"], a["approve"]) for a in answers] == [("mcpr_9", False)]


def test_provider_items_of_every_kind_show_escaped_in_every_format(
    server: FakeLLMServer,
) -> None:
    server.script(
        [
            Turn(
                text="answer",
                hosted=[
                    mcp_call("wiki", SCRIPT, {"q": SCRIPT}, error=SCRIPT),
                    raw_item(
                        {
                            "type": "web_search_call",
                            "id": "ws_1",
                            "status": "completed",
                            "action": {"type": "search", "query": SCRIPT},
                        }
                    ),
                    raw_item({"type": "future_thing", "id": "f_1", "note": SCRIPT}),
                ],
            )
        ]
    )
    server.validator = None  # the unknown item fits no SDK type
    chat = hosted_chat(server, approval="never")  # its calls run without asking
    view = ChatView(chat)
    chat.ask("q")
    [message] = [m for m in chat.transcript if m.role == "assistant"]
    assert [i.type for i in message.items] == ["mcp_call", "web_search_call", "future_thing"]
    live = "".join(
        w.value for w in widgets_in(view) if hasattr(w, "value") and isinstance(w.value, str)
    )
    static = chat_mimebundle(chat)
    for html in (live, static["text/html"]):
        assert SCRIPT not in html
        assert html.count('class="nba-entry nba-card nba-call nba-done nba-item') == 3
        assert 'data-item-type="web_search_call"' in html
        assert 'data-item-type="future_thing"' in html
        assert "nbagent does not know" in html
        assert "nba-err-line" in html  # the failed mcp_call's error on its line
        # the items come before the step's text
        assert html.index('data-item-type="mcp_call"') < html.index("answer")
    markdown, text = static["text/markdown"], static["text/plain"]
    assert "<script>" not in markdown  # plain text shows it as text, as it is
    assert "web search" in markdown and "future\\_thing" in markdown
    assert "provider ran web search: search" in text and "future_thing" in text
    assert f"mcp call: wiki · {SCRIPT}" in text


def test_a_reloaded_chat_shows_its_provider_items(server: FakeLLMServer) -> None:
    server.script([Turn(text="done", hosted=[mcp_call("wiki", "ask", {"q": "x"}, output="y")])])
    chat = hosted_chat(server, approval="never")
    chat.ask("q")
    # a view made after the fact rebuilds from the transcript
    from nbagent.notebook._state import ChatState

    state = ChatState.from_chat(chat)
    [step] = [e for e in state.entries if e.kind == "step"]
    assert [i.type for i in step.items] == ["mcp_call"]


def test_anthropics_mcp_connector_blocks_show_as_a_call_and_its_result(
    server: FakeLLMServer,
) -> None:
    from nbagent.providers import AnthropicProvider

    server.script(
        [Turn(text="It says 42.", hosted=[mcp_call("deepwiki", "ask", {"q": SCRIPT}, output="42")])]
    )
    provider = AnthropicProvider(
        "claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key="sk-ant-1", max_retries=0
    )
    chat = Chat(provider=provider, display=False).with_tools(
        HostedMCP("deepwiki", server_url="https://deepwiki.example/mcp", require_approval="never")
    )
    view = ChatView(chat)
    chat.ask("q")
    html = view._repr_mimebundle_()["text/html"]
    assert SCRIPT not in html
    assert 'data-item-type="mcp_tool_use"' in html and 'data-item-type="mcp_tool_result"' in html
    assert "deepwiki · ask" in html and "&#8594; 42" in html
    text = chat_mimebundle(chat)["text/plain"]
    assert "provider ran mcp call: deepwiki · ask" in text
    assert "provider ran result: deepwiki · ask -> ok: 42" in text
