"""A PostgreSQL URL whose password holds a '%' escape that is not UTF-8 text (``%a0``)
gives a clear ``StoreError``, with no trace of the password. Before, psycopg's
``UnicodeDecodeError`` came out of ``PostgresStore(...)`` as it was (the hypothesis
property of ``test_dsn_secrets.py`` found ``password=Zq90%a0``)."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent import StoreError
from nbagent.store import PostgresStore

pytest.importorskip("psycopg")

_REFUSED = "127.0.0.1:1"  # nothing listens: the connection is refused at once


@pytest.mark.parametrize("first", [True, False])
def test_a_password_with_a_non_utf8_escape_is_refused_clearly(first: bool) -> None:
    query = "password=Zq90%a0" if first else "sslmode=disable&password=Zq90%a0"
    with pytest.raises(StoreError, match="percent-escape that is not UTF-8") as info:
        PostgresStore(f"postgresql://agent@{_REFUSED}/agents?{query}", connect_timeout=2)
    assert "Zq90" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None


@settings(max_examples=30, deadline=None)
@given(byte=st.integers(min_value=0x80, max_value=0xFF), before=st.text("abcXYZ09", max_size=6))
def test_any_lone_high_byte_escape_gives_a_store_error(byte: int, before: str) -> None:
    password = f"Zq9{before}%{byte:02x}"
    with pytest.raises(StoreError) as info:
        PostgresStore(
            f"postgresql://agent@{_REFUSED}/agents?password={password}", connect_timeout=2
        )
    text = str(info.value)
    assert password not in text and f"Zq9{before}" not in text
    # quoted as the error says, the same password is taken (refused only by the server)
    with pytest.raises(StoreError) as quoted:
        PostgresStore(
            f"postgresql://agent@{_REFUSED}/agents?password={quote(password, safe='')}",
            connect_timeout=2,
        )
    assert "percent-escape" not in str(quoted.value)
