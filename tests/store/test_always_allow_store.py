"""``always_allow`` rules are kept with a stored chat (issue 23, item 3).

``Chat.load`` restored tools, options, resolvers and budgets but not the chat's
``always_allow`` rules, nor their revocations: after a kernel restart every call of an
always-allowed tool asked again. A rule is written as soon as it is added or revoked (an
``AlwaysAllowChanged`` event; the chat's state lists the rules), and restored by
``Chat.load`` in any process. A ``when`` predicate is code: only that the rule had one
is stored, and the rule comes back only with its predicate (``Chat.load(always_allow=)``);
without it the rule approves nothing (a warning says so): never an unconditional allow.
On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import AlwaysAllowChanged, Chat, ToolCall, tool

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import Refund, count  # noqa: E402

ran: list[str] = []


@tool(requires_approval=True)
def lookup(city: str) -> str:
    """Look a city up (gated here, to have a second gated tool).

    Args:
        city: The city.
    """
    ran.append(city)
    return f"{city}: found"


@pytest.fixture(autouse=True)
def _quiet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran.clear()
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(tmp_path / "runs.txt"))


def small(call: ToolCall) -> bool:
    return bool(call.arguments.get("order_id", 0) < 100)


def _load(backend: Any, chat_id: str, **kwargs: Any) -> Chat:
    return Chat.load(chat_id, store=backend.url, tools=[Refund, lookup], **kwargs)


def test_a_rule_is_stored_at_once_and_comes_back_on_load(backend: Any) -> None:
    """Added with nothing pending, the rule is on disk at once (no close): another store
    object loads the chat with it, and its calls are approved by the rule."""
    chat = Chat(model="demo", store=backend.url).with_tools(Refund, lookup)
    chat.ask("hello")
    chat.always_allow(Refund)
    loaded = _load(backend, chat.id)  # the first chat is still open: a kernel that died
    assert loaded.always_allowed == ("refund",)
    loaded.ask("Refund order 7")
    assert loaded.status == "complete"
    (call,) = loaded.tool_calls
    assert call.status == "ok" and call.decision is not None
    assert call.decision.by == "policy:always_allow:refund"
    loaded.close()
    chat.close()


def test_a_revoked_rule_stays_revoked(backend: Any) -> None:
    chat = Chat(model="demo", store=backend.url).with_tools(Refund, lookup)
    chat.always_allow(Refund).always_allow(lookup)
    chat.revoke(Refund)
    loaded = _load(backend, chat.id)
    assert loaded.always_allowed == ("lookup",)
    loaded.ask("Refund order 7")
    assert loaded.status == "awaiting_approval"  # asks again, as before the reload
    loaded.close()
    chat.close()
    with backend.open() as store:
        kinds = [
            (e.tool, e.allowed)
            for e in store.iter_events(chat.id)
            if e.type == "always_allow_changed"
        ]
    assert kinds == [("refund", True), ("lookup", True), ("refund", False)]


def test_a_conditional_rule_comes_back_only_with_its_predicate(backend: Any) -> None:
    chat = Chat(model="demo", store=backend.url).with_tools(Refund, lookup)
    chat.always_allow(Refund, when=small)
    chat.close()
    # without its predicate: kept, approves nothing, and says so
    with pytest.warns(UserWarning, match=r"'refund'.*approve nothing.*always_allow=\{'refund'"):
        bare = _load(backend, chat.id)
    assert bare.always_allowed == ()
    bare.ask("Refund order 7")  # small, but the predicate is not here: never widened
    assert bare.status == "awaiting_approval" and count_runs() == 0
    bare.deny(bare.pending_approvals[0])
    bare.complete()
    bare.close()
    # a predicate for a tool with no stored conditional rule restores nothing: refused
    with pytest.raises(ValueError, match=r"no stored conditional always_allow rule for 'lookup'"):
        _load(backend, chat.id, always_allow={"refund": small, "lookup": small})
    with pytest.raises(TypeError, match="callable"):
        _load(backend, chat.id, always_allow={"refund": True})
    # with it: restored (the rule survived the load without it)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        full = _load(backend, chat.id, always_allow={Refund: small})
    assert full.always_allowed == ("refund",)
    full.ask("Refund order 8")
    assert full.status == "complete" and count_runs() == 1
    assert full.tool_calls[-1].decision.by == "policy:always_allow:refund:when"  # type: ignore[union-attr]
    full.ask("Refund order 800")
    assert full.status == "awaiting_approval" and count_runs() == 1
    full.close()


def count_runs() -> int:
    return count(Path(os.environ["NBAGENT_TEST_COUNTER"]))


def test_a_rule_added_in_a_killed_process_approves_in_another(backend: Any, tmp_path: Path) -> None:
    """Process A parks a chat, always allows the tool (which approves the pending call) and
    is killed at once; process B loads the chat: the approved call runs once, and the
    tool's next calls are approved by the restored rule."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBAGENT_TEST_")}
    env["NBAGENT_TEST_COUNTER"] = os.environ["NBAGENT_TEST_COUNTER"]
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run(
        [sys.executable, str(HERE / "_agent.py"), "allow", backend.url],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr

    out = json.loads(proc.stdout.strip().splitlines()[-1])
    chat = Chat.load(out["chat_id"], store=backend.url, tools=[Refund])
    assert chat.always_allowed == ("refund",)
    chat.complete()
    assert chat.status == "complete" and count_runs() == 1
    chat.ask("Refund order 43")
    assert chat.status == "complete" and count_runs() == 2
    assert {c.decision.by for c in chat.tool_calls if c.decision} == {"policy:always_allow:refund"}
    chat.close()


_actions = st.lists(
    st.tuples(
        st.sampled_from(["allow", "allow_when", "revoke"]), st.sampled_from(["refund", "lookup"])
    ),
    max_size=6,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(actions=_actions)
def test_a_loaded_chat_never_allows_more_than_the_original(tmp_path: Path, actions: Any) -> None:
    """Whatever rules were added and revoked, the loaded chat (given no predicates) approves
    a call only if the original chat approves it, and approves every call the original
    approves unconditionally. SQLite (the rules travel the same way on both stores)."""
    db = tmp_path / f"rules-{abs(hash(tuple(actions)))}.db"
    chat = Chat(model="demo", store=db).with_tools(Refund, lookup)
    for action, name in actions:
        if action == "revoke":
            if name in chat.always_allowed:
                chat.revoke(name)
        else:
            chat.always_allow(name, when=small if action == "allow_when" else None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        loaded = Chat.load(chat.id, store=db, tools=[Refund, lookup])
    probe = [ToolCall("p1", "refund", {"order_id": 5}), ToolCall("p2", "lookup", {"city": "x"})]
    for call in probe:
        before = any(p.matches(call) for p in chat._policies)
        after = any(p.matches(call) for p in loaded._policies)
        assert not after or before  # never wider
        unconditional = any(p.tool == call.name and p.when is None for p in chat._policies)
        assert after == unconditional  # exactly the unconditional rules come back
    assert set(loaded.always_allowed) == {p.tool for p in chat._policies if p.when is None}
    loaded.close()
    chat.close()


def test_the_event_reaches_subscribers() -> None:
    seen: list[AlwaysAllowChanged] = []
    chat = Chat(model="demo", display=False).with_tools(Refund)
    chat.on(AlwaysAllowChanged, seen.append)
    chat.always_allow(Refund, when=small)
    chat.revoke("refund")
    assert [(e.tool, e.allowed, e.conditional) for e in seen] == [
        ("refund", True, True),
        ("refund", False, False),
    ]
    assert nbagent.AlwaysAllowChanged is AlwaysAllowChanged


def test_a_stored_fork_keeps_the_rules_it_was_made_with(backend: Any) -> None:
    chat = Chat(model="demo", store=backend.url).with_tools(Refund, lookup)
    chat.always_allow(lookup)
    chat.ask("Refund order 7")
    fork = chat.fork(step=1)
    loaded = _load(backend, fork.id)
    assert loaded.always_allowed == fork.always_allowed == ("lookup",)
    for c in (loaded, fork, chat):
        c.close()
