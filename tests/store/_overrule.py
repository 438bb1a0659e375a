"""Two processes for the tests of a call overruled elsewhere before its claim
(``test_overruled_before_its_claim.py``, ``test_overruled_with_edits_before_its_claim.py``).

Process A (the test) always allows ``refund`` and asks; the model asks for a slow ungated
``email`` and ``refund(order_id=1)`` (approved by the policy), or for the refund alone.
Process B (a child run by :meth:`Overrule.run`) loads the chat, overrules ``r1`` with the
test's line (a denial, an approval with edited arguments) and prints what the test checks.
B runs while A's round runs: from :class:`Email` (before the refund's claim, after the
email's) or from :class:`OverruleBeforeStep` (after the step read the decisions, before
the round claims its only call).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from nbagent import ApprovalDecided, Chat, Event, Tool
from nbagent._extension import Extension
from nbagent.store import StoreConflictWarning
from nbagent.testing import ScriptedProvider, call_tools, reply

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import Refund  # noqa: E402

_B = textwrap.dedent(
    """
    import sys, warnings
    sys.path.insert(0, {here!r})
    import nbagent
    from nbagent import Chat, Tool
    from nbagent.testing import ScriptedProvider
    from _agent import Refund
    warnings.simplefilter("ignore")
    nbagent.configure(quiet=True, display=False)

    class Email(Tool):
        '''Send an email.'''

        name = "email"
        requires_approval = False

        def execute(self, to: str) -> str:
            return "sent"

    chat = Chat.load(
        {chat_id!r}, store={db!r}, tools=[Email, Refund], provider=ScriptedProvider([])
    )
    {act}
    {report}
    """
)


@dataclass(frozen=True)
class Overrule:
    """How process B overrules ``r1``: the line that does it (``chat.deny("r1", ...)``,
    ``chat.approve("r1", arguments=...)``) and the lines that print what it sees."""

    act: str
    report: str

    def run(self, chat_id: str, db: str) -> str:
        """Run B on the chat in ``db``; what it printed (or the end of its error)."""
        code = _B.format(here=str(HERE), chat_id=chat_id, db=db, act=self.act, report=self.report)
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        return done.stdout.strip() or done.stderr[-2000:]


class Email(Tool):
    """Send an email (ungated); while it runs, another process overrules the refund."""

    name = "email"
    requires_approval = False
    # armed by ``overruled()``: chat_id, db, how (an Overrule); "b": what B printed
    overrule: ClassVar[dict[str, Any]] = {}

    def execute(self, to: str) -> str:
        how: Overrule = self.overrule["how"]
        self.overrule["b"] = how.run(self.overrule["chat_id"], self.overrule["db"])
        return "sent"


class OverruleBeforeStep(Extension):
    """Once the chat's step hooks have looked at the store (its own hook first: it was
    extended first), another process overrules the refund: after the step read the
    decisions and before the round claims the call."""

    def __init__(self, chat: Chat, db: str, how: Overrule):
        self.chat, self.db, self.how, self.said = chat, db, how, ""

    def before_step(self) -> None:
        calls = self.chat.tool_calls
        if not self.said and calls and calls[0].status == "approved":
            self.said = self.how.run(self.chat.id, self.db)


def _armed_chat(db: str, how: Overrule, seen: list[Event], *, email: bool) -> Chat:
    """A's chat, refund always allowed, the model asking for the email (unless ``email``
    is false) and ``refund(order_id=1)`` as ``r1``, then saying "done"; ``Email`` armed
    to overrule it with ``how``; ``seen`` gets the chat's ``ApprovalDecided`` events."""
    first = call_tools(("refund", {"order_id": 1}, "r1"))
    if email:
        first = call_tools(
            ("email", {"to": "x@example.com"}, "e1"), ("refund", {"order_id": 1}, "r1")
        )
    provider = ScriptedProvider([first, reply("done")])
    chat = Chat(provider=provider, store=db, display=False).with_tools(Email, Refund)
    chat.on(ApprovalDecided, seen.append)
    chat.always_allow("refund")
    Email.overrule.clear()
    Email.overrule.update(chat_id=chat.id, db=db, how=how)
    return chat


@dataclass
class Overruled:
    """A's chat after its turn, ``r1`` overruled by B while the round ran."""

    chat: Chat
    seen: list[Event]  # the chat's ApprovalDecided events
    counter: Path  # a line each time the refund ran (in any process)
    caught: list[warnings.WarningMessage]  # the warnings the turn raised
    said: str  # what B printed

    def conflicts(self) -> list[str]:
        """The ``StoreConflictWarning`` messages the turn raised."""
        return [str(w.message) for w in self.caught if issubclass(w.category, StoreConflictWarning)]

    def told(self, call_id: str) -> list[str]:
        """What the last request told the model of the call (its tool messages)."""
        last = self.chat.provider.requests[-1]
        return [
            str(m.content) for m in last.messages if m.role == "tool" and m.tool_call_id == call_id
        ]

    def decided(self, call_id: str) -> list[tuple[str, bool]]:
        """The call's decisions as the chat applied them: (by, made elsewhere), in order."""
        return [
            (e.decision.by, e.elsewhere)
            for e in self.seen
            if isinstance(e, ApprovalDecided) and e.call.id == call_id
        ]

    def reloaded(self, db: str) -> Chat:
        """The chat as another process loads it from ``db`` (the caller closes it)."""
        tools = [Email, Refund]
        return Chat.load(
            self.chat.id, store=db, tools=tools, provider=ScriptedProvider([]), display=False
        )


def overruled(
    db: str,
    how: Overrule,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    use_async: bool = False,
    before_step: bool = False,
) -> Overruled:
    """A asks "go" (``ask_async`` when ``use_async``: sequential, the default, so the refund
    is claimed right before it starts, after the email) and B overrules ``r1`` with ``how``
    while the round runs: from the email, or (``before_step``: the model asks for the
    refund alone) from :class:`OverruleBeforeStep`. The caller closes the chat."""
    counter = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(counter))
    seen: list[Event] = []
    chat = _armed_chat(db, how, seen, email=not before_step)
    hook = OverruleBeforeStep(chat, db, how)
    if before_step:
        chat.extend(hook)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if use_async:
            asyncio.run(chat.ask_async("go"))
        else:
            chat.ask("go")
    said = hook.said if before_step else str(Email.overrule.get("b", ""))
    return Overruled(chat, seen, counter, caught, said)
