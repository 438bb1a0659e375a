"""A hosted MCP call the provider ran against the chat's decision (issue 23, N7).

Through the OpenAI Responses API, the real ``openai`` SDK and the loopback fake
server: an ``mcp_call`` answering a denied approval request, one with no
request under ``require_approval="always"``, one answering a request that is
still undecided. Each warns (:class:`nbagent.HostedCallWarning`), keeps its
place in the transcript with its own status (``ran_despite_denial``,
``ran_unapproved``), and shows as such in ``chat.log``, the store (and the log
read back from it, and a loaded chat) and the view. Calls the chat approved, or
that need no approval, stay ``ok`` and warn nothing.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat, HostedMCP
from nbagent.providers import OpenAIProvider
from nbagent.store import SQLiteStore
from nbagent.testing import FakeLLMServer, Turn, mcp_approval_request, mcp_call, mcp_list_tools

STREAM = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake
    assert not fake.errors, fake.errors


def responses(server: FakeLLMServer) -> OpenAIProvider:
    return OpenAIProvider(
        "gpt-4.1-mini",
        api="responses",
        base_url=server.openai_base_url,
        api_key="sk-test-0123456789abcdef",
        compatible=False,
        max_retries=0,
    )


def hosted_chat(server: FakeLLMServer, stream: bool = False, **kwargs: Any) -> Chat:
    approval = kwargs.pop("require_approval", "always")
    chat = Chat(provider=responses(server), display=False, stream=stream, **kwargs)
    return chat.with_tools(
        HostedMCP("wiki", server_url="https://wiki.example/mcp", require_approval=approval)
    )


def asks(request_id: str = "mcpr_a") -> Turn:
    return Turn(
        hosted=[
            mcp_list_tools("wiki", "ask"),
            mcp_approval_request("wiki", "ask", {"q": "x"}, id=request_id),
        ]
    )


def ran(request_id: str | None = None, **kwargs: Any) -> Turn:
    kwargs.setdefault("output", "the answer")
    call = mcp_call("wiki", "ask", {"q": "x"}, approval_request_id=request_id, **kwargs)
    return Turn(text="done", hosted=[call])


def call_row(frame: Any) -> Any:
    rows = frame[frame["item_type"] == "mcp_call"]
    assert len(rows) == 1, rows
    return rows.iloc[0]


@STREAM
def test_a_call_run_against_a_denial_warns_and_is_recorded_as_such(
    server: FakeLLMServer, stream: bool, tmp_path: Path
) -> None:
    from nbagent.notebook import ChatView
    from nbagent.notebook._fallback import chat_mimebundle

    db = tmp_path / "chats.db"
    server.script([asks(), ran("mcpr_a")])
    chat = hosted_chat(server, stream, store=db)
    view = ChatView(chat)
    chat.ask("q")
    chat.deny("mcpr_a", reason="not this one")
    with pytest.warns(nbagent.HostedCallWarning, match=r"mcpr_a.*was denied.*ran_despite_denial"):
        chat.complete()
    assert chat.status == "complete"  # recorded, nothing lost
    [item] = chat.transcript[-1].items
    assert (item.type, item.status) == ("mcp_call", "ran_despite_denial")
    row = call_row(chat.log)
    assert (row["status"], row["decision"], row["reason"]) == (
        "ran_despite_denial",
        "denied",
        "not this one",
    )
    assert row["result_preview"] == "the answer"
    # the view: a failed line that says what happened
    html = view._repr_mimebundle_()["text/html"]
    assert "ran although its approval was denied" in html
    assert 'data-item-type="mcp_call"' in html and "nba-st-error" in html
    assert "ran although its approval was denied" in chat_mimebundle(chat)["text/plain"]
    chat.close()
    # the store keeps it: the log read back, and a loaded chat
    with SQLiteStore(db) as store:
        stored = call_row(nbagent.read_log(store))
        assert (stored["status"], stored["decision"]) == ("ran_despite_denial", "denied")
        loaded = Chat.load(chat.id, store=store, provider=responses(server), display=False)
        assert loaded.transcript[-1].items[0].status == "ran_despite_denial"
        assert call_row(loaded.log)["status"] == "ran_despite_denial"


@STREAM
def test_a_call_run_without_the_approval_always_asks_for_is_ran_unapproved(
    server: FakeLLMServer, stream: bool
) -> None:
    server.script([ran(None)])
    chat = hosted_chat(server, stream)
    with pytest.warns(nbagent.HostedCallWarning, match="without an approval.*ran_unapproved"):
        chat.ask("q")
    [item] = chat.transcript[-1].items
    assert item.status == "ran_unapproved"
    row = call_row(chat.log)
    assert (row["status"], row["decision"], bool(row["requires_approval"])) == (
        "ran_unapproved",
        "none",
        True,
    )


def test_a_call_run_before_its_request_is_decided_is_ran_unapproved(
    server: FakeLLMServer,
) -> None:
    both = Turn(
        hosted=[
            mcp_approval_request("wiki", "ask", {"q": "x"}, id="mcpr_b"),
            mcp_call("wiki", "ask", {"q": "x"}, output="early", approval_request_id="mcpr_b"),
        ]
    )
    server.script([both])
    chat = hosted_chat(server)
    with pytest.warns(nbagent.HostedCallWarning, match="mcpr_b.*not approved"):
        chat.ask("q")
    assert chat.transcript[-1].items[0].status == "ran_unapproved"
    assert call_row(chat.log)["decision"] == "none"  # nobody had decided when it ran
    [pending] = chat.pending_approvals  # the request itself still waits for a decision
    assert pending.id == "mcpr_b"


def test_a_failed_call_against_a_denial_keeps_its_error(server: FakeLLMServer) -> None:
    server.script([asks(), ran("mcpr_a", output=None, error="server down")])
    chat = hosted_chat(server)
    chat.ask("q")
    chat.deny("mcpr_a")
    with pytest.warns(nbagent.HostedCallWarning):
        chat.complete()
    row = call_row(chat.log)
    assert (row["status"], row["error"]) == ("ran_despite_denial", "server down")


@pytest.mark.parametrize(
    ("approval", "decide"),
    [
        ("always", "approve"),
        ("never", None),
        ({"never": {"tool_names": ["ask"]}}, None),
        ({"always": {"tool_names": ["other"]}}, None),
    ],
)
def test_calls_the_chat_approved_or_that_need_no_approval_stay_ok(
    server: FakeLLMServer, approval: Any, decide: str | None
) -> None:
    server.script([asks(), ran("mcpr_a")] if decide else [ran(None)])
    chat = hosted_chat(server, require_approval=approval)
    with warnings.catch_warnings():
        warnings.simplefilter("error", nbagent.HostedCallWarning)
        chat.ask("q")
        if decide:
            chat.approve("mcpr_a")
            chat.complete()
    assert chat.transcript[-1].items[0].status == "ok"
    assert call_row(chat.log)["status"] == "ok"


def test_the_warning_made_an_error_stops_the_chat_with_everything_recorded(
    server: FakeLLMServer,
) -> None:
    server.script([asks(), ran("mcpr_a"), "next turn"])
    chat = hosted_chat(server)
    chat.ask("q")
    chat.deny("mcpr_a")
    with warnings.catch_warnings():
        warnings.simplefilter("error", nbagent.HostedCallWarning)
        with pytest.raises(nbagent.HostedCallWarning):
            chat.complete()
    assert chat.status == "complete"
    assert chat.transcript[-1].items[0].status == "ran_despite_denial"
    assert chat.ask("more").content == "next turn"


@pytest.mark.parametrize(
    ("rule", "tool", "asks"),
    [
        ("always", "x", True),
        ("never", "x", False),
        ({"never": {"tool_names": ["x"]}}, "x", False),
        ({"never": {"tool_names": ["x"]}}, "y", True),
        ({"always": {"tool_names": ["x"]}}, "x", True),
        ({"always": {"tool_names": ["x"]}}, "y", False),
        ({"never": {"read_only": True}}, "y", None),
    ],
)
def test_asks_before_reads_require_approval(rule: Any, tool: str, asks: bool | None) -> None:
    wiki = HostedMCP("wiki", server_url="https://wiki.example/mcp", require_approval=rule)
    assert wiki.asks_before(tool) is asks


def test_the_summary_counts_a_hosted_call_and_its_decision_once(server: FakeLLMServer) -> None:
    """A hosted call the provider ran after an approval is two rows (the approval request,
    the provider's call, the decision copied onto it): the summary counted four calls, four
    decisions and an approval's "sent to the provider" as a call that ran, for two calls,
    one denied (and run anyway) and one approved."""
    server.script(
        [
            Turn(
                hosted=[
                    mcp_list_tools("wiki", "ask"),
                    mcp_approval_request("wiki", "ask", {"q": "x"}, id="mcpr_a"),
                    mcp_approval_request("wiki", "ask", {"q": "y"}, id="mcpr_b"),
                ]
            ),
            Turn(
                text="done",
                hosted=[
                    mcp_call("wiki", "ask", {"q": "x"}, approval_request_id="mcpr_a", output="x"),
                    mcp_call("wiki", "ask", {"q": "y"}, approval_request_id="mcpr_b", output="y"),
                ],
            ),
        ]
    )
    chat = hosted_chat(server)
    chat.ask("q")
    chat.deny("mcpr_a", reason="not this one")
    chat.approve("mcpr_b")
    with pytest.warns(nbagent.HostedCallWarning):
        chat.complete()
    row = nbagent.log.summary(chat).loc["ask"]
    assert (row["calls"], row["ok"], row["denied"], row["denial_rate"]) == (2, 1, 1, 0.5)
    assert row["pending"] == 0
    chat.close()
