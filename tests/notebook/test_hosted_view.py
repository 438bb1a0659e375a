"""The notebook view with hosted calls (in-process, level 1): it shows them and never crashes.

The lead gives hosted calls and provider items their own card rendering after
the view's rework; this holds what must already be true: a hosted approval has
the same approval card, a click sends exactly one ``mcp_approval_response``,
and what the provider did (a listing, a call, an unknown item) does not break
the view, with model-made text escaped.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _views import widgets_in

from nbagent import Chat, HostedMCP
from nbagent.notebook import ChatView, review
from nbagent.notebook import _continuation as cont
from nbagent.notebook._fallback import chat_mimebundle
from nbagent.notebook._widgets import ActionCard
from nbagent.providers import OpenAIProvider
from nbagent.testing import FakeLLMServer, Turn, mcp_approval_request, mcp_call, raw_item

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    cont.set_main_loop(None)  # a worker thread continues after a click
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
    assert "ask" in "\n".join(printed)
    answers = [
        i for i in server.last_request.body["input"] if i.get("type") == "mcp_approval_response"
    ]
    assert [a["approve"] for a in answers] == [False]
