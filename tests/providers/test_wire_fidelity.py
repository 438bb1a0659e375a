"""Issue 29: what the real APIs send comes back whole.

Each case goes through the real SDK clients against the strict fake server,
which sends these items the way the APIs do (reasoning around hosted MCP items
without ``reasoning=``, message ``phase``, Anthropic citations in JSON and
streams, a repeated approval id) and refuses a follow-up that lacks what the
API would want back. Every payload the fake sends is validated against the
SDKs' own types.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from nbagent import Chat, HostedMCP, ProviderError
from nbagent.providers import OpenAIProvider
from nbagent.testing import (
    FakeLLMServer,
    FakeToolCall,
    Turn,
    mcp_approval_request,
    mcp_call,
    mcp_list_tools,
    reasoning_item,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_hosted import validate  # the SDK types, beta included

KEY = "sk-test-SECRET-wire-0123456789"
STREAM = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
ENCRYPTED = ["reasoning.encrypted_content"]


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(validator=validate) as fake:
        yield fake
    assert not fake.errors, fake.errors


def responses(server: FakeLLMServer, model: str = "o4-mini", **kwargs: Any) -> OpenAIProvider:
    return OpenAIProvider(
        model,
        api="responses",
        base_url=server.openai_base_url,
        api_key=KEY,
        compatible=False,
        max_retries=0,
        **kwargs,
    )


def deepwiki() -> HostedMCP:
    return HostedMCP("deepwiki", server_url="https://mcp.deepwiki.example/mcp")


def kinds(body: dict[str, Any]) -> list[str]:
    return [i.get("type") or i.get("role") for i in body["input"]]


# -- 1. reasoning around hosted MCP items ---------------------------------------------


@STREAM
def test_reasoning_around_hosted_items_goes_back_in_place_without_reasoning_set(
    server: FakeLLMServer, stream: bool
) -> None:
    """A reasoning model with ``HostedMCP`` and no ``reasoning=``: on main no ``include`` was
    sent, the reasoning came back without ``encrypted_content`` and was left out, and the
    items that followed it went back alone (the strict fake, like the API, refuses that)."""
    call = mcp_call("deepwiki", "ask", {"q": "x"}, output="42", approval_request_id="mcpr_a")
    server.script(
        [
            Turn(
                hosted=[
                    reasoning_item("List the tools first."),
                    mcp_list_tools("deepwiki", "ask"),
                    reasoning_item("Ask the wiki."),
                    mcp_approval_request("deepwiki", "ask", {"q": "x"}, id="mcpr_a"),
                ]
            ),
            Turn(text="It indexes wikis.", hosted=[call, reasoning_item("Answer now.")]),
            "More.",
        ]
    )
    chat = Chat(provider=responses(server), display=False, stream=stream).with_tools(deepwiki())
    chat.ask("What does the repo do?")
    chat.approve("mcpr_a")
    assert chat.complete().content == "It indexes wikis."
    assert chat.ask("And then?").content == "More."
    bodies = [r.body for r in server.requests]
    assert all(b["include"] == ENCRYPTED and b["store"] is False for b in bodies)
    assert kinds(bodies[1]) == [
        "user",
        "reasoning",
        "mcp_list_tools",
        "reasoning",
        "mcp_approval_request",
        "mcp_approval_response",
    ]
    assert kinds(bodies[2])[6:] == ["mcp_call", "reasoning", "assistant", "user"]
    sent = [i for i in bodies[2]["input"] if i.get("type") == "reasoning"]
    assert [i["summary"][0]["text"] for i in sent] == [
        "List the tools first.",
        "Ask the wiki.",
        "Answer now.",
    ]
    assert all(i["encrypted_content"] for i in sent)


def test_a_model_that_is_not_a_reasoning_model_is_not_asked_for_encrypted_reasoning(
    server: FakeLLMServer,
) -> None:
    """gpt-4.1 refuses ``include: reasoning.encrypted_content``; a model the name rule does
    not know but that reasons is asked from its next request on."""
    server.script(["Hi.", Turn(reasoning="Hmm.", text="Hi again."), "Bye."])
    chat = Chat(provider=responses(server, "gpt-4.1-mini"), display=False)
    chat.ask("Hello")
    chat.ask("Hello?")
    chat.ask("Bye")
    assert ["include" in r.body for r in server.requests] == [False, False, True]


@pytest.mark.filterwarnings("ignore::nbagent.providers.UnknownModelWarning")
@pytest.mark.parametrize(
    "model",
    ["o1", "o3-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-mini", "gpt-5.1-codex", "openai/o3"],
)
def test_reasoning_models_by_name(server: FakeLLMServer, model: str) -> None:
    assert responses(server, model).preview_request(messages=())["include"] == ENCRYPTED


@pytest.mark.filterwarnings("ignore::nbagent.providers.UnknownModelWarning")
@pytest.mark.parametrize("model", ["gpt-4.1-mini", "gpt-4o", "gpt-5-chat-latest"])
def test_other_models_by_name(server: FakeLLMServer, model: str) -> None:
    assert "include" not in responses(server, model).preview_request(messages=())


def _hosted_round(server: FakeLLMServer, keep: Any) -> Any:
    """The raw SDK: a response with reasoning around hosted items, then a follow-up."""
    client = openai.OpenAI(api_key=KEY, base_url=server.openai_base_url, max_retries=0)
    common: dict[str, Any] = {
        "model": "o4-mini",
        "tools": [{"type": "mcp", "server_label": "deepwiki", "server_url": "https://x.example"}],
        "store": False,
        "include": ENCRYPTED,
    }
    first = client.responses.create(input="q", **common)
    items = keep([i.model_dump(exclude_none=True) for i in first.output])
    answer = {"type": "mcp_approval_response", "approval_request_id": "mcpr_a", "approve": True}
    return client.responses.create(
        input=[{"role": "user", "content": "q"}, *items, answer], **common
    )


@pytest.mark.parametrize(
    ("keep", "message"),
    [
        (lambda items: items, None),
        (lambda items: [i for i in items if i["type"] != "reasoning"], "mcp_list_tools"),
        (lambda items: items[:2] + items[3:], "mcp_approval_request"),
    ],
    ids=["intact", "all-dropped", "second-dropped"],
)
def test_the_strict_fake_wants_the_reasoning_before_each_hosted_item(
    server: FakeLLMServer, keep: Any, message: str | None
) -> None:
    server.script(
        [
            Turn(
                hosted=[
                    reasoning_item("List."),
                    mcp_list_tools("deepwiki", "ask"),
                    reasoning_item("Ask."),
                    mcp_approval_request("deepwiki", "ask", id="mcpr_a"),
                ]
            ),
            "Done.",
        ]
    )
    if message is None:
        assert _hosted_round(server, keep).output_text == "Done."
    else:
        with pytest.raises(openai.BadRequestError, match=f"'{message}'.*required 'reasoning'"):
            _hosted_round(server, keep)


def test_reasoning_a_client_did_not_ask_for_cannot_be_left_out_before_a_hosted_item(
    server: FakeLLMServer,
) -> None:
    """Without ``include`` the reasoning has no ``encrypted_content``: a client cannot send
    it back, and an item sent back under its id after it is refused (so nbagent asks)."""
    server.script([Turn(hosted=[reasoning_item("L."), mcp_list_tools("deepwiki", "ask")]), "x"])
    client = openai.OpenAI(api_key=KEY, base_url=server.openai_base_url, max_retries=0)
    first = client.responses.create(model="o4-mini", input="q", store=False)
    listing = first.output[1].model_dump(exclude_none=True)
    with pytest.raises(openai.BadRequestError, match="required 'reasoning' item"):
        client.responses.create(model="o4-mini", input=["q", listing][1:], store=False)


PARIS = FakeToolCall("get_weather", {"city": "Paris"})


# -- 2. Responses message phase ------------------------------------------------------


def _weather(p: Any, **kwargs: Any) -> Chat:
    def get_weather(city: str) -> str:
        """Weather.

        Args:
            city: City.
        """
        return "sunny"

    return Chat(provider=p, display=False, **kwargs).with_tools(get_weather)


@STREAM
def test_commentary_keeps_its_phase_and_id_and_is_not_the_answer(
    server: FakeLLMServer, stream: bool
) -> None:
    """On main the phase was dropped: the preamble came back as a plain assistant message
    and read as the answer's text; the final answer went back without phase or id."""
    server.script(
        [
            Turn(
                reasoning="Weather first.",
                commentary="Let me check the <b>weather</b>.",
                tool_calls=[PARIS],
            ),
            Turn(text="Sunny in Paris.", commentary="I have it."),
            "Bye.",
        ]
    )
    chat = _weather(responses(server), stream=stream)
    deltas: list[str] = []
    chat.on("text_delta", lambda e: deltas.append(e.text))
    assert chat.ask("Weather in Paris?").content == "Sunny in Paris."
    asked = chat.transcript[1]
    assert not asked.content
    [said] = [i for i in asked.items if i.type == "message"]
    assert (said.commentary, said.raw["id"], said.raw["phase"]) == (
        "Let me check the <b>weather</b>.",
        "msg_fake1_c",
        "commentary",
    )
    if stream:
        assert "".join(deltas) == "Sunny in Paris."  # the commentary streams as no answer
    chat.ask("Thanks")
    sent = server.last_request.body["input"]
    assert kinds(server.last_request.body) == [
        "user",
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
        "user",
    ]
    messages = [i for i in sent if i.get("type") == "message"]
    assert [(m["id"], m["phase"]) for m in messages] == [
        ("msg_fake1_c", "commentary"),
        ("msg_fake2_c", "commentary"),
        ("msg_fake2", "final_answer"),
    ]
    assert messages[2]["content"][0]["text"] == "Sunny in Paris."  # once, with its phase
    assert "commentary" not in set(chat.log.get("item_type", []))


def test_the_view_shows_commentary_as_such(server: FakeLLMServer) -> None:
    from nbagent.notebook._fallback import chat_mimebundle

    server.script(
        [Turn(commentary="Let me check the <b>weather</b>.", tool_calls=[PARIS]), "Sunny."]
    )
    chat = _weather(responses(server))
    chat.ask("Weather in Paris?")
    bundle = chat_mimebundle(chat)
    html = bundle["text/html"].split("</style>", 1)[1]
    assert "nba-commentary" in html and "Let me check the &lt;b&gt;weather&lt;/b&gt;." in html
    assert "<b>weather</b>" not in html
    assert html.index("Commentary") < html.index("Sunny.")
    assert "(commentary: Let me check" in bundle["text/plain"]
    assert "provider ran" not in bundle["text/plain"]  # not a provider-item line


# -- 3. Anthropic citations ----------------------------------------------------------

WEB = {
    "type": "web_search_result_location",
    "cited_text": "Paris is the capital of France.",
    "encrypted_index": "Eo8BCioIAhgBIiQ",
    "title": "Paris <Wikipedia>",
    "url": "https://en.wikipedia.org/wiki/Paris?a=1&b=<2>",
}
DOC = {
    "type": "char_location",
    "cited_text": "The grass is green.",
    "document_index": 0,
    "document_title": "Notes",
    "start_char_index": 0,
    "end_char_index": 19,
    "file_id": "file_011CNha8iCJcU1wXNR6q4V8w",
}
EVIL_LINK = {**WEB, "title": "click", "url": "javascript:alert(1)"}
SEARCH_USE = {
    "type": "server_tool_use",
    "id": "srvtoolu_1",
    "name": "web_search",
    "input": {"query": "capital of France"},
}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [
        {
            "type": "web_search_result",
            "title": "Paris",
            "url": "https://en.wikipedia.org/wiki/Paris",
            "encrypted_content": "EqgfCioIARgBIiQ",
            "page_age": None,
        }
    ],
}


def anthropic(server: FakeLLMServer) -> Any:
    from nbagent.providers import AnthropicProvider

    return AnthropicProvider(
        "claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key=KEY, max_retries=0
    )


@STREAM
def test_citations_are_kept_shown_logged_and_sent_back(server: FakeLLMServer, stream: bool) -> None:
    """On main the citations were dropped (the text alone was kept and sent back)."""
    from nbagent.notebook._fallback import chat_mimebundle
    from nbagent.testing import raw_item

    server.script(
        [
            Turn(
                hosted=[raw_item(SEARCH_USE), raw_item(SEARCH_RESULT)],
                text="Paris is the capital.",
                citations=[WEB, DOC, EVIL_LINK],
            ),
            "You're welcome.",
        ]
    )
    chat = Chat(provider=anthropic(server), display=False, stream=stream)
    answer = chat.ask("Capital of France?")
    assert answer.content == "Paris is the capital."
    assert answer.citations == (WEB, DOC, EVIL_LINK)  # as the API sent them
    chat.ask("Thanks")
    [assistant] = [m for m in server.last_request.body["messages"] if m["role"] == "assistant"]
    assert [b["type"] for b in assistant["content"]] == [
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    text = assistant["content"][2]
    assert text["text"] == "Paris is the capital."
    doc = {k: v for k, v in DOC.items() if k != "file_id"}  # a request takes no file_id
    assert text["citations"] == [WEB, doc, EVIL_LINK]

    messages = chat.messages
    cited = messages.loc[messages["role"] == "assistant", "citations"].iloc[0]
    assert cited == [WEB, DOC, EVIL_LINK]
    assert messages["citations"].iloc[0] is None  # the user's message cites nothing
    assert "text" not in set(chat.log["item_type"].dropna())  # a text block is no call

    html = chat_mimebundle(chat)["text/html"].split("</style>", 1)[1]
    sources = html.split("nba-sources", 1)[1]
    assert 'href="https://en.wikipedia.org/wiki/Paris?a=1&amp;b=&lt;2&gt;"' in sources
    assert "Paris &lt;Wikipedia&gt;" in sources and "<Wikipedia>" not in html
    assert "<li>Notes</li>" in sources
    assert "javascript:" not in html.split("href=", 1)[1].split(">", 1)[0]
    assert 'href="javascript' not in html
    assert html.index("Paris is the capital.") < html.index("nba-sources")


def test_the_strict_fake_refuses_a_citation_field_a_request_does_not_take(
    server: FakeLLMServer,
) -> None:
    import anthropic as sdk

    server.script(["ok"])
    cited = {"type": "text", "text": "Green.", "citations": [DOC]}
    with (
        sdk.Anthropic(api_key=KEY, base_url=server.anthropic_base_url, max_retries=0) as client,
        pytest.raises(sdk.BadRequestError, match="file_id: Extra inputs are not permitted"),
    ):  # closed: its keep-alive socket was collected later, failing another test (the suite
        # makes a ResourceWarning an error); found by tests/_sockets.py's report
        client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=100,
            messages=[
                {"role": "user", "content": "Colour?"},
                {"role": "assistant", "content": [cited]},
                {"role": "user", "content": "Sure?"},
            ],
        )


# -- 4. a repeated hosted approval id --------------------------------------------------


def _hosted(server: FakeLLMServer, stream: bool = False) -> Chat:
    chat = Chat(provider=responses(server, "gpt-4.1-mini"), display=False, stream=stream)
    return chat.with_tools(deepwiki())


@STREAM
def test_a_request_repeated_word_for_word_is_answered_once_under_its_own_id(
    server: FakeLLMServer, stream: bool
) -> None:
    """On main the repeat became a second pending call ``mcpr_a_2``, answered under that
    invented id (the strict fake, like the API, knows no such request)."""
    ask = mcp_approval_request("deepwiki", "ask", {"q": "x"}, id="mcpr_a")
    server.script([Turn(hosted=[ask, ask]), "Done."])
    chat = _hosted(server, stream)
    chat.ask("q")
    assert [c.id for c in chat.pending_approvals] == ["mcpr_a"]
    chat.approve("mcpr_a")
    assert chat.complete().content == "Done."
    body = server.last_request.body
    answers = [i for i in body["input"] if i.get("type") == "mcp_approval_response"]
    assert [a["approval_request_id"] for a in answers] == ["mcpr_a"]
    assert "mcpr_a_2" not in str(body) and "mcpr_a_2" not in set(chat.log["call_id"])


def test_two_different_requests_under_one_id_are_refused_clearly(server: FakeLLMServer) -> None:
    server.script(
        [
            Turn(
                hosted=[
                    mcp_approval_request("deepwiki", "ask", {"q": "x"}, id="mcpr_a"),
                    mcp_approval_request("deepwiki", "delete", {"q": "x"}, id="mcpr_a"),
                ]
            )
        ]
    )
    chat = _hosted(server)
    with pytest.raises(ProviderError, match="share the id 'mcpr_a'"):
        chat.ask("q")
    assert not chat.pending_approvals and len(chat.transcript) == 1  # the user's message only
    assert chat.steps["error_type"].tolist() == ["ProviderError"]


@STREAM
def test_an_id_repeated_in_a_later_response_is_refused_never_renamed(
    server: FakeLLMServer, stream: bool
) -> None:
    ask = mcp_approval_request("deepwiki", "ask", {"q": "x"}, id="mcpr_a")
    done = mcp_call("deepwiki", "ask", {"q": "x"}, output="42", approval_request_id="mcpr_a")
    server.script([Turn(hosted=[ask]), Turn(hosted=[done, ask])])
    chat = _hosted(server, stream)
    chat.ask("q")
    chat.approve("mcpr_a")
    with pytest.raises(ProviderError, match=r"'mcpr_a'.*already used in an earlier response"):
        chat.complete()
    assert [c.id for c in chat.pending_approvals] == []
    ids = {c.id for m in chat.transcript for c in getattr(m, "tool_calls", ())}
    assert ids == {"mcpr_a"}  # nothing answered under an invented id
    assert chat.log.set_index("call_id").loc["mcpr_a", "decision"] == "approved"


# -- a store keeps all of it ---------------------------------------------------------


def test_a_loaded_chat_sends_phase_and_citations_back_as_they_came(
    server: FakeLLMServer, tmp_path: Path
) -> None:
    """Nothing is lost on disk: a chat loaded from a store sends the commentary with its
    phase and id, and the cited text blocks with their citations."""
    from nbagent.store import SQLiteStore

    path = str(tmp_path / "chats.db")
    server.script([Turn(commentary="Checking.", tool_calls=[PARIS]), "Sunny.", "Bye."])
    chat = _weather(responses(server), store=SQLiteStore(path))
    chat.ask("Weather in Paris?")
    loaded = Chat.load(chat.id, store=SQLiteStore(path), provider=responses(server), display=False)
    loaded.ask("Thanks")
    said = [i for i in server.last_request.body["input"] if i.get("type") == "message"]
    assert [(m["id"], m["phase"]) for m in said] == [("msg_fake1_c", "commentary")]

    server.script([Turn(text="Paris.", citations=[WEB, DOC]), "Welcome."])
    cited = Chat(provider=anthropic(server), display=False, store=SQLiteStore(path))
    cited.ask("Capital?")
    again = Chat.load(cited.id, store=SQLiteStore(path), provider=anthropic(server), display=False)
    assert again.transcript[-1].citations == (WEB, DOC)
    assert list(again.messages["citations"].iloc[-1]) == [WEB, DOC]
    again.ask("Thanks")
    [assistant] = [m for m in server.last_request.body["messages"] if m["role"] == "assistant"]
    assert assistant["content"][0]["citations"][0] == WEB


# -- issue 28.7: the Anthropic request's URL is joined once ---------------------------


def test_the_url_joined_once_follows_the_clients_base_url() -> None:
    """The joined URL is kept per client and base URL: a client pointed elsewhere sends
    there, and a subclass of the client (Vertex, Bedrock rewrite paths) gets the path."""
    import anthropic as sdk

    from nbagent.providers._sdk import joined_url

    with FakeLLMServer() as first, FakeLLMServer() as second:
        first.script(["one"])
        second.script(["two"])
        provider = anthropic(first)
        assert Chat(provider=provider, display=False).ask("a").content == "one"
        provider.client.base_url = second.anthropic_base_url
        assert Chat(provider=provider, display=False).ask("b").content == "two"
        assert len(first.requests) == len(second.requests) == 1

    class Gateway(sdk.Anthropic):
        pass

    gateway = Gateway(api_key=KEY, base_url="http://127.0.0.1:9/prefix/")
    assert provider._url(gateway, "/v1/messages") == "/v1/messages"
    plain = sdk.Anthropic(api_key=KEY, base_url="http://127.0.0.1:9/prefix/")
    assert str(joined_url(plain, "/v1/messages")) == "http://127.0.0.1:9/prefix/v1/messages"
    assert joined_url(plain, "/v1/messages") is joined_url(plain, "/v1/messages")
