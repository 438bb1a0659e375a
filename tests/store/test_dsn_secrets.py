"""A DSN's password never reaches an error, however it is written.

- given as the URL's ``?password=`` query parameter (libpq takes it), raw or
  percent-encoded: libpq's parse errors ("invalid percent-encoded token", "unexpected
  spaces found in ...") quoted it, since only a ``user:password@`` one was scrubbed;
- in a URL one slash short (``postgresql:/user:pw@host/db``) or with another scheme
  (``postgresql+psycopg://``, ``pgsql://``): taken as a SQLite file path, the error named
  the missing "directory", password and all.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import Chat, StoreError
from nbagent.store import PostgresStore, SQLiteStore, open_store

pytest.importorskip("psycopg")

# a password that libpq may fail to parse (a lone '%', a space) or take as given
_PASSWORDS = st.text(
    alphabet=st.sampled_from("abcdefghijkXYZ0123456789%-_. ~!$'()*+,;:"), min_size=4, max_size=16
).map(lambda p: "Zq9" + p)
_REFUSED = "127.0.0.1:1"  # nothing listens: the connection is refused at once


def _error(dsn: str) -> str:
    with pytest.raises(StoreError) as info:
        PostgresStore(dsn, connect_timeout=2).close()
    return str(info.value)


def _hidden(password: str, text: str) -> bool:
    return password not in text and unquote(password) not in text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(password=_PASSWORDS, encoded=st.booleans(), first=st.booleans())
def test_a_query_string_password_never_shows(password: str, encoded: bool, first: bool) -> None:
    value = quote(password, safe="") if encoded else password
    query = f"password={value}" if first else f"sslmode=disable&password={value}"
    text = _error(f"postgresql://agent@{_REFUSED}/agents?{query}")
    assert _hidden(password, text) and _hidden(value, text), text


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://agent@db.internal/agents?password=Zq9SECRET%zq",  # a bad escape
        "postgresql://agent@db.internal/agents?password=Zq9 SECRETzq",  # a space
        "postgresql://agent@db.internal/agents?sslmode=require&password=Zq9SECRET%zq",
        "postgresql://agent@db.internal/agents?password=Zq9SECRET%2",
    ],
)
def test_a_query_string_password_libpq_cannot_parse_never_shows(dsn: str) -> None:
    text = _error(dsn)
    assert "SECRET" not in text, text
    assert "cannot open a PostgreSQL store" in text


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql:/agent:Zq9SECRET@db.internal/agents",  # one slash short
        "postgres:agent:Zq9SECRET@db.internal/agents",
        "postgresql+psycopg://agent:Zq9SECRET@db.internal/agents",  # SQLAlchemy's
        "pgsql://agent:Zq9SECRET@db.internal/agents",
        " PostgreSQL:/agent:Zq9SECRET@db.internal/agents",
    ],
)
def test_a_postgres_url_libpq_would_not_read_is_refused_unseen(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for open_it in (
        lambda: SQLiteStore(dsn),
        lambda: open_store(dsn),
        lambda: Chat(model="demo", store=dsn, display=False),
    ):
        with pytest.raises(StoreError) as info:
            open_it()
        text = str(info.value)
        assert "SECRET" not in text, text
        assert "postgresql://" in text  # what a PostgreSQL URL looks like
    assert os.listdir(tmp_path) == []  # no file, no directory made of it


@pytest.mark.parametrize("name", ["pg_data.db", "postgres.db", "psql-notes/agent.db"])
def test_a_file_named_like_postgres_is_still_a_file(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path(name).parent.mkdir(parents=True, exist_ok=True)
    with SQLiteStore(name) as store:
        assert store.chats() == []
