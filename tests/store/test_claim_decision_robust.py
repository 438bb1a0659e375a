"""A claim checks the decision the chat holds (394d47e); two ways that check stopped every
claim of an approved call, which then never ran (a critic's repros):

* on PostgreSQL, a NUL in the decision's JSON (an edited argument, a reason): decoding the
  document for ``->> 'by'`` raised "unsupported Unicode escape sequence" for every claim, and
  the error quoted the decision's JSON (a password in an edited argument) in its CONTEXT;
* a store whose ``claim`` has the signature from before (a subclass overriding it, a store of
  one's own): passed ``decision=``, each claim failed with a TypeError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat, Tool
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

RAN: list[str] = []


class Note(Tool):
    """Write a note (gated)."""

    name = "note"
    requires_approval = True

    def execute(self, text: str) -> str:
        RAN.append(text)
        return "noted"


def _parked(store: Any) -> Chat:
    provider = ScriptedProvider([call_tools(("note", {"text": "hello"}, "n1")), reply("done")])
    chat = Chat(provider=provider, store=store, display=False).with_tools(Note)
    chat.ask("go")
    assert chat.status == "awaiting_approval"
    return chat


@pytest.mark.parametrize("where", ["edit", "reason"])
def test_a_nul_in_the_decision_does_not_block_its_claim(backend: Any, where: str) -> None:
    RAN.clear()
    chat = _parked(backend.url)
    if where == "edit":
        chat.approve("n1", arguments={"text": "a\x00b"})
    else:
        chat.approve("n1", reason="ok\x00")
    chat.complete()
    assert (["a\x00b"] if where == "edit" else ["hello"]) == RAN  # once, as approved
    assert chat.status == "complete" and chat.get_call("n1").status == "ok"
    chat.close()
    with backend.open() as store:
        assert [c.status for c in store.load(chat.id).calls] == ["ok"]


def test_a_nul_in_a_reason_given_elsewhere_does_not_block_the_call(backend: Any) -> None:
    RAN.clear()
    chat = _parked(backend.url)
    with nbagent.open_store(backend.url) as store:
        store.approve("n1", chat_id=chat.id, reason="looks fine\x00", by="ops")
    chat.complete()
    assert RAN == ["hello"] and chat.get_call("n1").status == "ok"
    chat.close()


def test_a_postgres_error_hides_a_password_its_context_quotes(postgres_dsn: str) -> None:
    import psycopg

    from nbagent.store import PostgresStore

    document = '{"user": "bob", "password": "Tr0ub4dor-horse\\u0000"}'
    with (
        psycopg.connect(postgres_dsn, autocommit=True) as conn,
        pytest.raises(psycopg.Error) as caught,  # PostgreSQL quotes the JSON it read
    ):
        conn.execute("SELECT %s::json ->> 'password'", (document,))
    assert "Tr0ub4dor" in str(caught.value)  # in its CONTEXT line
    store = PostgresStore(postgres_dsn)
    try:
        text = str(store._error(caught.value))
        assert "Tr0ub4dor" not in text and "unsupported Unicode escape" in text, text
    finally:
        store.close()


class OlderStore(SQLiteStore):
    """A store of one's own written for the protocol before 394d47e: its claim takes no
    ``decision=`` (nor, in a subclass of a SQL store, ``write_job`` ``decisions=``)."""

    claims = 0

    def claim(
        self,
        chat_id: str,
        call_id: str,
        owner: str,
        entries: Sequence[Any] = (),
        state: Mapping[str, Any] | None = None,
    ) -> Any:
        type(self).claims += 1
        return super().claim(chat_id, call_id, owner, entries, state)


def test_a_store_whose_claim_takes_no_decision_still_runs_an_approved_call(
    tmp_path: Path,
) -> None:
    RAN.clear()
    store = OlderStore(tmp_path / "agent.db")
    chat = _parked(store)
    chat.approve("n1")
    chat.complete()
    assert RAN == ["hello"] and chat.get_call("n1").status == "ok"
    assert OlderStore.claims == 1
    chat.close()
    store.close()
