"""A policy's approval overruled in another process while the round runs, before the call is
claimed: the driving chat applies the denial and goes on, on SQLite and PostgreSQL.

Process A always allows ``refund``, then asks; the model asks for a slow ungated ``email``
and a ``refund`` (approved by the policy). While the email runs, process B loads the chat
and denies the refund (a person may overrule a chat's own automatic decision before the
call starts, in any process). A's claim of the refund then found it denied and took that
for another driver's claim: ``StoreConflictWarning`` "is being driven by another process
(refund(r1) is already denied)", A's record said ``approved`` while the store said
``denied``, ``refresh()`` did not mend it and every later ``complete()`` returned ``busy``;
the model heard of the denial only after a fresh ``Chat.load``. Now A applies the stored
denial as a decision made elsewhere (``ApprovalDecided(elsewhere=True)``), answers the call
with it without running it, and the round and the turn go on.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any, ClassVar

import pytest

import nbagent
from nbagent import ApprovalDecided, Chat, Event, Tool
from nbagent._extension import Extension
from nbagent.store import StoreConflictWarning
from nbagent.testing import ScriptedProvider, call_tools, reply

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import Refund, count  # noqa: E402

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
    chat.deny("r1", "not this one")
    print(chat.get_call("r1").status)
    """
)


class Email(Tool):
    """Send an email (ungated); while it runs, another process denies the refund."""

    name = "email"
    requires_approval = False
    overrule: ClassVar[dict[str, str]] = {}

    def execute(self, to: str) -> str:
        code = _B.format(here=str(HERE), chat_id=self.overrule["chat_id"], db=self.overrule["db"])
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        self.overrule["b"] = done.stdout.strip() or done.stderr[-2000:]
        return "sent"


def _chat(db: str, seen: list[Event]) -> Chat:
    provider = ScriptedProvider(
        [
            call_tools(("email", {"to": "x@example.com"}, "e1"), ("refund", {"order_id": 1}, "r1")),
            reply("done"),
        ]
    )
    chat = Chat(provider=provider, store=db, display=False).with_tools(Email, Refund)
    chat.on(ApprovalDecided, seen.append)
    chat.always_allow("refund")
    Email.overrule.clear()
    Email.overrule.update(chat_id=chat.id, db=db)
    return chat


def _check(chat: Chat, db: str, seen: list[Event], counter: Path, caught: list[Any]) -> None:
    assert Email.overrule["b"] == "denied", Email.overrule["b"]
    conflicts = [w for w in caught if issubclass(w.category, StoreConflictWarning)]
    assert not conflicts, [str(w.message) for w in conflicts]
    r1 = chat.get_call("r1")
    assert r1.status == "denied" and r1.decision is not None
    assert r1.decision.by == "user" and r1.decision.reason == "not this one"
    assert r1.result is not None and "not this one" in r1.result.content
    assert chat.status == "complete" and chat.last_step.kind == "complete"
    assert chat.last_assistant_message.content == "done"
    # the model was told of the denial in the request that got "done"
    last = chat.provider.requests[-1]
    told = [m for m in last.messages if m.role == "tool" and m.tool_call_id == "r1"]
    assert told and "not this one" in str(told[0].content)
    # applied as a decision made elsewhere, after the policy's own approval
    mine = [e for e in seen if isinstance(e, ApprovalDecided) and e.call.id == "r1"]
    assert [(e.decision.by, e.elsewhere) for e in mine] == [
        ("policy:always_allow:refund", False),
        ("user", True),
    ]
    assert count(counter) == 0  # the refund never ran
    with nbagent.open_store(db) as store:
        assert store.call("r1", chat_id=chat.id).status == "denied"
    again = Chat.load(
        chat.id, store=db, tools=[Email, Refund], provider=ScriptedProvider([]), display=False
    )
    assert again.status == "complete" and again.get_call("r1").status == "denied"
    again.close()


@pytest.mark.parametrize("attempt", range(3))
def test_a_denial_made_elsewhere_before_the_claim_is_applied(
    backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempt: int
) -> None:
    counter = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(counter))
    seen: list[Event] = []
    chat = _chat(backend.url, seen)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat.ask("go")
    _check(chat, backend.url, seen, counter, caught)
    chat.close()


@pytest.mark.parametrize("attempt", range(2))
def test_a_denial_made_elsewhere_before_the_claim_is_applied_async(
    backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempt: int
) -> None:
    counter = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(counter))
    seen: list[Event] = []
    chat = _chat(backend.url, seen)
    # sequential (the default): the refund is claimed right before it starts, after the email
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(chat.ask_async("go"))
    _check(chat, backend.url, seen, counter, caught)
    chat.close()


class _DenyElsewhere(Extension):
    """Once the chat's step hooks have looked at the store (its own hook first: it was
    extended first), the refund is denied in another process: after the step read the
    decisions and before the round claims the call."""

    def __init__(self, chat: Chat, db: str):
        self.chat, self.db, self.said = chat, db, ""

    def before_step(self) -> None:
        calls = self.chat.tool_calls
        if not self.said and calls and calls[0].status == "approved":
            code = _B.format(here=str(HERE), chat_id=self.chat.id, db=self.db)
            done = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
            )
            self.said = done.stdout.strip() or done.stderr[-2000:]


@pytest.mark.parametrize("attempt", range(2))
def test_the_round_s_only_call_denied_elsewhere_before_its_claim(
    backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempt: int
) -> None:
    """Every call of the round refused by its claim used to end the step ``busy`` (the
    calls still runnable, claimed elsewhere): one answered by its stored decision is not
    claimed elsewhere, and the turn goes on to the model's answer."""
    counter = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(counter))
    provider = ScriptedProvider([call_tools(("refund", {"order_id": 1}, "r1")), reply("done")])
    chat = Chat(provider=provider, store=backend.url, display=False).with_tools(Email, Refund)
    chat.always_allow("refund")
    deny = _DenyElsewhere(chat, backend.url)
    chat.extend(deny)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat.ask("go")
    assert deny.said == "denied", deny.said
    assert not [w for w in caught if issubclass(w.category, StoreConflictWarning)]
    assert chat.get_call("r1").status == "denied" and count(counter) == 0
    assert chat.last_step.kind == "complete" and chat.status == "complete"
    assert chat.last_assistant_message.content == "done"
    chat.close()
