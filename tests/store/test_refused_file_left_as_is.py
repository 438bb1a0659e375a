"""A file the store refuses to open (from a newer nbagent, or not an nbagent store) is left
exactly as it is, write-ahead log included.

The refusal said "the file was not changed", but the connection that read the schema
version was a read-write one: closing it, the file's last connection, copied a ``-wal``
left next to the file (by a newer nbagent's process that was killed) into the file and
deleted the log. The version is now read on a read-only connection first, which never
checkpoints.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nbagent import Chat, StoreError
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, reply

KILLED_WRITER = """
import os, sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("PRAGMA wal_autocheckpoint = 0")
for statement in sys.argv[2:]:
    con.execute(statement)
os._exit(0)  # killed: its log stays next to the file, not copied back
"""


@pytest.mark.parametrize(
    ("statements", "says"),
    [
        (
            [
                "INSERT INTO schema_migrations VALUES (99, 'm099_future', '2030-01-01')",
                "UPDATE chats SET title = 'a newer nbagent wrote this'",
            ],
            "was written by a newer nbagent",
        ),
        (["DROP TABLE schema_migrations"], "is an SQLite database but not an nbagent store"),
    ],
    ids=["newer", "foreign"],
)
def test_a_refused_file_and_its_log_are_left_as_they_are(
    tmp_path: Path, statements: list[str], says: str
) -> None:
    db = tmp_path / "agent.db"
    with SQLiteStore(db) as store:
        Chat(provider=ScriptedProvider([reply("Hi.")]), store=store).ask("Hello")
    subprocess.run([sys.executable, "-c", KILLED_WRITER, str(db), *statements], check=True)
    wal = Path(f"{db}-wal")
    before = (db.read_bytes(), wal.read_bytes())
    assert len(before[1]) > 0  # the newer writer's commits are in its log only
    with pytest.raises(StoreError, match=says) as raised:
        SQLiteStore(db)
    assert "not changed" in str(raised.value)
    assert wal.exists(), "the log was copied into the file and deleted"
    assert (db.read_bytes(), wal.read_bytes()) == before
