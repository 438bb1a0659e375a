"""Two inboxes in two processes decide the same stored call: the one whose decision the store
kept says ``approved``, and the other is told ``decided elsewhere`` (not "approved in this
inbox"), even when both record the same verdict as the same decider (``by="inbox"``)."""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat, Tool
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

REPO = Path(__file__).resolve().parents[2]


class Deploy(Tool):
    """Deploy a service."""

    requires_approval = True

    def execute(self, service: str) -> str:
        raise AssertionError("never run in these tests")


def _stored_keys(path: Path, n: int) -> list[str]:
    """``chat_id/call_id`` of ``n`` chats parked on one approval each in ``path``."""
    keys = []
    for i in range(n):
        script = [call_tools(("deploy", {"service": f"svc-{i}"})), reply("done")]
        with Chat(provider=ScriptedProvider(script), store=path, display=False) as chat:
            chat.with_tools(Deploy).ask("deploy")
            keys.append(f"{chat.id}/{chat.pending_approvals[0].id}")
    return keys


def test_an_inbox_whose_approval_came_second_says_decided_elsewhere(tmp_path: Path) -> None:
    """Another process's inbox (same decider name, same verdict) approves between this
    inbox's last read and its write: the store returns that approval unchanged, and this
    inbox reports it as someone else's, with nothing recorded twice."""
    path = tmp_path / "chats.db"
    (key,) = _stored_keys(path, 1)
    chat_id, call_id = key.split("/")
    box = nbagent.inbox(path)
    (source,) = box._sources.stores
    real = source.decision
    other_went = []

    def decision(row: Any) -> Any:  # the read before the write; the other inbox goes now
        seen = real(row)
        if not other_went:
            other_went.append(True)
            code = (
                "import nbagent\n"
                f"box = nbagent.inbox({str(path)!r})\n"
                f"print(box.approve({key!r}).outcome.tolist())\n"
                "box.close()\n"
            )
            env = {**os.environ, "PYTHONPATH": str(REPO)}
            done = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
            )
            assert done.stdout.strip() == "['approved']", done.stderr
        return seen

    source.decision = decision  # type: ignore[method-assign]
    try:
        out = box.approve(key)
        assert other_went
        assert out[["outcome", "verdict", "by"]].values.tolist() == [
            ["decided elsewhere", "approved", "inbox"]
        ]
        words = box.widget.decided[0]["words"]
        assert words.startswith("approved elsewhere (another inbox) at "), words
    finally:
        box.close()
    store = SQLiteStore(path)
    try:
        decision_now = store.call(call_id, chat_id=chat_id).decision
        assert decision_now is not None and decision_now.by == "inbox"
    finally:
        store.close()


def _racer(path: str, by: str, barrier: Any, keys: Any, outcomes: Any) -> None:
    box = nbagent.inbox(path, by=by)
    try:
        while (key := keys.get()) is not None:
            box.refresh()
            barrier.wait(30)  # both inboxes approve the same call at the same moment
            out = box.approve(key)
            outcomes.put((key, out["outcome"].iloc[0], out["verdict"].iloc[0], out["by"].iloc[0]))
    finally:
        box.close()


def _race(path: Path, keys: list[str], names: tuple[str, str]) -> Counter[tuple[str, ...]]:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    feeds = [ctx.Queue() for _ in names]
    outcomes = ctx.Queue()
    procs = [
        ctx.Process(target=_racer, args=(str(path), by, barrier, feed, outcomes), daemon=True)
        for by, feed in zip(names, feeds, strict=True)
    ]
    for p in procs:
        p.start()
    tally: Counter[tuple[str, ...]] = Counter()
    store = SQLiteStore(path)
    try:
        for key in keys:
            for feed in feeds:
                feed.put(key)
            pair = [outcomes.get(timeout=60) for _ in names]
            assert {k for k, *_ in pair} == {key}
            chat_id, call_id = key.split("/")
            stored = store.call(call_id, chat_id=chat_id).decision
            assert stored is not None and stored.verdict == "approved" and stored.by in names
            for _, outcome, verdict, by in pair:  # each names the decision that stands
                assert outcome in ("approved", "decided elsewhere")
                assert (verdict, by) == ("approved", stored.by)
            tally[tuple(sorted(o for _, o, *_ in pair))] += 1
    finally:
        for feed in feeds:
            feed.put(None)
        for p in procs:
            p.join(30)
        store.close()
    return tally


def test_two_inboxes_racing_never_both_claim_a_call_they_named_apart(tmp_path: Path) -> None:
    """Repeated race, two processes, an inbox each with its own ``by=``: every time exactly
    one says ``approved`` and the other ``decided elsewhere``, naming the winner."""
    path = tmp_path / "chats.db"
    keys = _stored_keys(path, 30)
    tally = _race(path, keys, ("inbox-ana", "inbox-bo"))
    assert tally == {("approved", "decided elsewhere"): len(keys)}


def test_two_same_named_inboxes_racing_tell_which_decided(tmp_path: Path) -> None:
    """Repeated race, two processes, both ``by="inbox"`` (the default): every time exactly
    one says ``approved`` and the other ``decided elsewhere``. The store refuses a call
    decided already, even alike, in the transaction that would write (``exclusive=True``),
    so only the inbox that wrote says it approved (before, about one round in eight had
    both say ``approved``, and telling them apart by the time stamped left the rounds
    where one waited for the store's lock)."""
    path = tmp_path / "chats.db"
    keys = _stored_keys(path, 60)
    tally = _race(path, keys, ("inbox", "inbox"))
    assert tally == {("approved", "decided elsewhere"): len(keys)}


def test_an_exclusive_decision_on_a_decided_call_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chats.db"
    (key,) = _stored_keys(path, 1)
    chat_id, call_id = key.split("/")
    store = SQLiteStore(path)
    try:
        first = store.approve(call_id, chat_id=chat_id, by="inbox", exclusive=True)
        assert first.decision is not None and first.decision.by == "inbox"
        again = store.approve(call_id, chat_id=chat_id, by="inbox")  # alike: a no-op
        assert again.decision == first.decision
        with pytest.raises(nbagent.DecisionError, match="already approved by inbox"):
            store.approve(call_id, chat_id=chat_id, by="inbox", exclusive=True)
        with pytest.raises(nbagent.DecisionError, match="already approved by inbox"):
            store.deny(call_id, chat_id=chat_id, by="inbox", exclusive=True)
        assert store.call(call_id, chat_id=chat_id).decision == first.decision
    finally:
        store.close()


def test_an_inbox_over_a_live_chat_tells_a_decision_found_in_its_store_from_its_own(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Forced: another inbox (over the store, same name) approves right as this one, over the
    live chat, decides; the chat records the store's decision as made elsewhere, and this
    inbox says so (it took any alike decision stamped meanwhile for its own)."""
    from nbagent.inbox import _sources

    path = tmp_path / "chats.db"
    script = [call_tools(("deploy", {"service": "api"})), reply("done")]
    chat = Chat(provider=ScriptedProvider(script), store=path, display=False).with_tools(Deploy)
    chat.ask("deploy")
    mine, theirs = nbagent.inbox(chat), nbagent.inbox(path)
    real = _sources.LiveSource._record
    said: list[str] = []

    def racing(self: Any, row: Any, verdict: Any, reason: Any, by: Any) -> Any:
        said.append(theirs.approve(f"{row.chat_id}/{row.call_id}")["outcome"].iloc[0])
        return real(self, row, verdict, reason, by)

    monkeypatch.setattr(_sources.LiveSource, "_record", racing)
    out = mine.approve(chat.pending_approvals[0].id)
    assert said == ["approved"] and out["outcome"].tolist() == ["decided elsewhere"]
    theirs.close()
    mine.close()
    chat.close()
