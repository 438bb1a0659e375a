"""A key in an answer given through the store never rests in the store.

``store.answer`` (another process, the inbox) wrote the answer as given into
``input_answers``: an ``sk-...`` key, a ``Bearer`` token or URL credentials in it stayed
there in clear, though the chat scrubs what it records when it applies the answer. Now
the store keeps the answer as the screen shows it (``***`` where a key was), the chat
applies that, and the model reads no key. ``repr`` of what the store lists
(``StoredCall``, ``StoredInput``) hides keys as ``repr(ToolCall)`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import Chat, InputError, ModelRequest, ask_user, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

if TYPE_CHECKING:
    from conftest import Backend  # tests/store's

SK = "sk-proj-Abc123Def456Ghi789Jkl012Mno345"
BEARER = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXRva2Vu.Zm9vYmFy"
PASSWORD = "hunter2-correct-horse"
ALL = (SK, BEARER, PASSWORD)


@tool(external=True)
def fetch_config(name: str) -> str:
    """Fetch a config from the ops team.

    Args:
        name: Which.
    """
    raise AssertionError("an external tool never runs here")


@tool(requires_approval=True)
def connect(host: str, api_key: str) -> str:
    """Connect to a host.

    Args:
        host: Where.
        api_key: The key.
    """
    return "connected"


def _model(
    seen: list[str], question: str = "Which token?", cls: type[ScriptedProvider] = ScriptedProvider
) -> ScriptedProvider:
    def answer(request: ModelRequest) -> Any:
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if results:
            seen.extend(m.content for m in results)
            return reply("done")
        return call_tools(
            ("fetch_config", {"name": "db"}, "a"), ("ask_user", {"question": question}, "q")
        )

    return cls([answer], repeat_last=True)


def _everything_stored(backend: Backend) -> str:
    if backend.kind == "sqlite":
        names = "SELECT name FROM sqlite_master WHERE type = 'table'"
    else:
        names = (
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
            "AND table_type = 'BASE TABLE'"
        )
    tables = [t for (t,) in backend.sql(names)]
    return "\n".join(str(r) for t in tables for r in backend.sql(f"SELECT * FROM {t}"))


def _parked(backend: Backend, seen: list[str]) -> str:
    """A stored chat parked on its external call and its question; its id (closed)."""
    chat = Chat(provider=_model(seen), display=False, store=backend.url)
    chat.with_tools(fetch_config, ask_user).ask("go")
    chat.close()
    return chat.id


def test_an_answer_given_through_the_store_is_stored_and_applied_without_its_keys(
    backend: Backend,
) -> None:
    seen: list[str] = []
    chat_id = _parked(backend, seen)
    store = backend.open()
    try:
        given_ = {
            "dsn": f"postgresql://app:{PASSWORD}@db:5432/prod",
            "header": f"Authorization: Bearer {BEARER}",
            "password": PASSWORD,
            "note": f"the key is {SK}",
        }
        a = store.answer("a", given_, by="ops", chat_id=chat_id)
        q = store.answer("q", f"use {SK}", by="ops", chat_id=chat_id)
        for si in (a, q, *store.inputs(chat_id)):
            shown = f"{si!r} {si.data!r}"
            assert not any(k in shown for k in ALL)
        assert a.data["note"] == "the key is sk-***"  # the rest of the answer is kept
        assert a.data["dsn"] == "postgresql://***@db:5432/prod"
        assert a.data["password"] == "***" and q.data == "use sk-***"
    finally:
        store.close()
    assert not any(k in _everything_stored(backend) for k in ALL)

    loaded = Chat.load(
        chat_id, store=backend.url, tools=[fetch_config], provider=_model(seen), display=False
    )
    try:
        loaded.complete()
        assert len(seen) == 2 and "sk-***" in "".join(seen)
        said = "\n".join([*seen, repr(loaded.record.inputs), repr(loaded.transcript)])
        assert not any(k in said for k in ALL)
        assert [r.answered_by for r in loaded.record.inputs] == ["ops", "ops"]
    finally:
        loaded.close()
    assert not any(k in _everything_stored(backend) for k in ALL)


def test_a_decline_reason_and_a_refused_answer_keep_the_key_out(backend: Backend) -> None:
    seen: list[str] = []
    chat_id = _parked(backend, seen)
    store = backend.open()
    try:
        store.decline("a", f"rotate {SK} first", by="ops", chat_id=chat_id)
        (a,) = [si for si in store.inputs(chat_id) if si.id == "a"]
        assert a.reason == "rotate sk-*** first"
    finally:
        store.close()
    assert SK not in _everything_stored(backend)


OWN = "zz-ORG-7f3a9c1b2d4e5f60718293a4b5c6d7e8"  # a key of no known shape: the provider's


class KeyedProvider(ScriptedProvider):
    def secrets(self) -> tuple[str, ...]:
        return (OWN,)


def test_a_decline_given_elsewhere_first_is_recorded_without_the_chats_key(
    backend: Backend,
) -> None:
    """The chat answers an input the store already has a decline for (another process was
    first): that decline is recorded instead, with its reason as the store keeps it. The store
    cannot know the chat's provider's key the reason quoted, and the chat recorded it and
    told it to the model in clear, though it hides that key in a reason given here."""
    seen: list[str] = []
    chat = Chat(provider=_model(seen, cls=KeyedProvider), display=False, store=backend.url)
    chat.with_tools(fetch_config, ask_user).ask("go")
    store = backend.open()
    try:
        store.decline("a", f"rotate {OWN} first", by="ops", chat_id=chat.id)
    finally:
        store.close()
    try:
        with pytest.raises(InputError, match="already answered elsewhere"):
            chat.answer("a", "use the old one")
        (a,) = [i for i in chat.record.inputs if i.input_id == "a"]
        assert (a.status, a.answered_by, a.reason) == ("decline", "ops", "rotate *** first")
        chat.answer("q", "fine")
        chat.complete()
        said = "\n".join([*seen, repr(chat.record.inputs), repr(chat.events)])
        assert "rotate *** first" in "".join(seen) and OWN not in said
    finally:
        chat.close()


def test_an_answer_that_needs_its_key_to_match_is_refused_with_nothing_written(
    backend: Backend,
) -> None:
    asks = call_tools(("ask_user", {"question": "Which?", "choices": ["none", SK]}, "q"))
    chat = Chat(provider=ScriptedProvider([asks]), display=False, store=backend.url)
    chat.with_tools(ask_user).ask("go")
    chat_id = chat.id
    chat.close()
    store = backend.open()
    try:
        with pytest.raises(InputError) as refused:
            store.answer("q", SK, by="ops", chat_id=chat_id)
        assert "never stored" in str(refused.value) and SK not in str(refused.value)
        with pytest.raises(InputError) as wrong:  # the check's own error quotes no key
            store.answer("q", "other", by="ops", chat_id=chat_id)
        assert SK not in str(wrong.value)
        assert [si.status for si in store.inputs(chat_id)] == ["pending"]
    finally:
        store.close()


def test_what_the_store_lists_shows_no_key(backend: Backend) -> None:
    chat = Chat(
        provider=ScriptedProvider(
            [
                call_tools(("connect", {"host": "h", "api_key": SK}, "c")),
                call_tools(("ask_user", {"question": f"Is {SK} still valid?"}, "q")),
            ]
        ),
        display=False,
        store=backend.url,
    )
    chat.with_tools(connect, ask_user).ask("go")
    chat_id = chat.id
    store = backend.open()
    try:
        (call,) = store.pending_approvals()
        assert call.arguments["api_key"] == SK  # the value itself is the call's
        assert SK not in repr(call) and "***" in repr(call)
        chat.approve("c")
        chat.complete()
        (si,) = store.pending_inputs(chat_id)
        assert SK not in repr(si) and "***" in repr(si)
    finally:
        store.close()
        chat.close()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    before=st.text(alphabet=st.characters(categories=["L", "N", "Zs", "P"]), max_size=20),
    after=st.text(alphabet=st.characters(categories=["L", "N", "Zs", "P"]), max_size=20),
    kind=st.sampled_from(["sk", "bearer", "url"]),
)
def test_no_text_around_a_key_lets_it_into_the_store(
    backend: Backend, before: str, after: str, kind: str
) -> None:
    key = {"sk": SK, "bearer": f"Bearer {BEARER}", "url": f"https://bob:{PASSWORD}@h/x"}[kind]
    secret = {"sk": SK, "bearer": BEARER, "url": PASSWORD}[kind]
    chat = Chat(provider=_model([]), display=False, store=backend.url)
    chat.with_tools(fetch_config, ask_user).ask("go")
    chat_id = chat.id
    chat.close()
    store = backend.open()
    try:
        store.answer("a", {"text": f"{before} {key} {after}"}, by="ops", chat_id=chat_id)
        store.answer("q", f"{before} {key} {after}", by="ops", chat_id=chat_id)
    finally:
        store.close()
    rows = backend.sql(
        "SELECT data FROM input_answers WHERE chat_id = ?",
        (chat_id,),
    )
    assert len(rows) == 2
    assert not any(secret in str(r) for r in rows)
