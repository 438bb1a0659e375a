"""A URL's password with a ``?`` or a ``#`` in it never reaches an error.

libpq reads a URL's userinfo up to the first ``@`` before the first ``/`` (a ``?`` or a
``#`` there is part of the password: ``conninfo_to_dict`` gives ``password='Sup3r?Pw'``),
but the store read the password only up to a ``?`` or a ``#``: it found none to scrub, and
libpq's parse errors, which quote the whole URL ("end of string reached when looking for
matching "]" in IPv6 host address in URI: "postgresql://u:Sup3r?SecretPw@[::1/p1""),
showed it in full, from ``PostgresStore(dsn)`` and ``Chat(store=dsn)`` alike. Now the
password is read as libpq reads it, and a DSN libpq cannot parse is never quoted.
"""

from __future__ import annotations

import traceback
from urllib.parse import quote, unquote

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nbagent import Chat, StoreError
from nbagent.store import PostgresStore

pytest.importorskip("psycopg")

_BAD_HOSTS = ["[::1", "[]", "[::1]x", "127.0.0.1:x5432", "127.0.0.1:1"]  # the last: refused


def _texts(open_it: object) -> str:
    """Everything the error from ``open_it()`` shows: its message, repr, chain, traceback."""
    with pytest.raises(StoreError) as info:
        open_it()  # type: ignore[operator]
    seen: list[BaseException] = []
    exc: BaseException | None = info.value
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return "\n".join(
        [f"{e}\n{e!r}" for e in seen] + ["".join(traceback.format_exception(info.value))]
    )


@pytest.mark.parametrize("how", ["store", "chat"])
@pytest.mark.parametrize(
    "dsn, password",
    [
        ("postgresql://u:Sup3r?SecretPw@[::1/p1", "Sup3r?SecretPw"),
        ("postgresql://u:Sup3r#SecretPw@[::1/p1", "Sup3r#SecretPw"),
        ("postgresql://u:Sup3r?SecretPw@[]/p1", "Sup3r?SecretPw"),
        ("postgresql://u:Sup3r?SecretPw@[::1]x/p1", "Sup3r?SecretPw"),
        ("postgresql://u:Sup3r?SecretPw@127.0.0.1:x5432/p1", "Sup3r?SecretPw"),
        ("postgresql://u:Sup3r?SecretPw@127.0.0.1:1/p1", "Sup3r?SecretPw"),
    ],
)
def test_a_password_with_a_question_mark_or_hash_never_shows(
    dsn: str, password: str, how: str
) -> None:
    if how == "store":
        text = _texts(lambda: PostgresStore(dsn, connect_timeout=2))
    else:
        text = _texts(lambda: Chat(model="demo", store=dsn, display=False))
    assert "Sup3r" not in text and "SecretPw" not in text, text


def test_a_dsn_libpq_cannot_parse_is_not_quoted() -> None:
    # a plain password was scrubbed before; the rest of the URL is not shown either now
    dsn = "postgresql://u:Sup3rSecretPw@[::1/p1"
    text = _texts(lambda: PostgresStore(dsn, connect_timeout=2))
    assert "Sup3rSecretPw" not in text and "[::1/p1" not in text, text
    assert 'IPv6 host address in URI: "<the DSN>"' in text  # what libpq found wrong is said


_PASSWORDS = st.text(
    alphabet=st.sampled_from("abcXYZ0189%-_.~!$'()*+,;:?#@/[]= &\"\\"), min_size=1, max_size=12
).map(lambda p: f"Zq9{p}Wk4")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(password=_PASSWORDS, encoded=st.booleans(), host=st.sampled_from(_BAD_HOSTS))
@example(password="Zq9?/Wk4", encoded=False, host="[::1")
@example(password="Zq9?a=/Wk4", encoded=False, host="127.0.0.1:1")
@example(password="Zq9?x@Wk4", encoded=False, host="127.0.0.1:1")
@example(password="Zq9#b/Wk4", encoded=False, host="[]")
@example(password="Zq9Z'-/#\"Wk4", encoded=False, host="[::1")  # a '/' before the '#'
@example(password="Zq9$,~Z:?Y@/'Wk4", encoded=False, host="[::1]x")  # read as a database
@example(password='Zq9?"%ZWk4', encoded=False, host="127.0.0.1:1")  # a '"' in a quoted piece
def test_no_error_of_a_bad_dsn_holds_its_password(password: str, encoded: bool, host: str) -> None:
    written = quote(password, safe="") if encoded else password
    text = _texts(lambda: PostgresStore(f"postgresql://u:{written}@{host}/p1", connect_timeout=2))
    for form in {password, written, unquote(written)}:
        assert form not in text, text
    # no part of it either (libpq may read a piece of an unencoded one as a host or a query)
    assert "Zq9" not in text and "Wk4" not in text, text
