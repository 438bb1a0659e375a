"""A store file this user cannot write is refused when opened, naming the file; nothing is
left behind that outlives the read-only spell.

A brief read-only spell (``chmod 444 agent.db`` while copying it, a read-only share) left
the store unwritable for good: the connection made then was read-only, and SQLite created
the ``-shm`` next to the file with the file's mode, 0444. The ``-shm`` stayed when the file
was writable again, every later connection was read-only through it, and the error named
``agent.db`` (writable by then) and said to decide again "once the store can be written",
which never came. Now a file, ``-wal`` or ``-shm`` this user cannot write is refused before
SQLite opens anything, and a write SQLite refuses says which file or directory cannot be
written.

Root writes any file whatever its mode: run as root, each store command runs in a child
process that becomes an unprivileged user first (``_as_user.py``); run as anyone else, as
that user. Nothing is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
NOBODY = 65534
USER = NOBODY if os.geteuid() == 0 else os.geteuid()
"""The user the store commands run as (never root)."""


@pytest.fixture
def folder() -> Iterator[Path]:
    """A directory of the user's own, which that user can reach (``tmp_path`` is under a
    directory only its owner can enter)."""
    path = Path(tempfile.mkdtemp(prefix="nbagent-read-only-"))
    path.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(path, USER, USER)
    try:
        yield path
    finally:
        path.chmod(0o755)
        shutil.rmtree(path, ignore_errors=True)


def as_user(*args: str | Path, counter: Path | None = None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBAGENT_TEST_")}
    if counter is not None:
        env["NBAGENT_TEST_COUNTER"] = str(counter)
    proc = subprocess.run(
        [sys.executable, str(HERE / "_as_user.py"), str(USER), *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _modes(folder: Path) -> dict[str, str]:
    return {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in sorted(folder.iterdir())}


def test_a_read_only_file_is_refused_and_writable_again_once_its_mode_is(folder: Path) -> None:
    db = folder / "agent.db"
    parked = as_user("new", db)
    assert parked["status"] == "awaiting_approval"
    db.chmod(0o444)
    opened = as_user("open", db)
    error = opened["error"]
    assert error is not None, "a store that cannot be written was opened"
    assert f"this user (uid {USER}) cannot write {db}" in error and "mode 0444" in error, error
    assert "chmod u+w" in error and "nothing was created or changed" in error
    assert opened["files"] == {"agent.db": "0o444"}  # no -wal or -shm made with its mode
    refused = as_user("approve", db, parked["call_id"])
    assert refused["error"] is not None and str(db) in refused["error"]
    db.chmod(0o644)  # the spell is over: the store can be written again
    approved = as_user("approve", db, parked["call_id"])
    assert approved == {"error": None, "status": "approved"}


@pytest.mark.parametrize("side", ["-shm", "-wal"])
def test_a_shm_or_wal_this_user_cannot_write_is_named(folder: Path, side: str) -> None:
    """Left by a connection made while the file was read-only (an older nbagent, the
    ``sqlite3`` shell) or by another user: SQLite opened the store read-only through it."""
    db = folder / "agent.db"
    parked = as_user("allow", db)  # the process dies with the store open: its files stay
    sidecar = Path(f"{db}{side}")
    assert sidecar.exists()
    sidecar.chmod(0o444)
    before = _modes(folder)
    opened = as_user("open", db)
    error = opened["error"]
    assert error is not None, f"a store whose {side} cannot be written was opened"
    assert f"cannot write {sidecar}" in error and "mode 0444" in error, error
    assert opened["files"] == before
    sidecar.chmod(0o644)
    assert as_user("approve", db, parked["call_id"]) == {"error": None, "status": "approved"}


def test_a_directory_this_user_cannot_write_is_named(folder: Path) -> None:
    """SQLite makes the ``-wal`` and ``-shm`` next to the file: its error read 'attempt to
    write a readonly database' with the file's name, which was writable."""
    db = folder / "agent.db"
    as_user("new", db)  # closed: its -wal and -shm are gone with the last connection
    folder.chmod(0o555)
    opened = as_user("open", db)
    assert opened["error"] is not None
    assert f"cannot write the directory {folder}" in opened["error"], opened["error"]
    created = as_user("open", folder / "new.db")
    assert created["error"] is not None
    assert f"cannot write the directory {folder}" in created["error"], created["error"]
    folder.chmod(0o755)
    assert as_user("open", db)["error"] is None
