"""What an approval rule or an ``always_allow`` predicate got wrong is said without the call's
secrets: a resolver raising ``ValueError(f"password {password} is too long")`` made the
call's approval reason quote the password whole (in ``chat.log``, its display, the chat's
html/markdown/plain forms and the store's events), since only ``redact_keys`` read it and a
value is a secret there only after ``password=``; so did a resolver returning ``(True,
f"... {password}")`` (its ``repr`` was quoted) and a predicate returning the password (its
warning quoted it). A wrong value is now said by its type alone, and an error's text has
the call's values under a secret's name masked, as the tracer and the judge's prompt do."""

from __future__ import annotations

import sqlite3
import string
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent import CallbackWarning, Chat, ToolCall, tool
from nbagent._approvals import always_allow_policy, consult_resolver
from nbagent._errors import display_safe
from nbagent.testing import ScriptedProvider, call_tools, reply

PW = "Tr0ub4dorZ3xyz"


def _login(user: str, password: str) -> str:
    """Log in.

    Args:
        user: The user.
        password: The password.
    """
    return "in"


def _raises(call: ToolCall) -> bool:
    password = call.arguments["password"]
    raise ValueError(f"password {password} is too long to judge")


def _tuple(call: ToolCall) -> Any:
    return (True, f"login as {call.arguments['user']} with {call.arguments['password']}")


def _chat(resolver: Callable[[ToolCall], Any], **kw: Any) -> Chat:
    login = tool(requires_approval=resolver, name="login")(_login)
    provider = ScriptedProvider(
        [call_tools(("login", {"user": "bob", "password": PW}, "c1")), reply("done")]
    )
    return Chat(provider=provider, display=False, **kw).with_tools(login)


def shown(chat: Chat) -> list[str]:
    """Everything that shows a call's approval reason."""
    bundle = chat._repr_mimebundle_()
    bundle = bundle[0] if isinstance(bundle, tuple) else bundle
    return [
        chat.record.calls[0].approval_reason or "",
        str(chat.get_call("c1").approval),
        str(chat.log["approval_reason"].tolist()),
        display_safe(chat.log).to_string(),
        *map(str, bundle.values()),
    ]


def reason_rows(path: Path) -> list[str]:
    """The store's rows that hold the call's approval reason."""
    con = sqlite3.connect(path)
    try:
        rows = []
        for (name,) in con.execute("select name from sqlite_master where type='table'"):
            rows += [str(r) for r in con.execute(f'select * from "{name}"') if "judge" in str(r)]
        return rows
    finally:
        con.close()


def test_a_resolvers_error_quoting_the_password_shows_it_nowhere(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    chat = _chat(_raises, store=str(path))
    chat.ask("go")
    assert chat.pending_approvals[0].id == "c1"  # it waits, as before
    reason = chat.record.calls[0].approval_reason
    assert reason == (
        "login decides per call with an approval rule "
        "(approval rule raised ValueError: password *** is too long to judge)"
    )
    for text in shown(chat):
        assert PW not in text, text[:2000]
    chat.close()
    rows = reason_rows(path)
    assert rows and all(PW not in r for r in rows), rows


def test_a_resolver_returning_a_tuple_is_told_by_its_type() -> None:
    chat = _chat(_tuple)
    chat.ask("go")
    assert chat.record.calls[0].approval_reason == (
        "login decides per call with an approval rule "
        "(approval rule returned a tuple (expected True, False or None))"
    )
    for text in shown(chat):
        assert PW not in text, text[:2000]
    chat.approve("c1")
    chat.complete()
    assert chat.get_call("c1").status == "ok"


def _predicate_chat() -> Chat:
    login = tool(requires_approval=True, name="login")(_login)
    provider = ScriptedProvider(
        [call_tools(("login", {"user": "bob", "password": PW}, "c1")), reply("done")]
    )
    return Chat(provider=provider, display=False).with_tools(login)


@pytest.mark.parametrize(
    ("when", "said"),
    [
        (lambda c: c.arguments["password"], "returned a str, not True or False"),
        (lambda c: [c.arguments["password"]], "returned a list, not True or False"),
        (
            lambda c: int(c.arguments["password"]),
            "raised ValueError: invalid literal for int() with base 10: '***'",
        ),
    ],
)
def test_an_always_allow_predicate_warns_without_the_password(
    when: Callable[[ToolCall], Any], said: str
) -> None:
    chat = _predicate_chat()
    chat.always_allow("login", when=when)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat.ask("go")
    messages = [str(w.message) for w in caught if issubclass(w.category, CallbackWarning)]
    assert messages == [
        f"nbagent: the always_allow predicate of 'login' {said}; login(c1) was not approved by it"
    ]
    assert chat.pending_approvals[0].id == "c1"  # not approved by it


def test_a_model_written_tool_name_in_the_warning_is_read_as_the_model_reads_it() -> None:
    name = "password=hunter2-very-secret"
    policy = always_allow_policy(name, when=lambda c: "yes")
    call = ToolCall("c1", name, {})
    with pytest.warns(CallbackWarning) as caught:
        assert policy.matches(call) is False
    [message] = [str(w.message) for w in caught]
    assert "hunter2" not in message
    assert message == (
        "nbagent: the always_allow predicate of 'password=***' returned a str, not True or "
        "False; password=***(c1) was not approved by it"
    )


# ------------------------------------------------------------ the property
_CHARS = string.ascii_letters + string.digits + "-_.~+/!$"
_SECRET = st.text(_CHARS, min_size=4, max_size=24).filter(
    lambda s: any(c.isdigit() for c in s)
)  # a digit: never a piece of the note's or the warning's own words
_FIELD = st.sampled_from(["password", "api_key", "access_token", "client_secret", "passcode"])


def _arguments(field: str, secret: str, nested: bool) -> dict[str, Any]:
    return {"user": "bob", "credentials": {field: secret}} if nested else {field: secret}


def _quoting(secret: str, how: int) -> Any:
    """A wrong answer (or an error's text) quoting ``secret`` as code may write it."""
    return [
        f"{secret} is wrong",
        f"value {secret!r} rejected",
        f'{{"x": "{secret}"}}',
        f"({secret})",
        (True, secret),
        {"why": secret},
    ][how]


@settings(max_examples=200, deadline=None)
@given(secret=_SECRET, field=_FIELD, nested=st.booleans(), how=st.integers(0, 5))
def test_no_secret_named_argument_is_in_a_resolvers_note_or_a_predicates_warning(
    secret: str, field: str, nested: bool, how: int
) -> None:
    """A value given under a secret's name (at any depth), quoted by what a resolver or a
    predicate raised or returned, is in neither the approval reason's note nor the warning."""
    arguments = _arguments(field, secret, nested)
    quoted = _quoting(secret, how)

    def raising(call: ToolCall) -> bool:
        raise ValueError(str(quoted))

    for answer in (raising, lambda call: quoted):
        gated = tool(requires_approval=answer, name="gated")(_login)
        verdict, note = consult_resolver(gated, ToolCall("c1", "gated", arguments))
        assert verdict is None and note is not None
        assert secret not in note, note

        policy = always_allow_policy("gated", when=answer)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert policy.matches(ToolCall("c1", "gated", arguments, chat_id="x")) is False
        [warning] = [str(w.message) for w in caught]
        assert secret not in warning, warning
