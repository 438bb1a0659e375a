"""A server's sampling request is a model request: once the chat's budget is spent it is not
sent. Approving it in the chat is refused (``InputError`` naming ``raise_budget``; the input
still waits); one approved elsewhere (a store) is answered to the server with an error."""

from __future__ import annotations

import dataclasses
import sys
import warnings
from pathlib import Path
from typing import Any

from _mcp_servers import answering

from nbagent import Chat, InputError, MCPServer, ModelRequest, PendingInput
from nbagent.store import open_store
from nbagent.testing import ScriptedProvider, call_tools, reply

HERE = Path(__file__).resolve().parent


def _costing(response: Any, tokens: int) -> Any:
    # gpt-4.1 input at $2 per million tokens
    return dataclasses.replace(response, model="gpt-4.1", input_tokens=tokens, output_tokens=0)


def _model(sent: list[str], marker: str, call: tuple[str, dict[str, Any], str]) -> Any:
    """Asks for ``call`` ($0.60), then replies with its result; a sampling request (its last
    message starts with ``marker``) is noted in ``sent`` and answered ($2.00)."""

    def answer(request: ModelRequest) -> Any:
        texts = [str(getattr(m, "content", "") or "") for m in request.messages]
        if texts and texts[-1].startswith(marker):
            sent.append(texts[-1])
            return _costing(reply("a short summary"), 1_000_000)
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if not results:
            return _costing(call_tools(call), 300_000)
        return reply(" | ".join(m.content for m in results))

    return ScriptedProvider([answer], repeat_last=True, model="gpt-4.1")


def test_approving_a_sampling_request_past_the_budget_is_refused_until_it_is_raised() -> None:
    server = MCPServer.stdio(
        sys.executable, [str(HERE / "inputs_server.py"), "--legacy"], prefix="inp", timeout=60
    )
    sent: list[str] = []
    provider = _model(sent, "Summarize:", ("inp_summarize", {"text": "t1"}, "c1"))
    chat = Chat(provider=provider, display=False, max_cost_usd=0.5).with_tools(server)
    refused: list[str] = []

    def person(chat: Chat, pending: PendingInput) -> None:
        try:
            chat.answer(pending)  # approve: would send it to the model
        except InputError as exc:
            refused.append(str(exc))
        assert chat.pending_inputs == [pending]  # refused: nothing changed, it still waits
        assert chat.raise_budget("cost") == 0.5  # what the refusal says to do
        chat.answer(pending)

    answering(chat, person)
    try:
        chat.ask("summarize")
    finally:
        server.close()
    assert len(refused) == 1
    assert "cost budget is spent" in refused[0] and "chat.raise_budget()" in refused[0]
    assert sent == ["Summarize: t1"]  # sent once, after the budget was raised
    (record,) = chat.record.inputs
    assert record.status == "accept" and record.cost_usd == 2.0


def test_a_sampling_request_approved_elsewhere_past_the_budget_is_not_sent(
    tmp_path: Path,
) -> None:
    url = str(tmp_path / "agent.db")
    server = MCPServer.stdio(
        sys.executable,
        [str(HERE / "durable_server.py")],
        prefix="dur",
        timeout=60,
        approval="never",
        env={"NBAGENT_TEST_COUNTER": str(tmp_path / "runs")},
    )
    sent: list[str] = []
    provider = _model(sent, "Title:", ("dur_title", {"text": "a long story"}, "c1"))
    try:
        with Chat(provider=provider, display=False, store=url, max_cost_usd=0.5) as chat:
            chat.with_tools(server)
            chat.ask("title it")
            (request,) = chat.pending_inputs
            assert request.kind == "sampling"
            with open_store(url) as store:  # approved from another process
                store.answer(request.id, by="editor")
            chat.refresh()
            chat.complete()
            call = chat.get_call("c1")
    finally:
        server.close()
    assert sent == []  # the spent budget stopped it: no model request
    assert call.status == "error" and call.result is not None
    assert "cost budget is spent" in call.result.content
    assert "not sent to the model" in call.result.content


def test_a_mid_call_sampling_request_approved_elsewhere_past_the_budget_is_an_error_reply(
    tmp_path: Path, caplog: Any
) -> None:
    """The older protocol asks while the call runs: the refusal is the server's error reply,
    not an exception the MCP SDK's handler logs with its traceback."""
    import logging

    caplog.set_level(logging.WARNING)
    url = str(tmp_path / "agent.db")
    server = MCPServer.stdio(
        sys.executable, [str(HERE / "inputs_server.py"), "--legacy"], prefix="inp", timeout=60
    )
    sent: list[str] = []
    provider = _model(sent, "Summarize:", ("inp_summarize", {"text": "t1"}, "c1"))
    chat = Chat(provider=provider, display=False, store=url, max_cost_usd=0.5)
    chat.with_tools(server)

    def elsewhere(chat: Chat, pending: PendingInput) -> None:
        with open_store(url) as store:  # approved from another process
            store.answer(pending.id, by="editor")

    answering(chat, elsewhere)
    try:
        chat.ask("summarize")
        call = chat.get_call("c1")
    finally:
        chat.close()
        server.close()
    assert sent == []
    assert call.status == "error" and call.result is not None
    assert "budget is spent" in call.result.content
    assert not [r for r in caplog.records if r.exc_info], caplog.text


def test_a_sampling_response_with_no_usage_costs_unknown_and_a_budget_says_so() -> None:
    """A server's sampling request answered by a model that reports no usage: its cost is
    unknown (None, and so is the chat's), not $0, and a budgeted chat warns once, as for a
    request of the chat's own. It read $0 and no budget heard of it."""

    def answer(request: ModelRequest) -> Any:
        texts = [str(getattr(m, "content", "") or "") for m in request.messages]
        if texts and texts[-1].startswith("Summarize:"):
            unreported = reply("a short summary")
            return dataclasses.replace(
                unreported, model="gpt-4.1", input_tokens=0, output_tokens=0, usage_reported=False
            )
        if not [m for m in request.messages if getattr(m, "role", "") == "tool"]:
            return _costing(call_tools(("inp_summarize", {"text": "t1"}, "c1")), 1000)
        return _costing(reply("done"), 1000)

    server = MCPServer.stdio(
        sys.executable, [str(HERE / "inputs_server.py"), "--legacy"], prefix="inp", timeout=60
    )
    provider = ScriptedProvider([answer], repeat_last=True, model="gpt-4.1")
    chat = Chat(provider=provider, display=False, max_cost_usd=5.0).with_tools(server)
    answering(chat, lambda chat, pending: chat.answer(pending))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            chat.ask("summarize")
    finally:
        server.close()
    (record,) = chat.record.inputs
    assert record.status == "accept" and record.cost_usd is None
    assert chat.cost_usd is None  # the chat's total is unknown with it
    said = [str(w.message) for w in caught if "reported no token usage" in str(w.message)]
    assert len(said) == 1 and "max_cost_usd=5" in said[0]
