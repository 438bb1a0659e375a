"""The step budget stops only work that was really left: never an answered or parked turn."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent import Chat, DriverError, StepFinished, tool
from nbagent.notebook._render import conversation_text
from nbagent.notebook._state import BudgetEntry, ChatState, state_for
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

ran: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    ran.append(key)
    return f"value of {key}"


@tool(requires_approval=True)
def wire(amount: int) -> str:
    """Send money."""
    ran.append(f"wire {amount}")
    return "sent"


def _chat(rounds: int, *, gated_last: bool = False) -> tuple[Chat, ChatState, list[str]]:
    script: list[Any] = [call_tools(("lookup", {"key": f"k{i}"})) for i in range(rounds)]
    if gated_last:
        script.append(call_tools(("wire", {"amount": 5})))
    script.append(reply("done"))
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(lookup, wire)
    state = state_for(chat)  # the display state follows the chat's record from the start
    kinds: list[str] = []
    chat.on(StepFinished, lambda e: kinds.append(e.kind))
    return chat, state, kinds


def _budget_cards(state: ChatState) -> list[BudgetEntry]:
    return [e for e in state.entries if isinstance(e, BudgetEntry)]


@settings(max_examples=60, deadline=None)
@given(rounds=st.integers(0, 4), max_steps=st.integers(1, 11), use_async=st.booleans())
def test_budget_stop_iff_work_was_cut_off(rounds: int, max_steps: int, use_async: bool) -> None:
    """``rounds`` tool rounds then an answer need ``2 * rounds + 1`` working steps."""
    ran.clear()
    chat, state, kinds = _chat(rounds)
    if use_async:
        asyncio.run(chat.ask_async("go", max_steps=max_steps))
    else:
        chat.ask("go", max_steps=max_steps)
    needed = 2 * rounds + 1
    cut_off = max_steps < needed
    assert chat.status == ("budget_exhausted" if cut_off else "complete")
    assert chat.last_step is not None
    assert chat.last_step.kind == ("budget_exhausted" if cut_off else "complete")
    assert kinds.count("budget_exhausted") == (1 if cut_off else 0)
    assert len(_budget_cards(state)) == (1 if cut_off else 0)
    assert (
        "step budget exhausted" in conversation_text(state.entries, state.totals_for(None))
    ) is (cut_off)
    # exactly the budget's worth of work was done, no more
    working = [k for k in kinds if k in ("generated", "ran_tools")]
    assert len(working) == min(max_steps, needed)
    assert len(ran) == min(rounds, max_steps // 2)
    if cut_off:  # and continuing finishes the turn with no budget card left pending
        chat.complete()
        assert chat.status == "complete" and len(ran) == rounds
        assert all(not e.pending for e in _budget_cards(state))


@settings(max_examples=20, deadline=None)
@given(rounds=st.integers(0, 3), extra=st.integers(0, 3))
def test_a_turn_parked_on_approval_is_not_a_budget_stop(rounds: int, extra: int) -> None:
    """A budget that runs out exactly when the model asks for approval: the turn waits."""
    ran.clear()
    chat, state, kinds = _chat(rounds, gated_last=True)
    needed = 2 * rounds + 1  # the lookups, then the response asking for the wire
    chat.ask("go", max_steps=needed + extra)
    assert chat.status == "awaiting_approval"
    assert "budget_exhausted" not in kinds and not _budget_cards(state)
    chat.approve(chat.pending_approvals[0])
    chat.complete(max_steps=2)  # run the wire, then the answer: exactly two steps
    assert chat.status == "complete" and ran[-1] == "wire 5"
    assert "budget_exhausted" not in kinds and not _budget_cards(state)


def test_answer_on_the_last_allowed_step_is_complete() -> None:
    """The reported case: one round and an answer, ``max_steps=3``."""
    ran.clear()
    chat, state, kinds = _chat(1)
    chat.ask("go", max_steps=3)
    assert chat.status == "complete" and kinds[-1] == "complete"
    assert not _budget_cards(state)
    assert state.totals_for(None).phase == "complete"


def test_a_drive_requested_during_the_run_does_not_outrun_the_budget() -> None:
    """A tool of the running chat tries to drive it (``chat.step()``): refused at once
    (it would wait for itself), and the running driver stops at its budget as planned."""
    ran.clear()
    asked: list[str] = []

    @tool
    def poke(key: str) -> str:
        """Try to drive the chat while it is driving."""
        try:
            chat.step()
        except DriverError:
            asked.append("refused")
        return "poked"

    script = [call_tools(("poke", {"key": "a"})), call_tools(("lookup", {"key": "b"}))]
    script.append(reply("done"))
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(poke, lookup)
    kinds: list[str] = []
    chat.on(StepFinished, lambda e: kinds.append(e.kind))
    chat.ask("go", max_steps=2)  # ask, run poke; the next request is over budget
    assert asked == ["refused"]
    assert chat.status == "budget_exhausted" and kinds == [
        "generated",
        "ran_tools",
        "budget_exhausted",
    ]
    assert ran == []  # lookup was never asked for
    chat.complete()
    assert chat.status == "complete" and ran == ["b"]


def test_a_click_during_the_run_does_not_outrun_the_budget_either() -> None:
    """The notebook's continuation: a decision made while it drives asks for another run;
    after a budget stop that run waits for the budget card's Continue."""
    from nbagent.notebook import _continuation as cont

    ran.clear()

    @tool
    def poke(key: str) -> str:
        """Ask the continuation to run again while it runs (what a click does)."""
        cont.continuation_for(chat).request()
        return "poked"

    script = [call_tools(("poke", {"key": "a"})), call_tools(("lookup", {"key": "b"}))]
    script.append(reply("done"))
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(poke, lookup)
    chat.ask_later("go")
    continuation = cont.continuation_for(chat)
    continuation.request(max_steps=2)  # ask, run poke; then over budget
    assert continuation.wait(10)
    assert chat.status == "budget_exhausted" and ran == []
    continuation.request(max_steps=5)  # the card's Continue
    assert continuation.wait(10)
    assert chat.status == "complete" and ran == ["b"]


def test_an_ask_the_budget_stops_before_any_answer_returns_none_not_the_last_turns() -> None:
    """``ask()`` returns the turn's last assistant message: stopped before the model was
    asked, it returned the previous turn's answer ("Paris is the capital" to a question
    about Germany), and code using the value read a wrong answer."""
    provider = ScriptedProvider([reply("Paris is the capital.")])
    chat = Chat(provider=provider, max_total_tokens=1)
    assert chat.ask("Capital of France?").content == "Paris is the capital."  # type: ignore[union-attr]
    assert chat.ask("Capital of Germany?") is None
    assert chat.status == "budget_exhausted" and len(provider.requests) == 1
