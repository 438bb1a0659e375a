"""An answer is scrubbed of keys as a tool's result is: an external tool's answer is its
result, and ``ask_user``'s reaches the model too. Before, a result a tool returned was
scrubbed of the chat's provider key and of ``sk-...`` tokens, but the same text given as
an external call's answer (or typed as an ``ask_user`` answer) reached the model, the
record, ``read_log`` and the store in clear.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, ModelRequest, ask_user, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

SK = "sk-proj-Abc123Def456Ghi789Jkl012"
OWN = "zz-ORG-7f3a9c1b2d4e5f60718293a4b5c6d7e8"  # a key of no known shape: the provider's


@tool(external=True)
def fetch_config(name: str) -> str:
    """Fetch a config from the ops team.

    Args:
        name: Which.
    """


class KeyedProvider(ScriptedProvider):
    """A scripted provider with a key of its own (as a real provider's ``secrets()``)."""

    def secrets(self) -> tuple[str, ...]:
        return (OWN,)


def provider(seen: list[str]) -> KeyedProvider:
    def answer(request: ModelRequest) -> Any:
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if results:
            seen.extend(m.content for m in results)
            return reply("done")
        return call_tools(
            ("fetch_config", {"name": "b"}, "a"), ("ask_user", {"question": "Token?"}, "q")
        )

    return KeyedProvider([answer], repeat_last=True)


def everything_said(chat: Chat, seen: list[str]) -> str:
    return "\n".join(
        [
            *seen,
            repr(chat.record.inputs),
            repr([r.data for r in chat.record.inputs]),
            nbagent.read_log(chat).to_string(),
            repr(chat.transcript),
        ]
    )


def test_answers_reach_no_one_with_a_key(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    seen: list[str] = []
    chat = Chat(provider=provider(seen), display=False, store=str(path))
    chat.with_tools(fetch_config, ask_user).ask("go")
    chat.answer("a", {"config": f"api_key={OWN}", "token": SK})
    chat.answer("q", f"my key is {SK} and {OWN}")
    chat.complete()
    said = everything_said(chat, seen)
    chat.close()
    assert seen and "sk-***" in said  # what the person said is still there, less the keys
    assert SK not in said and OWN not in said
    with sqlite3.connect(path) as db:
        tables = [t for (t,) in db.execute("select name from sqlite_master where type='table'")]
        rows = "".join(str(r) for t in tables for r in db.execute(f"select * from {t}"))
    assert SK not in rows and OWN not in rows


def test_an_answer_given_through_the_store_is_scrubbed_when_the_chat_applies_it(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "s.db")
    seen: list[str] = []
    chat = Chat(provider=provider(seen), display=False, store=path)
    chat.with_tools(fetch_config, ask_user).ask("go")
    store = nbagent.open_store(path)
    try:
        store.answer("a", f"api_key={OWN}", chat_id=chat.id)
        store.answer("q", f"token {SK}", chat_id=chat.id)
    finally:
        store.close()
    chat.refresh()
    chat.complete()
    said = everything_said(chat, seen)
    chat.close()
    assert seen and SK not in said and OWN not in said


@settings(max_examples=40, deadline=None)
@given(
    before=st.text(alphabet=st.characters(categories=["L", "N", "Zs"]), max_size=20),
    after=st.text(alphabet=st.characters(categories=["L", "N", "Zs"]), max_size=20),
)
def test_no_answer_around_a_key_lets_it_through(before: str, after: str) -> None:
    seen: list[str] = []
    chat = Chat(provider=provider(seen), display=False)
    chat.with_tools(fetch_config, ask_user).ask("go")
    chat.answer("a", f"{before} {OWN} {after}")
    chat.answer("q", f"{before} {SK} {after}")
    chat.complete()
    said = everything_said(chat, seen)
    assert OWN not in said and SK not in said


def test_a_declines_reason_is_scrubbed_too() -> None:
    """A reason given with chat.decline is sent to the model with the refusal: a key in it
    reached the model and the record in clear (store.decline scrubbed its copy)."""
    from nbagent import Chat, tool
    from nbagent.testing import ScriptedProvider, call_tools, reply

    @tool(external=True)
    def sign(party: str) -> str:
        """Have a contract signed.

        Args:
            party: Who signs.
        """

    chat = Chat(
        provider=ScriptedProvider([call_tools(("sign", {"party": "ACME"})), reply("ok")]),
        display=False,
    ).with_tools(sign)
    chat.ask("sign it")
    key = "sk-proj-" + "A1b2C3d4" * 4
    chat.decline(chat.pending_inputs[0], reason=f"use {key} instead")
    sent = repr(chat.transcript) + repr(chat.record.inputs) + repr(list(chat.events))
    assert key not in sent and "sk-***" in sent
