"""A decision made elsewhere stands as it was made, on SQLite and PostgreSQL.

* A denial made through the store by a decider named like a policy
  (``store.deny(call, by="policy-team")``) was taken for a policy's automatic decision: a
  person's ``chat.approve`` in the chat overruled it, the store's row said "approved by
  user" and the denied refund ran. Only a chat's own resolver (``"resolver"``) and
  policies (``"policy:<name>"``) decide automatically; ``store.approve``/``store.deny``
  refuse those names, and the store never lets a decision made through it be overruled,
  whatever its ``by`` (a store written before the names were reserved).
* ``chat.approve(call)`` and another process's ``store.approve(call, arguments=...)`` at
  the same moment both returned normally: the store kept the edited approval, the chat's
  record, log and events said "approved by user, unedited", and the chat ran the model's
  arguments (after a reload, the edited ones). The store took any approval as the same
  decision; now only the very decision is, another one stands and the chat records it.
* A plain approval joined an edited one made earlier (``chat.approve`` not refreshed,
  ``store.approve`` without arguments): no warning, the edited arguments ran. An approval
  without arguments is not an edited approval: ``DecisionError`` says which stands.
* ``store.approve`` with a lone surrogate in its edited arguments raised a bare
  ``UnicodeEncodeError``; it cleans them as ``chat.approve`` does.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import ApprovalDecided, Chat, DecisionError, Event, Tool, ToolCall
from nbagent.store import open_store
from nbagent.testing import ScriptedProvider, call_tools, reply

ran: list[dict[str, Any]] = []
_lock = threading.Lock()


class Refund(Tool):
    """Refund an order."""

    name = "refund"
    requires_approval = True

    def execute(self, order_id: int, note: str = "") -> str:
        with _lock:
            ran.append({"order_id": order_id, "note": note})
        return f"refunded order {order_id}"


resolver_says: dict[str, bool] = {}


class Wipe(Tool):
    """Wipe a disk (its resolver decides, automatically)."""

    name = "wipe"

    def requires_approval(self, tool_call: ToolCall) -> bool | None:
        return resolver_says.get(tool_call.arguments["disk"])

    def execute(self, disk: str) -> str:
        with _lock:
            ran.append({"disk": disk})
        return f"wiped {disk}"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    with _lock:
        ran.clear()


def parked(db: str, seen: list[Event] | None = None, order_id: int = 42) -> Chat:
    """A chat parked on a refund of ``order_id`` (its events into ``seen``)."""
    provider = ScriptedProvider([call_tools(("refund", {"order_id": order_id})), reply("done")])
    chat = Chat(provider=provider, store=db, display=False).with_tools(Refund)
    if seen is not None:
        chat.on(ApprovalDecided, seen.append)
    chat.ask(f"Refund order {order_id}")
    assert chat.status == "awaiting_approval"
    return chat


def reloaded(db: str, chat_id: str) -> Chat:
    return Chat.load(
        chat_id,
        store=db,
        tools=[Refund, Wipe],
        provider=ScriptedProvider([reply("done")]),
        display=False,
    )


def decided(chat: Chat, call_id: str) -> tuple[Any, ...]:
    d = chat.get_call(call_id).decision
    return (d.verdict, d.by, d.reason, d.arguments)


def stored(db: str, chat_id: str, call_id: str) -> tuple[Any, ...]:
    with open_store(db) as s:
        d = s.call(call_id, chat_id=chat_id).decision
    return (d.verdict, d.by, d.reason, d.arguments)


def logged(chat: Chat, call_id: str) -> tuple[Any, ...]:
    row = chat.log.set_index("call_id").loc[call_id]
    return (row["decision"], row["decided_by"], row["edited_arguments"])


# --------------------------------------------------- 1. a denial elsewhere is never overruled
@pytest.mark.parametrize("refreshed", [False, True])
def test_a_denial_by_a_policy_named_decider_elsewhere_is_not_overruled(
    backend: Any, refreshed: bool
) -> None:
    db = backend.url
    chat = parked(db)
    call = chat.pending_approvals[0]
    with open_store(db) as b:
        b.deny(call.id, chat_id=chat.id, by="policy-team", reason="compliance says no")
    if refreshed:
        chat.refresh()
        assert call.status == "denied"
    with pytest.raises(DecisionError, match="already denied by policy-team"):
        chat.approve(call)
    chat.complete()
    assert ran == []  # the denied refund never ran
    assert decided(chat, call.id)[:3] == ("denied", "policy-team", "compliance says no")
    assert stored(db, chat.id, call.id)[:3] == ("denied", "policy-team", "compliance says no")
    chat.close()


@pytest.mark.parametrize("by", ["resolver", "rule", "policy:team", "policy:always_allow:refund"])
def test_the_store_refuses_a_chat_deciders_name(backend: Any, by: str) -> None:
    db = backend.url
    chat = parked(db)
    call = chat.pending_approvals[0]
    with open_store(db) as b:
        for decide in (b.deny, b.approve):
            with pytest.raises(DecisionError, match="names nbagent's own decider"):
                decide(call.id, chat_id=chat.id, by=by)
        assert b.call(call.id, chat_id=chat.id).status == "awaiting_approval"
    chat.close()


def test_an_inbox_named_like_a_policy_makes_no_automatic_decision(tmp_path: Any) -> None:
    db = str(tmp_path / "agent.db")
    chat = parked(db)
    call = chat.pending_approvals[0]
    chat.close()
    with pytest.raises(ValueError, match="names nbagent's own decider"):
        nbagent.inbox(db, by="policy:desk")  # refused before it decides anything
    assert reloaded(db, chat.id).pending_approvals[0].id == call.id  # still waiting


def test_a_denial_through_an_older_store_by_a_policy_name_is_not_overruled(
    backend: Any,
) -> None:
    """A store written before the names were reserved may hold ``by="policy:..."`` on a
    decision made through it: the store knows it did not come from a chat."""
    db = backend.url
    chat = parked(db)
    call = chat.pending_approvals[0]
    with open_store(db) as b:
        b.deny(call.id, chat_id=chat.id, by="ops", reason="no")
    (data,) = backend.sql(
        "SELECT decision FROM tool_calls WHERE chat_id = ? AND call_id = ?", (chat.id, call.id)
    )[0]
    backend.sql(
        "UPDATE tool_calls SET decision = ? WHERE chat_id = ? AND call_id = ?",
        (data.replace('"ops"', '"policy:legacy"'), chat.id, call.id),
    )
    backend.sql("UPDATE decisions SET decided_by = 'policy:legacy'")
    chat.refresh()
    assert chat.get_call(call.id).decision.automatic  # it reads like a policy's...
    with pytest.raises(DecisionError, match="already denied by policy:legacy"):
        chat.approve(call)  # ...but the store knows a person made it
    chat.complete()
    assert ran == []
    assert stored(db, chat.id, call.id)[:2] == ("denied", "policy:legacy")
    chat.close()


@pytest.mark.parametrize("automatic", ["approved", "denied"])
def test_a_resolvers_decision_is_still_overruled_by_a_person(backend: Any, automatic: str) -> None:
    """The chat's own automatic decisions, written by the chat, may be overruled before the
    call starts: the store takes the person's decision, and so does a reload."""
    db = backend.url
    disk = f"sd-{automatic}"
    resolver_says[disk] = automatic == "approved"
    script = [call_tools(("wipe", {"disk": disk}, "w1"), ("refund", {"order_id": 1}, "r1"))]
    provider = ScriptedProvider([*script, reply("done")])
    chat = Chat(provider=provider, store=db, display=False).with_tools(Wipe, Refund)
    chat.ask_later("Wipe it")
    assert chat.step().kind == "generated"  # the refund waits: the round is open
    assert decided(chat, "w1")[:2] == (automatic, "resolver")
    assert stored(db, chat.id, "w1")[:2] == (automatic, "resolver")
    person = "denied" if automatic == "approved" else "approved"
    if person == "denied":
        chat.deny("w1", reason="not today")
    else:
        chat.approve("w1")
    assert stored(db, chat.id, "w1")[:2] == (person, "user")
    chat.deny("r1")
    chat.complete()
    assert ran == ([{"disk": disk}] if person == "approved" else [])
    chat.close()
    assert decided(reloaded(db, chat.id), "w1")[:2] == (person, "user")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    by=st.one_of(
        st.sampled_from(
            ["policy", "policy-team", "policy:x", "policyholder", "resolver", "rule", "store"]
        ),
        st.text(min_size=1, max_size=12),
    )
)
def test_whatever_its_decider_a_denial_made_through_the_store_never_runs(
    tmp_path: Any, by: str
) -> None:
    """Property: ``store.deny(call, by=...)`` is refused (nothing decided) or stands: the
    chat's ``approve`` after it, refreshed or not, is a ``DecisionError`` and the call
    never runs."""
    db = str(tmp_path / f"{abs(hash(by))}.db")
    chat = parked(db)
    call = chat.pending_approvals[0]
    with open_store(db) as b:
        try:
            b.deny(call.id, chat_id=chat.id, by=by, reason="no")
        except DecisionError:
            assert b.call(call.id, chat_id=chat.id).status == "awaiting_approval"
            chat.close()
            return
    for refresh in (False, True):
        if refresh:
            chat.refresh()
        with pytest.raises(DecisionError):
            chat.approve(call)
    chat.complete()
    assert ran == []
    assert stored(db, chat.id, call.id)[0] == "denied"
    chat.close()
    with _lock:
        ran.clear()


# ------------------------------------- 2. a decision here and one elsewhere at the same time
def _approve(chat: Chat, call: ToolCall) -> None:
    chat.approve(call)


def _approve_edited(chat: Chat, call: ToolCall) -> None:
    chat.approve(call, {"order_id": 7})


def _deny(chat: Chat, call: ToolCall) -> None:
    chat.deny(call, reason="not here")


def _always_allow(chat: Chat, call: ToolCall) -> None:
    chat.always_allow(Refund)


HERE = {
    "approve": _approve,
    "approve_edited": _approve_edited,
    "deny": _deny,
    "always_allow": _always_allow,
}
ELSEWHERE: dict[str, dict[str, Any]] = {
    "approve": {"verdict": "approved"},
    "approve_edited": {"verdict": "approved", "arguments": {"order_id": 999}},
    "deny": {"verdict": "denied", "reason": "not there"},
}
PAIRS = [
    ("approve", "approve_edited"),
    ("approve_edited", "approve"),
    ("approve", "approve"),
    ("deny", "deny"),
    ("always_allow", "approve_edited"),
]


def _elsewhere(b: Any, chat_id: str, call_id: str, what: str) -> None:
    how = ELSEWHERE[what]
    if how["verdict"] == "denied":
        b.deny(call_id, chat_id=chat_id, by="ops", reason=how["reason"])
    else:
        b.approve(call_id, chat_id=chat_id, by="ops", arguments=how.get("arguments"))


def _contradicts(here: str, there: str) -> bool:
    """Whether the decision made here contradicts the one made elsewhere (its caller is told
    ``DecisionError``, whichever is second): an approval with other arguments does."""
    if here == "always_allow":
        return False  # it decides what waits; one decided meanwhile keeps its decision
    mine = {**ELSEWHERE[here], "arguments": {"order_id": 7} if here == "approve_edited" else None}
    theirs = ELSEWHERE[there]
    return mine["verdict"] != theirs["verdict"] or mine["arguments"] != theirs.get("arguments")


def _one_record(db: str, chat: Chat, call_id: str, seen: list[Event]) -> tuple[Any, ...]:
    """The chat's record, log and last event say what the store says (returned)."""
    in_store = stored(db, chat.id, call_id)
    assert decided(chat, call_id) == in_store
    _, by, _, arguments = in_store
    assert logged(chat, call_id)[1] == by
    assert (logged(chat, call_id)[2] or None) == arguments
    last = [e.decision for e in seen if e.call.id == call_id][-1]
    assert (last.verdict, last.by, last.reason, last.arguments) == in_store
    return in_store


def _runs_as_stored(db: str, chat: Chat, call_id: str, in_store: tuple[Any, ...]) -> None:
    verdict, _, _, arguments = in_store
    chat.complete()
    expected = {"order_id": (arguments or {}).get("order_id", 42), "note": ""}
    assert ran == ([expected] if verdict == "approved" else [])  # once, as the store says
    chat.close()
    again = reloaded(db, chat.id)  # the kernel restarts: the record is the same
    assert decided(again, call_id) == in_store
    again.close()


@pytest.mark.parametrize(("here", "there"), PAIRS)
def test_a_decision_elsewhere_between_the_check_and_the_write_stands_here(
    backend: Any, here: str, there: str
) -> None:
    """Forced timing: the other process decides right after this chat read the store."""
    db = backend.url
    own = backend.open()  # this chat's store object: its read is where the other one lands
    seen: list[Event] = []
    chat = parked(db, seen)
    chat.close()
    chat = Chat.load(
        chat.id,
        store=own,
        tools=[Refund],
        provider=ScriptedProvider([reply("done")]),
        display=False,
    )
    chat.on(ApprovalDecided, seen.append)
    call = chat.pending_approvals[0]
    read = own.decisions
    armed = [True]

    def decisions(chat_id: str, call_ids: Any) -> Any:
        out = read(chat_id, call_ids)
        if armed[0]:
            armed[0] = False
            with open_store(db) as b:
                _elsewhere(b, chat.id, call.id, there)
        return out

    own.decisions = decisions  # type: ignore[method-assign]
    try:
        if _contradicts(here, there):
            with pytest.raises(DecisionError, match=r"already \w+ by ops"):
                HERE[here](chat, call)
        else:
            HERE[here](chat, call)
    finally:
        own.decisions = read  # type: ignore[method-assign]
    assert not armed[0]
    in_store = _one_record(db, chat, call.id, seen)
    assert in_store[1] == "ops"  # the decision written first stands
    _runs_as_stored(db, chat, call.id, in_store)
    own.close()


def _other(
    barrier: threading.Barrier,
    b: Any,
    chat_id: str,
    call_id: str,
    there: str,
    errors: list[BaseException],
) -> None:
    barrier.wait(10)
    try:
        _elsewhere(b, chat_id, call_id, there)
    except DecisionError as exc:
        errors.append(exc)


@pytest.mark.parametrize(("here", "there"), PAIRS)
def test_racing_decisions_here_and_elsewhere_leave_one_record(
    backend: Any, here: str, there: str
) -> None:
    """Repeated race, two connections deciding at the same moment: whoever wins, the chat's
    record, log and events are the store's decision, the loser of a contradiction is told
    ``DecisionError``, and the call runs once with the arguments the store says."""
    db = backend.url
    won = {"here": 0, "ops": 0}
    with open_store(db) as b:
        for _ in range(8):
            with _lock:
                ran.clear()
            seen: list[Event] = []
            chat = parked(db, seen)
            call = chat.pending_approvals[0]
            barrier = threading.Barrier(2)
            errors: list[BaseException] = []
            t = threading.Thread(target=_other, args=(barrier, b, chat.id, call.id, there, errors))
            t.start()
            barrier.wait(10)
            mine: DecisionError | None = None
            try:
                HERE[here](chat, call)
            except DecisionError as exc:
                mine = exc
            t.join(30)
            in_store = _one_record(db, chat, call.id, seen)
            won["ops" if in_store[1] == "ops" else "here"] += 1
            if here == "always_allow":  # the policy keeps a decision made meanwhile
                assert mine is None
                assert bool(errors) == (in_store[1] != "ops"), errors  # the edit came second
            elif _contradicts(here, there):  # exactly one of the two was told it lost
                assert (mine is None) != (not errors), (mine, errors)
                assert (mine is None) == (in_store[1] != "ops")
            else:
                assert mine is None and not errors
            _runs_as_stored(db, chat, call.id, in_store)
    assert sum(won.values()) == 8, won


# ------------------------------------------ 4. an approval without arguments is not an edit
def test_a_plain_approval_does_not_join_an_edited_one(backend: Any) -> None:
    db = backend.url
    seen: list[Event] = []
    chat = parked(db, seen)
    call = chat.pending_approvals[0]
    with open_store(db) as b:
        b.approve(call.id, chat_id=chat.id, by="ops", arguments={"order_id": 999})
        with pytest.raises(DecisionError, match="approved by ops with edited arguments"):
            b.approve(call.id, chat_id=chat.id, by="desk")  # nor through the store
        b.approve(call.id, chat_id=chat.id, arguments={"order_id": 999})  # the same: a no-op
    with pytest.raises(DecisionError, match="approved by ops with edited arguments"):
        chat.approve(call)  # not refreshed: the store answers
    in_store = _one_record(db, chat, call.id, seen)
    assert in_store == ("approved", "ops", None, {"order_id": 999})
    with pytest.raises(DecisionError, match="approved by ops with edited arguments"):
        chat.approve(call)  # refreshed now: the chat answers the same
    chat.approve(call, {"order_id": 999})  # the same approval: a no-op
    _runs_as_stored(db, chat, call.id, in_store)


def test_an_edited_approval_does_not_join_a_plain_one(backend: Any) -> None:
    db = backend.url
    chat = parked(db)
    call = chat.pending_approvals[0]
    chat.approve(call)
    with open_store(db) as b:
        with pytest.raises(DecisionError, match="approved by user with the model's arguments"):
            b.approve(call.id, chat_id=chat.id, by="ops", arguments={"order_id": 999})
        b.approve(call.id, chat_id=chat.id, by="ops")  # plain: the same approval, a no-op
    with pytest.raises(DecisionError, match="approved by user with the model's arguments"):
        chat.approve(call, {"order_id": 999})
    _runs_as_stored(db, chat, call.id, ("approved", "user", None, None))


# ------------------------------------------------- 8. edited arguments given to the store
def test_the_store_cleans_edited_arguments_as_the_chat_does(backend: Any) -> None:
    db = backend.url
    chat = parked(db)
    call = chat.pending_approvals[0]
    with open_store(db) as b:
        for bad, why in (
            ({"order_id": float("nan")}, "not JSON"),
            ({"order_id": {1, 2}}, "not JSON"),
            ([1], "must be a dict"),
        ):
            with pytest.raises(DecisionError, match=why):
                b.approve(call.id, chat_id=chat.id, arguments=bad)
        assert b.call(call.id, chat_id=chat.id).status == "awaiting_approval"
        sc = b.approve(call.id, chat_id=chat.id, arguments={"order_id": 5, "note": "caf\ud800"})
        assert sc.decision.arguments == {"order_id": 5, "note": "caf\ufffd"}
    chat.complete()
    assert ran == [{"order_id": 5, "note": "caf\ufffd"}]
    chat.close()
