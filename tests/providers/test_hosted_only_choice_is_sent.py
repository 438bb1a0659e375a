"""A chat whose only tools are hosted ones tells the provider its tool choice.

Two gaps left by 4969e09 (hosted approval requests follow the choice):

- ``with_tool_options(choice="none")`` in a chat with hosted tools only sent no
  ``tool_choice``: nbagent denied the provider's approval requests, but an ``mcp_call`` it
  runs without asking (``require_approval="never"``) could not be stopped: the user said no
  tool may be called, and the provider called one. OpenAI Responses now gets the choice
  (``"none"``, ``"required"``, ``"auto"``: they apply to hosted tools too) and, with
  ``calls="one"``, ``parallel_tool_calls: false``; Anthropic's MCP connector, which takes no
  ``tool_choice`` without a tool of the chat's own, gets each server's tools disabled
  (``tool_configuration.enabled: false``) when the choice is ``none``.
- ``choice="required"`` raised "needs tools, but the chat has none" as only the chat's own
  tools were counted: with hosted tools it is valid (sent as ``required``, spent once a call
  is decided), and a named choice still names only the chat's own tools (a clear error,
  before the message is kept). Anthropic cannot be sent ``required`` there: a clear error,
  nothing sent.

What the provider is sent is read from the strict fake server's recorded requests, through the
real SDKs, streamed and not. A chat with function tools only keeps its request keys (its
recordings still replay).
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nbagent import Chat, HostedMCP, ToolOptionError, tool
from nbagent._options import resolve_choice
from nbagent.providers import AnthropicProvider, OpenAIProvider
from nbagent.testing import (
    FakeLLMServer,
    ScriptedProvider,
    Turn,
    mcp_approval_request,
    mcp_call,
    reply,
)

KEY = "sk-test-SECRET-0123456789"
URL = "https://mcp.example.com/mcp"
STREAM = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])


@tool
def get_weather(city: str) -> str:
    """Get the weather for a city.

    Args:
        city: The city.
    """
    return f"{city}: 18 C"


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake
    assert not fake.errors, fake.errors


def _openai(
    server: FakeLLMServer, stream: bool, approval: str = "never", recordings: Any = None
) -> Chat:
    provider = OpenAIProvider(
        "gpt-4.1-mini",
        api="responses",
        base_url=server.openai_base_url,
        api_key=KEY,
        compatible=False,
        max_retries=0,
    )
    wiki = HostedMCP("wiki", server_url=URL, require_approval=approval)  # type: ignore[arg-type]
    chat = Chat(provider=provider, display=False, stream=stream, recordings=recordings)
    return chat.with_tools(wiki)


def _anthropic(server: FakeLLMServer, stream: bool) -> Chat:
    provider = AnthropicProvider(
        "claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key=KEY, max_retries=0
    )
    wiki = HostedMCP("wiki", server_url=URL, require_approval="never")
    return Chat(provider=provider, display=False, stream=stream).with_tools(wiki)


def _ran_unasked() -> Any:
    return mcp_call("wiki", "ask", {"q": "a"}, output="42")


# -- OpenAI Responses: the choice goes with the hosted tools -----------------------


@STREAM
@pytest.mark.parametrize("choice", ["none", "auto", "required"])
def test_openai_is_sent_the_choice_of_a_hosted_only_chat(
    server: FakeLLMServer, stream: bool, choice: str
) -> None:
    """The probe: ``choice="none"`` sent no ``tool_choice``, so the provider ran an
    ``mcp_call`` it did not ask about; now it is told, and ``required`` no longer raises."""
    server.script(["done"])
    chat = _openai(server, stream).with_tool_options(choice=choice)
    assert chat.ask("go").content == "done"
    (sent,) = server.requests
    assert sent.body["tool_choice"] == choice
    assert [t["type"] for t in sent.body["tools"]] == ["mcp"]
    assert "parallel_tool_calls" not in sent.body  # calls="many": the API's default


@STREAM
def test_openai_required_is_spent_by_a_decided_hosted_request(
    server: FakeLLMServer, stream: bool
) -> None:
    """``required`` is sent until a call was made: an approval request someone decided
    spends it, and the next request (the approval's answer) goes out with ``auto``."""
    ask = mcp_approval_request("wiki", "ask", {"q": "a"}, id="mcpr_1")
    server.script([Turn(hosted=[ask]), "done"])
    chat = _openai(server, stream, approval="always").with_tool_options(choice="required")
    chat.ask("go")
    assert [c.id for c in chat.pending_approvals] == ["mcpr_1"]
    chat.approve("mcpr_1")
    assert chat.complete().content == "done"
    assert [r.body["tool_choice"] for r in server.requests] == ["required", "auto"]
    items = server.requests[1].body["input"]
    answer = [i for i in items if i.get("type") == "mcp_approval_response"]
    assert [(a["approval_request_id"], a["approve"]) for a in answer] == [("mcpr_1", True)]


@STREAM
def test_openai_required_with_a_call_the_provider_ran_itself_ends_the_turn(
    server: FakeLLMServer, stream: bool
) -> None:
    """A call run without asking (``require_approval="never"``) meets ``required`` within
    its response: the model answers there, and nothing forces another request."""
    server.script([Turn(text="It says 42.", hosted=[_ran_unasked()])])
    chat = _openai(server, stream).with_tool_options(choice="required")
    assert chat.ask("go").content == "It says 42." and chat.status == "complete"
    assert [r.body["tool_choice"] for r in server.requests] == ["required"]


def test_openai_calls_one_is_sent_with_hosted_tools_only(server: FakeLLMServer) -> None:
    server.script(["done"])
    _openai(server, False).with_tool_options(calls="one").ask("go")
    body = server.requests[0].body
    assert body["parallel_tool_calls"] is False and body["tool_choice"] == "auto"


def test_openai_with_own_tools_is_sent_what_it_was(server: FakeLLMServer) -> None:
    """A function tool beside the hosted one: the choice was sent already, and still is."""
    server.script(["done"])
    chat = _openai(server, False).with_tools(get_weather).with_tool_options(choice="none")
    chat.ask("go")
    body = server.requests[0].body
    assert body["tool_choice"] == "none"
    assert [t["type"] for t in body["tools"]] == ["function", "mcp"]


# -- a named choice names only the chat's own tools ----------------------------------


@pytest.mark.parametrize("own", [False, True], ids=["hosted-only", "beside-own"])
@pytest.mark.parametrize("name", ["wiki", "ask"])
def test_a_named_choice_of_a_hosted_tool_is_a_clear_error(
    server: FakeLLMServer, own: bool, name: str
) -> None:
    """The server's label or one of its tools cannot be forced: a clear error before the
    message is kept, nothing sent."""
    chat = _openai(server, False)
    if own:
        chat.with_tools(get_weather)
    chat.with_tool_options(choice=name)
    with pytest.raises(ToolOptionError) as info:
        chat.ask("go")
    text = str(info.value)
    assert repr(name) in text and "hosted" in text and "wiki" in text
    if own:
        assert "get_weather" in text
    assert server.requests == [] and len(chat.transcript) == 0


# -- Anthropic's MCP connector --------------------------------------------------------


@STREAM
def test_anthropic_choice_none_disables_the_connectors_tools(
    server: FakeLLMServer, stream: bool
) -> None:
    """No ``tool_choice`` without a tool of the chat's own (the API's 400): the servers go
    with their tools disabled, so the connector runs none; ``auto`` leaves them as given."""
    server.script(["done", "again"])
    chat = _anthropic(server, stream).with_tool_options(choice="none")
    chat.ask("go")
    chat.with_tool_options(choice="auto")
    chat.ask("more")
    off, on = (r.body for r in server.requests)
    assert "tool_choice" not in off and "tool_choice" not in on
    assert off["mcp_servers"] == [
        {"type": "url", "url": URL, "name": "wiki", "tool_configuration": {"enabled": False}}
    ]
    assert on["mcp_servers"] == [{"type": "url", "url": URL, "name": "wiki"}]


@STREAM
def test_anthropic_choice_none_beside_own_tools_disables_them_too(
    server: FakeLLMServer, stream: bool
) -> None:
    server.script(["done"])
    chat = _anthropic(server, stream).with_tools(get_weather).with_tool_options(choice="none")
    chat.ask("go")
    body = server.requests[0].body
    assert body["tool_choice"] == {"type": "none"}
    assert body["mcp_servers"][0]["tool_configuration"] == {"enabled": False}


def test_anthropic_disabled_servers_keep_their_allowed_tools(server: FakeLLMServer) -> None:
    server.script(["done"])
    provider = AnthropicProvider(
        "claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key=KEY, max_retries=0
    )
    wiki = HostedMCP("wiki", server_url=URL, require_approval="never", allowed_tools=["ask"])
    chat = Chat(provider=provider, display=False).with_tools(wiki)
    chat.with_tool_options(choice="none").ask("go")
    config = server.requests[0].body["mcp_servers"][0]["tool_configuration"]
    assert config == {"enabled": False, "allowed_tools": ["ask"]}


def test_anthropic_required_with_hosted_tools_only_is_a_clear_error(
    server: FakeLLMServer,
) -> None:
    chat = _anthropic(server, False).with_tool_options(choice="required")
    with pytest.raises(ToolOptionError, match="required") as info:
        chat.ask("go")
    assert "MCP connector" in str(info.value)
    assert server.requests == []


# -- request keys: only a hosted-only chat's change -----------------------------------


def _old_resolve_choice(choice: str, tool_names: list[str], *, forced_spent: bool) -> str:
    """resolve_choice before hosted tools counted (its result is the key's tool_choice)."""
    if not tool_names:
        if choice not in ("auto", "none"):
            raise ToolOptionError("needs tools")
        return "none"
    if choice in ("auto", "none"):
        return choice
    if choice != "required" and choice not in tool_names:
        raise ToolOptionError("unknown")
    return "auto" if forced_spent else choice


@given(
    choice=st.sampled_from(["auto", "none", "required", "a", "b", "x"]),
    names=st.lists(st.sampled_from(["a", "b", "c"]), unique=True),
    spent=st.booleans(),
)
def test_without_hosted_tools_the_choice_resolves_as_before(
    choice: str, names: list[str], spent: bool
) -> None:
    try:
        old: str | None = _old_resolve_choice(choice, names, forced_spent=spent)
    except ToolOptionError:
        old = None
    try:
        new: str | None = resolve_choice(choice, names, forced_spent=spent)
    except ToolOptionError:
        new = None
    assert new == old


# the keys of these requests as nbagent computed them before the change
_KEYS = {
    ("auto", None): "c408bcbdca321854c13ddb9b7c54e9ef1b51a1e2dd643ce01c3f419c98865115",
    ("none", None): "9d8a1673a3c3006b793e004bfea810d1509e16c4305826448a302829d313630e",
    ("required", None): "083f3e56e8f82889a94aa8908e5b48274d9df42c67411992c1e1a88212ba045b",
    ("get_weather", None): "3ebd39bca0d778d350536c099609a7d876178ffb180d793db5692567697d2013",
    ("auto", "one"): "9ae072a9606c889d4a3a7284b8c1a897db3c8edf4654b80ef4aa4e59d90da1dc",
    (None, None): "bbb48f27e6e578526242555ee9dc5f568f00b9242e15853e6c34fc90ea3560fa",
}


@pytest.mark.parametrize(("choice", "calls"), list(_KEYS))
def test_an_ordinary_chats_recordings_keep_their_keys(
    tmp_path: pathlib.Path, choice: str | None, calls: str | None
) -> None:
    """Function tools only (or none): the recording is written under the key it had."""
    chat = Chat(provider=ScriptedProvider([reply("ok")]), recordings=tmp_path, display=False)
    if choice is not None:
        chat.with_tools(get_weather).with_tool_options(choice=choice, calls=calls)
    chat.ask("hi")
    assert [p.stem for p in tmp_path.rglob("*.json")] == [_KEYS[choice, calls]]


def test_a_hosted_only_chats_none_and_auto_are_two_requests(
    server: FakeLLMServer, tmp_path: pathlib.Path
) -> None:
    """They were one key (both resolved to ``none``), so a recording of one answered the
    other in a replay; they are sent differently now, and keyed apart."""
    server.script(["one", "two"])
    keys = []
    for choice in ("none", "auto"):
        folder = tmp_path / choice
        chat = _openai(server, False, recordings=folder)
        chat.with_tool_options(choice=choice).ask("go")
        keys.append([p.stem for p in folder.rglob("*.json")])
    assert len(keys[0]) == len(keys[1]) == 1 and keys[0] != keys[1]
