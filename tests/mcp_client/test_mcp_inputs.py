"""A server's requests for input during a call: elicitation and sampling park on the chat,
roots are answered without asking (a server of our own on the official SDK, both protocols).

The call waits while the input is pending (bounded by its ``timeout=``), the answer is
checked against the server's schema before anything is sent back, an approved sampling
request runs on the chat's provider and counts in its totals, and the tool runs once.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _mcp_servers import answering

from nbagent import (
    Chat,
    InputError,
    MCPServer,
    ModelRequest,
    PendingInput,
    ToolDefinitionError,
)
from nbagent.testing import ScriptedProvider, call_tools, reply

SERVER = str(Path(__file__).with_name("inputs_server.py"))


def inputs_server(*flags: str, **kwargs: Any) -> MCPServer:
    kwargs.setdefault("prefix", "inp")
    kwargs.setdefault("timeout", 60)
    return MCPServer.stdio(sys.executable, [SERVER, *flags], **kwargs)


@pytest.fixture(scope="module", params=["2026-07-28", "legacy"])
def server(request: pytest.FixtureRequest) -> Iterator[MCPServer]:
    """The server on the newest protocol (input_responses + request_state, answered in the
    call's own retry) and on the older one (the request sent in the middle of the call)."""
    flags = ("--legacy",) if request.param == "legacy" else ()
    s = inputs_server(*flags, roots=[Path(__file__).parent, "file:///srv/data"])
    s.connect()
    version = s._connection.client.protocol_version
    assert (version == "2026-07-28") == (request.param == "2026-07-28"), version
    yield s
    s.close()


def model(*calls: tuple[str, dict[str, Any], str], sampled: list[str] | None = None) -> Any:
    """Asks for ``calls``, then replies with what the tools said; answers a sampling request
    (no tools, a 'Summarize:' message) with a fixed summary, noting what it was sent."""

    def answer(request: ModelRequest) -> Any:
        texts = [getattr(m, "content", "") or "" for m in request.messages]
        if texts and texts[-1].startswith("Summarize:"):
            if sampled is not None:
                sampled.append(f"{request.system}|{texts[-1]}|{request.max_tokens}")
            return reply("a short summary")
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if not results:
            return call_tools(*calls)
        return reply(" | ".join(m.content for m in results))

    return ScriptedProvider([answer], repeat_last=True)


def test_an_elicitation_parks_on_the_chat_and_its_answer_is_checked(server: MCPServer) -> None:
    chat = Chat(provider=model(("inp_book_table", {"day": "Friday"}, "c1")), display=False)
    chat.with_tools(server)
    refused: list[str] = []

    def person(chat: Chat, pending: PendingInput) -> None:
        assert (pending.kind, pending.call_id, pending.server) == ("elicitation", "c1", "inp")
        assert pending.message == "Who is the table on Friday for?"
        assert pending.schema is not None and set(pending.schema["required"]) == {"name", "guests"}
        try:
            chat.answer(pending, {"name": "Ada", "guests": "three"})
        except InputError as exc:
            refused.append(str(exc))
        assert chat.pending_inputs == [pending]  # a bad answer loses nothing
        chat.answer(pending, {"name": "Ada", "guests": 3, "vegetarian": True}, by="ada")

    answering(chat, person)
    final = chat.ask("book a table on Friday")
    assert final is not None
    assert "booked Friday for Ada, 3 guests, vegetarian=True" in final.content
    assert refused and "guests: expected integer" in refused[0]
    (record,) = chat.record.inputs
    assert (record.kind, record.status, record.answered_by) == ("elicitation", "accept", "ada")
    assert record.wait_ms is not None and record.wait_ms >= 0
    assert chat.record.call("c1").answered_by == "ada"
    assert chat.get_call("c1").status == "ok"


@pytest.mark.parametrize("cancel", [False, True])
def test_a_declined_or_cancelled_elicitation_is_told_to_the_server(
    server: MCPServer, cancel: bool
) -> None:
    chat = Chat(provider=model(("inp_book_table", {"day": "Monday"}, "c1")), display=False)
    chat.with_tools(server)
    answering(chat, lambda chat, p: chat.decline(p, "not now", cancel=cancel))
    final = chat.ask("book")
    assert final is not None
    assert f"not booked ({'cancel' if cancel else 'decline'})" in final.content
    assert chat.record.inputs[0].status == ("cancel" if cancel else "decline")


def test_an_approved_sampling_request_runs_on_the_chats_provider_and_counts(
    server: MCPServer,
) -> None:
    sampled: list[str] = []
    chat = Chat(
        provider=model(("inp_summarize", {"text": "a long text"}, "c1"), sampled=sampled),
        display=False,
    )
    chat.with_tools(server)

    def person(chat: Chat, pending: PendingInput) -> None:
        assert pending.kind == "sampling"
        assert pending.content["messages"][0]["content"]["text"] == "Summarize: a long text"
        assert pending.content["maxTokens"] == 50
        chat.answer(pending)  # approve: the chat's model answers it

    answering(chat, person)
    final = chat.ask("summarize")
    assert final is not None
    assert "summary by scripted: a short summary" in final.content
    assert sampled == ["Be brief.|Summarize: a long text|50"]  # the exact request, run once
    (record,) = chat.record.inputs
    assert record.usage is not None and record.usage.total_tokens > 0
    steps = sum(s.usage.total_tokens for s in chat.record.steps if s.usage is not None)
    assert chat.usage.total_tokens == steps + record.usage.total_tokens  # in the chat's totals


def test_a_sampling_request_answered_by_a_person_or_declined(server: MCPServer) -> None:
    chat = Chat(provider=model(("inp_summarize", {"text": "x"}, "c1")), display=False)
    chat.with_tools(server)
    answering(chat, lambda chat, p: chat.answer(p, "my own summary"))
    final = chat.ask("summarize")
    assert final is not None and "summary by human: my own summary" in final.content

    chat2 = Chat(provider=model(("inp_summarize", {"text": "x"}, "c2")), display=False)
    chat2.with_tools(server)
    answering(chat2, lambda chat, p: chat.decline(p, "no model calls"))
    chat2.ask("summarize")
    call = chat2.get_call("c2")
    assert call.status == "error" and call.result is not None
    assert "declined the sampling request" in call.result.content


def test_roots_are_answered_from_the_server_settings_without_asking(server: MCPServer) -> None:
    chat = Chat(provider=model(("inp_workspace", {}, "c1")), display=False).with_tools(server)
    final = chat.ask("where?")
    assert final is not None
    here = Path(__file__).parent.resolve()
    assert final.content == f"{here.name}={here.as_uri()}, data=file:///srv/data"
    assert chat.record.inputs == ()  # nobody was asked


def test_the_calls_timeout_bounds_the_wait_and_withdraws_the_input() -> None:
    # The timeout must cover the server's request arriving (a loaded machine took more than
    # 3 s in a full run, and the call timed out before anything was asked): 15 s, nobody answers.
    server = inputs_server("--legacy", timeout=15)
    try:
        chat = Chat(provider=model(("inp_book_table", {"day": "Friday"}, "c1")), display=False)
        chat.with_tools(server)
        server.connect()  # started before the call, so its 15 s are the wait's alone
        chat.ask("book")
        assert chat.get_call("c1").status == "timed_out"
        (record,) = chat.record.inputs
        assert (record.status, record.answered_by) == ("cancel", "nbagent")
        assert record.reason == "the call ended (timed_out) before an answer"
        assert chat.pending_inputs == []
        with pytest.raises(InputError, match="already answered"):
            chat.answer(record.input_id, {"name": "late", "guests": 1})
    finally:
        server.close()


def test_outside_a_chat_nobody_can_answer_and_the_server_is_told() -> None:
    server = inputs_server()
    try:
        with pytest.raises(Exception, match="no chat call is in flight"):
            server.call("book_table", {"day": "Friday"})
    finally:
        server.close()


def test_sampling_runs_on_the_servers_provider_when_one_is_given() -> None:
    server_side: list[str] = []
    own = model(sampled=server_side)
    chat_side: list[str] = []
    server = inputs_server(sampling=own)
    try:
        chat = Chat(
            provider=model(("inp_summarize", {"text": "t"}, "c1"), sampled=chat_side),
            display=False,
        )
        chat.with_tools(server)
        answering(chat, lambda chat, p: chat.answer(p))
        final = chat.ask("summarize")
        assert final is not None and "summary by scripted: a short summary" in final.content
        assert server_side == ["Be brief.|Summarize: t|50"] and chat_side == []
        (record,) = chat.record.inputs
        assert record.usage is not None and record.usage.total_tokens > 0  # counted here too
    finally:
        server.close()
    with pytest.raises(ToolDefinitionError, match="sampling= takes a provider"):
        inputs_server(sampling=42)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_store_answer_reaches_a_call_waiting_mid_run(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """An older server asks in the middle of a call, in a stored chat driven by ``ask()``;
    another process answers through the store. Nobody stepped the chat meanwhile (its driver
    waits inside the call), so the answer waited for a step that came only after the call
    timed out: the other process was told "accept", the chat recorded a cancel, and the
    store and the chat disagreed. The store's follower now brings the answer to the call."""
    import threading

    from nbagent import InputRequested
    from nbagent.store import open_store

    url = (
        str(tmp_path / "chats.db")
        if backend == "sqlite"
        else request.getfixturevalue("postgres_dsn")
    )
    server = inputs_server("--legacy", timeout=60)
    chat = Chat(provider=model(("inp_book_table", {"day": "Friday"}, "c1")), store=url)
    chat.with_tools(server)
    asked = threading.Event()
    chat.on(InputRequested, lambda e: asked.set())

    def ops() -> None:  # another process: its own store connection, the chat's id
        assert asked.wait(60)
        with open_store(url) as other:
            (pending,) = other.pending_inputs(chat.id)
            other.answer(pending.id, {"name": "Ops", "guests": 2}, by="ops", chat_id=chat.id)

    answerer = threading.Thread(target=ops)
    answerer.start()
    try:
        final = chat.ask("book a table on Friday")
    finally:
        answerer.join()
        server.close()
    assert final is not None and "booked Friday for Ops, 2 guests" in final.content
    (record,) = chat.record.inputs
    assert (record.status, record.answered_by) == ("accept", "ops")
    with open_store(url) as other:
        (stored,) = other.inputs(chat.id)
        assert (stored.status, stored.answered_by, stored.applied) == ("accept", "ops", True)
    chat.close()
