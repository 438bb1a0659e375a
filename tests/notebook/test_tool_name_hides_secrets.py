"""A tool name the model wrote is shown as the answer it reads is: ``password=...`` in the name
of a call to an unknown tool reads ``password=***`` live, in every static form a notebook saves,
in the saved widget state and in ``chat.log``'s display, while the record keeps the name the
model sent."""

from __future__ import annotations

import json

import ipywidgets
from _views import widgets_in

from nbagent import Chat, HostedMCP, ToolResultMessage, tool
from nbagent.notebook import ChatView, review
from nbagent.notebook._fallback import (
    bundle_for,
    chat_mimebundle,
    orphan_words,
    running_twin_bundle,
    twin_bundle,
)
from nbagent.notebook._state import CallEntry, state_for
from nbagent.notebook._widgets import ActionCard
from nbagent.providers import OpenAIProvider
from nbagent.testing import (
    FakeLLMServer,
    ScriptedProvider,
    Turn,
    call_tools,
    mcp_approval_request,
    reply,
)

PASSWORD = "hunter2-very-secret"
NAME = f"password={PASSWORD}"


@tool
def get_weather(city: str) -> str:
    """The weather.

    Args:
        city: The city.
    """
    return "18 C"


def test_a_model_written_tool_name_shows_no_password() -> None:
    provider = ScriptedProvider([call_tools((NAME, {}, "c1")), reply("ok")])
    chat = Chat(provider=provider, display=False).with_tools(get_weather)
    view = ChatView(chat)
    chat.ask("go")
    answer = [m for m in provider.requests[-1].messages if isinstance(m, ToolResultMessage)]
    assert "password=***" in str(answer[-1].content)  # what the model reads
    texts = [json.dumps([w.get_state() for w in widgets_in(view)], default=str)]
    texts += [w.value for w in widgets_in(view) if isinstance(w, ipywidgets.HTML)]
    texts += list(bundle_for(state_for(chat)).values())
    bundle = chat_mimebundle(chat)
    texts += list(bundle.values())
    texts += list(chat.log._repr_mimebundle_().values())
    for text in texts:
        assert "hunter2" not in text, text[:3000]
    assert "tool password=***(" in bundle["text/plain"], bundle["text/plain"]
    assert "**tool `password=***`**" in bundle["text/markdown"], bundle["text/markdown"]
    assert "password=***" in bundle["text/html"]
    # the record keeps the model's own name
    assert chat.tool_calls[0].name == NAME
    assert chat.log["tool"].iloc[0] == NAME


def shown_outside_the_view(chat: Chat) -> list[str]:
    """What else shows a call's name: the words a notebook reopened with a new kernel
    keeps for each call (waiting for a decision, or running when the kernel ended), and
    everything ``review()`` prints and asks."""
    state = state_for(chat)
    calls = [e for e in state.entries if isinstance(e, CallEntry)]
    assert calls
    lead, code, last = orphan_words(chat, calls)
    texts = [lead, *code, last]
    texts += list(twin_bundle(chat, state, None).values())
    texts += list(running_twin_bundle(chat, state, None, calls).values())
    said: list[str] = []

    def ask(prompt: str) -> str:
        said.append(prompt)
        return "s"

    review(chat, input=ask, print=lambda *a: said.append(" ".join(map(str, a))))
    return [*texts, *said]


def saved_widget_state(view: ChatView) -> str:
    return json.dumps([w.get_state() for w in widgets_in(view)], default=str)


def test_an_unknown_tools_name_shows_no_password_outside_the_view_either() -> None:
    provider = ScriptedProvider([call_tools((NAME, {}, "c1")), reply("ok")])
    chat = Chat(provider=provider, display=False).with_tools(get_weather)
    view = ChatView(chat)
    chat.ask("go")
    for text in [saved_widget_state(view), *shown_outside_the_view(chat)]:
        assert "hunter2" not in text, text[:3000]
    assert chat.tool_calls[0].name == NAME


def hosted_chat(server: FakeLLMServer, *then: str) -> Chat:
    asks = Turn(hosted=[mcp_approval_request("wiki", NAME, {"q": "x"}, id="mcpr_1")])
    server.script([asks, *then])
    provider = OpenAIProvider(
        "gpt-4.1-mini", api="responses", base_url=server.openai_base_url, api_key="sk-test-1"
    )
    return Chat(provider=provider, display=False).with_tools(
        HostedMCP("wiki", server_url="https://wiki.example/mcp")
    )


def test_a_hosted_approval_requests_name_shows_no_password_on_its_card() -> None:
    with FakeLLMServer() as server:
        chat = hosted_chat(server)
        view = ChatView(chat)
        chat.ask("q")
        [call] = chat.pending_approvals
        assert call.name == NAME  # the record keeps the name as sent
        [card] = [w for w in widgets_in(view) if isinstance(w, ActionCard)]
        assert card.tool == "password=***"  # the card's head, as the browser draws it
        texts = [saved_widget_state(view), repr(card), *shown_outside_the_view(chat)]
        texts += list(view._repr_mimebundle_().values())
        for text in texts:
            assert "hunter2" not in str(text), str(text)[:3000]
        assert any("wiki · password=*** (mcpr_1) needs approval" in t for t in texts)
        assert chat.pending_approvals[0].name == NAME  # review() skipped: still waiting


def test_always_allow_and_its_revoke_from_a_hosted_card_act_on_the_real_name() -> None:
    with FakeLLMServer() as server:
        chat = hosted_chat(server, "done")
        view = ChatView(chat)
        chat.ask("q")
        [card] = [w for w in widgets_in(view) if isinstance(w, ActionCard)]
        card.click("always")
        assert chat.always_allowed == (NAME,)
        assert view.continuation.wait(10) and chat.status == "complete"
        assert card.state == "approved" and card.revocable
        assert "hunter2" not in saved_widget_state(view)
        card.click("revoke")
        assert chat.always_allowed == ()
        assert "password=*** asks for approval again" in card.note
        assert not card.revocable
        assert "hunter2" not in saved_widget_state(view)


def test_review_always_allows_the_real_name_and_prints_code_that_takes_it_back() -> None:
    with FakeLLMServer() as server:
        chat = hosted_chat(server, "done")
        chat.ask("q")
        printed: list[str] = []
        review(chat, input=lambda _: "l", print=lambda *a: printed.append(" ".join(map(str, a))))
        assert chat.always_allowed == (NAME,) and chat.status == "complete"
        text = "\n".join(printed)
        assert "hunter2" not in text, text
        assert "password=***: always allowed from now on" in text
        # the code it prints takes back the rule it made, without spelling the name
        code = "chat.revoke(chat.always_allowed[0])"
        assert code in text
        eval(code, {"chat": chat})
        assert chat.always_allowed == ()
