"""Version 7: a call's MCP server and whether the provider runs it (hosted) are stored."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from nbagent import Chat
from nbagent.store import SCHEMA_VERSION, SQLiteStore
from nbagent.store import _migrations as migrations

sys.path.insert(0, str(Path(__file__).parent))
from _agent import Refund


def test_a_version_6_store_gains_server_and_hosted_and_its_calls_are_local(
    tmp_path: Path,
) -> None:
    old = tmp_path / "v6.db"
    conn = sqlite3.connect(old, isolation_level=None)
    try:
        migrations.migrate(conn, upto=6)
    finally:
        conn.close()
    with SQLiteStore(old) as store:  # migrated to the current version on open
        assert store.schema_version == SCHEMA_VERSION >= 7
        chat = Chat(model="demo", store=store, display=False).with_tools(Refund)
        chat.ask("Refund order 42")
        [pending] = store.pending_approvals()
        assert (pending.server, pending.hosted) == (None, False)
        loaded = Chat.load(chat.id, store=store, tools=[Refund], display=False)
        call = loaded.pending_approvals[0]
        assert (call.server, call.hosted) == (None, False)
        assert "hosted" not in repr(pending)
    with sqlite3.connect(old) as conn:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(tool_calls)")}
        names = [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY version")]
    assert {"server", "hosted"} <= columns
    assert "m007_call_server" in names
