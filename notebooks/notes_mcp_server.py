"""A small MCP server for notebook 07: notes kept in a SQLite file.

Built with the official ``mcp`` SDK. Run it over stdio (what
``nbagent.MCPServer.stdio(sys.executable, [this_file, db_path])`` does)::

    python notes_mcp_server.py notes.db

Its tools carry MCP annotations, which nbagent reads to decide what needs a
human decision by default: ``list_notes`` and ``read_note`` are marked
read-only (they run freely), ``delete_note`` is marked destructive (it waits
for an approval).
"""

from __future__ import annotations

import sqlite3
import sys
from contextlib import closing

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True)
SEED = {
    "groceries": "milk, eggs, coffee",
    "standup": "demo the MCP notebook; ask about the flaky test",
    "old-draft": "an outdated draft nobody needs",
}

server = MCPServer("notes", log_level="WARNING")
DB = sys.argv[1] if len(sys.argv) > 1 else "notes.db"


def connect() -> sqlite3.Connection:
    db = sqlite3.connect(DB)
    db.execute("CREATE TABLE IF NOT EXISTS notes (title TEXT PRIMARY KEY, text TEXT NOT NULL)")
    if db.execute("SELECT COUNT(*) FROM notes").fetchone()[0] == 0:
        db.executemany("INSERT INTO notes VALUES (?, ?)", SEED.items())
    db.commit()
    return db


@server.tool(annotations=READ_ONLY)
def list_notes() -> list[str]:
    """List the titles of all notes."""
    with closing(connect()) as db:
        return [row[0] for row in db.execute("SELECT title FROM notes ORDER BY title")]


@server.tool(annotations=READ_ONLY)
def read_note(title: str) -> str:
    """Read a note by its title.

    Args:
        title: The note's title.
    """
    with closing(connect()) as db:
        row = db.execute("SELECT text FROM notes WHERE title = ?", (title,)).fetchone()
    if row is None:
        raise ToolError(f"no note called {title!r}")
    return str(row[0])


@server.tool(annotations=DESTRUCTIVE)
def delete_note(title: str) -> str:
    """Delete a note for good.

    Args:
        title: The note's title.
    """
    with closing(connect()) as db, db:
        gone = db.execute("DELETE FROM notes WHERE title = ?", (title,)).rowcount
    return f"deleted {title!r}" if gone else f"no note called {title!r}"


if __name__ == "__main__":
    server.run("stdio")
