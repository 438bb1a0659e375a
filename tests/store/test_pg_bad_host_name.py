"""A PostgreSQL URL whose host name has an empty label (``db..internal``, ``.db``: a typo)
fails with ``StoreError`` like any host that cannot be reached. Before, Python's
``UnicodeError`` ("encoding with 'idna' codec failed (UnicodeError: label empty or too
long)", from psycopg's host name lookup) came out of ``PostgresStore(dsn)`` and
``Chat(store=dsn)`` as it was (the property of ``test_dsn_userinfo_secrets.py`` met it)."""

from __future__ import annotations

import pytest

from nbagent import Chat, StoreError
from nbagent.store import PostgresStore

pytest.importorskip("psycopg")


@pytest.mark.parametrize("host", ["db..internal", ".db", "db.internal..", "a" * 64 + ".db"])
def test_a_host_name_with_an_empty_or_long_label_fails_as_a_store_error(host: str) -> None:
    dsn = f"postgresql://agent:Zq9SECRETpw@{host}/agents"
    for open_it in (
        lambda: PostgresStore(dsn, connect_timeout=1),
        lambda: Chat(model="demo", store=dsn, display=False),
    ):
        with pytest.raises(StoreError, match="cannot connect to PostgreSQL store") as info:
            open_it()
        assert "Zq9SECRETpw" not in str(info.value)
        assert info.value.__cause__ is None and info.value.__context__ is None
