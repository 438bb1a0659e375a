"""Pending inputs in the store: listed, answered and followed from any process (issue 26.2).

``store.pending_inputs()`` lists what chats wait for (an external tool's result,
``ask_user``'s answer) beside ``pending_approvals()``; ``store.answer`` /
``store.decline`` settle one from any process, checked exactly as ``chat.answer``
checks it, first answer wins (across threads and processes, on both stores); the
answer reaches a live chat through the store's one follower, and ``Chat.load``
resumes a chat answered while nobody had it open.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import Chat, InputAnswered, InputError, ModelRequest, ask_user, tool
from nbagent.store import StoredInput, follow, open_store
from nbagent.store._migrations import MIGRATIONS, SCHEMA_VERSION
from nbagent.store._migrations import m015_inputs as m_inputs
from nbagent.testing import ScriptedProvider, call_tools, reply

if TYPE_CHECKING:
    from conftest import Backend  # tests/store's


class _SQLiteFile:
    """A SQLite store file, opened as the ``backend`` fixture opens one (for hypothesis,
    which makes a chat per example and cannot take a function-scoped fixture)."""

    kind = "sqlite"

    def __init__(self, url: str):
        self.url = url

    def open(self) -> Any:
        return open_store(self.url)


ROOT = Path(__file__).resolve().parents[2]


@tool(external=True)
def sign_contract(party: str) -> str:
    """Have the contract signed by a person.

    Args:
        party: Who signs.
    """
    raise AssertionError("an external tool never runs here")


def scripted(*calls: tuple[str, dict[str, Any], str]) -> ScriptedProvider:
    """One response asking for ``calls``, then a reply quoting the results it read."""

    def answer(request: ModelRequest) -> Any:
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if not results:
            return call_tools(*calls)
        return reply(" | ".join(f"{m.status}:{m.content}" for m in results))

    return ScriptedProvider([answer], repeat_last=True)


def parked(
    backend: Backend | _SQLiteFile, *calls: tuple[str, dict[str, Any], str]
) -> tuple[Chat, Any]:
    provider = scripted(*calls)
    chat = Chat(provider=provider, display=False, store=backend.open())
    chat.with_tools(sign_contract, ask_user)
    chat.ask("go")
    assert chat.awaiting_input
    return chat, provider


def test_the_store_lists_inputs_and_an_answer_from_elsewhere_reaches_the_chat(
    backend: Backend,
) -> None:
    chat, _ = parked(
        backend,
        ("sign_contract", {"party": "ACME"}, "c1"),
        ("ask_user", {"question": "Which color?", "choices": ["red", "blue"]}, "c2"),
    )
    with chat, backend.open() as other:  # another store object: another process's view
        waiting = other.pending_inputs()
        assert [(i.id, i.kind, i.tool, i.status) for i in waiting] == [
            ("c1", "external", "sign_contract", "pending"),
            ("c2", "ask_user", "ask_user", "pending"),
        ]
        assert all(isinstance(i, StoredInput) and i.chat_id == chat.id for i in waiting)
        assert waiting[1].choices == ("red", "blue")
        assert other.pending_inputs(chat.id) == waiting and other.pending_inputs("nope") == []
        assert other.pending_approvals() == []  # inputs are not approvals

        # checked exactly as chat.answer checks it: refused, nothing written
        with pytest.raises(InputError, match="does not match"):
            other.answer("c2", "green", by="bob")
        assert [i.id for i in other.pending_inputs()] == ["c1", "c2"]
        with pytest.raises(InputError, match="no input 'zz'"):
            other.answer("zz", "x")

        done = other.answer("c2", "blue", by="bob")
        assert (done.status, done.data, done.answered_by, done.applied) == (
            "accept",
            "blue",
            "bob",
            False,
        )
        other.decline("c1", "not today", by="carol")
        assert other.pending_inputs() == []
        with pytest.raises(InputError, match=r"already answered \(accept by bob"):
            other.answer("c2", "red")

        # the chat applies them at its next look, as the people answered
        assert {c.id for c in chat.refresh()} == {"c1", "c2"}
        final = chat.complete()
        assert final is not None
        assert final.content == "denied:Declined by carol: no result was given: not today | ok:blue"
        answers = {e.input_id: e for e in chat.events if isinstance(e, InputAnswered)}
        assert (answers["c2"].by, answers["c2"].elsewhere) == ("bob", True)
        assert all(i.applied for i in other.inputs(chat.id))
        records = {r.input_id: r for r in chat.record.inputs}
        assert (records["c1"].status, records["c1"].answered_by) == ("decline", "carol")


def test_answered_in_the_cell_first_the_store_refuses_and_the_other_way_round(
    backend: Backend,
) -> None:
    chat, _ = parked(
        backend,
        ("sign_contract", {"party": "A"}, "c1"),
        ("sign_contract", {"party": "B"}, "c2"),
    )
    with chat, backend.open() as other:
        chat.answer("c1", "signed here", by="alice")
        with pytest.raises(InputError, match=r"already answered \(accept by alice"):
            other.answer("c1", "signed there")
        other.answer("c2", "signed there", by="bob")  # the chat has not looked yet
        with pytest.raises(InputError, match=r"already answered elsewhere \(accept by bob\)"):
            chat.answer("c2", "signed here too", by="alice")
        assert chat.pending_inputs == []  # the store's answer is the one recorded
        final = chat.complete()
        assert final is not None and final.content == "ok:signed here | ok:signed there"
        stored = {i.id: (i.data, i.answered_by) for i in other.inputs(chat.id)}
        assert stored == {"c1": ("signed here", "alice"), "c2": ("signed there", "bob")}


def test_chat_load_resumes_with_an_answer_given_while_nobody_had_it_open(
    backend: Backend,
) -> None:
    chat, provider = parked(backend, ("sign_contract", {"party": "ACME"}, "c1"))
    chat_id = chat.id
    chat.close()
    with backend.open() as other:
        other.answer("c1", {"signed": True}, by="dana")
    with Chat.load(chat_id, store=backend.open(), provider=provider) as loaded:  # no tools
        assert loaded.pending_inputs == [] and loaded.status == "ready"
        final = loaded.complete()
        assert final is not None and final.content == 'ok:{"signed":true}'
    with backend.open() as other:
        (row,) = other.inputs(chat_id)
        assert (row.status, row.answered_by, row.applied) == ("accept", "dana", True)


def test_a_live_chat_hears_of_an_answer_through_the_one_follower(backend: Backend) -> None:
    chat, _ = parked(backend, ("sign_contract", {"party": "ACME"}, "c1"))
    heard = threading.Event()

    def look(_ids: set[str]) -> None:  # what a displayed card or a parked batch row does
        if chat.refresh():
            heard.set()

    with chat, backend.open() as watcher, backend.open() as other:
        sub = follow(watcher, [chat.id], look)
        try:
            other.answer("c1", "signed", by="erin")
            assert heard.wait(60), "the follower never brought the answer"
        finally:
            sub.close()
        assert chat.pending_inputs == [] and chat.get_call("c1").status == "ok"


def test_racing_answers_in_threads_settle_each_input_once(backend: Backend) -> None:
    calls = [("sign_contract", {"party": f"p{i}"}, f"c{i}") for i in range(6)]
    chat, _ = parked(backend, *calls)
    with chat:
        stores = [backend.open(), backend.open()]
        won: dict[str, list[str]] = {f"c{i}": [] for i in range(6)}
        barrier = threading.Barrier(3)

        def answer(who: int) -> None:
            barrier.wait()
            for i in range(6):
                try:
                    stores[who].answer(f"c{i}", f"by {who}", by=f"t{who}")
                    won[f"c{i}"].append(f"t{who}")
                except InputError:
                    pass

        def in_cell() -> None:
            barrier.wait()
            for i in range(6):
                try:
                    chat.answer(f"c{i}", "by the cell", by="cell")
                    won[f"c{i}"].append("cell")
                except InputError:
                    pass

        threads = [threading.Thread(target=answer, args=(w,)) for w in (0, 1)]
        threads.append(threading.Thread(target=in_cell))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        chat.refresh()
        assert all(len(w) == 1 for w in won.values()), won
        stored = {i.id: i.answered_by for i in stores[0].inputs(chat.id)}
        assert stored == {k: w[0] for k, w in won.items()}
        recorded = {r.input_id: r.answered_by for r in chat.record.inputs}
        assert recorded == stored  # the chat recorded the store's first answer, each once
        for s in stores:
            s.close()


_RACER = """
import json, os, sys, time
from pathlib import Path
from nbagent import InputError
from nbagent.store import open_store
url, go, who, ids = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4].split(",")
store = open_store(url)
store.pending_inputs()  # connected before the start
while not go.exists():
    time.sleep(0.01)
won = []
for i in ids:
    try:
        store.answer(i, "by " + who, by=who)
        won.append(i)
    except InputError:
        pass
store.close()
print(json.dumps(won))
"""


def test_racing_answers_across_processes_settle_each_input_once(
    backend: Backend, tmp_path: Path
) -> None:
    ids = [f"c{i}" for i in range(8)]
    chat, _ = parked(backend, *[("sign_contract", {"party": i}, i) for i in ids])
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with chat:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _RACER, backend.url, str(go), who, ",".join(ids)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for who in ("p1", "p2")
        ]
        time.sleep(1.0)  # let both connect (not an assertion: the race is the same without)
        go.touch()
        outs = [p.communicate(timeout=300) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
        won = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
        assert sorted(won[0] + won[1]) == sorted(ids)  # each input answered exactly once
        with backend.open() as store:
            stored = {i.id: i.answered_by for i in store.inputs(chat.id)}
        assert stored == {i: ("p1" if i in won[0] else "p2") for i in ids}
        chat.refresh()
        assert {r.input_id: r.answered_by for r in chat.record.inputs} == stored


def test_inputs_of_chats_stored_before_the_inputs_tables_are_carried_over(backend: Backend) -> None:
    chat, provider = parked(
        backend,
        ("sign_contract", {"party": "A"}, "c1"),
        ("ask_user", {"question": "Ok?", "choices": ["yes", "no"]}, "c2"),
    )
    chat.answer("c1", {"signed": True, "n": 2}, by="alice")
    chat_id = chat.id
    chat.close()
    # the store as the version before left it: no inputs tables (the events hold the inputs)
    backend.sql("DROP TABLE input_answers")
    backend.sql("DROP TABLE inputs")
    if backend.kind == "postgres":
        backend.sql("DROP FUNCTION nbagent_input_answer_notify()")
        backend.sql("DROP TRIGGER events_rule_notify ON events")  # m017's
        backend.sql("DROP FUNCTION nbagent_rule_notify()")
    backend.sql("DROP INDEX events_rule_changes")  # and what the migrations after it made
    inputs_version = MIGRATIONS.index(m_inputs) + 1
    assert inputs_version + 2 == SCHEMA_VERSION  # a new migration: undo what it makes above
    backend.sql(f"DELETE FROM schema_migrations WHERE version >= {inputs_version}")
    with backend.open() as store:  # migrates
        assert store.schema_version == SCHEMA_VERSION
        rows = {i.id: i for i in store.inputs(chat_id)}
        assert (rows["c1"].status, rows["c1"].data, rows["c1"].answered_by) == (
            "accept",
            {"signed": True, "n": 2},
            "alice",
        )
        assert rows["c2"].status == "pending" and rows["c2"].schema == {
            "type": "string",
            "enum": ["yes", "no"],
        }
        assert rows["c2"].content == chat.record.input("c2").request.content  # type: ignore[union-attr]
        store.answer("c2", "yes", by="bob")
    with Chat.load(chat_id, store=backend.open(), provider=provider) as loaded:
        final = loaded.complete()
        assert final is not None and final.content == 'ok:{"signed":true,"n":2} | ok:yes'


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["chat", "s1", "s2"]),  # who answers: the cell, two other processes
        st.integers(0, 2),  # which input
        st.sampled_from(["good", "bad", "decline"]),
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_OPS)
def test_every_input_is_settled_once_whoever_answers_first(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int, str]]
) -> None:
    url = str(tmp_path_factory.mktemp("inputs") / "agent.db")
    backend = _SQLiteFile(url)
    chat, _ = parked(
        backend,
        ("ask_user", {"question": "A?", "choices": ["a", "b"]}, "c0"),
        ("ask_user", {"question": "B?", "choices": ["a", "b"]}, "c1"),
        ("sign_contract", {"party": "C"}, "c2"),
    )
    stores = {"s1": backend.open(), "s2": backend.open()}
    first: dict[str, tuple[str, str]] = {}  # input -> (action, who): the model
    try:
        for who, index, what in ops:
            input_id = f"c{index}"
            bad = what == "bad" and index < 2  # an external result may be anything
            data = "zz" if bad else "a"
            try:
                if who == "chat":
                    if what == "decline":
                        chat.decline(input_id, by=who)
                    else:
                        chat.answer(input_id, data, by=who)
                elif what == "decline":
                    stores[who].decline(input_id, by=who)
                else:
                    stores[who].answer(input_id, data, by=who)
            except InputError:
                assert bad or input_id in first  # refused only when bad or answered already
                continue
            assert not bad and input_id not in first  # accepted only when first and good
            first[input_id] = ("decline" if what == "decline" else "accept", who)
        chat.refresh()
        stored = {i.id: (i.status, i.answered_by) for i in stores["s1"].inputs(chat.id)}
        assert {k: v for k, v in stored.items() if v[0] != "pending"} == first
        recorded = {r.input_id: (r.status, r.answered_by) for r in chat.record.inputs}
        assert {k: v for k, v in recorded.items() if v[0] != "pending"} == first
        answered = [e.input_id for e in chat.events if isinstance(e, InputAnswered)]
        assert sorted(answered) == sorted(first)  # each recorded once, in the chat too
    finally:
        chat.close()
        for s in stores.values():
            s.close()
