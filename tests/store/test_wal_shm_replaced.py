"""A store's ``-wal`` or ``-shm`` deleted or replaced while it is open: nothing runs twice,
nothing is lost.

SQLite keeps the ``-wal`` and ``-shm`` it opened, as it keeps the database file. A sync
client, a clean-up script or a half-done ``rm agent.db*`` that removes one of them while a
kernel holds a chat split the store in two: after the ``-shm`` went, the kernel kept its old
index of the log while every new process built a fresh one, each wrote over the other's
log frames (``PRAGMA integrity_check`` still said ``ok``), and a call approved and run in
another process showed as awaiting approval in the kernel, ran again when approved there,
and the other process's decision vanished; after the ``-wal`` went, the kernel's commits
went into a file nobody else could read, and a crash brought back a call that had already
run. Worse, a store holding the old files that closed last copied its stale view back and
deleted the log the others had written.

Now the store looks at all three files at each transaction: a change raises ``StoreError``
naming the file, before anything is decided or run; a connection holding an old file never
checkpoints it back (its checkpointer's neither), and this process opens no new store on a
file whose old ``-shm`` it still holds. Every "other process" is a real ``python``
subprocess (``_agent.py``); the tool counts its runs in a file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, StoreError
from nbagent.store import SQLiteStore
from nbagent.store import _checkpointer as checkpointer
from nbagent.testing import ScriptedProvider, reply

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import Refund, count  # noqa: E402


def _env(counter: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBAGENT_TEST_")}
    env["NBAGENT_TEST_COUNTER"] = str(counter)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def run_agent(*args: str, env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(HERE / "_agent.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"agent {args} failed ({proc.returncode}):\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.fixture
def counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(path))
    return path


def _delete(path: str) -> None:
    os.remove(path)


def _replace(path: str) -> None:
    """A copy put in its place (a sync client, a restore): the same bytes, another file."""
    shutil.copyfile(path, path + ".copy")
    os.replace(path + ".copy", path)


CHANGES = [pytest.param(_delete, id="deleted"), pytest.param(_replace, id="replaced")]


def _decided_elsewhere(db: Path, chat_id: str, call_id: str, env: dict[str, str]) -> None:
    """Another process approves the call and completes the chat: the tool runs there."""
    assert run_agent("approve", str(db), call_id, env=env)["status"] == "approved"
    assert run_agent("complete", str(db), chat_id, env=env)["status"] == "complete"


def _sql_elsewhere(db: Path, statement: str) -> str:
    """One statement in another process (its own connection, its own view of the files)."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "print(c.execute(sys.argv[2]).fetchone()[0]); c.close()",
            str(db),
            statement,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _as_stored(db: Path, chat_id: str) -> Chat:
    """The chat as a process opening the file now reads it (this one holds nothing of it)."""
    assert _sql_elsewhere(db, "PRAGMA integrity_check") == "ok"
    with SQLiteStore(db) as store:
        loaded = Chat.load(chat_id, store=store, tools=[Refund])
        loaded.close()
    return loaded


@pytest.mark.parametrize("change", CHANGES)
def test_an_approved_call_run_elsewhere_after_the_shm_changed_never_runs_here(
    tmp_path: Path, counter: Path, change: Callable[[str], None]
) -> None:
    db = tmp_path / "agent.db"
    chat = Chat(model="demo", store=str(db)).with_tools(Refund)
    chat.ask("Refund order 42")
    call = chat.pending_approvals[0]
    change(f"{db}-shm")
    _decided_elsewhere(db, chat.id, call.id, _env(counter))
    assert count(counter) == 1
    with pytest.raises(StoreError) as raised:
        chat.approve(call)  # this kernel's index still shows the call waiting
    text = str(raised.value)  # deleted, the other process made another: replaced either way
    assert f"the file {db}-shm" in text and "was replaced by another file" in text, text
    assert "Nothing is decided" in text
    with pytest.raises(StoreError, match="-shm"):
        chat.complete()
    assert count(counter) == 1
    chat.close()
    stored = _as_stored(db, chat.id)  # what the other process wrote is all there
    assert stored.status == "complete" and count(counter) == 1
    (stored_call,) = stored.tool_calls
    assert stored_call.status == "ok"
    assert stored_call.decision is not None and stored_call.decision.by == "script"


@pytest.mark.parametrize("change", CHANGES)
def test_a_store_holding_the_old_shm_closes_without_undoing_what_others_wrote(
    tmp_path: Path, counter: Path, change: Callable[[str], None]
) -> None:
    """Closing alone did it: the last connection to close copies the log back through its
    index and deletes the log; through the old index, the other process's commits went."""
    db = tmp_path / "agent.db"
    store = SQLiteStore(db)
    chat = Chat(model="demo", store=store).with_tools(Refund)
    chat.ask("Refund order 42")
    call = chat.pending_approvals[0]
    change(f"{db}-shm")
    _decided_elsewhere(db, chat.id, call.id, _env(counter))
    chat.close()
    store.close()
    stored = _as_stored(db, chat.id)
    assert stored.status == "complete" and stored.tool_calls[0].status == "ok"
    assert count(counter) == 1


CRASHING_KERNEL = """
import json, os, sys
sys.path.insert(0, {here!r})
import nbagent
from nbagent import Chat, StoreError
from _agent import Refund
nbagent.configure(quiet=True, display=False)
db = sys.argv[1]
chat = Chat(model="demo", store=db).with_tools(Refund)
chat.ask("Refund order 42")
call_id = chat.pending_approvals[0].id
chat.close()
chat = Chat.load(chat.id, store=db, tools=[Refund])  # the kernel holds the chat again
os.remove(db + "-wal")  # a clean-up of agent.db*, half done
error = None
try:
    chat.approve(call_id)
    chat.complete()
except StoreError as exc:
    error = str(exc)
print(json.dumps({{"chat_id": chat.id, "call_id": call_id, "error": error}}), flush=True)
os._exit(0)  # the kernel dies: nothing closes
"""


def test_a_call_approved_after_the_wal_was_deleted_is_not_run_into_a_lost_log(
    tmp_path: Path, counter: Path
) -> None:
    """The kernel's approval, the tool's run and its result went into the deleted log; the
    kernel died; the call came back awaiting approval and ran a second time."""
    db = tmp_path / "agent.db"
    script = tmp_path / "kernel.py"
    script.write_text(CRASHING_KERNEL.format(here=str(HERE)))
    proc = subprocess.run(
        [sys.executable, str(script), str(db)],
        env=_env(counter),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["error"] is not None, "the approval went into the deleted log"
    assert f"the file {db}-wal" in out["error"] and "was deleted" in out["error"]
    assert count(counter) == 0  # nothing ran on the strength of a write that went nowhere
    with SQLiteStore(db) as store:
        chat = Chat.load(out["chat_id"], store=store, tools=[Refund])
        assert chat.status == "awaiting_approval"
        chat.approve(out["call_id"])
        chat.complete()
        assert chat.status == "complete"
        chat.close()
    assert count(counter) == 1


OPEN_ELSEWHERE = (
    "import sys\n"
    "from nbagent import StoreError\n"
    "from nbagent.store import SQLiteStore\n"
    "try:\n"
    "    print(len(SQLiteStore(sys.argv[1]).chats()))\n"
    "except StoreError as exc:\n"
    "    print(exc)\n"
)


def test_another_process_meeting_a_log_shorter_than_its_index_is_told_why(
    tmp_path: Path, counter: Path
) -> None:
    """The ``-wal`` deleted while this process's commits were in it: the index (``-shm``)
    still counts them, and another process read 'disk I/O error (SQLITE_IOERR_SHORT_READ)'
    and nothing more, until this process let go of the old log."""
    db = tmp_path / "agent.db"
    store = SQLiteStore(db)
    chat = Chat(model="demo", store=store).with_tools(Refund)
    chat.ask("Refund order 42")
    os.remove(f"{db}-wal")

    def elsewhere() -> str:
        out = subprocess.run(
            [sys.executable, "-c", OPEN_ELSEWHERE, str(db)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    said = elsewhere()
    assert "SQLITE_IOERR_SHORT_READ" in said and f"{db}-wal is shorter" in said, said
    with pytest.raises(StoreError, match="-wal"):
        chat.approve(chat.pending_approvals[0])
    chat.close()
    store.close()  # what was only in the deleted log is gone with it; the file reads again
    assert elsewhere() == "0"
    assert count(counter) == 0


def test_this_process_opens_no_new_store_on_a_file_whose_old_shm_it_holds(
    tmp_path: Path, counter: Path
) -> None:
    """SQLite maps one ``-shm`` per database file per process: a store opened again (a
    ``Chat.load`` after the error) used the old index too, read the call as waiting, and
    ran it again when approved. It is refused until the old connections are closed."""
    db = tmp_path / "agent.db"
    chat = Chat(model="demo", store=str(db)).with_tools(Refund)
    chat.ask("Refund order 42")
    call = chat.pending_approvals[0]
    os.remove(f"{db}-shm")
    _decided_elsewhere(db, chat.id, call.id, _env(counter))
    with pytest.raises(StoreError) as raised:
        Chat.load(chat.id, store=str(db), tools=[Refund])
    text = str(raised.value)
    assert f"{db}-shm" in text and "chat.close()" in text, text
    with pytest.raises(StoreError, match="still open in this process"):
        SQLiteStore(db)
    copy = chat.fork(store=tmp_path / "elsewhere.db")  # the chat, whole, into another file
    assert copy.transcript == chat.transcript
    copy.close()
    assert count(counter) == 1
    chat.close()  # the last connection holding the old index: the file opens again
    loaded = Chat.load(chat.id, store=str(db), tools=[Refund])
    assert loaded.status == "complete" and loaded.tool_calls[0].decision.by == "script"  # type: ignore[union-attr]
    loaded.close()
    assert count(counter) == 1


def test_the_checkpointer_never_copies_the_log_back_through_an_old_shm(
    tmp_path: Path, counter: Path
) -> None:
    """The checkpointer's connection shares the process's index of the file: after the
    ``-shm`` was replaced and another process started the log over and wrote more of it, a
    pass copied the other process's frames back to the pages the old index named (the file
    damaged: ``integrity_check`` failed)."""
    db = tmp_path / "agent.db"
    store = SQLiteStore(db)
    cp = store._checkpointer
    cp._checkpoint(False)  # its connection is open on the files
    chat = Chat(model="demo", store=store).with_tools(Refund)
    chat.ask("Refund order 42")
    call = chat.pending_approvals[0]
    talk = Chat(provider=ScriptedProvider([reply("Noted.")] * 8), store=store)
    for i in range(8):  # pages in the log the checkpointer has not copied back yet
        talk.ask(f"Note {i}")
    os.remove(f"{db}-shm")
    _sql_elsewhere(db, "PRAGMA wal_checkpoint(TRUNCATE)")  # another process: a new index
    _sql_elsewhere(  # ... which starts the log over, and writes more of it than this one had
        db,
        "INSERT INTO blobs SELECT hex(randomblob(16)), 'x', 4000, randomblob(4000), '' "
        "FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) "
        "SELECT i FROM n) RETURNING 1",
    )
    _decided_elsewhere(db, chat.id, call.id, _env(counter))
    cp._checkpoint(True)  # a pass in this process, as a commit would ask for
    assert cp._conn is None  # it let go of the old files, and opened nothing through them
    chat.close()
    talk.close()
    store.close()
    stored = _as_stored(db, chat.id)
    assert stored.status == "complete" and count(counter) == 1


def test_the_stores_own_checkpoints_never_change_the_files_it_checks(
    tmp_path: Path, counter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite truncates the ``-wal`` (a RESTART, the TRUNCATE past the hard limit,
    ``journal_size_limit``) and never deletes it or the ``-shm`` while a connection is open,
    whoever else opens and closes the file: no false alarm."""
    monkeypatch.setattr(checkpointer, "HARD_LIMIT", 64 * 1024)  # a TRUNCATE every few commits
    monkeypatch.setattr(checkpointer, "WAL_LIMIT", 32 * 1024)
    db = tmp_path / "agent.db"
    with SQLiteStore(db) as store:
        env = _env(counter)
        for i in range(40):
            chat = Chat(model="demo", store=store).with_tools(Refund)
            chat.ask("Refund order 42")
            chat.approve(chat.pending_approvals[0])
            chat.complete()
            chat.close()
            if i % 10 == 0:  # another process opens, checkpoints and closes the file
                run_agent("new", str(db), env=env)
                _sql_elsewhere(db, "PRAGMA wal_checkpoint(TRUNCATE)")
            assert store.names_its_file()
        assert store._checkpointer._idle.wait(10)
        assert os.stat(f"{db}-wal").st_size < 1024 * 1024
        assert len(store.chats()) == 44
    assert count(counter) == 40
