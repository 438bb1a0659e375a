"""Warnings nbagent composes around others' text reach the screen: an ``always_allow``
predicate that raised (its text may quote the chat's provider key, of no key shape: a
policy alone cannot know it), a hosted call the provider ran unapproved (its name is the
provider's), an approval rule whose exception cannot even be read. Each is said with the
chat's key and key shapes hidden, and none breaks the chat."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

import nbagent
from nbagent import CallbackWarning, Chat, HostedMCP, ToolCall, tool
from nbagent.providers import OpenAIProvider
from nbagent.testing import (
    FakeLLMServer,
    ScriptedProvider,
    Turn,
    call_tools,
    mcp_call,
    reply,
)

KEY = "localkey_Zq7PmW4xR9tB2nV6"  # an OpenAI-compatible server's key: no key shape


class KeyedProvider(ScriptedProvider):
    def secrets(self) -> tuple[str, ...]:
        return (KEY,)


def _pay(amount: int) -> str:
    """Pay."""
    return "paid"


pay = tool(requires_approval=True, name="pay")(_pay)


def test_a_raising_always_allow_predicate_warns_without_the_provider_key() -> None:
    llm = KeyedProvider([call_tools(("pay", {"amount": 5}, "p1")), reply("done")])
    chat = Chat(provider=llm, display=False).with_tools(pay)

    def when(call: ToolCall) -> bool:
        raise RuntimeError(f"policy service refused key {KEY}")

    chat.always_allow(pay, when=when)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat.ask("pay 5")
    said = [str(w.message) for w in caught if issubclass(w.category, CallbackWarning)]
    assert said and "RuntimeError" in said[0]
    assert all(KEY not in text for text in said), said
    assert [c.id for c in chat.pending_approvals] == ["p1"]  # not approved by it


class _Unreadable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def _unreadable(call: ToolCall) -> bool:
    raise _Unreadable


@pytest.mark.parametrize("where", ["resolver", "predicate"])
def test_an_exception_whose_text_cannot_be_read_leaves_the_call_waiting(where: str) -> None:
    gated = tool(requires_approval=_unreadable if where == "resolver" else True, name="pay")(_pay)
    llm = ScriptedProvider([call_tools(("pay", {"amount": 5}, "p1")), reply("done")])
    chat = Chat(provider=llm, display=False).with_tools(gated)
    if where == "predicate":
        chat.always_allow("pay", when=_unreadable)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chat.ask("pay 5")  # no crash: the call waits, its reason says why
    [call] = chat.pending_approvals
    if where == "resolver":
        assert "_Unreadable (its message could not be read)" in call.approval.reason


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


def test_a_hosted_call_run_unapproved_warns_without_a_key_in_its_name(
    server: FakeLLMServer,
) -> None:
    name = "use_sk-proj-Zq81xYb27TvWm3aQ9rLk5PdE4sHj6UcN"
    server.script([Turn(text="done", hosted=[mcp_call("wiki", name, {"q": "x"})])])
    provider = OpenAIProvider(
        "gpt-4.1-mini",
        api="responses",
        base_url=server.openai_base_url,
        api_key=KEY,
        compatible=False,
        max_retries=0,
    )
    chat = Chat(provider=provider, display=False).with_tools(
        HostedMCP("wiki", server_url="https://wiki.example/mcp", require_approval="always")
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat.ask("q")
    said = [str(w.message) for w in caught if issubclass(w.category, nbagent.HostedCallWarning)]
    assert said and "ran_unapproved" in said[0]
    assert all(name not in text and "Zq81xYb27" not in text for text in said), said
    assert chat.transcript[-1].items[0].status == "ran_unapproved"  # recorded all the same


@pytest.mark.parametrize("where", ["after_tool_result", "subscriber", "before_tool_call"])
def test_a_callback_raising_an_unreadable_exception_is_said_not_a_crash(where: str) -> None:
    ran: list[int] = []

    @tool
    def note(n: int) -> str:
        """Note."""
        ran.append(n)
        return "noted"

    heard: list[str] = []
    llm = ScriptedProvider([call_tools(("note", {"n": 1}, "n1")), reply("done")])
    chat = Chat(provider=llm, display=False).with_tools(note)
    if where == "after_tool_result":
        chat.after_tool_result(_unreadable)
    elif where == "subscriber":
        chat.on("tool_call_finished", _unreadable)
        chat.on("tool_call_finished", lambda e: heard.append(e.type))  # still hears it
    else:
        chat.before_tool_call(_unreadable)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert chat.ask("note 1").content == "done"
    said = [str(w.message) for w in caught if issubclass(w.category, CallbackWarning)]
    if where == "before_tool_call":  # it keeps its call from running, as one that raises does
        assert ran == []
        assert "its message could not be read" in chat.record.calls[0].result_preview
    else:
        assert ran == [1]
        assert any("_Unreadable (its message could not be read)" in t for t in said), said
    if where == "subscriber":
        assert heard == ["tool_call_finished"]
