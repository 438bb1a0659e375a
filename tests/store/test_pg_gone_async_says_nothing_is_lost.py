"""The PostgreSQL server gone (past the reconnect window) while a tool ran, under the async
driver: the error says what the sync driver says, that the tool ran, its result is kept and
``complete()`` again is safe.

``await chat.complete_async()`` raised a bare ``StoreError: cannot connect to PostgreSQL
store ...``: the step hook read the rules (``store.rule_changes``) before it looked at the
events still unwritten, so the read's error came out alone, while ``chat.complete()`` said
"N event(s) could not be written ... Nothing is lost ... continue (complete())". A person
reading only "cannot connect" could not tell whether the refund ran, nor whether running the
chat again would refund twice.
"""

from __future__ import annotations

import asyncio
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, StoreError, Tool
from nbagent.store import PostgresStore
from nbagent.testing import ScriptedProvider, call_tools, reply

sys.path.insert(0, str(Path(__file__).parent))

_server: dict[str, Any] = {}
_runs: list[int] = []


class Refund(Tool):
    """Refund an order (gated); the database goes away while it runs."""

    name = "refund"
    requires_approval = True

    def execute(self, order_id: int) -> str:
        _runs.append(order_id)
        _server["server"].pause()
        return f"refunded order {order_id}"


def _drive(chat: Chat, driver: str) -> Any:
    if driver == "async":
        return asyncio.run(chat.complete_async())
    return chat.complete()


@pytest.mark.parametrize("driver", ["async", "sync"])
def test_a_server_gone_while_a_tool_ran_says_nothing_is_lost(
    postgres_dsn: str, postgres_server: Any, monkeypatch: pytest.MonkeyPatch, driver: str
) -> None:
    from nbagent.store import _postgres

    monkeypatch.setattr(_postgres, "RECONNECT_WINDOW", 0.5)  # gone for good, sooner
    _runs.clear()
    _server["server"] = postgres_server
    provider = ScriptedProvider([call_tools(("refund", {"order_id": 7}, "r1")), reply("done")])
    chat = Chat(provider=provider, store=postgres_dsn, display=False).with_tools(Refund)
    chat.ask("refund order 7")
    chat.approve("r1")
    try:
        with pytest.raises(StoreError) as raised, warnings.catch_warnings(record=True):
            warnings.simplefilter("always")  # the write's own warning (sync): kept, retried
            _drive(chat, driver)
        text = str(raised.value)
        assert "could not be written" in text, text
        assert "Nothing is lost" in text and "complete()" in text, text
        assert chat.get_call("r1").status == "ok" and _runs == [7]
    finally:
        postgres_server.resume()
    result = _drive(chat, driver)
    assert result.content == "done" and chat.status == "complete"
    assert _runs == [7]  # the refund ran once
    chat.close()
    with PostgresStore(postgres_dsn) as store:
        assert store.call("r1", chat_id=chat.id).status == "ok"


class RemoveFile(Tool):
    """Refund an order (gated); the store's file is deleted while it runs."""

    name = "refund"
    requires_approval = True

    def execute(self, order_id: int) -> str:
        _runs.append(order_id)
        for suffix in ("", "-wal", "-shm"):
            Path(_server["db"] + suffix).unlink(missing_ok=True)
        return f"refunded order {order_id}"


@pytest.mark.parametrize("driver", ["async", "sync"])
def test_sqlite_says_the_same_when_its_file_is_gone(tmp_path: Path, driver: str) -> None:
    """SQLite's step hook wrote before it read, so it said this already: kept the same."""
    _runs.clear()
    _server["db"] = db = str(tmp_path / "agent.db")
    provider = ScriptedProvider([call_tools(("refund", {"order_id": 7}, "r1")), reply("done")])
    chat = Chat(provider=provider, store=db, display=False).with_tools(RemoveFile)
    chat.ask("refund order 7")
    chat.approve("r1")
    with pytest.raises(StoreError) as raised, warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        _drive(chat, driver)
    text = str(raised.value)
    assert "could not be written" in text and "Nothing is lost" in text, text
    assert chat.get_call("r1").status == "ok" and _runs == [7]
    with pytest.raises(StoreError, match="could not be written"):
        chat.close()  # its last events cannot be written: said at close too
