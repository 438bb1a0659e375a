"""A fork stored in another store replays its tools' results there, in any process.

``chat.fork(step=1, store=other)`` wrote the fork's shared steps (their messages and
calls) to ``other`` but not which request each step had asked nor its recording: those
stayed in the parent's store (or the process). Loaded in a new process with
``replay_tools=True``, the fork (and its own forks) found no key for a shared step, so a
call of that step got no recorded result and its side-effecting tool ran again (in the
same store the keys are found through the parent link). The fork's store now gets the
shared steps' request keys and recordings with the shared history it is written with.

The second process is a real ``python`` (this file run as a script); the tool counts its
runs in a file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, tool
from nbagent._replay import PROCESS
from nbagent.testing import ScriptedProvider, call_tools, reply

HERE = Path(__file__)


@tool
def lookup(order_id: int) -> str:
    """Look an order up (counted: a side effect here).

    Args:
        order_id: The order.
    """
    with open(os.environ["NBAGENT_TEST_COUNTER"], "a") as f:
        f.write(f"{os.getpid()} {order_id}\n")
    return f"order {order_id}: paid"


def _answer(request: Any) -> Any:
    last = request.messages[-1]
    if getattr(last, "role", "") == "user":
        return call_tools(("lookup", {"order_id": 2}, "c2"))
    return reply("saw: " + str(last.content)[:40])


def _provider() -> ScriptedProvider:
    return ScriptedProvider([_answer], repeat_last=True)


def _runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def _elsewhere(command: str, db: str, chat_id: str, counter: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBAGENT_")}
    env["NBAGENT_TEST_COUNTER"] = str(counter)
    proc = subprocess.run(
        [sys.executable, str(HERE), command, db, chat_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    seen: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return seen


@pytest.fixture
def places(backend: Any, tmp_path: Path) -> tuple[str | None, str]:
    """The parent's store (a second one of the same kind) and the fork's."""
    if backend.kind == "sqlite":
        return str(tmp_path / "parent.db"), backend.url
    return backend.server.new_database(), backend.url


@pytest.fixture
def counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(path))
    PROCESS.clear()
    yield path
    PROCESS.clear()


def _ran_in_a_fork(parent_store: str | None, fork_store: str, counter: Path) -> Chat:
    chat = Chat(provider=_provider(), store=parent_store, replay="auto", display=False)
    chat.with_tools(lookup).ask("go")
    assert _runs(counter) == 1
    fork = chat.fork(step=1, store=fork_store)  # the model step: the lookup runs again
    fork.complete()
    assert _runs(counter) == 2
    fork.close()
    chat.close()
    return fork


@pytest.mark.parametrize("parent_stored", [True, False], ids=["stored", "in_memory"])
def test_a_fork_of_the_fork_replays_its_run(
    places: tuple[str, str], counter: Path, parent_stored: bool
) -> None:
    parent_store, fork_store = places
    fork = _ran_in_a_fork(parent_store if parent_stored else None, fork_store, counter)
    seen = _elsewhere("refork", fork_store, fork.id, counter)
    assert seen["shared_keys"] == [1]  # the loaded fork knows its shared step's request
    assert seen["log"] == [["c2", "ok", True]]  # replayed: the tool did not run
    assert _runs(counter) == 2


def test_a_new_chat_in_the_forks_store_replays_the_whole_run(
    places: tuple[str, str], counter: Path
) -> None:
    """The shared step's recording is in the fork's store: a rerun there replays it (and
    the call's result the fork's run gave) with replay="only"."""
    parent_store, fork_store = places
    _ran_in_a_fork(parent_store, fork_store, counter)
    seen = _elsewhere("rerun", fork_store, "", counter)
    assert seen["replayed_steps"] == [1, 3]
    assert seen["log"] == [["c2", "ok", True]]
    assert _runs(counter) == 2


def test_in_the_same_store_nothing_is_copied(backend: Any, counter: Path) -> None:
    """A fork in its parent's store finds the shared keys through the parent link: it gets
    no request rows of its own for the shared steps."""
    chat = Chat(provider=_provider(), store=backend.url, replay="auto", display=False)
    chat.with_tools(lookup).ask("go")
    fork = chat.fork(step=1)
    fork.complete()
    rows = backend.sql("SELECT step FROM model_requests WHERE chat_id = ?", (fork.id,))
    assert sorted(s for (s,) in rows) == [3]
    seen = _elsewhere("refork", backend.url, fork.id, counter)
    assert seen["log"] == [["c2", "ok", True]]
    assert _runs(counter) == 2
    fork.close()
    chat.close()


def _main(command: str, db: str, chat_id: str) -> None:
    kw: dict[str, Any] = {"replay_tools": True, "replay": "only", "display": False}
    if command == "refork":
        f = Chat.load(chat_id, store=db, provider=ScriptedProvider([]), tools=[lookup], **kw)
        keys = sorted(s for s in f._replayer.keys if s <= f.parent.step)  # type: ignore[union-attr]
        h = f.fork(step=1)
        h.complete()
        out = {"shared_keys": keys, "log": h.log[["call_id", "status", "replayed"]].values.tolist()}
        h.close()
        f.close()
    else:
        r = Chat(provider=ScriptedProvider([]), store=db, **kw).with_tools(lookup)
        r.ask("go")
        out = {
            "replayed_steps": sorted(r.replayed_steps),
            "log": r.log[["call_id", "status", "replayed"]].values.tolist(),
        }
        r.close()
    print(json.dumps(out))


if __name__ == "__main__":
    _main(*sys.argv[1:4])
