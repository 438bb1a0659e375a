"""The docs' own prose through redact_keys: the docs site and the notebooks render tool
results, and such text in a tool's result reaches the model as redact_keys leaves it. A
header's name in a Markdown code span read the closing backtick and the next word as its
value (`` `Proxy-Authorization:` header `` read ``Proxy-Authorization:*** header``), and a
literal under a secret's name lost its place before ``)`` (`` `"secret": false`), `` read
``"secret": "***"``). Every paragraph of docs/*.md that mentions a cookie, Basic, an
Authorization header or a secret reads as it is, but for the changes listed here: the
examples of secrets the docs give, which are meant to be hidden."""

from __future__ import annotations

import re
import string
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent._errors import redact_keys

DOCS = Path(__file__).resolve().parents[1] / "docs"

EXPECTED: list[tuple[str, str, str]] = [
    # (file, as written, as redact_keys shows it): an example of a secret, hidden
    ("approve-from-a-button.md", "postgresql://user:password@...", "postgresql://***@..."),
    ("controlling-tool-execution.md", "`password=...`", "`password=***`"),
    ("controlling-tool-execution.md", '`"password": "..."`', '`"password": "***"`'),
    ("controlling-tool-execution.md", "`api_key=...`", "`api_key=***`"),
    ("controlling-tool-execution.md", "`access_token: ...`", "`access_token: ***`"),
    ("controlling-tool-execution.md", '`"client_secret": "..."`', '`"client_secret": "***"`'),
    ("controlling-tool-execution.md", "`ssh_key=...`", "`ssh_key=***`"),
    ("mcp.md", "`--token=...`", "`--token=***`"),
    ("mcp.md", "`API_KEY=...`", "`API_KEY=***`"),
    ("mcp.md", "postgresql://app:pw@db/app", "postgresql://***@db/app"),
    ("mcp.md", "`secrets=[...]`", "`secrets=***`"),
    # an unquoted value given with "=" is hidden whole, a comma after it too (a password
    # holding ",]" is hidden whole): the examples' commas go with them
    ("providers.md", "`Chat(api_key=...,", "`Chat(api_key=***"),
    ("providers.md", "api_key=..., timeout", "api_key=*** timeout"),
    # nbagent's own "<tool>: <parameter>:" read as a password's name given a value: why its
    # own words are read by scrub_keys, for keys only, as this paragraph says
    ("providers.md", "reset_password: password: expected", "reset_password: *** expected"),
    ("store.md", "postgresql://agent:secret@db", "postgresql://***@db"),
    ("testing.md", "(`?api_key=...`)", "(`?api_key=***`)"),
    ("traces.md", "`passcode=2026`", "`passcode=***`"),
]
"""Each change redact_keys makes to the docs' paragraphs; anything else it changes is a
mangling (a code span's backtick read as a value, a literal lost)."""

_MENTIONS = re.compile(r"cookie|basic|authoriz|secret", re.IGNORECASE)


def _paragraphs() -> list[tuple[str, str]]:
    return [
        (page.name, paragraph)
        for page in sorted(DOCS.glob("*.md"))
        for paragraph in re.split(r"\n\s*\n", page.read_text(encoding="utf-8"))
        if _MENTIONS.search(paragraph)
    ]


def test_the_docs_paragraphs_read_as_written_but_for_their_examples_of_secrets() -> None:
    paragraphs = _paragraphs()
    assert len(paragraphs) > 20  # the docs were found
    used: set[tuple[str, str, str]] = set()
    for name, paragraph in paragraphs:
        intended = paragraph
        for change in EXPECTED:
            page, written, shown = change
            if page == name and written in intended:
                intended = intended.replace(written, shown)
                used.add(change)
        assert redact_keys(paragraph) == intended, (name, paragraph)
    assert used == set(EXPECTED), set(EXPECTED) - used  # the list is the docs' own


def test_a_header_name_in_a_code_span_reads_no_value_beyond_the_backtick() -> None:
    """A backtick right after a name's colon or ``=`` closes a Markdown code span: the word
    after it is prose; a value ending at a code span's closing backtick is hidden with the
    backtick and the punctuation after it kept."""
    for kept in (
        "the `Authorization:` or `Proxy-Authorization:` header's name",
        "a `Cookie:` / `Set-Cookie:` header",
        "(`X-Api-Key:` header) or `api_key=` argument, or `authorization=`.",
        '(`True`, `False`, `None`: `"secret": false`), `token_count=12`',
        "`api_key=None`), `password=***`, `access_token: null`.",
    ):
        assert redact_keys(kept) == kept
    for text, shown in {
        "`password=hunter22`, then": "`password=***`, then",
        "(`api_key=abc123def456`).": "(`api_key=***`).",
        "`access_token: abc123`)": "`access_token: ***`)",
        "password: `hunter22`": "password: `***`",  # a code span opened after the colon
        "password=`hunter22`": "password=`***`",
    }.items():
        assert redact_keys(text) == shown, text


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        string.ascii_letters + string.digits + "`,]})[{(#!$%*+-./:<>?@^_|~", min_size=4, max_size=24
    )
    .map(lambda p: p.strip("`"))
    .filter(lambda p: len(p) >= 4 and p.rstrip(",.") == p and "`" not in p[-2:])
    .filter(lambda p: p.lower() not in ("true", "false", "null", "none")),  # literals stay
    st.sampled_from(["password", "api_key", "DB_PASSWORD", "--token"]),
    st.sampled_from(["", ",", ").", "`"]),
)
def test_a_value_in_a_code_span_is_hidden_whole(value: str, name: str, after: str) -> None:
    """A value (backticks inside it too) given in a code span, the sentence's punctuation
    after it: all of it reads ``***``, the span's backticks and the punctuation kept."""
    text = f"use `{name}={value}`{after} here"
    assert redact_keys(text) == f"use `{name}=***`{after} here", text
