"""A deny rule added in another copy of a chat does not cut off the copy driving it.

The other copy's ``add_rule`` drops the person's stored approval (``refuse_decision``: the
call's row back to ``awaiting_approval``) and then writes the rule's denial: two store
writes. The driving copy, whose step read the rules just before the rule was stored, claimed
the call between them, found ``awaiting_approval`` and detached ("being driven by another
process"): its call stayed ``approved``, every later ``complete()`` returned ``None``, while
the store said denied by ``rule`` (a critic's repro on e82d5e5; about 1 run in 150 without
the delay). Nobody else drove it: the claim now reads the rules stored meanwhile (the rule
denies the call here, which never runs) and the turn goes on. A claim held by another
driver still detaches, as before.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import nbagent
from nbagent import Chat, Rule, tool
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


def _driving(url: str) -> Chat:
    script = [call_tools(("charge", {"amount": 500}, "c1")), reply("done"), reply("more")]
    chat = Chat(provider=ScriptedProvider(script), store=url, display=False).with_tools(charge)
    chat.ask("charge it")
    chat.approve("c1")  # the person's click: approved, not run yet
    return chat


def _other(url: str, chat_id: str) -> Chat:
    return Chat.load(chat_id, store=url, tools=[charge], display=False,
                     provider=ScriptedProvider([reply("x")]))  # fmt: skip


def _row(url: str, chat_id: str) -> tuple[str, str | None]:
    with nbagent.open_store(url) as store:
        c = store.call("c1", chat_id=chat_id)
    return c.status, c.decision.by if c.decision else None


def _hook(chat: Chat, name: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Wrap a chat's extension hook (only to hold it at a point in time: nothing else)."""
    hooks = chat._ext_hooks[name]
    assert len(hooks) == 1
    chat._ext_hooks = {**chat._ext_hooks, name: (wrap(hooks[0]),)}


def _detached(chat: Chat) -> list[str | None]:
    return [e.detached for e in chat._extensions if hasattr(e, "detached")]


def test_a_claim_between_the_drop_and_the_rules_denial_does_not_detach(backend: Any) -> None:
    """The critic's repro: the driving copy's claim lands in the other copy's gap."""
    driving = _driving(backend.url)
    other = _other(backend.url, driving.id)
    dropped, claimed = threading.Event(), threading.Event()

    def refusing(refuse: Callable[..., Any]) -> Callable[..., Any]:
        def held(*args: Any) -> None:
            refuse(*args)  # the row: awaiting_approval
            dropped.set()
            claimed.wait(10)  # the other copy is slow to write its denial

        return held

    adding = threading.Thread(target=lambda: other.add_rule(DENY))

    def claiming(claim: Callable[..., Any]) -> Callable[..., Any]:
        def late(c: Any) -> bool:
            if not adding.is_alive() and not dropped.is_set():
                adding.start()  # the step read the rules already: the rule comes now
                assert dropped.wait(10)
            try:
                return bool(claim(c))
            finally:
                claimed.set()

        return late

    _hook(other, "refuse_decision", refusing)
    _hook(driving, "claim", claiming)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        answer = driving.complete()
        adding.join(10)
    other.close()
    said = [str(w.message) for w in seen if issubclass(w.category, StoreConflictWarning)]
    assert not any("driven by another process" in s for s in said), said  # was: detached
    assert _detached(driving) == [None]
    call = driving.get_call("c1")
    assert (call.status, call.decision and call.decision.by) == ("denied", "rule")  # was: approved
    assert answer is not None and answer.content == "done"  # the turn went on (was: None next)
    assert RAN == []
    assert _row(backend.url, driving.id) == ("denied", "rule")
    assert driving.ask("again?").content == "more"
    driving.close()


def test_a_claim_held_by_another_driver_still_detaches(backend: Any) -> None:
    """The other copy claims the call first (it drives): the driving copy detaches as before,
    and the call runs once, there."""
    driving = _driving(backend.url)
    other = _other(backend.url, driving.id)

    def claiming(claim: Callable[..., Any]) -> Callable[..., Any]:
        def late(c: Any) -> bool:
            other.complete()  # the other copy runs the approved call first
            return bool(claim(c))

        return late

    _hook(driving, "claim", claiming)
    with pytest.warns(StoreConflictWarning, match="driven by another process"):
        driving.complete()
    other.close()
    assert _detached(driving) != [None]
    assert RAN == [500]
    assert _row(backend.url, driving.id) == ("ok", "user")
    driving.close()


@pytest.mark.parametrize("run", range(30))
def test_a_rule_elsewhere_racing_the_claim_never_strands_the_chat(tmp_path: Any, run: int) -> None:
    """No delay: the other copy's add_rule against the driving copy's complete(), repeated.
    Whoever wins, the chat and the store agree, and the chat is never left approved and
    unrun (the rule came late: ran once; else denied by the rule, never run)."""
    url = str(tmp_path / "race.db")
    driving = _driving(url)
    other = _other(url, driving.id)
    go = threading.Barrier(2)

    def add() -> None:
        go.wait()
        other.add_rule(DENY)

    adding = threading.Thread(target=add)
    adding.start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreConflictWarning)
        go.wait()
        driving.complete()
        adding.join(30)
        other.close()
        driving.complete()
    call = driving.get_call("c1")
    by = call.decision and call.decision.by
    assert _detached(driving) == [None]
    assert (call.status, by, RAN) in (("ok", "user", [500]), ("denied", "rule", []))
    assert _row(url, driving.id) == (call.status, by)
    driving.close()
