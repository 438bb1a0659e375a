"""A fork's given result is scrubbed as a tool's result is.

``chat.fork(call, result=...)`` answered the call with the text as given: a DSN's
password and an ``sk-proj`` key a tool's own result would have shown as ``***`` reached
the model, ``fork.log``, ``fork.parent`` and the store (the call's row, its message, the
fork's parent link) whole. The text is scrubbed as the runner scrubs a tool's result
(the provider's key, key-shaped tokens, URL credentials), and the "already returned
this" check compares what the model would read.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

POSTGRES = "postgresql://admin:ForkPW22@db/x"
KEY = "sk-proj-FORKKEY1234567890abcd"
PROVIDER_KEY = "pk-live-Zq81LmNo24XyPq90"


@tool
def dbinfo(name: str) -> str:
    """Info.

    Args:
        name: n
    """
    return "dsn postgresql://admin:ToolPW11@db/x and key sk-proj-TOOLKEY1234567890abcd"


@tool(requires_approval=True)
def connect(host: str, password: str) -> str:
    """Connect.

    Args:
        host: h
        password: p
    """
    return f"connected {host}"


class KeyedProvider(ScriptedProvider):
    """A scripted provider with a key of its own (scrubbed from what the model reads)."""

    def secrets(self) -> tuple[str, ...]:
        return (PROVIDER_KEY,)


def _rows(db: Path) -> dict[str, str]:
    """Each table's rows as text, by table."""
    con = sqlite3.connect(db)
    try:
        tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: "\n".join(repr(r) for r in con.execute(f"SELECT * FROM {t}")) for t in tables}
    finally:
        con.close()


def _stored_text(db: Path) -> str:
    return "\n".join(_rows(db).values())


def _chat(db: Path) -> tuple[Chat, ScriptedProvider]:
    p = KeyedProvider(
        [call_tools(("dbinfo", {"name": "a"}, "k1")), reply("ok")],
        repeat_last=True,
    )
    chat = Chat(provider=p, store=db, display=False).with_tools(dbinfo)
    chat.ask("info")
    return chat, p


def test_a_forks_result_reaches_no_one_with_its_secrets(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    chat, p = _chat(db)
    given = f"dsn {POSTGRES} and key {KEY}, token {PROVIDER_KEY}"
    fork = chat.fork("k1", result=given)
    fork.complete()
    read = p.requests[-1].messages[-1].content
    assert read == "dsn postgresql://***@db/x and key sk-***, token ***"
    assert fork.get_call("k1").result.content == read  # type: ignore[union-attr]
    assert fork.log["result_preview"].tolist() == [read]
    assert fork.parent is not None and fork.parent.value == read
    stored = _stored_text(db)
    for secret in ("ForkPW22", "FORKKEY", PROVIDER_KEY, "ToolPW11", "TOOLKEY"):
        assert secret not in stored
        assert secret not in repr(fork.parent)
    loaded = Chat.load(fork.id, store=db, provider=KeyedProvider([]), tools=[dbinfo])
    assert loaded.parent == fork.parent
    assert loaded.get_call("k1").result.content == read  # type: ignore[union-attr]


def test_the_same_result_scrubbed_changes_nothing(tmp_path: Path) -> None:
    """The tool's own result, given again with other secrets in the same places, reads the
    same to the model: nothing would change."""
    chat, _ = _chat(tmp_path / "p.db")
    with pytest.raises(ValueError, match="already returned this"):
        chat.fork(
            "k1", result="dsn postgresql://admin:Other99@db/x and key sk-proj-OTHER1234567890abcd"
        )


def test_a_forks_edited_password_is_stored_as_an_approval_stores_it(tmp_path: Path) -> None:
    """Edited arguments reach the model as the normal path's edit does (the password as
    ``***``), and the fork's store holds them where an approval's edit is held (the
    decision: what the tool runs with), not in the fork's parent link as well."""
    edit = {"host": "b", "password": "N3wPassw0rd9"}

    def run(db: Path, fork: bool) -> tuple[Any, set[str]]:
        p = ScriptedProvider(
            [call_tools(("connect", {"host": "a", "password": "OldPassw0rd1"}, "k")), reply("x")],
            repeat_last=True,
        )
        chat = Chat(provider=p, store=db, display=False).with_tools(connect)
        chat.ask("go")
        if fork:
            chat.approve("k")
            chat.complete()
            f = chat.fork("k", arguments=edit)
            f.complete()
            assert f.parent is not None and f.parent.value == {"host": "b", "password": "***"}
            assert f.get_call("k").effective_arguments == edit  # it ran with them
        else:
            chat.approve("k", arguments=edit)
            chat.complete()
        held = {t for t, rows in _rows(db).items() if "N3wPassw0rd9" in rows}
        return p.requests[-1].messages[-1].content, held

    normal, normal_held = run(tmp_path / "a.db", fork=False)
    forked, fork_held = run(tmp_path / "b.db", fork=True)
    assert forked == normal
    assert "N3wPassw0rd9" not in forked and "***" in forked
    assert fork_held == normal_held
