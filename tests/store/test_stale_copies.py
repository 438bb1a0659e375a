"""A stale copy of a stored chat (loaded before another copy moved it on) never answers a
question the store never got, nor leaves rows of its own: it stops with a ``busy`` step.

Two real processes (``_racer.py``) load the same stored chat, then at once either ask
each their own question or complete it (its next step a model request). The store must
end with one answer, no step row of the loser's request, and the loser must have said
``busy`` with a ``StoreConflictWarning``: before this, the loser asked the model anyway,
returned an answer stored nowhere, and committed its request's rows after the winner's
(phantom steps). On SQLite and PostgreSQL, repeated.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat
from nbagent.store import StoreConflictWarning, open_store
from nbagent.testing import ScriptedProvider, reply

HERE = Path(__file__).parent
ROUNDS = 4


class Racer:
    """A ``_racer.py`` worker process: one job per line."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("NBAGENT_TEST_")}
        root = str(HERE.parent.parent)  # this checkout's nbagent, as the test process's
        env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "_racer.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert json.loads(self.read())["ready"]

    def read(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the worker died"
        return line

    def send(self, spec: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(spec) + "\n")
        self.proc.stdin.flush()

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.read())
        assert "error" not in out, out["error"]
        return out

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def racers() -> Iterator[tuple[Racer, Racer]]:
    pair = Racer(), Racer()
    yield pair
    for r in pair:
        r.close()


def _race(racers: tuple[Racer, Racer], db: str, chat_id: str, op: str) -> list[dict[str, Any]]:
    go = time.time() + 1.0  # both have loaded the chat by then
    for tag, racer in zip("bc", racers, strict=True):
        racer.send({"db": db, "chat": chat_id, "op": op, "tag": tag, "go": go})
    return [r.result() for r in racers]


def _requests(db: str, chat_id: str) -> tuple[int, int, int]:
    """The stored chat's model requests started and ended (finished or failed: events),
    and its step rows."""
    with open_store(db) as store:
        types = [e.type for e in store.iter_events(chat_id)]
        ended = types.count("model_request_finished") + types.count("model_request_failed")
        chat = Chat.load(chat_id, store=store, provider=ScriptedProvider([]), display=False)
        steps = len(chat.steps)
        chat.close()
    return types.count("model_request_started"), ended, steps


def _stored(db: str, chat_id: str) -> list[str]:
    with open_store(db) as store:
        return [str(m["content"]) for m in store.load(chat_id).messages]


def _check_loser(out: dict[str, Any]) -> None:
    assert out["step"] == "busy", out
    assert "StoreConflictWarning" in out["warnings"], out


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_two_processes_asking_one_stored_chat_at_once(
    backend: Any, racers: tuple[Racer, Racer], round_: int
) -> None:
    """The loser's question conflicts with the winner's: it stops before its model is
    asked (``busy``), and nothing of its turn is stored."""
    db = str(backend.url)
    with open_store(db) as store:
        chat = Chat(provider=ScriptedProvider([reply("hello")]), store=store, display=False)
        chat.ask("hi")
        chat_id = chat.id
        chat.close()
    results = _race(racers, db, chat_id, "ask")
    stored = _stored(db, chat_id)
    assert len(stored) == 4, stored  # hi, hello, one question, its answer
    winners = [r for r in results if r["step"] != "busy"]
    assert len(winners) == 1, results
    (winner,) = winners
    tag = winner["last"].rsplit(" ", 1)[1]
    assert stored[2:] == [f"question of {tag}", f"answer of {tag}"]
    (loser,) = [r for r in results if r is not winner]
    _check_loser(loser)
    assert loser["asked"] == 0, loser  # the model never heard a question the store lacks
    assert winner["asked"] == 1 and winner["warnings"] == [], winner
    started, finished, steps = _requests(db, chat_id)
    assert (started, finished, steps) == (2, 2, 2)


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_two_processes_completing_one_stored_chat_at_once(
    backend: Any, racers: tuple[Racer, Racer], round_: int
) -> None:
    """Both ask the model (nothing tells them apart before), one answer is stored: the
    loser's step says ``busy`` rather than report its answer, and its request leaves no
    row (a phantom step)."""
    db = str(backend.url)

    def down(request: Any) -> Any:
        raise ConnectionError("the model is down")

    with open_store(db) as store:
        chat = Chat(provider=ScriptedProvider([down]), store=store, display=False)
        with pytest.raises(ConnectionError):
            chat.ask("go")  # the question is stored; the model did not answer
        chat_id = chat.id
        chat.close()
    results = _race(racers, db, chat_id, "complete")
    stored = _stored(db, chat_id)
    assert len(stored) == 2, stored
    winners = [r for r in results if r["step"] != "busy"]
    assert len(winners) == 1, results
    (winner,) = winners
    assert winner["step"] == "complete" and stored[1] == winner["last"], (results, stored)
    (loser,) = [r for r in results if r is not winner]
    _check_loser(loser)
    started, finished, steps = _requests(db, chat_id)
    # the failed request and the winner's: none of the loser's
    assert (started, finished, steps) == (2, 2, 2), results


def test_a_stale_copy_completing_stops_busy_and_writes_nothing(backend: Any) -> None:
    """Deterministic, one process: copy ``a`` completes; copy ``b``, loaded before, then
    completes too. ``b``'s step is ``busy`` and the store holds ``a``'s answer and steps
    only (``b``'s request rows were committed, renumbered after ``a``'s)."""

    def down(request: Any) -> Any:
        raise ConnectionError("the model is down")

    db = str(backend.url)
    with open_store(db) as store:
        chat = Chat(provider=ScriptedProvider([down]), store=store, display=False)
        with pytest.raises(ConnectionError):
            chat.ask("go")
        chat_id = chat.id
        chat.close()
    with open_store(db) as sa, open_store(db) as sb:
        pa = ScriptedProvider([reply("answer of a")])
        pb = ScriptedProvider([reply("answer of b")])
        a = Chat.load(chat_id, store=sa, provider=pa, display=False)
        b = Chat.load(chat_id, store=sb, provider=pb, display=False)
        a.complete()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = b.complete()
        assert b.last_step is not None and b.last_step.kind == "busy"
        # the answer b got is not the chat's (the store holds a's): not reported as it
        assert got is None and b.last_step.message is None
        assert [w.category for w in caught] == [StoreConflictWarning]
        a.close()
        b.close()
    assert _stored(db, chat_id) == ["go", "answer of a"]
    assert _requests(db, chat_id) == (2, 2, 2)


@pytest.mark.parametrize("drive", ["sync", "async"])
def test_a_stale_copy_asking_never_asks_the_model(backend: Any, drive: str) -> None:
    """Copy ``a`` asks a follow-up; copy ``b``, loaded before, asks its own: ``b``'s question
    cannot be stored, so its model is never asked (the step is ``busy``)."""
    import asyncio

    db = str(backend.url)
    with open_store(db) as store:
        chat = Chat(provider=ScriptedProvider([reply("hello")]), store=store, display=False)
        chat.ask("hi")
        chat_id = chat.id
        chat.close()
    with open_store(db) as sa, open_store(db) as sb:
        a = Chat.load(chat_id, store=sa, provider=ScriptedProvider([reply("to a")]))
        pb = ScriptedProvider([reply("to b")])
        b = Chat.load(chat_id, store=sb, provider=pb, display=False)
        a.ask("from a")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            answer = b.ask("from b") if drive == "sync" else asyncio.run(b.ask_async("from b"))
        assert pb.requests == []
        assert answer is None  # not the last turn's "hello", as if it answered "from b"
        assert b.last_step is not None and b.last_step.kind == "busy"
        assert StoreConflictWarning in [w.category for w in caught]
        a.close()
        b.close()
    assert _stored(db, chat_id) == ["hi", "hello", "from a", "to a"]
    assert _requests(db, chat_id) == (2, 2, 2)
