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

from nbagent import Chat, HostedMCP
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
from test_hosted import validate  # the SDK types, beta included  # noqa: E402

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
    return client.responses.create(input=[{"role": "user", "content": "q"}, *items, answer], **common)


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
