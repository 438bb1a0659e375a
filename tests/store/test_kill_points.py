"""A process killed (``kill -9``) at the points where the store used to lose something.

Each test runs a real child process (``python -c``) that drives a chat against the store
and is killed with ``SIGKILL``, by itself or by the test, then loads the chat here and
continues it. On SQLite and on PostgreSQL (``backend``, see ``conftest.py``).

- an answer to an input (an external tool's result, ``ask_user``'s answer) given and then
  the kernel restarted before ``complete()``: the answer reaches the model, the external
  tool's body never runs (it ran, and the model read ``null``);
- a question asked while the model thinks: ``Chat.load`` has it and ``complete()`` asks
  the model again (the chat came back empty, or as the previous turn left it);
- the async API's sequential round killed while its first call runs: only that call is in
  doubt (the second, never started, was in doubt too: its approval lost);
- a call left running by a process on another host (a replaced container): the warning
  says so and names ``claim_timeout``, which lets it go.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat, InputAnswered, tool
from nbagent.store import StoreConflictWarning, open_store
from nbagent.store import _codec as codec
from nbagent.testing import ScriptedProvider, call_tools, reply

HEAD = """
import os, sys, signal, time, asyncio
import nbagent
from nbagent import Chat, Tool, tool
from nbagent.testing import ScriptedProvider, call_tools, reply
nbagent.configure(quiet=True, display=False)
DB = sys.argv[1]
def ran(what):
    with open(os.environ["RUNS"], "a") as f:
        f.write(what + "\\n")
def die():
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)
@tool(external=True)
def countersign(party: str) -> str:
    \"\"\"Have the contract countersigned by legal.

    Args:
        party: Who signs.
    \"\"\"
    ran("external body")
    return "the body's own result"
"""


def _child(code: str, db: str, runs: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (after :data:`HEAD`) in a fresh interpreter, to its end or its kill."""
    env = {**os.environ, "RUNS": str(runs)}
    return subprocess.run(
        [sys.executable, "-c", HEAD + code, db, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _ran(runs: Path) -> list[str]:
    return runs.read_text().splitlines() if runs.exists() else []


def _line(out: str, key: str) -> str:
    return next(line.split(None, 1)[1] for line in out.splitlines() if line.startswith(key))


@pytest.fixture
def db(backend: Any) -> str:
    return str(backend.url)


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "runs.txt"


@tool(external=True)
def countersign(party: str) -> str:
    """Have the contract countersigned by legal.

    Args:
        party: Who signs.
    """
    raise AssertionError("an external tool's body never runs: its input is answered")


def _reader(seen: list[list[str]], tool_name: str, arguments: dict[str, Any]) -> Any:
    """A model that asks for one call, then answers with what the tool result said."""

    def model(req: Any) -> Any:
        results = [m.content for m in req.messages if getattr(m, "role", "") == "tool"]
        if not results:
            return call_tools((tool_name, arguments, "x1"))
        seen.append(results)
        return reply("done: " + results[-1])

    return model


PARK = """
chat = Chat(provider=ScriptedProvider([call_tools((TOOL, ARGS, "x1"))]), store=DB)
chat.with_tools(countersign, nbagent.ask_user)
chat.ask("Have the contract countersigned")
print("ID", chat.id, flush=True)
if sys.argv[2] == "answer":
    chat.answer(chat.pending_inputs[0].id, ANSWER)  # returns: written; the kernel restarts
    die()
chat.close()
"""

LOOK = """
chat = Chat.load(
    sys.argv[2], store=DB, tools=[countersign, nbagent.ask_user], provider=ScriptedProvider([])
)
print("LOOKED", [(c.id, c.status) for c in chat.tool_calls], flush=True)
die()  # a notebook that only loaded the chat to look at it, then restarted
"""


@pytest.mark.parametrize(
    "case",
    ["external answered here", "ask_user answered here", "external answered in the store"],
)
def test_an_answer_survives_a_restart_before_complete(db: str, runs: Path, case: str) -> None:
    """The answered call's result is written with its answer, in one transaction: a kernel
    killed after ``chat.answer`` (or after a load that applied an answer given through
    ``store.answer``) and before ``complete()`` loses neither, and the external tool's body
    never runs."""
    external = case.startswith("external")
    name, args, answer = (
        ("countersign", {"party": "ACME"}, "signed by legal")
        if external
        else ("ask_user", {"question": "Which account should I refund?"}, "account 7")
    )
    given = f"TOOL, ARGS, ANSWER = {name!r}, {args!r}, {answer!r}\n"  # the child's constants
    here = case.endswith("here")
    made = _child(given + PARK, db, runs, "answer" if here else "park")
    assert made.returncode == (-signal.SIGKILL if here else 0), made.stderr
    chat_id = _line(made.stdout, "ID")
    if not here:  # answered from a script, then a notebook loads the chat only to look
        with open_store(db) as store:
            store.answer("x1", answer, by="legal", chat_id=chat_id)
        looked = _child(given + LOOK, db, runs, chat_id)
        assert looked.returncode == -signal.SIGKILL, looked.stderr
        assert "('x1', 'ok')" in _line(looked.stdout, "LOOKED")

    seen: list[list[str]] = []
    prov = ScriptedProvider([_reader(seen, name, args)], repeat_last=True)
    chat = Chat.load(chat_id, store=db, tools=[countersign, nbagent.ask_user], provider=prov)
    try:
        call = chat.get_call("x1")
        assert call.status == "ok", "the answered call came back runnable"
        assert chat.pending_inputs == []
        answered = chat.complete()
        assert seen == [[answer]]
        assert answered is not None and answered.content == f"done: {answer}"
    finally:
        chat.close()
    assert _ran(runs) == []  # the external tool's body never ran, in any process


ASK = """
def slow(req):
    print("THINKING", flush=True)
    time.sleep(60)
    return reply("too late")
turn, how = int(sys.argv[2]), sys.argv[3]
script = [reply("first answer"), slow] if turn == 2 else [slow]
chat = Chat(provider=ScriptedProvider(script), store=DB)
if turn == 2:
    chat.ask("first question")
print("ID", chat.id, flush=True)
if how == "async":
    asyncio.run(chat.ask_async("refund order 42 please"))
else:
    chat.ask("refund order 42 please")
"""


@pytest.mark.parametrize("how", ["sync", "async"])
@pytest.mark.parametrize("turn", [1, 2])
def test_a_question_survives_a_kill_while_the_model_thinks(
    db: str, runs: Path, turn: int, how: str
) -> None:
    """The turn's question is on disk before its first model request is sent: killed while
    the model thinks, the chat loads with it, and ``complete()`` asks the model again."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HEAD + ASK, db, str(turn), how],
        env={**os.environ, "RUNS": str(runs)},
        stdout=subprocess.PIPE,
        text=True,
    )
    chat_id = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("ID"):
                chat_id = line.split()[1]
            if line.startswith("THINKING"):
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert chat_id is not None and proc.returncode == -signal.SIGKILL

    prov = ScriptedProvider([reply("answer after restart")], repeat_last=True)
    chat = Chat.load(chat_id, store=db, provider=prov)
    try:
        before = [("user", "first question"), ("assistant", "first answer")] if turn == 2 else []
        question = ("user", "refund order 42 please")
        assert [(m.role, m.content) for m in chat.transcript] == [*before, question]
        answered = chat.complete()
        assert len(prov.requests) == 1  # asked again
        assert answered is not None and answered.content == "answer after restart"
        assert answered.turn == turn
    finally:
        chat.close()


ROUND = """
class Act(Tool):
    \"\"\"Do an action that needs approval.\"\"\"

    requires_approval = True

    def execute(self, target: str) -> str:
        ran(target)
        if target == "a":
            die()  # the kernel dies while the round's first call runs
        time.sleep(2)  # (threads: b runs beside a, and is still running when it dies)
        return "acted on " + target

chat = Chat(provider=ScriptedProvider([call_tools(
    ("act", {"target": "a"}, "ca"), ("act", {"target": "b"}, "cb"), ("act", {"target": "c"}, "cc")
)]), store=DB).with_tools(Act)
chat.with_tool_options(concurrency=sys.argv[2] == "threads" or False, max_concurrency=2)
asyncio.run(chat.ask_async("act on a, b and c"))
print("ID", chat.id, flush=True)
for c in chat.tool_calls:
    chat.approve(c)
asyncio.run(chat.complete_async())
"""


class Act(nbagent.Tool):
    """Do an action that needs approval."""

    requires_approval = True

    def execute(self, target: str) -> str:
        with open(os.environ["RUNS"], "a") as f:
            f.write(target + "\n")
        return "acted on " + target


@pytest.mark.parametrize("mode", ["sequential", "threads"])
def test_an_async_round_claims_only_the_calls_that_start(
    db: str, runs: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the async API a round claims in advance only the calls it starts at once (the
    first in sequential mode, ``max_concurrency`` of them in parallel): a kill while the
    first runs leaves in doubt only what had started; the rest run once on reload."""
    monkeypatch.setenv("RUNS", str(runs))
    made = _child(ROUND, db, runs, mode)
    assert made.returncode == -signal.SIGKILL, made.stderr
    chat_id = _line(made.stdout, "ID")
    started = _ran(runs)
    assert "a" in started and "c" not in started
    chat = Chat.load(chat_id, store=db, tools=[Act], provider=ScriptedProvider([reply("ok")]))
    try:
        status = {c.id: c.status for c in chat.tool_calls}
        if mode == "sequential":
            assert started == ["a"]
            assert status == {"ca": "in_doubt", "cb": "approved", "cc": "approved"}
        else:  # two start at once (max_concurrency=2): a and b, claimed together; c waits
            assert status == {"ca": "in_doubt", "cb": "in_doubt", "cc": "approved"}
        chat.complete()
        assert {c.id: c.status for c in chat.tool_calls}["cc"] == "ok"
    finally:
        chat.close()
    runs_of = _ran(runs)
    if mode == "sequential":
        assert runs_of == ["a", "b", "c"]  # b and c never started before: each ran once
    else:
        assert sorted(runs_of) == sorted([*started, "c"])  # c ran once; a, b not again


SLOW = """
class Act(Tool):
    \"\"\"Do an action that needs approval.\"\"\"

    requires_approval = True

    def execute(self, target: str) -> str:
        print("RUNNING", flush=True)
        time.sleep(60)
        return "acted on " + target

chat = Chat(provider=ScriptedProvider([call_tools(("act", {"target": "a"}, "ca"))]), store=DB)
chat.with_tools(Act)
chat.ask("act on a")
print("ID", chat.id, flush=True)
chat.approve(chat.pending_approvals[0])
chat.complete()
"""


def test_a_claim_made_on_another_host_names_claim_timeout(backend: Any, runs: Path) -> None:
    """A call left running by a process on another host (its container replaced) cannot be
    checked from here: the chat stays busy, and the warning says why and names
    ``claim_timeout``, which reports the call in doubt once the claim is that old."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HEAD + SLOW, backend.url],
        env={**os.environ, "RUNS": str(runs)},
        stdout=subprocess.PIPE,
        text=True,
    )
    chat_id = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("ID"):
                chat_id = line.split()[1]
            if line.startswith("RUNNING"):
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert chat_id is not None
    # the container is replaced: the claim names a host this process is not on
    (owner,) = backend.sql("SELECT claimed_by FROM tool_calls WHERE call_id = 'ca'")[0]
    backend.sql(
        "UPDATE tool_calls SET claimed_by = ? WHERE call_id = 'ca'",
        ("old-container-7f3a:" + owner.split(":", 1)[1],),
    )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat = Chat.load(chat_id, store=backend.url, tools=[Act], provider=ScriptedProvider([]))
    try:
        said = " ".join(str(w.message) for w in caught if w.category is StoreConflictWarning)
        assert "another host (old-container-7f3a)" in said
        assert "claim_timeout" in said
        chat.complete()
        assert chat.last_step is not None and chat.last_step.kind == "busy"
    finally:
        chat.close()

    time.sleep(0.05)
    store = backend.open(claim_timeout=0.01)
    try:
        chat = Chat.load(chat_id, store=store, tools=[Act], provider=ScriptedProvider([]))
        assert chat.get_call("ca").status == "in_doubt"
        chat.close()
    finally:
        store.close()


def test_an_answer_stored_without_its_result_is_applied_on_load(db: str, runs: Path) -> None:
    """A store an older nbagent wrote: an answer marked applied (its ``InputAnswered``
    written alone, as that version did at once) and the call's result never written (the
    process was killed before the end of its step). Loaded, the call is answered from the
    stored answer, never run as if nobody had answered."""
    given = "TOOL, ARGS, ANSWER = 'countersign', {'party': 'ACME'}, None\n"
    made = _child(given + PARK, db, runs, "park")
    assert made.returncode == 0, made.stderr
    chat_id = _line(made.stdout, "ID")
    with open_store(db) as store:
        store.answer("x1", "signed by legal", by="legal", chat_id=chat_id)
        applied = InputAnswered(
            chat_id=chat_id,
            seq=store.load(chat_id).next_seq,
            call=None,
            input_id="x1",
            action="accept",
            data="signed by legal",
            by="legal",
            reason=None,
            elsewhere=True,
        )
        assert store.write(chat_id, [codec.encode(applied, False, {})]) is None
        assert store.input_answers(chat_id, ["x1"])["x1"].applied

    seen: list[list[str]] = []
    prov = ScriptedProvider([_reader(seen, "countersign", {"party": "ACME"})], repeat_last=True)
    chat = Chat.load(chat_id, store=db, tools=[countersign], provider=prov)
    try:
        assert chat.get_call("x1").status == "ok"
        chat.complete()
        assert seen == [["signed by legal"]]
    finally:
        chat.close()
    again = Chat.load(chat_id, store=db, tools=[countersign], provider=prov)  # written so
    try:
        assert again.get_call("x1").status == "ok"
    finally:
        again.close()
    assert _ran(runs) == []
