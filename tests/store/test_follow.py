"""One follower per store object: every consumer of decisions made elsewhere subscribes to it.

``nbagent.store.follow(store, chat_ids, callback)`` calls back with the followed
chats that got a decision (both stores; a store with only a ``watch()``; a store
with neither, through its pending calls). Many consumers cost one follower and
no thread each; a callback that fails stops nothing; closing the store closes
every subscription.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import Chat
from nbagent.store import SQLiteStore, follow
from nbagent.store._follow import Follower, follower_of

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import Refund  # noqa: E402


def parked(store: Any) -> tuple[Chat, str]:
    chat = Chat(model="demo", store=store).with_tools(Refund)
    chat.ask("Refund order 42")
    assert chat.status == "awaiting_approval"
    return chat, chat.pending_approvals[0].id


def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


class Got:
    """A callback that keeps what it was called with."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: list[set[str]] = []

    def __call__(self, ids: set[str]) -> None:
        with self.lock:
            self.ids.append(set(ids))

    @property
    def seen(self) -> set[str]:
        with self.lock:
            return set().union(*self.ids) if self.ids else set()


def _nbagent_threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("nbagent-")}


def test_one_follower_serves_every_consumer_with_no_thread_each(store: Any, backend: Any) -> None:
    (a, a_call), (b, b_call) = parked(store), parked(store)
    first = follow(store, [a.id], Got(), look=False)  # the store's one listener / poll starts
    before = _nbagent_threads()
    gots = [Got() for _ in range(20)]
    subs = [follow(store, [a.id] if i % 2 else [b.id], g, look=False) for i, g in enumerate(gots)]
    watches = [store.watch([a.id]) for _ in range(5)]
    assert _nbagent_threads() <= before | {"nbagent-loop"}  # nothing per consumer
    follower = follower_of(store)
    assert len(follower.subscriptions) == 26 and follower_of(store) is follower
    other = backend.open()  # another store object: a decision made elsewhere
    try:
        other.approve(a_call, chat_id=a.id)
        until(lambda: all(g.seen == {a.id} for g in gots[1::2]))
        assert all(w.wait(10) == {a.id} for w in watches)
        other.deny(b_call, chat_id=b.id, reason="no")
        until(lambda: all(g.seen == {b.id} for g in gots[::2]))
        assert all(g.seen == {a.id} for g in gots[1::2])  # only the chats each follows
    finally:
        other.close()
        for s in [first, *subs, *watches]:
            s.close()
        a.close()
        b.close()
    assert follower.subscriptions == []


def test_a_new_subscription_looks_once_and_a_failing_callback_stops_nothing(store: Any) -> None:
    chat, call_id = parked(store)
    store.approve(call_id, chat_id=chat.id)  # before anyone follows

    def broken(ids: set[str]) -> None:
        raise RuntimeError("a consumer's bug")

    bad = follow(store, [chat.id], broken)
    got = Got()
    good = follow(store, [chat.id], got)  # look=True: called once for its chats
    until(lambda: got.seen == {chat.id})
    until(lambda: bad.calls >= 1)
    assert isinstance(bad.last_error, RuntimeError) and not bad.closed
    bad.close()
    good.close()
    chat.close()


def test_a_failed_callback_is_retried_though_other_news_came_first(store: Any) -> None:
    """A callback raised for chat A (its refresh failed: one decision is one piece of news);
    news for B came before A's retry was due: that call cleared A's retry unsent, and A's
    decision was never followed. A call that goes ahead carries the chats waiting for a
    retry."""
    a, a_call = parked(store)
    b, b_call = parked(store)
    failed: list[str] = []
    got = Got()

    def flaky(ids: set[str]) -> None:
        if a.id in ids and not failed:
            failed.append(a.id)
            raise RuntimeError("the store could not be read")
        got(ids)

    sub = follow(store, [a.id, b.id], flaky, look=False)
    store.approve(a_call, chat_id=a.id)
    until(lambda: bool(failed))
    store.approve(b_call, chat_id=b.id)  # news for B, before A's retry is due
    until(lambda: a.id in got.seen)
    assert b.id in got.seen
    sub.close()
    a.close()
    b.close()


def test_closing_the_store_closes_its_subscriptions(backend: Any) -> None:
    store = backend.open()
    closed = threading.Event()
    sub = follow(store, None, Got(), on_close=closed.set)
    watch = store.watch()
    store.close()
    assert closed.is_set() and sub.closed and watch.closed


class _NoWatch:
    """A store of someone else's making with no ``watch()``: the Store protocol's reads only."""

    def __init__(self, inner: SQLiteStore):
        self._inner = inner

    def pending_approvals(self, chat_id: str | None = None) -> Any:
        return self._inner.pending_approvals(chat_id)


class _OwnWatch(_NoWatch):
    """Another store with a ``watch()`` of its own (read without waiting by the follower)."""

    def __init__(self, inner: SQLiteStore):
        super().__init__(inner)
        self.made: list[Any] = []

    def watch(self, chat_ids: Iterable[str] | None = None) -> Any:
        w = self._inner.watch(chat_ids)
        self.made.append(w)
        return w


def test_a_store_without_a_watch_is_followed_through_its_pending_calls(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "a.db") as inner, SQLiteStore(tmp_path / "a.db") as other:
        chat, call_id = parked(inner)
        for store in (_NoWatch(inner), _OwnWatch(inner)):
            got = Got()
            sub = follow(store, [chat.id], got, look=False)
            if isinstance(store, _OwnWatch):
                assert len(store.made) == 1
                other.approve(call_id, chat_id=chat.id)
            else:
                time.sleep(0.3)  # a look has seen the call pending
                other.approve(call_id, chat_id=chat.id)  # gone from pending: decided
            until(lambda got=got, chat=chat: got.seen == {chat.id})
            sub.close()
            chat.refresh()
            chat.complete()
            chat, call_id = parked(inner)
        chat.close()


class _Pushing:
    """A store that pushes its news (as PostgreSQL's listener does), driven by the test."""

    def __init__(self) -> None:
        self.follower: Follower | None = None

    def _decision_feed(self, follower: Follower) -> None:
        self.follower = follower


CHATS = ["c0", "c1", "c2", "c3"]
op = st.one_of(
    st.tuples(st.just("sub"), st.frozensets(st.sampled_from(CHATS))),
    st.tuples(st.just("decide"), st.sampled_from(CHATS)),
    st.tuples(st.just("close"), st.integers(0, 20)),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, max_size=15))
def test_every_subscription_gets_exactly_its_chats_decisions(ops: list[tuple[Any, Any]]) -> None:
    """Property: a subscription is called back with every chat it follows that got a
    decision while it was open, never with a chat it does not follow, and otherwise only
    with one decided just before it subscribed (news not looked at yet: harmless, a
    consumer only looks again)."""
    store = _Pushing()
    probe = Got()  # follows everything: tells when a look has been dispatched
    follow(store, None, probe, look=False)
    assert store.follower is not None
    subs: list[tuple[Any, Got, frozenset[str], set[str], set[str]]] = []  # ..., expected, earlier
    decided: set[str] = set()
    marks = 0

    def settle() -> None:  # two looks after this point: every earlier push was dispatched
        nonlocal marks
        for _ in range(2):
            marks += 1
            mark = f"mark-{marks}"
            store.follower.push([mark])
            until(lambda mark=mark: mark in probe.seen)

    for kind, arg in ops:
        if kind == "sub":
            got = Got()
            subs.append((follow(store, arg, got, look=False), got, arg, set(), set(decided)))
        elif kind == "decide":
            store.follower.push([arg])
            decided.add(arg)
            for sub, _, chats, expected, _ in subs:
                if not sub.closed and arg in chats:
                    expected.add(arg)
        elif subs:
            settle()  # what was pushed before the close reaches it first
            subs[arg % len(subs)][0].close()
    settle()
    for sub, got, chats, expected, earlier in subs:
        assert expected <= got.seen <= chats and got.seen <= expected | earlier
        sub.close()
    store.follower.close()
