"""A deny rule wins over an approval made before it, until the call is claimed to run.

The docs promise that a call a deny rule matches never runs. An approval made before the
rule came, and not run yet, ran anyway: ops's plain ``store.approve`` applied by a chat that
had the rule already (its load, its next step), or handed back by the store to the rule's
own denial (the store's first decision wins: the chat recorded the approval instead), and a
call approved in the chat itself before ``add_rule``. Now an approval is recorded only if no
deny rule the chat has matches what would run; a rule added while a call is approved and not
started denies it (recorded as decided by ``rule``, in the store too: the approval there is
dropped with a ``StoreConflictWarning``). A call already started runs on: the rule came late.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, DecisionError, Rule, tool
from nbagent.store import StoreConflictWarning
from nbagent.testing import ScriptedProvider, call_tools, reply

RAN: list[int] = []
DENY = Rule.deny("charge", ("amount", ">", 100))


@tool(requires_approval=True)
def charge(amount: int) -> str:
    """Charge an amount of money.

    Args:
        amount: How much.
    """
    RAN.append(amount)
    return f"charged {amount}"


@pytest.fixture(autouse=True)
def _ran() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


def _chat(url: str | None, amount: int = 500) -> Chat:
    script = [call_tools(("charge", {"amount": amount}, "c1")), reply("done"), reply("more")]
    return Chat(provider=ScriptedProvider(script), store=url, display=False).with_tools(charge)


def _load(url: str) -> Chat:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreConflictWarning)
        return Chat.load(
            _chat_id(url), store=url, tools=[charge], display=False,
            provider=ScriptedProvider([reply("after"), reply("more")]),
        )  # fmt: skip


_IDS: dict[str, str] = {}


def _chat_id(url: str) -> str:
    return _IDS[url]


def _parked(url: str, amount: int = 500) -> Chat:
    chat = _chat(url, amount)
    _IDS[url] = chat.id
    chat.ask("charge it")
    assert chat.status == "awaiting_approval"
    return chat


def _ops(url: str, arguments: dict[str, Any] | None = None) -> None:
    with nbagent.open_store(url) as store:
        store.approve("c1", arguments=arguments, by="ops", chat_id=_chat_id(url))


def _row(url: str) -> tuple[str, str | None]:
    with nbagent.open_store(url) as store:
        c = store.call("c1", chat_id=_chat_id(url))
    return c.status, c.decision.by if c.decision else None


def test_a_stored_approval_a_later_rule_matches_is_not_applied_at_load(backend: Any) -> None:
    """A dashboard opened before the model asked adds the rule: it does not know the call,
    so the store keeps ops's approval; the next load has the rule and refuses it."""
    script = [reply("hello"), call_tools(("charge", {"amount": 500}, "c1")), reply("done")]
    chat = Chat(provider=ScriptedProvider(script), store=backend.url, display=False)
    chat.with_tools(charge)
    _IDS[backend.url] = chat.id
    chat.ask("hi")
    dashboard = _load(backend.url)  # before the call exists
    chat.ask("charge it")
    assert chat.status == "awaiting_approval"
    chat.close()
    _ops(backend.url)  # plain: the model's amount=500
    dashboard.add_rule(DENY)  # it has no call c1: nothing decided there
    dashboard.close()
    with pytest.warns(StoreConflictWarning, match=r"cannot be applied .*amount > 100"):
        chat = Chat.load(_chat_id(backend.url), store=backend.url, tools=[charge],
                         display=False, provider=ScriptedProvider([reply("after")]))  # fmt: skip
    chat.complete()
    call = chat.get_call("c1")
    assert (call.status, call.decision and call.decision.by) == ("denied", "rule")  # was: ok
    assert RAN == []
    assert _row(backend.url) == ("denied", "rule")
    chat.close()


def test_a_rule_added_while_the_store_holds_a_plain_approval_denies_the_call(
    backend: Any,
) -> None:
    chat = _parked(backend.url)
    _ops(backend.url)  # not applied here yet
    with pytest.warns(StoreConflictWarning, match=r"cannot be applied .*amount > 100"):
        chat.add_rule(DENY)  # its denial met ops's approval in the store: was recorded instead
    chat.complete()
    call = chat.get_call("c1")
    assert (call.status, call.decision and call.decision.by) == ("denied", "rule")
    assert RAN == []
    assert _row(backend.url) == ("denied", "rule")
    chat.close()


@pytest.mark.parametrize("stored", [False, True])
def test_a_rule_added_after_an_approval_here_denies_the_call_not_started(
    tmp_path: Path, stored: bool
) -> None:
    url = str(tmp_path / "agent.db") if stored else None
    chat = _chat(url)
    chat.ask("charge it")
    chat.approve(chat.pending_approvals[0])
    chat.add_rule(DENY)
    chat.complete()
    call = chat.get_call("c1")
    assert (call.status, call.decision and call.decision.by) == ("denied", "rule")  # was: ok
    assert RAN == []
    if url is not None:
        _IDS[url] = chat.id
        assert _row(url) == ("denied", "rule")
    chat.close()


def test_a_rule_added_elsewhere_after_an_approval_here_denies_the_call_not_started(
    backend: Any,
) -> None:
    chat = _parked(backend.url)
    chat.approve(chat.pending_approvals[0])  # applied here, not run yet
    other = _load(backend.url)
    other.add_rule(DENY)
    other.close()
    chat.complete()  # its step reads the rule before anything runs
    call = chat.get_call("c1")
    assert (call.status, call.decision and call.decision.by) == ("denied", "rule")
    assert RAN == []
    assert _row(backend.url) == ("denied", "rule")
    chat.close()


def test_a_call_already_running_is_not_stopped_by_a_rule(tmp_path: Path) -> None:
    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: How much.
        """
        chat.add_rule(Rule.deny("pay", ("amount", ">", 100)))  # while it runs
        RAN.append(amount)
        return "paid"

    script = [call_tools(("pay", {"amount": 500}, "c1")), reply("done")]
    chat = Chat(provider=ScriptedProvider(script), store=str(tmp_path / "a.db"), display=False)
    chat.with_tools(pay)
    chat.ask("pay")
    chat.approve("c1")
    chat.complete()
    assert chat.get_call("c1").status == "ok" and RAN == [500]  # started: the rule came late
    chat.close()


CASE = st.fixed_dictionaries(
    {
        "amount": st.sampled_from([5, 500]),
        "edit": st.none() | st.sampled_from([7, 700]),
        "limit": st.sampled_from([1, 100, 1000]),
        "rule_first": st.booleans(),
        "loaded_before": st.booleans(),
        "click": st.sampled_from([None, "approve", "deny", "edit"]),
    }
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CASE)
def test_what_runs_matches_no_deny_rule_however_the_decisions_met(case: dict[str, Any]) -> None:
    """ops decides in the store (plain or edited), a rule comes before or after it (added by
    a copy of the chat), the driving chat is loaded before or after, and a person clicks:
    whatever ran, ran once and matches no deny rule."""
    RAN.clear()
    rule = Rule.deny("charge", ("amount", ">", case["limit"]))
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreConflictWarning)
        url = str(Path(tmp) / "agent.db")
        first = _parked(url, case["amount"])
        first.close()
        driving = _load(url) if case["loaded_before"] else None
        ops = None if case["edit"] is None else {"amount": case["edit"]}

        def add_rule() -> None:
            copy = _load(url)
            copy.add_rule(rule)
            copy.close()

        if case["rule_first"]:
            add_rule()
        # the store may refuse: an edit the rule matches, or a call the rule denied
        with contextlib.suppress(DecisionError):
            _ops(url, ops)
        if not case["rule_first"]:
            add_rule()
        chat = driving or _load(url)
        if case["click"] is not None and chat.pending_approvals:
            call = chat.pending_approvals[0]
            try:
                if case["click"] == "deny":
                    chat.deny(call)
                elif case["click"] == "approve":
                    chat.approve(call)
                else:
                    chat.approve(call, arguments={"amount": 50})
            except DecisionError:
                pass
        chat.complete()
        call = chat.get_call("c1")
        chat.close()
    assert len(RAN) <= 1
    for amount in RAN:
        assert not amount > case["limit"], (case, RAN)
        assert call.status == "ok"
    if call.status == "denied":
        assert RAN == []


@pytest.mark.parametrize("stored", [False, True])
def test_a_rule_racing_the_run_of_an_approved_call_either_denies_it_or_comes_late(
    tmp_path: Path, stored: bool
) -> None:
    """``add_rule`` on one thread while ``complete()`` starts the approved call on another,
    many times: the call is denied by the rule and never ran, or it ran once under its
    approval (started first); never denied and run, never run twice; the store agrees."""
    outcomes = set()
    for n in range(30):
        RAN.clear()
        url = str(tmp_path / f"race{n}.db") if stored else None
        chat = _chat(url)
        chat.ask("charge it")
        chat.approve(chat.pending_approvals[0])
        go = threading.Barrier(2)

        def deny(chat: Chat = chat, go: threading.Barrier = go) -> None:
            go.wait()
            chat.add_rule(DENY)

        thread = threading.Thread(target=deny)
        thread.start()
        go.wait()
        chat.complete()
        thread.join()
        chat.complete()
        call = chat.get_call("c1")
        by = call.decision and call.decision.by
        if call.status == "denied":
            assert by == "rule" and RAN == [] and call.started_at is None
        else:
            assert (call.status, by, RAN) == ("ok", "user", [500])
        outcomes.add(call.status)
        if url is not None:
            _IDS[url] = chat.id
            assert _row(url) == (call.status, by)
        chat.close()
    assert outcomes <= {"denied", "ok"}
