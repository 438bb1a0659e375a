"""``SQLiteStore(path, read_only=True)``: a store this user may not write is read, and the
reader never creates a file next to it, nor stops its writer.

528897f refused a store this user cannot write when opened (a connection SQLite opened
read-only made a ``-shm`` with the file's 0444 mode that left the store unwritable for
good): reading a teammate's or a finished batch's store (``read_log``, a chat loaded to look
at, ``pending_approvals``), which worked before, raised. A read-only store reads such a file:
with no ``-wal`` and ``-shm`` next to it, ``immutable`` (SQLite's ``mode=ro`` alone creates
both, this user's, and another user's writer could not write them then); with them (a writer
has it open), through them. A writer coming after the reader opened writes as ever, and the
reader reads what it wrote. Every write raises before it starts.

Run as root, the writer and the reader are two unprivileged users (``_as_user.py``,
``_as_reader.py``) and the store's directory is shared (1777, as ``/tmp``); run as anyone
else, both are that user.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
ROOT = os.geteuid() == 0
WRITER = 65534 if ROOT else os.geteuid()
READER = 65533 if ROOT else os.geteuid()


@pytest.fixture
def folder() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="nbagent-reader-"))
    path.chmod(0o1777 if ROOT else 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _env(counter: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBAGENT_TEST_")}
    if counter is not None:
        env["NBAGENT_TEST_COUNTER"] = str(counter)
    return env


def as_writer(*args: str | Path, counter: Path | None = None) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(HERE / "_as_user.py"), str(WRITER), *map(str, args)],
        env=_env(counter),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


class Reader:
    """A reader process with the store open, answering one command at a time."""

    def __init__(self, db: Path, *flags: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "_as_reader.py"), str(READER), str(db), *flags],
            env=_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.opened: dict[str, Any] = {"error": "not started"}
        try:
            self.opened = self._answer()
        except BaseException:
            self.close()  # not left running with its pipes open (collected in a later test)
            raise

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(self.proc.stderr.read() if self.proc.stderr else "no answer")
        return json.loads(line)  # type: ignore[no-any-return]

    def __call__(self, *command: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(" ".join(command) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def close(self) -> dict[str, Any]:
        answer: dict[str, Any] = {}
        try:
            if self.opened.get("error") is None and self.proc.poll() is None:
                answer = self("quit")
            self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    pipe.close()
        return answer


def _owners(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_uid for p in sorted(folder.iterdir())}


def _store(folder: Path, counter: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """A store of the writer's with a chat parked on an approval, closed; 0644."""
    db = folder / "agent.db"
    parked = as_writer("new", db, counter=counter)
    assert parked["status"] == "awaiting_approval"
    db.chmod(0o644)
    return db, parked


def test_another_user_reads_a_store_it_cannot_write(folder: Path) -> None:
    db, parked = _store(folder)
    if not ROOT:
        db.chmod(0o444)  # this user cannot write it either
    before = _owners(folder)
    plain = Reader(db, "--plain")
    plain.close()
    error = plain.opened["error"]
    assert error is not None and "cannot write" in error, error
    assert f"SQLiteStore('{db}', read_only=True)" in error, error
    reader = Reader(db)
    try:
        assert reader.opened["error"] is None, reader.opened
        read = reader("read", parked["chat_id"])
        assert read["error"] is None, read
        assert read["chats"] == 1 and read["messages"] >= 2, read
        assert read["pending"] == [parked["call_id"]]
        assert read["status"] == "awaiting_approval"
        assert read["loaded_pending"] == [parked["call_id"]]
        assert _owners(folder) == before  # no -wal, no -shm: nothing made next to the file
    finally:
        closed = reader.close()
    assert closed["files"] == {"agent.db": "0o444" if not ROOT else "0o644"}
    if not ROOT:
        db.chmod(0o644)
    assert as_writer("approve", db, parked["call_id"]) == {"error": None, "status": "approved"}


def test_every_write_on_a_read_only_store_raises_and_nothing_is_written(folder: Path) -> None:
    counter = folder / "ran.txt"
    db, parked = _store(folder)
    reader = Reader(db)
    try:
        wrote = reader("write", parked["call_id"], parked["chat_id"])
        assert wrote["error"] is None, wrote
        for name, error in wrote["errors"].items():
            assert error is not None, f"{name} did not raise on a read-only store"
            assert "opened read_only" in error and "nothing was written" in error, (name, error)
        assert wrote["status"] == "awaiting_approval"
        assert wrote["files"] == {"agent.db": "0o644"}
        assert reader("read")["pending"] == [parked["call_id"]]
        # decided elsewhere: the chat loaded for looking shows it as its stored events do
        # (taking the decision is a write, left to a writable copy), and runs nothing
        assert as_writer("approve", db, parked["call_id"]) == {"error": None, "status": "approved"}
        loaded = reader("read", parked["chat_id"])
        assert loaded["pending"] == [] and loaded["error"] is None, loaded
        assert loaded["loaded_pending"] == [parked["call_id"]], loaded
    finally:
        reader.close()
    assert sorted(os.listdir(folder)) == ["agent.db"]
    assert not counter.exists()
    # the writer's chat takes its decision and runs the call, once
    done = as_writer("complete", db, parked["chat_id"], counter=counter)
    assert done["status"] == "complete", done
    assert len(counter.read_text().splitlines()) == 1


def test_a_writer_coming_after_the_reader_opened_writes_and_is_read(folder: Path) -> None:
    """The reader opened the file alone (no ``-wal``): a writer then makes its ``-wal`` and
    ``-shm`` as itself, decides and closes (its checkpoint rewrites the file), another dies
    with the store open, a third writes through what it left while the reader reads through
    it too: each write is read, none is refused because of the reader, and nothing in the
    directory is the reader's."""
    db, parked = _store(folder)
    reader = Reader(db)
    try:
        assert reader.opened["error"] is None, reader.opened
        assert reader("read")["pending"] == [parked["call_id"]]
        assert as_writer("approve", db, parked["call_id"]) == {"error": None, "status": "approved"}
        read = reader("read")
        assert read["error"] is None and read["pending"] == [], read
        died = as_writer("allow", db)  # dies with the store open: -wal and -shm stay
        assert (folder / "agent.db-wal").exists()
        read = reader("read", died["chat_id"])
        assert read["error"] is None and read["chats"] == 2, read
        assert read["status"] == "ready" and read["pending"] == [], read  # always allowed
        third = as_writer("new", db)  # the reader holds the -wal: the writer writes on
        assert third["status"] == "awaiting_approval", third
        read = reader("read", third["chat_id"])
        assert read["error"] is None and read["chats"] == 3, read
        assert read["pending"] == [third["call_id"]] and read["status"] == "awaiting_approval"
        if ROOT:
            assert READER not in _owners(folder).values(), _owners(folder)
    finally:
        reader.close()
    if ROOT:
        assert READER not in _owners(folder).values(), _owners(folder)
    assert as_writer("open", db)["error"] is None


def test_the_writer_open_first_then_the_reader(folder: Path) -> None:
    """A writer has the store open (its ``-wal`` and ``-shm``, which the reader may not
    write): the reader reads through them, reads what the next writer writes, and leaves
    the files as they were."""
    db = folder / "agent.db"
    died = as_writer("allow", db)
    owners = _owners(folder)
    assert set(owners) == {"agent.db", "agent.db-wal", "agent.db-shm"}
    reader = Reader(db)
    try:
        read = reader("read", died["chat_id"])
        assert read["error"] is None and read["chats"] == 1 and read["status"] == "ready", read
        second = as_writer("new", db)
        read = reader("read", second["chat_id"])
        assert read["chats"] == 2 and read["pending"] == [second["call_id"]], read
    finally:
        reader.close()
    assert _owners(folder) == owners
    assert as_writer("open", db)["error"] is None


def test_a_missing_file_is_not_created(folder: Path) -> None:
    reader = Reader(folder / "none.db")
    reader.close()
    assert reader.opened["error"] is not None
    assert "no such file" in reader.opened["error"]
    assert reader.opened["files"] == {}
