"""Recordings keyed by incremental digests (issue 28, item 4), on SQLite and PostgreSQL.

A request's key chains the digests of its messages; a store keeps each link of
that chain once (``recording_links``) and a recording names its request's
messages by count and chain, so a long chat writes O(new messages) per request
instead of its whole history. The links are read back only to say what differs
on a miss. Recordings written before (schema version 12, every digest listed)
still replay: ``fixtures/recorded_v12.db`` was written by nbagent at commit
ec380d4 (``fixtures/make_recorded_v12.py``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, LLMToolResponse, ModelRequest, ReplayMissError, ToolCall, tool
from nbagent._recording import (
    Digests,
    Prefix,
    digest_links,
    fingerprint,
    fingerprint_json,
    linked_digests,
    request_key,
)
from nbagent._replay import PROCESS
from nbagent._types import AssistantToolCallMessage, ChatMessage, ToolResultMessage
from nbagent.store import SCHEMA_VERSION, SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

FIXTURE = Path(__file__).parent / "fixtures" / "recorded_v12.db"
QUESTION = "Weather in Paris, then Rome?"
ANSWER = "Paris and Rome are 21 C."


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    nbagent.configure(quiet=True, display=False)
    PROCESS.clear()  # only the store knows
    yield
    PROCESS.clear()


@tool
def lookup(city: str) -> str:
    """Weather for a city.

    Args:
        city: The city.
    """
    return f"{city}: 21 C"


@tool(name="lookup")
def warmer(city: str) -> str:
    """Weather for a city.

    Args:
        city: The city.
    """
    return f"{city}: 30 C"


def _script() -> list[Any]:
    """What ``fixtures/make_recorded_v12.py`` recorded."""
    return [
        call_tools(("lookup", {"city": "Paris"})),
        call_tools(("lookup", {"city": "Rome"})),
        reply(ANSWER),
    ]


class _Rounds:
    """A model asking for ``rounds`` calls, one a response, then answering."""

    name = "rounds"
    model = "rounds"

    def __init__(self, rounds: int):
        self.rounds, self.n = rounds, 0

    def complete(self, request: ModelRequest) -> LLMToolResponse:
        n, self.n = self.n, self.n + 1
        if n >= self.rounds:
            return LLMToolResponse(text="done", model="rounds", provider="rounds")
        call = ToolCall(f"call_{n}", "lookup", {"city": f"city {n}"})
        return LLMToolResponse(text="", tool_calls=(call,), stop_reason="tool_use")

    async def complete_async(self, request: ModelRequest) -> LLMToolResponse:
        return self.complete(request)


def _replay_only(store: Any, *tools: Any) -> Chat:
    return Chat(provider=ScriptedProvider([]), store=store, replay="only").with_tools(
        *(tools or (lookup,))
    )


def _miss(store: Any) -> str:
    """The explanation of a rerun whose first tool now answers 30 C."""
    chat = _replay_only(store, warmer)
    with pytest.raises(ReplayMissError) as caught:
        chat.ask(QUESTION)
    chat.close()
    return str(caught.value)


# ----------------------------------------------------------- O(new messages) a request
def test_a_long_chat_writes_each_message_digest_once(backend: Any) -> None:
    rounds = 40
    with backend.open() as store:
        chat = Chat(provider=_Rounds(rounds), store=store, max_steps=3 * rounds)
        chat.with_tools(lookup).ask("look a lot up")
        assert chat.status == "complete"
        chat.close()
    fingerprints = [r[0] for r in backend.sql("SELECT fingerprint FROM recordings")]
    assert len(fingerprints) == rounds + 1
    # a request's row names its messages by count and chain: its size does not grow
    assert len({len(f) for f in fingerprints}) <= 2  # (the count's digits: 1 then 2)
    assert max(map(len, fingerprints)) < 1000
    links = backend.sql("SELECT chain, parent, n, digests FROM recording_links")
    written = [d for _, _, _, digests in links for d in json.loads(digests)]
    assert len(written) == 1 + 2 * rounds  # every message of the last request, once
    by_chain = {chain: (parent, json.loads(d)) for chain, parent, _, d in links}
    last = max((json.loads(f)["messages"] for f in fingerprints), key=lambda m: m["n"])
    whole = linked_digests(by_chain, last["chain"])
    assert whole is not None and len(whole) == last["n"] == len(written)
    assert sorted(map(tuple, whole)) == sorted(map(tuple, written))


def test_a_miss_against_the_store_names_the_message_that_differs(backend: Any) -> None:
    with backend.open() as store:
        chat = Chat(provider=ScriptedProvider(_script()), store=store).with_tools(lookup)
        assert chat.ask(QUESTION).content == ANSWER
        chat.close()
    PROCESS.clear()
    with backend.open() as store:  # another process: the links are read from the store
        rerun = _replay_only(store)
        assert rerun.ask(QUESTION).content == ANSWER
        rerun.close()
        PROCESS.clear()
        said = _miss(store)
    assert "message 3 (tool): now 'result of lookup: Paris: 30 C'" in said, said


def test_a_missing_link_blurs_the_explanation_and_never_the_replay(backend: Any) -> None:
    with backend.open() as store:
        chat = Chat(provider=ScriptedProvider(_script()), store=store).with_tools(lookup)
        chat.ask(QUESTION)
        chat.close()
    backend.sql("DELETE FROM recording_links")
    PROCESS.clear()
    with backend.open() as store:
        chat = _replay_only(store)
        with pytest.raises(ReplayMissError) as caught:
            chat.ask("Weather in Oslo?")
        chat.close()
        said = str(caught.value)  # the nearest is known by its chain alone
        assert "differs in the messages (1 now, 1 recorded; " in said, said
        assert "which one differs is unknown" in said, said
        PROCESS.clear()
        rerun = _replay_only(store)
        assert rerun.ask(QUESTION).content == ANSWER  # the key needs no link
        rerun.close()
        PROCESS.clear()
        said = _miss(store)  # and the replayed requests wrote their links again
    assert "message 3 (tool): now 'result of lookup: Paris: 30 C'" in said, said


# ------------------------------------------------------------------ memory
def test_a_chat_with_a_store_leaves_no_recording_in_the_process(backend: Any) -> None:
    """replay="off" (the default): the store keeps the recordings, the process none (a batch
    of thousands of chats would otherwise hold thousands); the chat keeps its own."""
    with backend.open() as store:
        chat = Chat(provider=ScriptedProvider(_script()), store=store).with_tools(lookup)
        assert chat.ask(QUESTION).content == ANSWER
        assert len(PROCESS) == 0
        assert sorted(chat.recordings()) == [1, 3, 5]  # what to_pytest exports
        chat.close()
        assert sorted(chat.recordings()) == [1, 3, 5]  # its own, the store detached
        rerun = Chat(provider=ScriptedProvider([]), store=store, replay="auto")
        assert rerun.with_tools(lookup).ask(QUESTION).content == ANSWER  # from the store
        assert len(PROCESS) == 3  # replay on: the process keeps them for a rerun cell
        rerun.close()
    alone = Chat(provider=ScriptedProvider(_script())).with_tools(lookup)
    alone.ask("Weather in Paris, then Rome, please?")
    assert len(PROCESS) == 6  # no other place: the process keeps them, whatever the mode


# ------------------------------------------------------------ written before version 13
def test_recordings_written_by_version_12_replay_and_explain(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(FIXTURE, path)
    with SQLiteStore(path) as store:
        assert store.schema_version == SCHEMA_VERSION >= 14
        chat = _replay_only(store)
        assert chat.ask(QUESTION).content == ANSWER
        assert chat.steps["replayed"].tolist() == [True, True, True]
        chat.close()
        PROCESS.clear()
        said = _miss(store)
    assert "message 3 (tool): now 'result of lookup: Paris: 30 C'" in said, said


def test_rows_in_the_version_12_form_replay_on_both_stores(backend: Any) -> None:
    """PostgreSQL's old rows: the fingerprints rewritten as version 12 wrote them."""
    with backend.open() as store:
        chat = Chat(provider=ScriptedProvider(_script()), store=store).with_tools(lookup)
        chat.ask(QUESTION)
        chat.close()
        PROCESS.clear()
        old = {r.key: json.dumps(fingerprint_json(r.fingerprint)) for r in store.recordings()}
    assert len(old) == 3 and all('"messages": [[' in f for f in old.values())
    for key, fp in old.items():
        backend.sql("UPDATE recordings SET fingerprint = ? WHERE key = ?", (fp, key))
    backend.sql("DELETE FROM recording_links")
    with backend.open() as store:
        rerun = _replay_only(store)
        assert rerun.ask(QUESTION).content == ANSWER
        rerun.close()
        PROCESS.clear()
        said = _miss(store)
    assert "message 3 (tool): now 'result of lookup: Paris: 30 C'" in said, said


# ----------------------------------------------------------------- the chain, as a property
_messages = st.lists(
    st.tuples(st.sampled_from(["user", "call", "result"]), st.text(max_size=8)),
    min_size=1,
    max_size=12,
)


def _as_message(i: int, kind: str, text: str) -> Any:
    if kind == "user":
        return ChatMessage("user", text)
    if kind == "call":
        return AssistantToolCallMessage(text or None, (ToolCall(f"c{i}", "lookup", {"q": text}),))
    return ToolResultMessage(f"c{i - 1}", text, name="lookup")


@settings(max_examples=60, deadline=None)
@given(messages=_messages, cuts=st.lists(st.integers(1, 12), max_size=6))
def test_chained_keys_equal_whole_ones_and_links_hold_each_message_once(
    messages: list[tuple[str, str]], cuts: list[int]
) -> None:
    history = tuple(_as_message(i, k, t) for i, (k, t) in enumerate(messages))
    ends = sorted({min(c, len(history)) for c in cuts} | {len(history)})
    prefix, written, links = Prefix(), set[str](), dict[str, tuple[str, list[list[str]]]]()
    stored = 0
    for end in ends:  # one chat's requests, each extending the last
        request = ModelRequest(messages=history[:end])
        chained = fingerprint("p", "m", request, prefix)
        whole = fingerprint("p", "m", request)
        assert request_key(chained) == request_key(whole)
        assert list(chained["messages"]) == list(whole["messages"])
        for chain, parent, n, items in digest_links(chained["messages"], written.__contains__):
            written.add(chain)
            links[chain] = (parent, items)
            stored += len(items)
            assert n <= end
        assert linked_digests(links, chained["messages"].chain) == [
            list(x) for x in whole["messages"]
        ]
    assert stored == len(history)  # each message's digest stored once
    assert isinstance(whole["messages"], Digests)
