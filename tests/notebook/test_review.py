"""``chat.review()``: the terminal prompt stops cleanly, skips for good, says what is left,
and offers to revoke an always-allow."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterable
from typing import Any

from nbagent import Chat, tool
from nbagent.notebook import review
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

ran: list[str] = []


@tool(requires_approval=True)
def refund(order: int) -> str:
    """Refund an order."""
    ran.append(f"refund {order}")
    return f"refunded {order}"


@tool(requires_approval=True)
def wire(amount: int) -> str:
    """Send money."""
    ran.append(f"wire {amount}")
    return "sent"


class Prompt:
    """Scripted answers; ``EOFError`` once they run out (a closed stdin)."""

    def __init__(self, answers: Iterable[str]):
        self.answers = list(answers)
        self.asked: list[str] = []
        self.printed: list[str] = []

    def input(self, prompt: str) -> str:
        self.asked.append(prompt)
        if not self.answers:
            raise EOFError
        return self.answers.pop(0)

    def print(self, *values: Any, **_: Any) -> None:
        self.printed.append(" ".join(map(str, values)))

    @property
    def out(self) -> str:
        return "\n".join(self.printed)

    def review(self, chat: Chat) -> Any:
        return review(chat, input=self.input, print=self.print)


def _chat(*script: Any) -> Chat:
    ran.clear()
    return Chat(provider=ScriptedProvider(list(script)), display=False).with_tools(refund, wire)


def test_closed_input_stops_asking_and_says_what_is_pending() -> None:
    chat = _chat(call_tools(("refund", {"order": 1}, "c1"), ("refund", {"order": 2}, "c2")))
    chat.ask("refund 1 and 2")
    prompt = Prompt([])  # stdin already at its end
    assert prompt.review(chat) is chat.last_assistant_message  # returns normally
    assert len(prompt.asked) == 1  # asked once, then stopped
    assert "No more input (stdin is closed): stopped asking." in prompt.out
    assert "2 calls still waiting for approval:" in prompt.out
    assert "refund (c1)" in prompt.out and "refund (c2)" in prompt.out
    assert "chat.approve('c1') or chat.deny('c1', reason=...)" in prompt.out
    assert chat.status == "awaiting_approval" and ran == []


def test_a_front_end_without_input_is_closed_input() -> None:
    """A notebook run by nbclient or papermill: IPython's input() cannot ask at all."""
    from IPython.core.error import StdinNotImplementedError

    def no_input(_prompt: str) -> str:
        raise StdinNotImplementedError("raw_input was called, but this frontend does not support")

    chat = _chat(call_tools(("refund", {"order": 1}, "c1")))
    chat.ask("refund 1")
    printed: list[str] = []
    review(chat, input=no_input, print=lambda *a, **_k: printed.append(" ".join(map(str, a))))
    out = "\n".join(printed)
    assert "No input here (this front end cannot answer input()): stopped asking." in out
    assert "1 call still waiting for approval:" in out and chat.status == "awaiting_approval"


def test_decisions_made_before_the_input_closed_are_carried_out() -> None:
    chat = _chat(
        call_tools(("refund", {"order": 1}, "c1"), ("refund", {"order": 2}, "c2")),
        reply("done"),
    )
    chat.ask("refund 1 and 2")
    prompt = Prompt(["a"])  # approve c1, then stdin ends while asking about c2
    prompt.review(chat)
    assert ran == ["refund 1"]  # c1 ran; c2 still waits
    assert [c.id for c in chat.pending_approvals] == ["c2"]
    assert "1 call still waiting for approval:" in prompt.out and "refund (c2)" in prompt.out


def test_a_skipped_call_is_not_asked_again_in_this_review() -> None:
    chat = _chat(
        call_tools(("refund", {"order": 1}, "c1"), ("refund", {"order": 2}, "c2")),
        reply("done"),
    )
    chat.ask("refund 1 and 2")
    prompt = Prompt(["s", "a"])  # skip c1, approve c2
    prompt.review(chat)
    assert len(prompt.asked) == 2 and not prompt.answers  # c1 not asked again after c2 ran
    assert ran == ["refund 2"]
    assert "No more input" not in prompt.out
    assert "1 call still waiting for approval:" in prompt.out and "refund (c1)" in prompt.out
    # a new review asks about it again
    again = Prompt(["a"])
    again.review(chat)
    assert ran == ["refund 2", "refund 1"] and chat.status == "complete"
    assert "still waiting" not in again.out and "Assistant: done" in again.out


def test_quit_stops_asking() -> None:
    chat = _chat(call_tools(("refund", {"order": 1}, "c1"), ("wire", {"amount": 3}, "c2")))
    chat.ask("go")
    prompt = Prompt(["q", "a"])
    prompt.review(chat)
    assert len(prompt.asked) == 1 and prompt.answers == ["a"]
    assert "Stopped asking." in prompt.out and "2 calls still waiting" in prompt.out


def test_always_allow_is_offered_for_revocation() -> None:
    chat = _chat(
        call_tools(("refund", {"order": 1}, "c1")),
        reply("refunded"),
        call_tools(("refund", {"order": 2}, "c2")),
        reply("refunded again"),
        call_tools(("wire", {"amount": 5}, "c3")),
        reply("wired"),
        call_tools(("refund", {"order": 3}, "c4")),
    )
    chat.ask("refund 1")
    first = Prompt(["l"])
    first.review(chat)
    assert "[r]evoke" not in first.asked[0]  # nothing to revoke yet
    assert "refund: always allowed from now on; [r] in a review or chat.revoke('refund')" in (
        first.out
    )
    assert "Always allowed (run without asking): refund" in first.out
    chat.ask("refund 2")  # approved by the policy, no question
    assert ran == ["refund 1", "refund 2"]
    chat.ask("wire 5")
    second = Prompt(["r", "a"])  # revoke the refund policy, then approve the wire
    second.review(chat)
    assert "[r]evoke always-allow" in second.asked[0]
    assert "[r]evoke" not in second.asked[1]  # nothing left to revoke
    assert "refund: no longer always allowed; its next calls ask again." in second.out
    assert chat.always_allowed == () and ran[-1] == "wire 5"
    chat.ask("refund 3")  # asks again
    assert [c.id for c in chat.pending_approvals] == ["c4"]


def test_revoke_asks_which_when_several_are_allowed() -> None:
    chat = _chat(call_tools(("refund", {"order": 1}, "c1")))
    chat.always_allow(wire).always_allow("other")
    chat.ask("refund 1")
    prompt = Prompt(["r", "nope", "r", "wire", "s"])
    prompt.review(chat)
    assert "revoke which (wire, other)? " in prompt.asked
    assert "'nope' is not always allowed" in prompt.out
    assert chat.always_allowed == ("other",)


def test_a_real_closed_stdin(tmp_path: Any) -> None:
    script = textwrap.dedent(
        """
        from nbagent import Chat, tool

        @tool(requires_approval=True)
        def refund(order: int) -> str:
            '''Refund an order.'''
            return "refunded"

        chat = Chat(model="demo", display=False).with_tools(refund)
        chat.ask("Refund order 7")
        chat.review()
        print("returned:", chat.status)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "EOFError" not in proc.stderr and "Traceback" not in proc.stderr
    out = proc.stdout
    assert "refund (" in out and "needs approval" in out
    assert "No more input (stdin is closed): stopped asking." in out
    assert "1 call still waiting for approval:" in out
    assert out.rstrip().endswith("returned: awaiting_approval")
