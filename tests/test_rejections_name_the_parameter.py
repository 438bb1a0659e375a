"""The answer nbagent writes for a call it rejects names what was wrong, for a tool that
handles secrets too, and still shows no secret the model wrote.

09db4a0 scrubbed every such answer whole, so ``redact_keys`` read nbagent's own template
``invalid arguments for <tool>: <parameter>: <problem>`` as a name given a value: for
``reset_password``, ``set_secret`` and ``save_api_key`` the model read ``reset_password: ***
expected string, got integer`` and could not tell which parameter to mend. Only the pieces
the model (or the provider) wrote are read as text that may hold a secret now (its
unparsable arguments, an unknown tool's name, a value or key the schema check quotes back);
nbagent's composed text is scrubbed of the provider's key and key-shaped tokens only.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import Chat, Tool, ToolCall, ToolResultMessage, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

OWN = "zz-ORG-7f3a9c1b2d4e5f60718293a4b5c6d7e8"  # a key of no known shape: the provider's
SK = "sk-proj-Abc123Def456Ghi789Jkl012"
PASSWORD = "hunter2xyz"  # what the model wrote under a password's name


class KeyedProvider(ScriptedProvider):
    """A scripted provider with a key of its own (as a real provider's ``secrets()``)."""

    def secrets(self) -> tuple[str, ...]:
        return (OWN,)


ran: list[str] = []


@tool
def set_secret(name: str, secret: str) -> str:
    """Store a secret in the vault.

    Args:
        name: Its name.
        secret: Its value.
    """
    ran.append("set_secret")
    return "stored"


@tool
def reset_password(user: str, password: str) -> str:
    """Reset a password.

    Args:
        user: Who.
        password: The new one.
    """
    ran.append("reset_password")
    return "ok"


@tool
def save_api_key(service: str, api_key: str) -> str:
    """Save a key.

    Args:
        service: Which.
        api_key: The key.
    """
    ran.append("save_api_key")
    return "ok"


@tool(requires_approval=True)
def rotate_password(user: str, password: str) -> str:
    """Rotate a password (a person approves).

    Args:
        user: Who.
        password: The new one.
    """
    ran.append("rotate_password")
    return "ok"


TOOLS = [set_secret, reset_password, save_api_key, rotate_password]


def _run(call: ToolCall, *, store: Path | None = None) -> tuple[Chat, KeyedProvider]:
    ran.clear()
    provider = KeyedProvider([call_tools(call), reply("ok")], repeat_last=True)
    chat = Chat(provider=provider, display=False, store=str(store) if store else None)
    chat.with_tools(*TOOLS).ask("go")
    return chat, provider


def _answer_everywhere(chat: Chat, provider: ScriptedProvider) -> dict[str, str]:
    """The answer to the one call, where it went: the model, the transcript, the log."""
    [result] = [m for m in chat.transcript if isinstance(m, ToolResultMessage)]
    sent = [m for m in provider.requests[-1].messages if getattr(m, "role", "") == "tool"]
    log = chat.log
    return {
        "model": "\n".join(str(m.content) for m in sent),
        "transcript": result.content,
        "log": log["result_preview"].astype(str).str.cat() + log["error"].astype(str).str.cat(),
    }


def _stored(db: Path) -> str:
    """The answers the store keeps and its decisions (the call's own name and arguments are
    the model's, kept as they came, beside them)."""
    with sqlite3.connect(db) as con:
        rows = [*con.execute("select result from tool_calls where result is not null")]
        rows += [*con.execute("select json from messages where role = 'tool'")]
        answers = [json.loads(r)["content"] for (r,) in rows]
        answers += [str(r) for r in con.execute("select reason from decisions")]
    assert len(rows) == 2
    return "\n".join(answers)


@pytest.mark.parametrize(
    ("name", "args", "wrong"),
    [
        ("set_secret", {"name": "db", "secret": 12}, "secret: expected string, got integer"),
        ("reset_password", {"user": "bob", "password": 5}, "password: expected string, got"),
        ("save_api_key", {"service": "x", "api_key": 5}, "api_key: expected string, got integer"),
        ("reset_password", {"user": "bob"}, "password: Field required"),
        ("rotate_password", {"user": "bob", "password": True}, "password: expected string, got"),
    ],
)
def test_a_schema_rejection_names_the_parameter(
    name: str, args: dict[str, Any], wrong: str, tmp_path: Path
) -> None:
    db = tmp_path / "chats.db"
    chat, provider = _run(ToolCall("k", name, args), store=db)
    surfaces = _answer_everywhere(chat, provider)
    chat.close()
    assert ran == []
    for where, text in surfaces.items():
        assert f"invalid arguments for {name}: {wrong}" in text, (where, text)
    assert f"invalid arguments for {name}: {wrong}" in _stored(db)


@pytest.mark.parametrize("pad", ["", "user: ", "; ", ", api_key: "])
def test_a_password_the_model_wrote_into_invalid_json_is_hidden(pad: str, tmp_path: Path) -> None:
    db = tmp_path / "chats.db"
    raw = '{"user": "bob", "note": "' + pad + "password=" + PASSWORD + '"'  # unterminated
    call = ToolCall("k", "reset_password", {}, raw_arguments=raw, parse_error="invalid JSON")
    chat, provider = _run(call, store=db)
    surfaces = _answer_everywhere(chat, provider)
    frames = chat.log.to_csv() + chat.messages.to_csv()
    chat.close()
    assert ran == []
    for where, text in surfaces.items():
        assert "arguments for reset_password were not valid JSON" in text, where
        assert "***" in text and "bob" in text, (where, text)
        assert PASSWORD not in text, (where, text)
    assert PASSWORD not in frames
    assert PASSWORD not in _stored(db)


def test_the_providers_key_and_a_key_shape_in_invalid_json_are_hidden(tmp_path: Path) -> None:
    """09db4a0's case, where nothing names the keys: they are hidden by what they are."""
    raw = '{"user": "bob", "note": "mine ' + OWN + " and " + SK + '"'
    call = ToolCall("k", "reset_password", {}, raw_arguments=raw, parse_error="invalid JSON")
    chat, provider = _run(call, store=tmp_path / "chats.db")
    surfaces = _answer_everywhere(chat, provider)
    chat.close()
    for where, text in surfaces.items():
        assert "mine ***" in text and OWN not in text and SK not in text, (where, text)
    assert OWN not in _stored(tmp_path / "chats.db")


def test_a_long_unparsable_text_is_hidden_before_it_is_cut() -> None:
    """The quote is cut at 400 characters: a password across the cut shows no part."""
    for at in range(380, 400):
        raw = '{"x": "' + "a" * (at - 7) + " password=" + PASSWORD + '"' + " " * 500
        call = ToolCall("k", "reset_password", {}, raw_arguments=raw, parse_error="invalid JSON")
        chat, _provider = _run(call)
        [result] = [m for m in chat.transcript if isinstance(m, ToolResultMessage)]
        assert "characters in all" in result.content
        assert not any(PASSWORD[:n] in result.content for n in range(3, len(PASSWORD) + 1)), at


@pytest.mark.parametrize(
    "name",
    [
        f"lookup password={PASSWORD}",
        f"api_key: {PASSWORD}",
        f"https://me:{PASSWORD}@example.com",
        f"lookup_{OWN}",
        f"lookup {SK}",
    ],
)
def test_an_unknown_tools_name_is_hidden_where_it_holds_a_secret(name: str, tmp_path: Path) -> None:
    db = tmp_path / "chats.db"
    chat, provider = _run(ToolCall("k", name, {"user": "bob"}), store=db)
    surfaces = _answer_everywhere(chat, provider)
    chat.close()
    assert ran == []
    for where, text in surfaces.items():
        assert "unknown tool" in text and "Available tools: " in text, where
        assert "reset_password" in text  # nbagent's own list of its tools, as it is
        for secret in (PASSWORD, OWN, SK):
            assert secret not in text, (where, text)
    for secret in (PASSWORD, OWN, SK):
        assert secret not in _stored(db)


class Register(Tool):
    """Register an account."""

    parameters = {  # noqa: RUF012 (a Tool's class attribute)
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email"},
            "password": {"type": "string", "minLength": 12},
        },
        "required": ["email", "password"],
        "additionalProperties": False,
    }

    def execute(self, **params: Any) -> str:
        ran.append("register")
        return "ok"


def test_what_the_schema_check_quotes_back_is_hidden_and_the_parameter_named() -> None:
    """A value the check quotes back, or a key the model made up, is the model's text."""
    ran.clear()
    args = {
        "email": f"password={PASSWORD}",
        "password": "short",
        f"password={PASSWORD}": 1,
    }
    provider = KeyedProvider([call_tools(("register", args, "k")), reply("ok")], repeat_last=True)
    chat = Chat(provider=provider, display=False).with_tools(Register())
    chat.ask("go")
    surfaces = _answer_everywhere(chat, provider)
    assert ran == []
    for where, text in surfaces.items():
        assert "invalid arguments for register: email: not a valid email" in text, (where, text)
        assert "password: shorter than 12" in text, (where, text)
        assert "unexpected argument" in text, (where, text)
        assert PASSWORD not in text, (where, text)


def test_a_persons_reason_with_a_password_is_still_hidden(tmp_path: Path) -> None:
    db = tmp_path / "chats.db"
    ran.clear()
    provider = KeyedProvider(
        [call_tools(("rotate_password", {"user": "bob", "password": "x"}, "k")), reply("ok")],
        repeat_last=True,
    )
    chat = Chat(provider=provider, display=False, store=str(db)).with_tools(*TOOLS)
    chat.ask("go")
    chat.deny("k", reason=f"not like this: password={PASSWORD}, key {OWN}")
    chat.complete()
    surfaces = _answer_everywhere(chat, provider)
    chat.close()
    assert ran == []
    for where, text in surfaces.items():
        assert "denied" in text and "password=***" in text, (where, text)
        assert PASSWORD not in text and OWN not in text, (where, text)
    assert PASSWORD not in _stored(db) and OWN not in _stored(db)


def test_a_hosted_calls_name_holding_a_secret_is_hidden_in_its_refusal() -> None:
    """A hosted approval request nbagent refuses itself (tool choice none) quotes its name,
    the provider's text."""
    name = f"lookup password={PASSWORD}"
    call = ToolCall("h", name, {}, server="vault", hosted=True)
    provider = KeyedProvider([call_tools(call), reply("ok")], repeat_last=True)
    chat = Chat(provider=provider, display=False).with_tools(*TOOLS)
    chat.with_tool_options(choice="none").ask("go")
    [result] = [m for m in chat.transcript if isinstance(m, ToolResultMessage)]
    assert "Not executed" in result.content
    assert PASSWORD not in result.content


# the names secret_field judges a secret's, as tool and parameter names
SECRET_WORDS = ["password", "secret", "api_key", "token", "access_token", "pwd", "credentials"]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    tool_word=st.sampled_from(SECRET_WORDS),
    param=st.sampled_from(SECRET_WORDS),
    given_value=st.sampled_from([5, 1.5, True, None, [1], {"a": 1}]),
)
def test_any_secret_named_parameter_is_named_in_its_rejection(
    tool_word: str, param: str, given_value: Any
) -> None:
    """Whatever secret's name the tool and its parameter bear, the model reads which
    parameter was wrong."""
    name = f"set_{tool_word}"
    schema = {"type": "object", "properties": {param: {"type": "string"}}, "required": [param]}
    secretive = type(
        "Secretive",
        (Tool,),
        {"name": name, "parameters": schema, "execute": lambda self, **kw: "ok", "__doc__": "Set."},
    )
    provider = KeyedProvider([call_tools((name, {param: given_value}, "k")), reply("ok")])
    chat = Chat(provider=provider, display=False).with_tools(secretive())
    chat.ask("go")
    [result] = [m for m in chat.transcript if isinstance(m, ToolResultMessage)]
    assert result.content.startswith(f"Error: invalid arguments for {name}: {param}: expected"), (
        result.content
    )
