"""Pending inputs: external tools and ``ask_user`` park the chat like an approval.

An external tool's call never runs: it waits (``awaiting_input``) until
``chat.answer(call, result)`` gives its result, exactly once; ``ask_user``'s
question waits for the user's answer, checked against its choices; a bad answer
is refused and loses nothing; the answer is in the record with who gave it and
how long it waited, survives ``Chat.load``, and the model reads it on the wire.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import (
    Chat,
    ChatMessage,
    DecisionError,
    InputAnswered,
    InputError,
    InputRequested,
    ModelRequest,
    PendingInput,
    PendingToolCallsError,
    SQLiteStore,
    ToolCallFinished,
    ask_user,
    tool,
)
from nbagent._record import fold
from nbagent.providers import OpenAIProvider
from nbagent.testing import FakeLLMServer, FakeToolCall, ScriptedProvider, Turn, call_tools, reply

RAN: list[str] = []


@tool(external=True)
def sign_contract(party: str) -> str:
    """Have the contract signed by a person.

    Args:
        party: Who signs.
    """
    RAN.append(party)  # never: an external tool is not run here
    return "ran"


@tool(external=True, requires_approval=True)
def wire_money(amount: int) -> str:
    """Send money (a person does it, once approved).

    Args:
        amount: How much.
    """
    RAN.append(str(amount))
    return "ran"


def scripted(*calls: tuple[str, dict[str, Any], str]) -> ScriptedProvider:
    """One response asking for ``calls``, then a reply quoting the results it read."""

    def answer(request: ModelRequest) -> Any:
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if not results:
            return call_tools(*calls)
        return reply(" | ".join(f"{m.status}:{m.content}" for m in results))

    return ScriptedProvider([answer], repeat_last=True)


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def test_an_external_call_parks_like_an_approval_and_never_runs() -> None:
    chat = Chat(provider=scripted(("sign_contract", {"party": "ACME"}, "c1")), display=False)
    chat.with_tools(sign_contract)
    chat.ask("sign it")
    assert chat.status == "awaiting_approval"  # parked: nothing runs until someone answers
    assert chat.awaiting_approval and chat.awaiting_input
    assert chat.pending_approvals == []
    (request,) = chat.pending_inputs
    assert isinstance(request, PendingInput)
    assert (request.kind, request.call_id, request.tool) == ("external", "c1", "sign_contract")
    assert request.content == {"arguments": {"party": "ACME"}}
    assert chat.get_call("c1").status == "awaiting_input"
    with pytest.raises(PendingToolCallsError, match=r"chat\.answer"):
        chat.ask("and another")
    assert chat.complete() is not None and chat.status == "awaiting_approval"  # still waits

    chat.answer(request, {"signed": True, "on": "2026-12-01"})
    assert chat.pending_inputs == [] and chat.status == "ready"
    final = chat.complete()
    assert final is not None
    assert final.content == 'ok:{"signed":true,"on":"2026-12-01"}'
    assert RAN == []  # the function never ran
    call = chat.get_call("c1")
    assert call.status == "ok" and call.result is not None
    assert call.result.value == {"signed": True, "on": "2026-12-01"}


def test_the_answer_is_in_the_record_with_who_when_and_the_wait() -> None:
    chat = Chat(provider=scripted(("sign_contract", {"party": "ACME"}, "c1")), display=False)
    chat.with_tools(sign_contract)
    chat.ask("sign it")
    chat.answer("c1", "signed", by="alice")
    (record,) = chat.record.inputs
    assert (record.kind, record.status, record.answered_by, record.data) == (
        "external",
        "accept",
        "alice",
        "signed",
    )
    assert record.answered_at is not None and record.wait_ms is not None
    assert record.answered_at >= record.requested_at
    call = chat.record.call("c1")
    assert (call.input_kind, call.answered_by) == ("external", "alice")
    assert call.input_wait_ms == record.wait_ms
    requested = [e for e in chat.events if isinstance(e, InputRequested)]
    answered = [e for e in chat.events if isinstance(e, InputAnswered)]
    assert len(requested) == len(answered) == 1
    assert fold(chat.events) == chat.record


def test_ask_user_free_text_and_choices_checked_before_anything_changes() -> None:
    chat = Chat(
        provider=scripted(
            ("ask_user", {"question": "Which colour?", "choices": ["red", "blue"]}, "q1"),
            ("ask_user", {"question": "Your name?"}, "q2"),
        ),
        display=False,
    ).with_tools(ask_user)
    chat.ask("ask me things")
    q1, q2 = chat.pending_inputs
    assert (q1.kind, q1.message, q1.choices) == ("ask_user", "Which colour?", ("red", "blue"))
    assert (q2.message, q2.choices, q2.schema) == ("Your name?", (), {"type": "string"})
    before = len(chat.events)
    with pytest.raises(InputError, match=r"does not match what was asked.*still waits"):
        chat.answer(q1, "green")
    with pytest.raises(InputError, match="expected string"):
        chat.answer(q2, 42)
    assert len(chat.events) == before  # nothing recorded, nothing lost
    assert chat.pending_inputs == [q1, q2]
    chat.answer(q1, "blue")
    chat.answer(q2, "Ada")
    final = chat.complete()
    assert final is not None and final.content == "ok:blue | ok:Ada"


def test_decline_and_cancel_answer_the_call_without_running_it() -> None:
    chat = Chat(
        provider=scripted(
            ("sign_contract", {"party": "A"}, "a"),
            ("sign_contract", {"party": "B"}, "b"),
            ("ask_user", {"question": "Why?"}, "c"),
        ),
        display=False,
    ).with_tools(sign_contract, ask_user)
    chat.ask("go")
    with pytest.raises(TypeError, match="reason must be a string, got int"):
        chat.decline("a", 42)  # type: ignore[arg-type]  # was kept as no reason at all
    assert [p.id for p in chat.pending_inputs] == ["a", "b", "c"]  # nothing settled
    chat.decline("a", "the legal team said no")
    chat.decline("b", cancel=True)
    chat.decline("c", by="bob")
    final = chat.complete()
    assert final is not None
    assert final.content == (
        "denied:Declined by the user: no result was given: the legal team said no | "
        "cancelled:Cancelled by the user: no answer was given. | "
        "denied:Bob declined to answer."
    )
    assert [r.status for r in chat.record.inputs] == ["decline", "cancel", "decline"]
    assert RAN == []


def test_answering_twice_unknown_or_not_waiting_is_refused() -> None:
    chat = Chat(provider=scripted(("sign_contract", {"party": "A"}, "a")), display=False)
    chat.with_tools(sign_contract)
    chat.ask("go")
    chat.answer("a", "done")
    with pytest.raises(InputError, match="already answered"):
        chat.answer("a", "again")
    with pytest.raises(InputError, match="already answered"):
        chat.decline("a")
    with pytest.raises(InputError, match="no pending input 'zzz'"):
        chat.answer("zzz", 1)
    assert issubclass(InputError, DecisionError)
    with pytest.raises(TypeError):
        chat.answer(3, "x")  # type: ignore[arg-type]


def test_a_gated_external_call_is_decided_first_then_parks() -> None:
    chat = Chat(
        provider=scripted(("wire_money", {"amount": 5}, "w1"), ("wire_money", {"amount": 9}, "w2")),
        display=False,
    ).with_tools(wire_money)
    chat.ask("pay")
    assert [c.id for c in chat.pending_approvals] == ["w1", "w2"]
    assert chat.pending_inputs == []
    chat.approve("w1")
    chat.deny("w2", reason="too much")
    (request,) = chat.pending_inputs  # the approved call now waits for its result
    assert request.call_id == "w1"
    with pytest.raises(InputError, match=r"w2.*denied"):
        chat.answer("w2", "sent")
    chat.answer(request, "sent by the bank")
    final = chat.complete()
    assert final is not None and final.content.startswith("ok:sent by the bank | denied:")
    assert RAN == []


def test_step_resumes_after_the_answer() -> None:
    chat = Chat(provider=scripted(("sign_contract", {"party": "A"}, "a")), display=False)
    chat.with_tools(sign_contract)
    chat.ask_later("go")
    assert chat.step().kind == "generated"
    assert [i.id for i in chat.pending_inputs] == ["a"]  # parked as soon as it was asked for
    result = chat.step()
    assert (result.kind, [c.id for c in result.calls]) == ("awaiting_approval", ["a"])
    chat.answer("a", "done")
    assert chat.step().kind == "generated"
    assert chat.step().kind == "complete"


def test_async_twins() -> None:
    async def go() -> str:
        chat = Chat(provider=scripted(("ask_user", {"question": "Q?"}, "q")), display=False)
        chat.with_tools(ask_user)
        await chat.ask_async("ask", wait_for_approval=False)
        (request,) = chat.pending_inputs
        await chat.answer_async(request, "yes")
        final = await chat.complete_async()
        assert final is not None
        return final.content

    assert asyncio.run(go()) == "ok:yes"

    async def declined() -> str:
        chat = Chat(provider=scripted(("ask_user", {"question": "Q?"}, "q")), display=False)
        chat.with_tools(ask_user)
        await chat.ask_async("ask", wait_for_approval=False)
        await chat.decline_async("q", "rather not")
        final = await chat.complete_async()
        assert final is not None
        return final.content

    assert asyncio.run(declined()) == "denied:The user declined to answer: rather not"


def test_racing_answers_settle_an_input_exactly_once() -> None:
    for _ in range(30):
        chat = Chat(provider=scripted(("sign_contract", {"party": "A"}, "a")), display=False)
        chat.with_tools(sign_contract)
        chat.ask("go")
        barrier = threading.Barrier(6)
        won: list[int] = []
        refused: list[int] = []

        def answer(
            n: int,
            chat: Chat = chat,
            barrier: threading.Barrier = barrier,
            won: list[int] = won,
            refused: list[int] = refused,
        ) -> None:
            barrier.wait()
            try:
                if n % 2:
                    chat.answer("a", f"answer {n}")
                else:
                    chat.decline("a", f"no {n}")
                won.append(n)
            except InputError:
                refused.append(n)

        threads = [threading.Thread(target=answer, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(won) == 1 and len(refused) == 5
        finished = [e for e in chat.events if isinstance(e, ToolCallFinished)]
        answered = [e for e in chat.events if isinstance(e, InputAnswered)]
        assert len(finished) == len(answered) == 1
        chat.complete()
        assert chat.status == "complete"


answers_st = st.lists(
    st.tuples(
        st.sampled_from(["x", "y", "z", "nope"]),
        st.sampled_from(["answer", "bad", "decline", "cancel"]),
    ),
    max_size=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=answers_st)
def test_every_input_is_answered_at_most_once_whatever_is_tried(
    actions: list[tuple[str, str]],
) -> None:
    chat = Chat(
        provider=scripted(
            ("sign_contract", {"party": "X"}, "x"),
            ("ask_user", {"question": "?", "choices": ["a", "b"]}, "y"),
            ("ask_user", {"question": "free"}, "z"),
        ),
        display=False,
    ).with_tools(sign_contract, ask_user)
    chat.ask("go")
    settled: dict[str, str] = {}
    for target, what in actions:
        try:
            if what == "answer":
                chat.answer(target, "a")
            elif what == "bad":
                chat.answer(target, ["not", "text"] if target != "x" else object())
            elif what == "decline":
                chat.decline(target, "no")
            else:
                chat.decline(target, cancel=True)
        except InputError:
            continue
        assert target not in settled  # never settled twice
        assert what != "bad" or target == "x"  # a list is no text: only the external one takes it
        settled[target] = what
    finished = [e.call.id for e in chat.events if isinstance(e, ToolCallFinished)]
    assert sorted(finished) == sorted(settled)  # one result per settled input, none for others
    assert {i.id for i in chat.pending_inputs} == {"x", "y", "z"} - set(settled)
    assert RAN == []
    assert fold(chat.events) == chat.record


def test_a_pending_input_survives_a_store_and_chat_load(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    provider = scripted(("sign_contract", {"party": "ACME"}, "c1"))
    with Chat(provider=provider, display=False, store=SQLiteStore(path)) as chat:
        chat.with_tools(sign_contract)
        chat.ask("sign it")
        chat_id = chat.id
    with Chat.load(chat_id, store=SQLiteStore(path), provider=provider) as bare:
        # loaded without its tool, the call still waits for its answer (never an error)
        assert [i.id for i in bare.pending_inputs] == ["c1"]
        bare.complete()
        assert bare.get_call("c1").status == "awaiting_input"
    with Chat.load(
        chat_id, store=SQLiteStore(path), tools=[sign_contract], provider=provider
    ) as loaded:
        assert loaded.status == "awaiting_approval"
        (request,) = loaded.pending_inputs
        assert (request.kind, request.call_id, request.content) == (
            "external",
            "c1",
            {"arguments": {"party": "ACME"}},
        )
        assert len([e for e in loaded.events if isinstance(e, InputRequested)]) == 1
        loaded.answer(request, "signed", by="carol")
        final = loaded.complete()
        assert final is not None and final.content == "ok:signed"
    with Chat.load(chat_id, store=SQLiteStore(path), provider=provider) as again:  # no tools
        assert again.status == "complete" and again.pending_inputs == []
        (record,) = again.record.inputs
        assert (record.status, record.answered_by, record.data) == ("accept", "carol", "signed")
        with pytest.raises(InputError, match="already answered"):
            again.answer("c1", "twice")
    assert RAN == []


def test_on_the_fake_server_the_model_reads_the_answer_as_the_tools_result() -> None:
    with FakeLLMServer() as server:
        server.script(
            [
                Turn(
                    tool_calls=[
                        FakeToolCall(
                            "ask_user", {"question": "Ship today?", "choices": ["yes", "no"]}
                        )
                    ]
                ),
                Turn(text="Shipping."),
            ]
        )
        provider = OpenAIProvider(
            "gpt-4.1-mini", base_url=server.openai_base_url, api_key="sk-test", max_retries=0
        )
        try:
            chat = Chat(provider=provider, display=False).with_tools(ask_user)
            chat.ask("should we ship?")
            (request,) = chat.pending_inputs
            assert request.choices == ("yes", "no")
            assert len(server.requests) == 1  # parked: no request while it waits
            chat.answer(request, "yes")
            final = chat.complete()
        finally:
            provider.close()
        assert final is not None and final.content == "Shipping."
        tools = server.last_request.body["tools"]
        assert [t["function"]["name"] for t in tools] == ["ask_user"]
        tool_messages = [m for m in server.last_request.body["messages"] if m["role"] == "tool"]
        assert [m["content"] for m in tool_messages] == ["yes"]


def test_the_demo_model_asks_the_user_and_answers_from_the_reply() -> None:
    chat = Chat(display=False).with_tools(ask_user)
    chat.ask("ask the user which colour they prefer")
    (request,) = chat.pending_inputs
    assert request.kind == "ask_user"
    chat.answer(request, "green")
    final = chat.complete()
    assert final is not None and "green" in final.content
    assert json.loads(json.dumps(chat.record.inputs[0].data)) == "green"


def test_a_call_asks_mid_run_and_an_approved_sampling_request_counts_in_the_totals() -> None:
    """The core's seam an MCP server's requests go through, with no server: a tool asks a
    sampling question while it runs; approved, the chat's provider answers it and its
    tokens join the chat's totals; the fold from scratch agrees."""
    from nbagent import current_input_asker
    from nbagent._events import SamplingFinished

    @tool
    def consult(topic: str) -> str:
        """Ask the model a side question while running.

        Args:
            topic: What about.
        """
        asker = current_input_asker()
        assert asker is not None
        input_id, future = asker.ask("sampling", f"side question on {topic}", {}, None, None)
        action, _ = future.result(timeout=60)
        assert action == "accept"
        message = ChatMessage("user", f"Side question: {topic}")
        response = asyncio.run(asker.sample(input_id, [message], None, 20))
        return f"side answer: {response.text}"

    def answer(request: ModelRequest) -> Any:
        last = request.messages[-1]
        if getattr(last, "content", "").startswith("Side question"):
            return reply("forty-two")
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        return (
            reply(results[0].content) if results else call_tools(("consult", {"topic": "x"}, "k"))
        )

    chat = Chat(provider=ScriptedProvider([answer], repeat_last=True), display=False)
    chat.with_tools(consult)
    asked = threading.Event()
    chat.on(InputRequested, lambda e: asked.set())

    def person() -> None:
        assert asked.wait(60)
        (pending,) = chat.pending_inputs
        assert (pending.kind, pending.call_id) == ("sampling", "k")
        chat.answer(pending)

    t = threading.Thread(target=person)
    t.start()
    final = chat.ask("consult")
    t.join()
    assert final is not None and final.content == "side answer: forty-two"
    (sampled,) = [e for e in chat.events if isinstance(e, SamplingFinished)]
    steps = sum(s.usage.total_tokens for s in chat.record.steps if s.usage is not None)
    assert sampled.usage.total_tokens > 0
    assert chat.usage.total_tokens == steps + sampled.usage.total_tokens
    assert chat.record.inputs[0].usage == sampled.usage
    assert fold(chat.events) == chat.record


def test_the_log_has_who_answered_when_and_the_wait() -> None:
    chat = Chat(
        provider=scripted(
            ("sign_contract", {"party": "A"}, "a"), ("sign_contract", {"party": "B"}, "b")
        ),
        display=False,
    ).with_tools(sign_contract)
    chat.ask("go")
    chat.answer("a", "signed", by="alice")
    log = chat.log.frame().set_index("call_id")
    assert log.loc["a", "status"] == "ok" and log.loc["b", "status"] == "awaiting_input"
    assert list(log["input_kind"]) == ["external", "external"]
    assert log.loc["a", "answered_by"] == "alice"
    assert log.loc["a", "answered_at"] == chat.record.inputs[0].answered_at
    assert log.loc["a", "input_wait_ms"] >= 0
    assert log.loc["b", "answered_by"] is pd.NA and log.loc["b", "input_wait_ms"] is pd.NA
    assert str(log["answered_at"].dtype) == "datetime64[ns, UTC]"


def test_an_input_left_pending_by_a_crash_closes_with_its_call_in_the_fold() -> None:
    """A call asked mid-run, then found in doubt after its process died: no answer event
    ever comes, so its final event closes the input (no card offers to answer it)."""
    from datetime import UTC, datetime

    from nbagent import Approval, ToolCall, ToolCallRequested, ToolResultMessage

    call = ToolCall("c1", "book", {})
    now = datetime.now(UTC)
    history = [
        ToolCallRequested(chat_id="x", call=call, step=1, turn=1, approval=Approval(False)),
        InputRequested(
            chat_id="x",
            call=call,
            input_id="in_1",
            kind="elicitation",
            prompt="who?",
            content={},
            schema=None,
            server="s",
            step=1,
            turn=1,
            ts=now,
        ),
        ToolCallFinished(
            chat_id="x",
            call=call,
            step=1,
            turn=1,
            status="in_doubt",
            result=ToolResultMessage("c1", "outcome unknown", True, "in_doubt", "book"),
            error="outcome unknown",
            duration_ms=None,
            started_at=None,
            mode=None,
        ),
    ]
    assert fold(history[:2]).pending_inputs[0].id == "in_1"
    record = fold(history)
    assert record.pending_inputs == ()
    (closed,) = record.inputs
    assert (closed.status, closed.reason, closed.answered_by) == ("cancel", "the call ended", None)
