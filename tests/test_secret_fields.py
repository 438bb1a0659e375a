"""A secret passed by name (``"password": "hunter2hunter2"``, ``"api_key": "abcd..."``) is
shown as ``***`` wherever a call's arguments are shown, as ``redact_keys`` already hid it
in JSON text: it was in full on the card, in the edit box, in the inbox, in the saved
notebook and in ``repr(call)``. The call still runs with the real value, and an edit that
leaves the value as shown keeps it."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, tool
from nbagent._html import unredacted
from nbagent._secrets import redact_keys, redact_named, redacted, scrub, secret_field
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
    """A name that ends in a secret's word is one; a name about one is not: a person must
    see a pagination cursor, a tokenizer's marker or a count to approve the call."""
    shown_names = (
        *("max_tokens", "key", "sort_key", "author", "tokens", "order_id", "passenger"),
        *("page_token", "nextPageToken", "continuation_token", "eos_token", "token_count"),
        *("pwd", "cookie_name", "credential_id", "secret_santa", "password_hint"),
        *("pin_count", "spin", "zip_code", "country_code", "status_code", "card_type"),
        *("code", "otp_sent", "pinned", "card_last4"),
    )
    for name in shown_names:
        assert not secret_field(name), name
    hidden_names = (
        *("password", "PGPASSWORD", "apiKey", "x-api-key", "access_token", "db_pwd"),
        *("api_keys", "secrets", "passkey", "ssh_key", "refresh_token", "authToken"),
        *("private_key_pem", "privateKeyPem", "api_key_value", "password_plain", "csrf_token"),
        *("pin", "card_pin", "PIN", "cvv", "cvc", "card_cvv", "cvv2", "otp", "totp"),
        *("card_number", "cardNumber", "pin_code", "security_code", "mfaCode", "auth_code"),
        *("verification_code", "otp_code"),
    )
    for name in hidden_names:
        assert secret_field(name), name
    assert redacted({"password": ["hunter2", "s3cret"]}) == {"password": ["***", "***"]}
    assert redacted({"max_tokens": 5, "key": "user_42"}) == {"max_tokens": 5, "key": "user_42"}


def test_the_whole_value_under_a_secrets_name_is_hidden() -> None:
    """Only a string (or a list of strings) under a secret's name was hidden: a dict under
    one (``"credentials": {"username": ..., "pass": ...}``) was walked key by key and shown,
    a number (``"password": 987654``) shown as it is. Now every value under the name is:
    a dict as ``***`` whole (its keys may be secrets too: a token -> user map), a number
    or a bool as ``***``, a list item by item; nothing (``None``, ``""``, ``[]``) stays."""
    original = {
        "credentials": {"username": "bob", "pass": "CREDpass-777"},
        "password": 987654,
        "api_keys": [1234, {"pin": "x"}, ["a", 2.5]],
        "access_token": True,
        "api_key": None,
        "secret": "",
        "host": {"name": "db", "port": 5432},
    }
    shown = redacted(original)
    assert shown == {
        "credentials": "***",
        "password": "***",
        "api_keys": ["***", "***", ["***", "***"]],
        "access_token": "***",
        "api_key": None,
        "secret": "",
        "host": {"name": "db", "port": 5432},
    }
    assert redacted({"host": "db", "password": "***"}) == {"host": "db", "password": "***"}
    assert unredacted(shown, original) == original  # an edit leaving them as shown keeps them
    assert unredacted({**shown, "password": 1111}, original)["password"] == 1111
    assert unredacted({**shown, "credentials": {"username": "al"}}, original)["credentials"] == {
        "username": "al"
    }


@tool(requires_approval=True)
def unlock(credentials: dict[str, Any], password: int, door: str) -> str:
    """Unlock a door.

    Args:
        credentials: Who.
        password: A numeric code.
        door: Which door.
    """
    RAN.append({"credentials": credentials, "password": password, "door": door})
    return "open"


def test_a_dict_or_number_under_a_secrets_name_is_hidden_where_arguments_are_shown(
    tmp_path: Path,
) -> None:
    arguments = {"credentials": {"username": "bob", "pass": "CREDpass-777"}, "password": 987654}
    arguments["door"] = "front"
    provider = ScriptedProvider([call_tools(("unlock", arguments)), reply("done")])
    chat = Chat(provider=provider, display=False, store=str(tmp_path / "u.db")).with_tools(unlock)
    chat.ask("unlock")
    (call,) = chat.pending_approvals
    log = chat.log
    shown = [repr(call), str(call), *chat_mimebundle(chat).values()]
    shown += [log._repr_html_(), *log._repr_mimebundle_().values()]
    for text in shown:
        assert "CREDpass-777" not in str(text) and "987654" not in str(text), text
        assert '"username": "bob"' not in str(text)
    assert '"credentials": "***", "password": "***", "door": "front"' in repr(call)
    frame = nbagent.read_log(nbagent.SQLiteStore(str(tmp_path / "u.db")))
    assert "987654" not in frame._repr_html_() and "CREDpass" not in frame._repr_html_()
    RAN.clear()
    chat.approve(call)
    chat.complete()
    assert [arguments] == RAN  # the tool ran with the real values


def test_an_edit_never_gives_one_entrys_secret_to_another() -> None:
    """Deleting the first of two accounts in the edit box ran the call with the remaining
    (staging) host and the deleted (production) password: a value shown as *** was put
    back by its place in the list. A left-as-shown entry keeps its own secret wherever it
    moved; an entry both moved and changed cannot be matched, and the edit is refused."""
    original = {
        "accounts": [
            {"host": "prod", "password": "PRODPW-123"},
            {"host": "staging", "password": "STAGINGPW-456"},
        ]
    }
    shown = redacted(original)
    accounts = shown["accounts"]
    assert unredacted({"accounts": accounts[1:]}, original) == {
        "accounts": [{"host": "staging", "password": "STAGINGPW-456"}]
    }
    assert unredacted({"accounts": accounts[::-1]}, original) == {
        "accounts": original["accounts"][::-1]
    }
    edited_in_place = [{**accounts[0], "host": "prod-2"}, accounts[1]]
    assert unredacted({"accounts": edited_in_place}, original)["accounts"][0] == {
        "host": "prod-2",
        "password": "PRODPW-123",
    }
    moved_and_changed = [{**accounts[1], "host": "elsewhere"}]
    with pytest.raises(ValueError, match="cannot be put back"):
        unredacted({"accounts": moved_and_changed}, original)


def test_what_the_model_reads_of_an_edit_hides_the_secret() -> None:
    """The note before an edited call's result quoted the edited arguments whole: a password
    a person typed into the edit box went to the model, and into traces."""
    chat = _chat()
    chat.ask("connect")
    RAN.clear()
    chat.approve(
        chat.pending_approvals[0],
        arguments={"host": "db2", "password": "n3wpass!!", "api_key": KEY},
    )
    chat.complete()
    assert RAN[0]["password"] == "n3wpass!!"  # the tool ran with it
    sent = repr(chat.transcript)
    assert "n3wpass!!" not in sent and KEY not in sent and "db2" in sent


def test_review_keeps_a_value_left_as_printed() -> None:
    """review() prints "password": "***"; pasting that back with another host ran the tool
    with the password '***'."""
    chat = _chat()
    chat.ask("connect")
    printed: list[str] = []
    edited = json.dumps({"host": "db2", "password": "***", "api_key": "***"})
    answers = iter(["e", edited])
    RAN.clear()
    chat.review(input=lambda _p: next(answers), print=lambda *a: printed.append(" ".join(a)))
    assert RAN == [{"host": "db2", "password": PASSWORD, "api_key": KEY, "limit": 10}]
    assert PASSWORD not in "\n".join(printed)


@tool
def gist_info(gist_id: str) -> str:
    """Describe a gist.

    Args:
        gist_id: Which gist.
    """
    return (
        '{"id": "aa11", "secret": false, "has_token": true, "api_key": null}\n'
        "ssh_key=/home/u/.ssh/deploy_ed25519 (chmod 600 /home/u/.ssh/deploy_ed25519 needed)\n"
        f"Order 20240115 created; session_token=20240115; retried with api_key={KEY}"
    )


def test_the_model_reads_a_result_with_only_named_values_hidden() -> None:
    """Every ok result goes through redact_keys before the model reads it: a ``false``
    under a secret's name reached it as ``"***"``, and a value hidden under a name was hidden
    wherever else the result had it (a file path, an order number). The model reads the
    literals as they are and those values where they are not named; a value under a
    secret's name stays hidden."""
    script = [call_tools(("gist_info", {"gist_id": "aa11"}, "c1")), reply("ok")]
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(gist_info)
    chat.ask("info")
    content = chat.get_call("c1").result.content  # type: ignore[union-attr]
    assert content == (
        '{"id": "aa11", "secret": false, "has_token": true, "api_key": null}\n'
        "ssh_key=*** (chmod 600 /home/u/.ssh/deploy_ed25519 needed)\n"
        "Order 20240115 created; session_token=***; retried with api_key=***"
    )
    assert KEY not in repr(chat.transcript)


def test_shown_json_text_hides_a_named_secret_as_the_object_does() -> None:
    """Arguments that did not parse are shown as text: a value under a secret's name is
    hidden there too, a bool as well (as in the object). What the model reads goes through
    redact_keys alone, which leaves a tokenizer's "token", an "authorization" status (data)
    and a literal as they are."""
    text = json.dumps({"host": "db", "api_key": KEY, "page_token": "p2"})
    assert redact_named(text) == '{"host": "db", "api_key": "***", "page_token": "p2"}'
    text = '{"api_key": 12345678, "token": true, "secret": null, "n": 1}'  # a number too
    assert redact_named(text) == '{"api_key": "***", "token": "***", "secret": null, "n": 1}'
    data = json.dumps({"token": "Hello", "logprob": -0.1, "authorization": "approved"})
    assert redact_keys(data) == data and scrub(data, []) == data


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

    def hidden(value: Any) -> bool:  # what is shown under a secret's name: *** or nothing
        return all(map(hidden, value)) if isinstance(value, list) else value in ("***", {}, None)

    def check(shown: Any, original: Any) -> None:
        if isinstance(original, dict):
            for k, x in original.items():
                assert hidden(shown[k]) if secret_field(k) else check(shown[k], x) is None
        elif isinstance(original, list):
            for s, o in zip(shown, original, strict=True):
                check(s, o)
        else:
            assert shown == original

    check(shown, args)
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


def test_read_log_displays_them_hidden_too(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    chat = _chat(store=db)
    chat.ask("connect")
    frame = nbagent.read_log(nbagent.SQLiteStore(db))
    shown = frame._repr_html_() + frame._repr_mimebundle_()["text/plain"]
    assert PASSWORD not in shown and KEY not in shown and "db.example" in shown
    assert frame["arguments"].tolist()[0]["password"] == PASSWORD  # the values stay


def test_an_answer_or_a_result_quoting_a_secret_argument_hides_it_in_the_view() -> None:
    """The model's answer (or its text beside the call, or a tool's result) quoting a value
    the chat's calls were given under a secret's name showed it in full in the view and the
    saved notebook, though the card hid it in the arguments (traces and the judge hid it)."""

    @tool
    def login(user: str, password: str) -> str:
        """Log in.

        Args:
            user: Who.
            password: The password.
        """
        return f"logged in as {user} (password {password} accepted)"

    script = [
        call_tools(("login", {"user": "bob", "password": PASSWORD}), text=f"Using {PASSWORD}."),
        reply(f"Done: I logged bob in with {PASSWORD}; keep {PASSWORD}1 private."),
    ]
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(login)
    answer = chat.ask("log bob in")
    bundle = chat_mimebundle(chat)
    for text in bundle.values():
        assert PASSWORD not in str(text).replace(f"{PASSWORD}1", ""), text
    assert "logged bob in with ***" in bundle["text/plain"]
    assert f"keep {PASSWORD}1 private" in bundle["text/plain"]  # another word: not the value
    assert answer is not None and answer.content.count(PASSWORD) == 2  # the chat's own text
