"""The store in one process: exact round trips, decisions, bad input, conflicts.

Tests taking ``store`` or ``backend`` run on SQLite and on PostgreSQL (``conftest.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import (
    Chat,
    DecisionError,
    Event,
    StoreError,
    TextDelta,
    ToolCallDelta,
    ToolResultMessage,
    ToolUnavailableError,
    tool,
)
from nbagent.store import SQLiteStore, Store, StoreConflictWarning, open_store
from nbagent.store import _codec as codec
from nbagent.store._process import new_owner, owner_alive

sys.path.insert(0, str(Path(__file__).parent))
from _agent import Refund, count


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "agent.db"


@pytest.fixture
def counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(path))
    return path


@tool
def get_weather(city: str, unit: str = "c") -> dict[str, Any]:
    """Get the weather for a city.

    Args:
        city: City name.
        unit: Temperature unit.
    """
    return {"city": city, "temp": 21, "unit": unit, "note": "sunny ☀"}


def closed(chat: Chat) -> None:
    chat.close()


def parked(store: Any) -> tuple[Chat, str]:
    chat = Chat(model="demo", store=store).with_tools(Refund)
    chat.ask("Refund order 42")
    assert chat.status == "awaiting_approval"
    return chat, chat.pending_approvals[0].id


# ------------------------------------------------------------ round trips
def _busy_chat(store: Any, events: list[Event]) -> Chat:
    chat = Chat(model="demo", store=store, system="Be brief.").with_tools(get_weather, Refund)
    chat.on(None, events.append)
    chat.with_tool_options(concurrency="threads")
    chat.ask("Weather in Paris and in Tokyo")  # two parallel calls, run on threads
    chat.ask("Refund order 7")
    chat.deny(chat.pending_approvals[0], reason="needs a manager")
    chat.complete()
    chat.ask("Refund order 8")
    chat.approve(chat.pending_approvals[0], {"order_id": 9})  # edited arguments
    chat.complete()
    chat.ask("Weather in Oslo")
    chat.with_tool_options(calls="one", choice="required")
    return chat


def _lifecycle(chat: Chat) -> list[tuple[Any, ...]]:
    return [
        (
            c.id,
            c.name,
            c.arguments,
            c.status,
            c.approval,
            c.decision,
            c.result,
            c.started_at,
            c.finished_at,
            chat._call_turn[c.id],
            chat._call_step[c.id],
        )
        for c in chat.tool_calls
    ]


def test_a_loaded_chat_equals_the_original(store: Any, backend: Any, counter: Path) -> None:
    events: list[Event] = []
    chat = _busy_chat(store, events)
    loaded = Chat.load(chat.id, store=backend.url, tools=[get_weather, Refund])
    try:
        assert loaded.transcript == chat.transcript
        assert _lifecycle(loaded) == _lifecycle(chat)
        assert loaded.usage == chat.usage
        assert loaded.tool_options == chat.tool_options
        assert loaded.system == "Be brief."
        assert (loaded.turn, loaded._step, loaded._forced_spent) == (
            chat.turn,
            chat._step,
            chat._forced_spent,
        )
        assert loaded.status == chat.status == "complete"
        # the assistant message's calls are the chat's call objects, as in a live chat
        assistant = next(m for m in loaded.transcript if getattr(m, "tool_calls", None))
        assert assistant.tool_calls[0] is loaded.get_call(assistant.tool_calls[0].id)
        # the log of the loaded chat has the history
        assert list(loaded.log["call_id"]) == list(chat.log["call_id"])
        assert list(loaded.log["status"]) == list(chat.log["status"])
        # and it goes on
        loaded.ask("Weather in Rome")
        assert loaded.status == "complete"
        assert count(counter) == 1
    finally:
        closed(loaded)


def _fields(e: Event) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(e):
        v = getattr(e, f.name)
        out[f.name] = v.id if f.name == "call" else v
    return out


def test_events_come_back_with_the_same_fields(store: Any, counter: Path) -> None:
    events: list[Event] = []
    chat = _busy_chat(store, events)
    live = [e for e in events if not isinstance(e, (TextDelta, ToolCallDelta))]
    stored = list(store.iter_events(chat.id))
    assert [type(e) for e in stored] == [type(e) for e in live]
    assert [_fields(e) for e in stored] == [_fields(e) for e in live]
    # one ToolCall object per call, shared by the events that refer to it
    calls = {}
    for e in stored:
        if hasattr(e, "call"):
            assert calls.setdefault(e.call.id, e.call) is e.call
    closed(chat)


def test_codec_round_trips_are_exact() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    from nbagent import Approval, AssistantToolCallMessage, ChatMessage, Decision, ToolCall

    call = ToolCall("c1", "t", {"a": [1, 2.5, None], "ü": {"x": "☀"}}, None, None)
    call.status = "ok"
    call.approval = Approval(True, "tool", "why")
    call.decision = Decision(
        "approved", "user", datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC), "ok", {"a": 1}
    )
    call.result = ToolResultMessage("c1", "out", False, "ok", "t", turn=3)
    call.started_at = datetime(2024, 1, 2, 3, 4, 5, 7, tzinfo=timezone(timedelta(hours=2)))
    # a call's lifecycle values, as its row's columns hold them
    stored = codec.loads(codec.dumps(codec.approval_out(call.approval)))
    assert codec.approval_in(stored) == call.approval
    stored = codec.loads(codec.dumps(codec.decision_out(call.decision)))
    assert codec.decision_in(stored) == call.decision  # timezone and microseconds kept
    assert codec.dt_in(codec.dt_out(call.started_at)) == call.started_at
    assert codec.dt_in(codec.dt_out(None)) is None
    bad = ToolCall("c2", "t", {}, raw_arguments="{oops", parse_error="Expecting value")
    assert codec.call_identity_in(codec.call_identity_out(bad)).raw_arguments == "{oops"
    for m in (
        ChatMessage("user", "hé", turn=2),
        ChatMessage("assistant", "", turn=1, stop_reason="max_tokens"),
        AssistantToolCallMessage(None, (call, bad), turn=4),
        ToolResultMessage("c1", "x", True, "in_doubt", "t", turn=1),
    ):
        assert codec.message_in(codec.loads(codec.dumps(codec.message_out(m)))) == m


# ---------------------------------------------------------- decisions
def test_store_decisions_follow_the_rules(store: Any, counter: Path) -> None:
    chat, call_id = parked(store)
    with pytest.raises(DecisionError, match="invalid"):
        store.approve(call_id, arguments={"order_id": "forty-two"})
    assert store.call(call_id).status == "awaiting_approval"  # nothing written

    first = store.approve(call_id, reason="fine", by="alice")
    assert first.status == "approved" and first.decision.by == "alice"
    assert store.approve(call_id, by="bob").decision.by == "alice"  # same decision: no-op
    with pytest.raises(DecisionError, match="already approved by alice"):
        store.deny(call_id, reason="changed my mind")
    assert store.call(call_id).decision == first.decision  # nothing lost

    chat.complete()
    assert chat.status == "complete" and count(counter) == 1
    assert store.approve(call_id).status == "ok"  # still the same decision: no-op
    with pytest.raises(DecisionError):
        store.deny(call_id)
    closed(chat)


def test_edited_arguments_from_the_store(store: Any, counter: Path) -> None:
    chat, call_id = parked(store)
    store.approve(call_id, arguments={"order_id": 43})
    chat.complete()
    assert chat.get_call(call_id).effective_arguments == {"order_id": 43}
    assert counter.read_text().split()[1] == "43"
    closed(chat)


def test_unknown_and_ambiguous_call_ids(store: Any) -> None:
    a, call_id = parked(store)
    b, same_id = parked(store)  # the demo model numbers calls per chat: same id twice
    assert call_id == same_id
    with pytest.raises(DecisionError, match=r"no tool call 'nope'.*pending_approvals"):
        store.approve("nope")
    with pytest.raises(DecisionError, match=r"several chats.*chat_id="):
        store.approve(call_id)
    store.deny(call_id, chat_id=b.id, reason="no")
    pending = store.pending_approvals()
    assert [(p.chat_id, p.id) for p in pending] == [(a.id, call_id)]
    store.approve(pending[0])  # a StoredCall knows its chat
    assert store.pending_approvals() == []
    with pytest.raises(DecisionError, match="no tool call"):
        store.approve(call_id, chat_id="other-chat")
    closed(a)
    closed(b)


def test_a_call_that_needs_no_approval_cannot_be_decided(store: Any) -> None:
    chat = Chat(model="demo", store=store).with_tools(get_weather)
    chat.ask("Weather in Paris")
    call = chat.tool_calls[0]
    with pytest.raises(DecisionError, match="does not need approval"):
        store.approve(call.id)
    closed(chat)


def test_pending_approvals_across_chats_and_read_log(store: Any) -> None:
    chats = [parked(store)[0] for _ in range(3)]
    chats[0].deny(chats[0].pending_approvals[0])
    chats[0].complete()
    pending = store.pending_approvals()
    assert sorted(p.chat_id for p in pending) == sorted(c.id for c in chats[1:])
    infos = {i.id: i for i in store.chats()}
    assert infos[chats[1].id].pending == 1 and infos[chats[1].id].title == "Refund order 42"
    for c in chats:  # the list and a load agree on when a chat was last written
        assert infos[c.id].updated_at == store.load(c.id).info.updated_at
    log = nbagent.read_log(store)
    assert len(log) == 3 and set(log["chat_id"]) == {c.id for c in chats}
    assert sorted(log["status"]) == ["awaiting_approval", "awaiting_approval", "denied"]
    for c in chats:
        closed(c)


def test_a_gated_call_whose_tool_is_missing_is_refused(db: Path, counter: Path) -> None:
    with SQLiteStore(db) as store:
        chat_id = parked(store)[0].id
    chat = Chat.load(chat_id, store=db)  # no tools passed
    call = chat.pending_approvals[0]
    assert call.approval is not None and call.approval.required  # the gate is stored
    chat.approve(call)
    step = chat.record.steps[-1].step if chat.record.steps else 0
    # an approval is not used up by a process that cannot run the call: it waits for one
    # that can, and complete() says so (it answered "not available", for good)
    for drive in (chat.complete, chat.step):
        with pytest.raises(ToolUnavailableError, match=r"does not have tool 'refund'") as caught:
            drive()
        assert [c.id for c in caught.value.calls] == [call.id]
        assert "approved, not run" in str(caught.value)
    assert call.status == "approved" and call.result is None and count(counter) == 0
    assert (chat.record.steps[-1].step if chat.record.steps else 0) == step
    closed(chat)
    again = Chat.load(chat_id, store=db)  # another process's load: still approved
    assert again.tool_calls[-1].status == "approved"
    closed(again)
    job = Chat.load(chat_id, store=db, tools=[Refund])  # the job that has the tool
    job.complete()
    assert job.is_complete and job.tool_calls[-1].status == "ok" and count(counter) == 1
    closed(job)
    late = Chat.load(chat_id, store=db, tools=[Refund])
    late.complete()  # nothing left: it ran once
    assert count(counter) == 1
    closed(late)


def test_an_ungated_call_whose_tool_is_missing_waits_too(db: Path, counter: Path) -> None:
    """with_tools() dropping the tool of a call still ready to run: the call waits."""
    with SQLiteStore(db) as store:
        chat, call_id = parked(store)
        chat.approve(call_id)
        chat.with_tools(None)  # the tool gone before the approved call ran
        with pytest.raises(ToolUnavailableError):
            chat.complete()
        assert chat.tool_calls[-1].status == "approved" and count(counter) == 0
        chat.with_tools(Refund)
        chat.complete()
        assert chat.tool_calls[-1].status == "ok" and count(counter) == 1
        closed(chat)


# -------------------------------------------------------------- bad input
def test_unknown_chat_id(store: Any) -> None:
    chat, _ = parked(store)
    before = store.chats()
    with pytest.raises(StoreError, match=r"no chat 'nope'.*store\.chats\(\)"):
        Chat.load("nope", store=store)
    with pytest.raises(StoreError, match="Did you mean"):
        Chat.load(chat.id[:8], store=store)
    short = repr(chat).split("id='")[1].split("'")[0]  # what a repr shows: the id's end
    with pytest.raises(StoreError, match=f"Did you mean '{chat.id}'"):
        Chat.load(short, store=store)
    assert store.chats() == before
    with pytest.raises(StoreError, match=r"already exists.*Chat\.load"):
        Chat(model="demo", store=store, id=chat.id)
    closed(chat)


def test_a_corrupt_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    junk = b"this is not a database\n" * 300
    path.write_bytes(junk)
    with pytest.raises(StoreError, match=r"agent\.db.*left it as it is"):
        SQLiteStore(path)
    with pytest.raises(StoreError):
        Chat(model="demo", store=path)
    assert path.read_bytes() == junk
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.db"]


def test_a_truncated_store_is_refused(tmp_path: Path, db: Path) -> None:
    store = SQLiteStore(db)
    chat, _ = parked(store)
    closed(chat)
    store.close()
    data = db.read_bytes()
    broken = tmp_path / "broken.db"
    broken.write_bytes(data[: len(data) // 2] + b"\0" * 100)
    with pytest.raises(StoreError, match=r"broken\.db"), SQLiteStore(broken) as s:
        Chat.load(chat.id, store=s)


def test_other_sqlite_databases_are_not_touched(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not an nbagent store"):
        SQLiteStore(path)
    assert path.read_bytes() == before


def _stored_options(backend: Any, chat_id: str, change: Any) -> None:
    """Change a stored chat's tool options in place (as a newer nbagent or a hand edit would)."""
    import json

    ((state,),) = backend.sql("SELECT state FROM chats WHERE id = ?", (chat_id,))
    state = json.loads(state)
    change(state["options"])
    backend.sql("UPDATE chats SET state = ? WHERE id = ?", (json.dumps(state), chat_id))


def test_unknown_or_invalid_stored_options_name_the_key_and_the_chat(
    store: Any, backend: Any
) -> None:
    """A stored tool option this version does not know (a newer nbagent, a hand edit) is a
    StoreError naming it and the chat, not a raw TypeError from inside the chat."""
    chat = Chat(model="demo", store=store).with_tools(Refund).with_tool_options(calls="one")
    closed(chat)
    _stored_options(backend, chat.id, lambda o: o.update(parallel_budget=3))
    with pytest.raises(StoreError, match=rf"chat {chat.id} of .*'parallel_budget'"):
        Chat.load(chat.id, store=store, tools=[Refund])
    _stored_options(backend, chat.id, lambda o: o.update(timeout="soon", parallel_budget=None))
    with pytest.raises(StoreError, match=rf"chat {chat.id} of .*'parallel_budget'"):
        Chat.load(chat.id, store=store, tools=[Refund])
    _stored_options(backend, chat.id, lambda o: o.pop("parallel_budget"))
    with pytest.raises(StoreError, match=rf"chat {chat.id} of .*'timeout'"):
        Chat.load(chat.id, store=store, tools=[Refund])
    _stored_options(backend, chat.id, lambda o: o.update(timeout=None))
    loaded = Chat.load(chat.id, store=store, tools=[Refund])  # valid again: it loads
    assert loaded.tool_options == chat.tool_options
    closed(loaded)


def test_bad_paths_and_closed_stores(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        SQLiteStore(tmp_path / "missing" / "agent.db")
    with pytest.raises(StoreError, match="directory"):
        SQLiteStore(tmp_path)
    s = SQLiteStore(tmp_path / "a.db")
    s.close()
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.chats()
    with pytest.raises(TypeError):
        open_store(42)  # type: ignore[arg-type]


def test_open_store(tmp_path: Path) -> None:
    s = open_store(tmp_path / "a.db")
    try:
        assert isinstance(s, SQLiteStore) and isinstance(s, Store)
        assert open_store(s) is s
    finally:
        s.close()


def test_api_keys_are_never_stored(db: Path) -> None:
    pytest.importorskip("openai")
    secret = "sk-test-DO-NOT-STORE-0123456789"
    chat = Chat(model="gpt-4.1-mini", api_key=secret, store=db).with_tools(Refund)
    chat.with_tool_options(calls="one")
    closed(chat)
    blob = b"".join(p.read_bytes() for p in db.parent.glob("agent.db*"))
    assert secret.encode() not in blob
    with SQLiteStore(db) as store:
        info = store.chats()[0]
        assert (info.provider, info.model) == ("openai", "gpt-4.1-mini")


# --------------------------------------------------------------- conflicts
def test_two_copies_in_one_process_run_a_call_once(store: Any, counter: Path) -> None:
    chat, call_id = parked(store)
    store.approve(call_id)
    a = Chat.load(chat.id, store=store, tools=[Refund])
    b = Chat.load(chat.id, store=store, tools=[Refund])
    a.complete()
    assert a.status == "complete"
    with pytest.warns(StoreConflictWarning, match="already ok"):
        b.complete()
    assert b.last_step is not None and b.last_step.kind == "busy"
    assert b.step().kind == "busy"  # stays stale: load it again
    assert count(counter) == 1
    for c in (chat, a, b):
        closed(c)


def test_a_contradicting_decision_loses_to_the_stored_one(store: Any, counter: Path) -> None:
    chat, call_id = parked(store)
    store.deny(call_id, reason="no", by="manager")
    with pytest.raises(DecisionError, match="already denied by manager"):
        chat.approve(call_id)  # this copy did not refresh: the store's decision wins
    call = chat.get_call(call_id)
    assert call.status == "denied" and call.decision.by == "manager"  # and this copy shows it
    chat.complete()
    assert chat.status == "complete" and count(counter) == 0
    again = Chat.load(chat.id, store=store, tools=[Refund])
    assert again.get_call(call_id).status == "denied"
    again.complete()
    assert again.status == "complete" and count(counter) == 0
    closed(chat)
    closed(again)


def test_owner_liveness() -> None:
    me = new_owner()
    assert owner_alive(me) is False  # a token no live chat object holds
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    host = me.split(":")[0]
    assert owner_alive(f"{host}:{proc.stdout.strip()}::abc") is False
    assert owner_alive("elsewhere:1:2:abc") is None
    assert owner_alive(None) is False


# ----------------------------------------------------------- other drivers
def test_async_and_budget_state(store: Any) -> None:
    chat = Chat(model="demo", store=store).with_tools(get_weather)

    async def go() -> None:
        await chat.ask_async("Weather in Paris")

    asyncio.run(go())
    assert chat.status == "complete"
    chat.ask("Weather in Lima", max_steps=1)
    assert chat.status == "budget_exhausted"
    loaded = Chat.load(chat.id, store=store, tools=[get_weather])
    assert loaded.status == "budget_exhausted"
    loaded.complete()
    assert loaded.status == "complete"
    assert len(loaded.tool_calls) == 2
    closed(chat)
    closed(loaded)


class _Script:
    """A tiny provider: answers from a list (a response, or a function of the messages)."""

    name = "script"
    model = "script-1"

    def __init__(self, responses: list[Any]):
        self.responses = list(responses)

    def complete(self, request: Any) -> Any:
        r = self.responses.pop(0)
        return r(request.messages) if callable(r) else r

    async def complete_async(self, request: Any) -> Any:
        return self.complete(request)


def test_rejected_calls_round_trip(store: Any) -> None:
    from nbagent import LLMToolResponse, ToolCall

    calls = (
        ToolCall("x1", "no_such_tool", {}),
        ToolCall("x2", "get_weather", {}, raw_arguments="{bad", parse_error="Expecting value"),
        ToolCall("x3", "get_weather", {"city": 3}),
        ToolCall("x4", "get_weather", {"city": "Oslo"}),
    )
    provider = _Script(
        [
            LLMToolResponse("", calls, stop_reason="tool_use", input_tokens=7, output_tokens=3),
            LLMToolResponse("done", input_tokens=11, output_tokens=2),
        ]
    )
    chat = Chat(provider=provider, store=store).with_tools(get_weather)
    chat.with_tool_options(calls=3)
    chat.ask("go")
    statuses = [c.status for c in chat.tool_calls]
    assert statuses == ["error", "error", "error", "skipped"]
    with pytest.raises(ValueError, match="unknown provider 'script'"):
        Chat.load(chat.id, store=store, tools=[get_weather])
    loaded = Chat.load(chat.id, store=store, tools=[get_weather], provider=_Script([]))
    assert loaded.transcript == chat.transcript
    assert _lifecycle(loaded) == _lifecycle(chat)
    assert loaded.usage == chat.usage and loaded.usage.input_tokens == 18
    assert loaded.tool_options.calls == 3
    assert loaded.get_call("x2").raw_arguments == "{bad"
    closed(chat)
    closed(loaded)


def test_a_decision_that_cannot_be_applied_is_rejected(
    store: Any, backend: Any, counter: Path
) -> None:
    chat, call_id = parked(store)
    backend.sql("UPDATE chats SET tools = NULL")  # as if the schema were unknown
    store.approve(call_id, arguments={"order_id": "not a number"}, by="script")
    with pytest.warns(StoreConflictWarning, match="cannot be applied"):
        assert chat.refresh() == []
    assert chat.pending_approvals[0].id == call_id
    again = store.call(call_id)
    assert again.status == "awaiting_approval" and again.decision is None
    store.approve(call_id, by="script")  # a valid decision afterwards works
    chat.complete()
    assert chat.status == "complete" and count(counter) == 1
    closed(chat)


def test_the_wal_file_stays_bounded_under_continuous_writes(tmp_path: Path) -> None:
    """A process that commits without pause still lets the WAL start over.

    Background passive checkpoints alone never catch up with a writer that
    never pauses (the WAL grew to hundreds of MB); a restart checkpoint past a
    size makes the next commit start the WAL over, cut back to its limit.
    """
    from nbagent.store import _checkpointer as checkpointer

    db = tmp_path / "busy.db"
    wal = Path(f"{db}-wal")
    sizes = []
    with SQLiteStore(db) as store:
        for _ in range(60):  # ~15,000 frames, about 60 MB if the WAL never started over
            chat = Chat(model="demo", store=store).with_tools(get_weather)
            for city in ("Paris", "Oslo", "Lima", "Rome", "Kyiv"):
                chat.ask(f"Weather in {city}")
            sizes.append(wal.stat().st_size)
            closed(chat)
    limit = checkpointer.WAL_LIMIT + 4 * checkpointer.RESTART_FRAMES * (4096 + 24)
    assert max(sizes) < limit, [s // 1_000_000 for s in sizes]


@pytest.mark.parametrize(
    "url", ["postgresql://me:hunter22@db/x", "mysql://u:pw9999@h/db", "host=db password=pw9999"]
)
def test_a_url_given_to_sqlitestore_is_refused_without_showing_it(url: str) -> None:
    # as a path, "//" folded to "/", the URL redaction missed it, and the error showed
    # "directory postgresql:/me:hunter22@db does not exist"
    with pytest.raises(StoreError, match="takes a file path, not a URL") as raised:
        SQLiteStore(url)
    assert "hunter22" not in str(raised.value) and "pw9999" not in str(raised.value)


@pytest.mark.parametrize("url", ["mysql://admin:hunter2secret@db/x", "redis://:hunter2secret@h"])
def test_a_url_no_store_opens_is_refused_everywhere_without_showing_it(url: str) -> None:
    for opening in (
        lambda: nbagent.open_store(url),
        lambda: nbagent.Chat(model="demo", display=False, store=url),
        lambda: nbagent.inbox(url),
    ):
        with pytest.raises(StoreError) as raised:
            opening()
        assert "hunter2secret" not in str(raised.value)
