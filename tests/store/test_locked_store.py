"""A store another session holds locked (a DB browser's write transaction on SQLite; on
PostgreSQL an admin's open transaction, a ``LOCK``, a report's ``FOR UPDATE``): every
operation that must write fails with ``StoreError`` ("... is locked") after the store's
timeout, and nothing is half made.

- a question is not asked of the model (``ask()`` raises; the question is kept);
- ``always_allow``/``revoke``/``add_rule``/``remove_rule`` are not made, here or in the
  store: before, a revocation only warned, held in memory, and came back in the next process
  to load the chat if this one died first; an ``always_allow`` raised "nothing is decided"
  and approved the waiting call at the next ``complete()``;
- on PostgreSQL, ``store.approve`` waited forever; it now fails after
  ``PostgresStore(dsn, timeout=...)`` seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import AssistantToolCallMessage, Chat, ChatMessage, Rule, StoreError, Tool
from nbagent.store import PostgresStore, SQLiteStore, open_store
from nbagent.testing import ScriptedProvider, call_tools, reply

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import Refund, count  # noqa: E402
from _postgres import PASSWORD  # noqa: E402

TIMEOUT = 0.3


class Act(Tool):
    """Act (gated)."""

    name = "act"
    requires_approval = True

    def execute(self, target: str) -> str:
        """Act.

        Args:
            target: What to act on.
        """
        return f"acted on {target}"


def short(backend: Any) -> Any:
    """The backend's store with a short lock timeout."""
    cls: Any = SQLiteStore if backend.kind == "sqlite" else PostgresStore
    return cls(backend.url, timeout=TIMEOUT)


class Holder:
    """Another session holding the store locked for writes (reads still go through)."""

    def __init__(self, backend: Any):
        self.kind = backend.kind
        if self.kind == "sqlite":
            import sqlite3

            self.conn: Any = sqlite3.connect(backend.url, isolation_level=None)
        else:
            import psycopg

            self.conn = psycopg.connect(backend.url, autocommit=True)
        self.held = False

    def take(self) -> None:
        if self.kind == "sqlite":
            self.conn.execute("BEGIN IMMEDIATE")  # a DB browser's write transaction
        else:
            self.conn.execute("BEGIN")
            self.conn.execute(
                "LOCK TABLE chats, messages, events, tool_calls, decisions IN EXCLUSIVE MODE"
            )
        self.held = True

    def release(self) -> None:
        if self.held:
            self.conn.execute("ROLLBACK")
            self.held = False

    def close(self) -> None:
        self.release()
        self.conn.close()


@pytest.fixture
def holder(backend: Any) -> Iterator[Holder]:
    h = Holder(backend)
    yield h
    h.close()


def _two_step(request: Any) -> Any:
    if not any(isinstance(m, AssistantToolCallMessage) for m in request.messages):
        return call_tools(("act", {"target": "x"}, "c0"))
    return reply("done")


@pytest.mark.parametrize("drive", ["sync", "async"])
def test_a_question_the_locked_store_cannot_take_is_not_asked(
    backend: Any, holder: Holder, drive: str
) -> None:
    asked: list[str] = []

    def model(request: Any) -> Any:
        users = [m for m in request.messages if isinstance(m, ChatMessage) and m.role == "user"]
        asked.append(str(users[-1].content))
        return reply("answer")

    store = short(backend)
    chat = Chat(provider=ScriptedProvider([model], repeat_last=True), store=store, display=False)
    chat.ask("hello")
    holder.take()
    started = time.monotonic()
    with warnings.catch_warnings(record=True), pytest.raises(StoreError, match="is locked"):
        warnings.simplefilter("always")
        if drive == "sync":
            chat.ask("second")
        else:
            asyncio.run(chat.ask_async("second"))
    assert time.monotonic() - started < 10
    assert asked == ["hello"] and chat.transcript[-1].content == "second"
    holder.release()
    chat.complete()
    assert asked == ["hello", "second"]
    chat.close()
    with open_store(backend.url) as other:
        assert [m["content"] for m in other.load(chat.id).messages] == [
            "hello",
            "answer",
            "second",
            "answer",
        ]
    store.close()


def test_always_allow_on_a_locked_store_changes_nothing(backend: Any, holder: Holder) -> None:
    store = short(backend)
    chat = Chat(provider=ScriptedProvider([_two_step], repeat_last=True), store=store)
    chat = chat.with_tools(Act)
    chat.ask("go")
    assert chat.status == "awaiting_approval"
    holder.take()
    with warnings.catch_warnings(record=True), pytest.raises(StoreError, match="is locked"):
        warnings.simplefilter("always")
        chat.always_allow(Act)
    assert chat.always_allowed == ()  # the error is true: nothing changed
    holder.release()
    chat.complete()
    assert chat.status == "awaiting_approval"  # not approved by a rule never made
    assert chat.tool_calls[0].decision is None
    chat.always_allow(Act)  # once the store can be written: made, and it decides
    chat.complete()
    assert chat.status == "complete"
    chat.close()
    with open_store(backend.url) as other:
        loaded = Chat.load(chat.id, store=other, tools=[Act], provider=ScriptedProvider([]))
        assert loaded.always_allowed == ("act",)
        loaded.close()
    store.close()


CHILD = textwrap.dedent(
    """
    import json, sys, warnings
    from nbagent import Chat, Rule, StoreError, tool
    from nbagent.store import PostgresStore, SQLiteStore
    from nbagent.testing import ScriptedProvider, reply

    @tool(name="act", requires_approval=True)
    def Act(target: str) -> str:
        '''Act.

        Args:
            target: What to act on.
        '''
        return "acted"

    cls = SQLiteStore if {kind!r} == "sqlite" else PostgresStore
    store = cls({url!r}, timeout={timeout!r})
    chat = Chat(provider=ScriptedProvider([reply("ok")]), store=store, display=False)
    chat = chat.with_tools(Act)
    rule = Rule.deny("act", ("target", "==", "evil"))
    chat.always_allow(Act)
    chat.add_rule(rule)
    print(json.dumps({{"chat": chat.id}}), flush=True)
    sys.stdin.readline()  # the parent holds the store locked now
    out = {{}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for what, change in (("revoke", lambda: chat.revoke(Act)),
                             ("remove_rule", lambda: chat.remove_rule(rule))):
            try:
                change()
                out[what] = "made"
            except StoreError as exc:
                out[what] = "StoreError: " + str(exc)
    out["always_allowed"] = list(chat.always_allowed)
    out["rules"] = len(chat.rules)
    out["warnings"] = [w.category.__name__ for w in caught]
    print(json.dumps(out), flush=True)
    sys.stdin.readline()  # killed here, before the lock is let go
    """
)


def test_revoke_and_remove_rule_on_a_locked_store_are_not_made(
    backend: Any, holder: Holder
) -> None:
    """A real process revokes an always-allow and removes a rule while the store is
    locked, and is killed before the lock is let go: it was told neither was made (and
    they are not, in its chat), and the next process to load the chat has both, as told."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBAGENT_TEST_")}
    root = str(HERE.parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    code = CHILD.format(kind=backend.kind, url=backend.url, timeout=TIMEOUT)
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        chat_id = json.loads(proc.stdout.readline())["chat"]
        holder.take()
        proc.stdin.write("\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        assert line, "the child died"
        out = json.loads(line)
        os.kill(proc.pid, signal.SIGKILL)  # before any background retry can write
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        proc.stdin.close()
        proc.stdout.close()
    holder.release()
    assert out["revoke"].startswith("StoreError") and "is locked" in out["revoke"], out
    assert "Nothing changed" in out["revoke"]
    assert out["remove_rule"].startswith("StoreError"), out
    assert out["always_allowed"] == ["act"] and out["rules"] == 1, out  # as it was, in memory
    assert PASSWORD not in out["revoke"] and PASSWORD not in out["remove_rule"]
    with open_store(backend.url) as other:
        loaded = Chat.load(chat_id, store=other, tools=[Act], provider=ScriptedProvider([]))
        assert loaded.always_allowed == ("act",) and len(loaded.rules) == 1  # as told
        loaded.revoke(Act)  # the store can be written: made, and kept
        loaded.close()
        again = Chat.load(chat_id, store=other, tools=[Act], provider=ScriptedProvider([]))
        assert again.always_allowed == ()
        again.close()


def test_a_postgres_row_lock_makes_store_approve_fail_not_hang(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An admin's transaction holds the call's row (``FOR UPDATE``): ``store.approve``
    waited for it forever; it now fails after the store's ``timeout``, saying the store is
    locked (and never showing the DSN's password)."""
    import psycopg

    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(tmp_path / "runs.txt"))
    with open_store(postgres_dsn) as store:
        chat = Chat(model="demo", store=store).with_tools(Refund)
        chat.ask("Refund order 42")
        call_id = chat.pending_approvals[0].id
        chat.close()
    admin = psycopg.connect(postgres_dsn)
    try:
        admin.execute("SELECT * FROM tool_calls WHERE call_id = %s FOR UPDATE", (call_id,))
        with PostgresStore(postgres_dsn, timeout=0.5) as other:
            started = time.monotonic()
            with pytest.raises(StoreError, match="is locked") as info:
                other.approve(call_id)
            assert time.monotonic() - started < 10
            assert PASSWORD not in str(info.value)
            assert "timeout=" in str(info.value)
    finally:
        admin.rollback()
        admin.close()
    with PostgresStore(postgres_dsn, timeout=0.5) as other:
        assert other.approve(call_id).status == "approved"  # let go: it goes through
    assert count(tmp_path / "runs.txt") == 0


@pytest.mark.parametrize("bad", [0, -1, float("inf"), "30", True])
def test_a_postgres_timeout_must_be_a_positive_number(postgres_dsn: str, bad: Any) -> None:
    with pytest.raises(ValueError, match="timeout"):
        PostgresStore(postgres_dsn, timeout=bad)


def test_a_pickled_postgres_store_keeps_its_lock_timeout(postgres_dsn: str) -> None:
    """A worker (Ray, multiprocessing) opens the store again with the same timeout: its
    sessions' ``lock_timeout`` is the one given."""
    import pickle

    for timeout, shown in ((2.5, "2500ms"), (None, "0")):
        with PostgresStore(postgres_dsn, timeout=timeout) as store:
            copy = pickle.loads(pickle.dumps(store))
            try:
                assert copy.timeout == timeout
                with copy._read() as conn:
                    assert conn.execute("SHOW lock_timeout").fetchone()[0] == shown
            finally:
                copy.close()


_RULE = Rule.deny("act", ("target", "==", "evil"))
_OPS = st.lists(
    st.tuples(
        st.sampled_from(["always_allow", "revoke", "add_rule", "remove_rule"]), st.booleans()
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS)
def test_what_a_chat_holds_of_its_rules_is_what_the_store_has(
    tmp_path_factory: Any, ops: Any
) -> None:
    """Whatever rule changes are made, each with the file locked or not: every change the
    chat holds is one the store has (a fresh load agrees), and one that raised is in neither."""
    import sqlite3

    db = tmp_path_factory.mktemp("rules") / "agent.db"
    store = SQLiteStore(db, timeout=0.05)
    chat = Chat(provider=ScriptedProvider([reply("ok")]), store=store, display=False)
    chat = chat.with_tools(Act)
    lock = sqlite3.connect(db, isolation_level=None)
    try:
        for op, locked in ops:
            before = (chat.always_allowed, chat.rules)
            if locked:
                lock.execute("BEGIN IMMEDIATE")
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    if op == "always_allow":
                        chat.always_allow(Act)
                    elif op == "revoke":
                        chat.revoke(Act)
                    elif op == "add_rule":
                        chat.add_rule(_RULE)
                    else:
                        chat.remove_rule(_RULE)
            except StoreError:
                assert locked
                assert (chat.always_allowed, chat.rules) == before  # not made here
            except ValueError:
                assert (chat.always_allowed, chat.rules) == before  # nothing to remove
            finally:
                if locked:
                    lock.execute("ROLLBACK")
            with SQLiteStore(db) as other:
                loaded = Chat.load(chat.id, store=other, tools=[Act], provider=ScriptedProvider([]))
                assert (loaded.always_allowed, loaded.rules) == (chat.always_allowed, chat.rules)
                loaded.close()
    finally:
        lock.close()
        chat.close()
        store.close()


def test_a_revoke_from_a_tool_under_the_async_driver_is_written_or_not_made(
    backend: Any, holder: Holder
) -> None:
    """A tool run by ``ask_async`` revokes an always-allow while the store is locked: under
    the async driver the change was left for the driver's catch-up and ``revoke`` returned
    as made, so a process killed before it came back with the tool always allowed. It is
    written at once, as outside the driver, or raises and is not made."""
    from nbagent import tool

    said: dict[str, Any] = {}
    store = short(backend)

    @tool(name="act", requires_approval=True)
    def act(target: str) -> str:
        """Act.

        Args:
            target: What.
        """
        return "acted"

    @tool(name="lock_down")
    def lock_down() -> str:
        """Stop always allowing act."""
        holder.take()
        try:
            chat.revoke("act")
            said["revoke"] = "made"
        except StoreError as exc:
            said["revoke"] = f"StoreError: {exc}"
        finally:
            holder.release()
        said["always_allowed"] = list(chat.always_allowed)
        return "done"

    def model(request: Any) -> Any:
        if not any(isinstance(m, AssistantToolCallMessage) for m in request.messages):
            return call_tools(("lock_down", {}, "c0"))
        return reply("done")

    chat = Chat(
        provider=ScriptedProvider([model], repeat_last=True), store=store, display=False
    ).with_tools(act, lock_down)
    chat.always_allow("act")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        asyncio.run(chat.ask_async("lock it down"))
    chat.close()
    store.close()
    assert said["revoke"].startswith("StoreError") and "Nothing changed" in said["revoke"], said
    assert said["always_allowed"] == ["act"]  # as told: not made
    with open_store(backend.url) as other:
        loaded = Chat.load(
            chat.id, store=other, tools=[act, lock_down], provider=ScriptedProvider([])
        )
        assert loaded.always_allowed == ("act",)
        loaded.close()
