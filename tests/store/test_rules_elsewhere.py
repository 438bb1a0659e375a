"""A rule another process adds to a stored chat (or removes from it: ``add_rule``,
``remove_rule``, ``always_allow``, ``revoke``) is never lost and is applied by the process
driving the chat from its next step, on SQLite and PostgreSQL.

Before, the driving process knew only its own rules: a deny rule added in a second
process did not stop the next matching call, and the driver's next state write dropped
the rule from the store, so even a later ``Chat.load`` ran without it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import Chat, Rule, StoreError

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import Refund, count  # noqa: E402

DENY_BIG = Rule.deny("refund", ("order_id", ">", 100))
ALLOW_SMALL = Rule.allow("refund", ("order_id", "<=", 10))

_CHILD = """
import sys
import nbagent
from nbagent import Chat, Rule
sys.path.insert(0, {here!r})
from _agent import Refund
nbagent.configure(quiet=True, display=False)
chat = Chat.load({chat_id!r}, store={url!r}, tools=[Refund], provider="demo")
{statement}
chat.close()
"""


@pytest.fixture(autouse=True)
def _counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(path))
    return path


def _elsewhere(backend: Any, chat_id: str, method: str, rule: Rule | None = None) -> None:
    """``chat.add_rule``/``remove_rule`` (or ``always_allow``/``revoke`` of refund: then
    ``method`` is the statement) in another process, on the stored chat."""
    statement = f"chat.{method}(Rule.from_dict({rule.as_dict()!r}))" if rule else method
    code = _CHILD.format(here=str(HERE), chat_id=chat_id, url=backend.url, statement=statement)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def _load(backend: Any, chat_id: str) -> Chat:
    return Chat.load(chat_id, store=backend.url, tools=[Refund])


def _ask(chat: Chat, text: str, drive: str) -> None:
    """``chat.ask(text)``, or its async twin (whose step reads the store off its loop, or on
    it without waiting: ``nbagent/store/_waiting.py``)."""
    if drive == "sync":
        chat.ask(text)
    else:
        asyncio.run(chat.ask_async(text))


DRIVES = pytest.mark.parametrize("drive", ["sync", "async"])


@DRIVES
def test_a_deny_rule_added_in_another_process_stops_the_next_call(
    backend: Any, _counter: Path, drive: str
) -> None:
    chat = Chat(model="demo", store=backend.url).with_tools(Refund)
    chat.ask("Refund order 7")
    chat.approve(chat.tool_calls[-1])
    chat.complete()
    assert count(_counter) == 1
    _elsewhere(backend, chat.id, "add_rule", DENY_BIG)
    _ask(chat, "Refund order 420", drive)  # this process never added the rule
    denied = chat.tool_calls[-1]
    assert denied.status == "denied" and count(_counter) == 1
    assert denied.decision is not None and denied.decision.by == "rule"
    assert denied.decision.reason == "Denied by rule: tool refund, order_id > 100"
    assert chat.rules == (DENY_BIG,)
    applied = [e for e in chat.events if e.type == "rule_changed"]
    assert [(e.added, e.elsewhere) for e in applied] == [(True, True)]
    chat.close()
    loaded = _load(backend, chat.id)
    assert loaded.rules == (DENY_BIG,)  # the driver's state writes did not drop it
    loaded.close()
    with backend.open() as store:  # stored once: the driver does not write it again
        changes = [e for e in store.iter_events(chat.id) if e.type == "rule_changed"]
    assert len(changes) == 1


def test_a_rule_added_elsewhere_decides_a_waiting_call(backend: Any, _counter: Path) -> None:
    chat = Chat(model="demo", store=backend.url).with_tools(Refund)
    chat.ask("Refund order 5")
    assert chat.status == "awaiting_approval"
    _elsewhere(backend, chat.id, "add_rule", ALLOW_SMALL)
    # The other process's chat approved the waiting call by the rule (a decision in the
    # store); this one learns the rule and the decision at its next look.
    chat.refresh()
    assert chat.rules == (ALLOW_SMALL,)
    chat.complete()
    assert chat.tool_calls[-1].status == "ok" and count(_counter) == 1
    chat.close()


def test_a_rule_removed_elsewhere_stays_removed(backend: Any, _counter: Path) -> None:
    chat = Chat(model="demo", store=backend.url).with_tools(Refund)
    chat.add_rule(DENY_BIG)
    _elsewhere(backend, chat.id, "remove_rule", DENY_BIG)
    chat.ask("Refund order 420")
    assert chat.rules == () and chat.status == "awaiting_approval"
    chat.deny(chat.tool_calls[-1], "no")
    chat.complete()
    chat.add_rule(ALLOW_SMALL)  # a state write that knows only this process's list
    chat.close()
    loaded = _load(backend, chat.id)
    assert loaded.rules == (ALLOW_SMALL,)
    loaded.close()
    assert count(_counter) == 0


@DRIVES
def test_a_rule_added_elsewhere_that_cannot_be_read_stops_the_step(
    backend: Any, drive: str
) -> None:
    chat = Chat(model="demo", store=backend.url).with_tools(Refund)
    chat.ask("Refund order 7")
    chat.approve(chat.tool_calls[-1])
    chat.complete()
    other = _load(backend, chat.id)
    other.add_rule(DENY_BIG)
    other.close()
    bad = '{"rule": {"tool": "refund", "verdict": "maybe", "conditions": []}, "added": true}'
    backend.sql(
        "UPDATE events SET json = ? WHERE chat_id = ? AND type = 'rule_changed'", (bad, chat.id)
    )
    with pytest.raises(StoreError, match="cannot read"):
        _ask(chat, "Refund order 420", drive)
    with pytest.raises(StoreError, match="cannot read"):  # and every step after, not once
        _ask(chat, "Refund order 421", drive)
    chat.close()


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(
        st.tuples(st.sampled_from(["here", "there"]), st.booleans(), st.sampled_from([0, 1])),
        min_size=1,
        max_size=8,
    )
)
def test_rules_changed_by_two_chat_objects_end_as_the_changes_in_order(
    tmp_path: Path, ops: list[tuple[str, bool, int]]
) -> None:
    """Two copies of one stored chat (two connections, as two processes have) add and
    remove rules in any interleaving, each refreshing before it changes anything; the
    stored chat ends with exactly the rules the changes leave, in either copy and after
    a load."""
    pool = (DENY_BIG, ALLOW_SMALL)
    db = str(tmp_path / f"p{len(list(tmp_path.iterdir()))}.db")
    here = Chat(model="demo", store=db).with_tools(Refund)
    there = Chat.load(here.id, store=db, tools=[Refund])
    expected: list[Rule] = []
    for who, add, n in ops:
        chat = here if who == "here" else there
        chat.refresh()
        rule = pool[n]
        assert list(chat.rules) == expected
        if add:
            chat.add_rule(rule)
            if rule not in expected:
                expected.append(rule)
        elif rule in expected:
            chat.remove_rule(rule)
            expected.remove(rule)
    for chat in (here, there):
        chat.refresh()
        assert set(chat.rules) == set(expected)
    here.close()
    there.close()
    loaded = Chat.load(here.id, store=db, tools=[Refund])
    assert set(loaded.rules) == set(expected)
    loaded.close()


def test_a_rule_added_through_the_same_store_object_is_seen_too(
    tmp_path: Path, _counter: Path
) -> None:
    """SQLite's ``data_version`` does not move for a commit on the same connection: a rule
    another chat object adds through the driver's own store object still reaches it."""
    from nbagent.store import open_store

    with open_store(str(tmp_path / "shared.db")) as store:
        chat = Chat(model="demo", store=store).with_tools(Refund)
        chat.ask("Refund order 7")
        chat.approve(chat.tool_calls[-1])
        chat.complete()  # it has looked at the rules (none) at each step
        other = Chat.load(chat.id, store=store, tools=[Refund])
        other.add_rule(DENY_BIG)
        chat.ask("Refund order 420")
        assert chat.tool_calls[-1].status == "denied" and count(_counter) == 1
        other.close()
        chat.close()


def test_always_allow_revoked_in_another_process_stops_approving_here(
    backend: Any, _counter: Path
) -> None:
    chat = Chat(model="demo", store=backend.url).with_tools(Refund)
    chat.always_allow(Refund)
    chat.ask("Refund order 7")
    assert chat.tool_calls[-1].status == "ok" and count(_counter) == 1
    _elsewhere(backend, chat.id, "chat.revoke('refund')")
    chat.ask("Refund order 8")  # a person withdrew the permission elsewhere: asked again
    assert chat.status == "awaiting_approval" and count(_counter) == 1
    assert chat.always_allowed == ()
    changes = [e for e in chat.events if e.type == "always_allow_changed"]
    assert [(e.allowed, e.elsewhere) for e in changes] == [(True, False), (False, True)]
    chat.deny(chat.tool_calls[-1], "no")
    chat.complete()
    chat.close()
    loaded = _load(backend, chat.id)  # the driver's later state writes did not bring it back
    assert loaded.always_allowed == ()
    loaded.close()


def test_always_allow_added_in_another_process_approves_here(backend: Any, _counter: Path) -> None:
    chat = Chat(model="demo", store=backend.url).with_tools(Refund)
    chat.ask("Refund order 7")
    assert chat.status == "awaiting_approval"
    _elsewhere(backend, chat.id, "chat.always_allow('refund')")
    chat.refresh()  # the waiting call was approved there; the rule is known here now
    chat.complete()
    chat.ask("Refund order 8")
    assert [c.status for c in chat.tool_calls] == ["ok", "ok"] and count(_counter) == 2
    assert chat.always_allowed == ("refund",)
    chat.close()
    loaded = _load(backend, chat.id)
    assert loaded.always_allowed == ("refund",)
    loaded.close()


def test_a_conditional_always_allow_from_elsewhere_approves_nothing_without_its_predicate(
    backend: Any, _counter: Path
) -> None:
    chat = Chat(model="demo", store=backend.url).with_tools(Refund)
    chat.ask("Refund order 1")
    chat.deny(chat.tool_calls[-1], "no")
    chat.complete()
    _elsewhere(backend, chat.id, "chat.always_allow('refund', when=lambda c: True)")
    chat.ask("Refund order 2")  # the predicate is code in the other process: never widened
    assert chat.status == "awaiting_approval" and count(_counter) == 0
    chat.deny(chat.tool_calls[-1], "no")
    chat.complete()
    chat.close()
    loaded = Chat.load(
        chat.id,
        store=backend.url,
        tools=[Refund],
        always_allow={"refund": lambda c: c.arguments["order_id"] < 5},
    )
    loaded.ask("Refund order 3")
    assert loaded.tool_calls[-1].status == "ok" and count(_counter) == 1
    loaded.close()


@pytest.mark.parametrize("change", ["add_rule", "remove_rule"])
def test_a_rule_changed_on_a_copy_loaded_while_the_chat_runs_is_stored_and_applied(
    backend: Any, _counter: Path, change: str
) -> None:
    """The second notebook loaded the chat while a tool ran in the first: its copy is
    detached (it cannot drive), and it wrote only decisions, so a deny rule added there (or
    an allow rule taken back) was kept in that copy and nowhere else, and the driver ran
    every later call."""
    import threading

    from nbagent.testing import ScriptedProvider, call_tools, reply

    started, go_on = threading.Event(), threading.Event()

    class SlowRefund(Refund):
        name = "refund"

        def execute(self, order_id: int) -> str:
            """Refund (the first one waits until the other process is done).

            Args:
                order_id: The order to refund.
            """
            started.set()
            if order_id == 7:
                go_on.wait(60)
            return super().execute(order_id)

    allow = Rule.allow("refund")
    script = [call_tools(("refund", {"order_id": n})) for n in (7, 420)] + [reply("done")]
    chat = Chat(provider=ScriptedProvider(script), store=backend.url).with_tools(SlowRefund)
    chat.add_rule(allow)  # runs without asking: the driver never stops on its own
    driving = threading.Thread(target=chat.ask, args=("refund both",))
    driving.start()
    try:
        assert started.wait(30)
        _elsewhere(backend, chat.id, change, DENY_BIG if change == "add_rule" else allow)
    finally:
        go_on.set()
        driving.join(60)
    with backend.open() as store:
        assert len(store.rule_changes(chat.id)) == 2  # this process's allow, the other's change
    first, second = chat.tool_calls
    assert first.status == "ok" and count(_counter) == 1
    if change == "add_rule":
        assert second.status == "denied" and second.decision is not None
        assert second.decision.by == "rule"
    else:
        assert second.status == "awaiting_approval"
    chat.close()
