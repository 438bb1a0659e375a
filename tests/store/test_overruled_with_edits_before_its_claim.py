"""A policy's approval a person overrules with edited arguments from another process while
the round runs, before the call is claimed: the call runs once, with the person's arguments,
on SQLite and PostgreSQL, sync and async.

Process A always allows ``refund``, then asks; the model asks for a slow ungated ``email``
and ``refund(order_id=1)`` (approved by the policy). While the email runs, process B loads
the chat and approves the refund with ``order_id=999`` (a person may overrule a chat's own
automatic decision before the call starts, in any process). A's claim of the refund used to
succeed, as the row still said ``approved``: A refunded order 1, and the store then recorded
the person's approval of order 999 for a call that ran with order 1 (an approved call did
not run as approved). The claim is now granted only for the decision the claimant holds: A's
claim is refused, A applies the person's approval as one made elsewhere, claims again with it
and refunds order 999, once; the model is told of the edit as of any edit.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import warnings
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import ApprovalDecided, Chat, Decision, Event, Tool
from nbagent._extension import Extension
from nbagent._result_text import edit_note
from nbagent.store import StoreConflictWarning
from nbagent.store import _codec as codec
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
    chat.approve("r1", arguments={{"order_id": 999}})
    c = chat.get_call("r1")
    print(c.status, c.effective_arguments["order_id"])
    """
)


def _overrule(chat_id: str, db: str) -> str:
    code = _B.format(here=str(HERE), chat_id=chat_id, db=db)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return done.stdout.strip() or done.stderr[-2000:]


class Email(Tool):
    """Send an email (ungated); while it runs, another process edits the refund's approval."""

    name = "email"
    requires_approval = False
    overrule: ClassVar[dict[str, str]] = {}

    def execute(self, to: str) -> str:
        self.overrule["b"] = _overrule(self.overrule["chat_id"], self.overrule["db"])
        return "sent"


def _runs(counter: Path) -> list[str]:
    """The order ids the refund ran with, one per run (in any process)."""
    lines = counter.read_text().splitlines() if counter.exists() else []
    return [line.split()[1] for line in lines]


def _chat(db: str, seen: list[Event], *, email: bool = True) -> Chat:
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
    Email.overrule.update(chat_id=chat.id, db=db)
    return chat


def _check(chat: Chat, db: str, seen: list[Event], counter: Path, caught: list[Any]) -> None:
    conflicts = [w for w in caught if issubclass(w.category, StoreConflictWarning)]
    assert not conflicts, [str(w.message) for w in conflicts]
    assert _runs(counter) == ["999"]  # once, with the person's arguments
    r1 = chat.get_call("r1")
    assert r1.status == "ok" and r1.decision is not None
    assert r1.decision.by == "user" and r1.decision.arguments == {"order_id": 999}
    assert r1.effective_arguments == {"order_id": 999}
    assert r1.result is not None and "refunded order 999" in r1.result.content
    assert chat.status == "complete" and chat.last_step.kind == "complete"
    assert chat.last_assistant_message.content == "done"
    # the model was told of the edit, as of any edit
    last = chat.provider.requests[-1]
    told = [m for m in last.messages if m.role == "tool" and m.tool_call_id == "r1"]
    assert told and str(told[0].content).startswith(edit_note({"order_id": 999}))
    assert "refunded order 999" in str(told[0].content)
    # applied as a decision made elsewhere, after the policy's own approval
    mine = [e for e in seen if isinstance(e, ApprovalDecided) and e.call.id == "r1"]
    assert [(e.decision.by, e.elsewhere) for e in mine] == [
        ("policy:always_allow:refund", False),
        ("user", True),
    ]
    with nbagent.open_store(db) as store:
        stored = store.call("r1", chat_id=chat.id)
        assert stored.status == "ok" and stored.started_at is not None
        assert stored.decision is not None and stored.decision.by == "user"
        assert stored.decision.arguments == {"order_id": 999}
        assert stored.result is not None and "refunded order 999" in stored.result.content
        log = nbagent.read_log(store, chat_id=chat.id).set_index("call_id")
        assert log.loc["r1", "status"] == "ok" and log.loc["r1", "decided_by"] == "user"
        assert log.loc["r1", "edited_arguments"] == {"order_id": 999}
        assert "refunded order 999" in str(log.loc["r1", "result_preview"])
    again = Chat.load(
        chat.id, store=db, tools=[Email, Refund], provider=ScriptedProvider([]), display=False
    )
    try:
        assert again.status == "complete"
        back = again.get_call("r1")
        assert back.status == "ok" and back.effective_arguments == {"order_id": 999}
        assert back.decision is not None and back.decision.by == "user"
    finally:
        again.close()
    assert _runs(counter) == ["999"]


@pytest.mark.parametrize("attempt", range(3))
def test_an_edited_approval_made_elsewhere_before_the_claim_runs_as_edited(
    backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempt: int
) -> None:
    counter = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(counter))
    seen: list[Event] = []
    chat = _chat(backend.url, seen)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat.ask("go")
    assert Email.overrule["b"] == "approved 999", Email.overrule["b"]
    _check(chat, backend.url, seen, counter, caught)
    chat.close()


@pytest.mark.parametrize("attempt", range(3))
def test_an_edited_approval_made_elsewhere_before_the_claim_runs_as_edited_async(
    backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempt: int
) -> None:
    counter = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(counter))
    seen: list[Event] = []
    chat = _chat(backend.url, seen)
    # sequential (the default): the refund is claimed right before it starts, after the email
    # (on PostgreSQL by the loop's sender: the grouped claim)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(chat.ask_async("go"))
    assert Email.overrule["b"] == "approved 999", Email.overrule["b"]
    _check(chat, backend.url, seen, counter, caught)
    chat.close()


class _EditElsewhere(Extension):
    """Once the chat's step hooks have looked at the store (its own hook first: it was
    extended first), another process approves the refund with edited arguments: after the
    step read the decisions and before the round claims the call. (The async driver writes
    the response with the claim of the round's first call, in one transaction: there is no
    such moment; its later calls' claims are the async tests' above.)"""

    def __init__(self, chat: Chat, db: str):
        self.chat, self.db, self.said = chat, db, ""

    def before_step(self) -> None:
        calls = self.chat.tool_calls
        if not self.said and calls and calls[0].status == "approved":
            self.said = _overrule(self.chat.id, self.db)


@pytest.mark.parametrize("attempt", range(2))
def test_the_round_s_only_call_edited_elsewhere_before_its_claim(
    backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempt: int
) -> None:
    counter = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(counter))
    seen: list[Event] = []
    chat = _chat(backend.url, seen, email=False)
    edit = _EditElsewhere(chat, backend.url)
    chat.extend(edit)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat.ask("go")
    assert edit.said == "approved 999", edit.said
    _check(chat, backend.url, seen, counter, caught)
    chat.close()


def test_a_claim_is_granted_only_for_the_decision_the_claimant_holds(backend: Any) -> None:
    """The store's side: ``claim(decision=...)`` refuses a call whose stored decision is
    another (``ClaimResult.decision`` is the one stored), and grants the one held."""
    chat = Chat(
        provider=ScriptedProvider([call_tools(("refund", {"order_id": 1}, "r1"))]),
        store=backend.url,
        display=False,
    ).with_tools(Refund)
    chat.ask("go")  # parks on the approval
    chat.approve("r1")
    held = chat.get_call("r1").decision
    assert held is not None
    other = Decision("approved", "policy:x", held.at + timedelta(seconds=1), None, None)
    with backend.open() as store:
        if backend.kind == "postgres":  # the loop sender's grouped claim: one statement
            refused_job = store.write_job(
                chat.id, [], claims=["r1"], owner="s", decisions={"r1": other}
            )
            assert refused_job is not None
            assert asyncio.run(store.send_async(refused_job)) is False  # the group wrote nothing
            assert store.call("r1", chat_id=chat.id).status == "approved"
        refused = store.claim(chat.id, "r1", "someone", decision=other)
        assert not refused.claimed and refused.claimed_by is None
        assert refused.status == "approved" and refused.decision == held
        assert store.call("r1", chat_id=chat.id).status == "approved"
        # the same decision, its time in another zone (a row written in another form than
        # the claim's check reads): the careful path decides it is the one held
        elsewhere = held.at.astimezone(timezone(timedelta(hours=2)))
        same = Decision(held.verdict, held.by, elsewhere, held.reason, held.arguments)
        granted = store.claim(chat.id, "r1", "someone", decision=same)
        assert granted.claimed and store.call("r1", chat_id=chat.id).claimed_by == "someone"
    chat.close()


def test_the_loop_sender_s_grouped_claim_is_granted_for_the_decision_held(
    postgres_dsn: str,
) -> None:
    """PostgreSQL's grouped claim (``write_job``/``send_async``) checks the decision held in
    the claim's own statement: granted for the stored decision, in the group's one trip."""
    chat = Chat(
        provider=ScriptedProvider([call_tools(("refund", {"order_id": 1}, "r1"))]),
        store=postgres_dsn,
        display=False,
    ).with_tools(Refund)
    chat.ask("go")
    chat.approve("r1")
    held = chat.get_call("r1").decision
    assert held is not None
    with nbagent.open_store(postgres_dsn) as store:
        job = store.write_job(chat.id, [], claims=["r1"], owner="s", decisions={"r1": held})
        assert job is not None and asyncio.run(store.send_async(job)) is True
        assert store.call("r1", chat_id=chat.id).claimed_by == "s"
    chat.close()


_DECIDERS = st.sampled_from(["policy:always_allow:refund", "resolver", "user", "ops"])
_TIMES = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC)
)
_ZONES = st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-7))])
_PARKED: dict[str, tuple[str, str]] = {}  # one store with an approved call, for every example


def _parked(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    if not _PARKED:
        db = str(tmp_path_factory.mktemp("property") / "agent.db")
        provider = ScriptedProvider([call_tools(("refund", {"order_id": 1}, "r1"))])
        chat = Chat(provider=provider, store=db, display=False).with_tools(Refund)
        chat.ask("go")  # parks on the approval
        chat.approve("r1")
        _PARKED["one"] = (db, chat.id)
        chat.close()
    return _PARKED["one"]


@settings(max_examples=60, deadline=None)
@given(
    stored_by=_DECIDERS,
    stored_at=_TIMES,
    held_by=_DECIDERS,
    held_at=_TIMES | st.none(),
    zone=_ZONES,
    edit=st.sampled_from([None, {"order_id": 999}]),
)
def test_a_claim_is_granted_exactly_when_the_decision_held_is_the_one_stored(
    tmp_path_factory: pytest.TempPathFactory,
    stored_by: str,
    stored_at: datetime,
    held_by: str,
    held_at: datetime | None,
    zone: Any,
    edit: dict[str, int] | None,
) -> None:
    """Property (SQLite: the grouped statement, then the careful path): whatever the two
    decisions, a claim is granted iff the decision held is the stored one (its decider and
    instant, the time written in any zone), and a refused claim changes nothing and names
    the stored decision."""
    db, chat_id = _parked(tmp_path_factory)
    stored = Decision("approved", stored_by, stored_at, None, edit)
    instant = stored_at if held_at is None else held_at
    held = Decision("approved", held_by, instant.astimezone(zone), None, None)
    with sqlite3.connect(db) as conn:  # the call approved by ``stored``, claimed by nobody
        conn.execute(
            "UPDATE tool_calls SET status = 'approved', claimed_by = NULL, claimed_at = NULL, "
            "decision = ? WHERE chat_id = ? AND call_id = 'r1'",
            (codec.dumps(codec.decision_out(stored)), chat_id),
        )
    conn.close()
    with nbagent.open_store(db) as store:
        result = store.claim(chat_id, "r1", "me", decision=held)
        row = store.call("r1", chat_id=chat_id)
    same = held_by == stored_by and instant == stored_at
    assert result.claimed is same
    if same:
        assert (row.status, row.claimed_by) == ("running", "me")
    else:
        assert (row.status, row.claimed_by) == ("approved", None)
        assert result.claimed_by is None and result.decision == stored
