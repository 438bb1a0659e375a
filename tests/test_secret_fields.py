"""A secret passed by name (``"password": "hunter2hunter2"``, ``"api_key": "abcd..."``) is
shown as ``***`` wherever a call's arguments are shown, as ``redact_keys`` already hid it
in JSON text: it was in full on the card, in the edit box, in the inbox, in the saved
notebook and in ``repr(call)``. The call still runs with the real value, and an edit that
leaves the value as shown keeps it."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, tool
from nbagent._html import unredacted
from nbagent._secrets import redacted, secret_field
from nbagent.inbox._present import row_view
from nbagent.notebook._fallback import chat_mimebundle
from nbagent.testing import ScriptedProvider, call_tools, reply

PASSWORD = "hunter2hunter2"
KEY = "abcd1234efgh5678ijkl"  # no provider's key shape: only its name says it is one
RAN: list[dict[str, Any]] = []


@tool(requires_approval=True)
def connect(host: str, password: str, api_key: str, limit: int = 10) -> str:
    """Connect to a database.

    Args:
        host: The host.
        password: Its password.
        api_key: The service key.
        limit: Rows at most.
    """
    RAN.append({"host": host, "password": password, "api_key": api_key, "limit": limit})
    return "connected"


def _chat(**kwargs: Any) -> Chat:
    arguments = {"host": "db.example", "password": PASSWORD, "api_key": KEY}
    script = [call_tools(("connect", arguments)), reply("done")]
    return Chat(provider=ScriptedProvider(script), display=False, **kwargs).with_tools(connect)


def test_named_secrets_are_hidden_where_arguments_are_shown() -> None:
    chat = _chat()
    chat.ask("connect")
    (call,) = chat.pending_approvals
    for text in (repr(call), str(call), *chat_mimebundle(chat).values()):
        assert PASSWORD not in str(text) and KEY not in str(text)
    assert '"password": "***"' in repr(call) and "db.example" in repr(call)
    RAN.clear()
    chat.approve(call)
    chat.complete()
    assert RAN == [{"host": "db.example", "password": PASSWORD, "api_key": KEY, "limit": 10}]
    assert chat.log["arguments"].tolist()[0]["password"] == PASSWORD  # the frame's values stay


def test_the_inbox_hides_them_too(tmp_path: Path) -> None:
    db = str(tmp_path / "inbox.db")
    chat = _chat(store=db)
    chat.ask("connect")
    box = nbagent.inbox(nbagent.SQLiteStore(db))
    rows = box.matching_rows()
    widget_rows = [row_view(r, True) for r in rows]  # what the widget draws
    shown = [*box._repr_mimebundle_().values(), repr(box), repr(widget_rows)]
    for text in shown:
        assert PASSWORD not in text and KEY not in text, text
    assert {"key": "password", "short": "***", "full": ""} in widget_rows[0]["args"]
    assert box.pending["arguments"].tolist()[0]["password"] == PASSWORD  # the frame's own


def test_an_edit_keeps_a_value_left_as_shown() -> None:
    original = {"host": "db", "password": PASSWORD, "nested": [{"client_secret": "s3cr3t"}]}
    shown = redacted(original)
    assert shown == {"host": "db", "password": "***", "nested": [{"client_secret": "***"}]}
    edited = {**shown, "host": "db2"}
    assert unredacted(edited, original) == {**original, "host": "db2"}
    assert unredacted({**shown, "password": "new"}, original)["password"] == "new"


def test_names_that_are_not_secrets_stay_shown() -> None:
    for name in ("max_tokens", "key", "sort_key", "author", "tokens", "order_id", "passenger"):
        assert not secret_field(name), name
    for name in ("password", "PGPASSWORD", "apiKey", "x-api-key", "access_token", "pwd"):
        assert secret_field(name), name
    assert redacted({"max_tokens": 5, "key": "user_42"}) == {"max_tokens": 5, "key": "user_42"}


_names = st.sampled_from(["password", "db_password", "api_key", "token", "secret", "host", "n"])
_values = st.text(string.ascii_letters + string.digits, min_size=1, max_size=12)
_args: Any = st.recursive(
    st.dictionaries(_names, _values, max_size=4),
    lambda inner: st.dictionaries(_names, st.one_of(_values, inner, st.lists(inner, max_size=2))),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(_args)
def test_shown_never_holds_a_named_secret_and_an_untouched_edit_is_the_original(
    args: dict[str, Any],
) -> None:
    shown = redacted(args)

    def named(value: Any, key: Any = None) -> list[str]:
        if isinstance(value, dict):
            return [s for k, x in value.items() for s in named(x, k)]
        if isinstance(value, list):
            return [s for x in value for s in named(x)]
        return [value] if isinstance(value, str) and secret_field(key) else []

    assert named(shown) == ["***"] * len(named(args))
    assert unredacted(shown, args) == args


def test_traces_with_content_hide_them() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    nbagent.instrument(provider, content=True)
    try:
        chat = _chat()
        chat.ask("connect")
        chat.approve(chat.pending_approvals[0])
        chat.complete()
    finally:
        nbagent.uninstrument()
    exported = "\n".join(s.to_json() for s in exporter.get_finished_spans())
    assert "db.example" in exported  # content is on: the arguments are there
    assert PASSWORD not in exported and KEY not in exported
