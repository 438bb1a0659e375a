"""What a batch keeps alive once it is over: its frames keep its run (``read_log`` and the
inbox read through it), nothing else does; with a store a done row's chat is not kept at
all (the store has it). A run still watching parked rows is kept without a frame."""

from __future__ import annotations

import asyncio
import gc
import importlib
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _batch_setup import first_user_text, tool_messages

import nbagent
from nbagent import Chat, MessageAdded, tool
from nbagent._aio import run_sync
from nbagent.providers import OpenAIProvider
from nbagent.store import SQLiteStore
from nbagent.testing import FakeLLMServer, FakeToolCall, RecordedRequest, Turn

KEY = "sk-test-memory-00000000000000"
RAN: list[str] = []
SHIPPED = threading.Event()


@tool
def look(item: str) -> str:
    """Look at an item.

    Args:
        item: The item.
    """
    RAN.append(item)
    return f"looked at {item}"


@tool(requires_approval=True)
def ship(item: str) -> str:
    """Ship an item.

    Args:
        item: The item.
    """
    RAN.append(f"ship {item}")
    SHIPPED.set()
    return f"shipped {item}"


def handler(request: RecordedRequest) -> Turn:
    """``look`` (``ship`` for a prompt starting "Ship") once, then an answer."""
    prompt = first_user_text(request)
    if tool_messages(request) == 0:
        name = "ship" if prompt.startswith("Ship") else "look"
        return Turn(tool_calls=[FakeToolCall(name, {"item": prompt.split()[-1]})])
    return Turn(text=f"finished {prompt}")


@pytest.fixture
def server() -> Any:
    with FakeLLMServer(handler=handler, strict=True) as fake:
        yield fake
        for provider in PROVIDERS:
            _close(provider)
        PROVIDERS.clear()


def _close(provider: OpenAIProvider) -> None:
    """Close the provider's clients on both loops a test's chats ran on: this thread's
    (``batch()`` in a script) and nbagent's background loop (from a cell, the inbox)."""

    async def from_a_cell() -> None:
        run_sync(provider.aclose())

    run_sync(provider.aclose())
    asyncio.run(from_a_cell())


PROVIDERS: list[OpenAIProvider] = []


def _factory(server: FakeLLMServer, refs: list[weakref.ref[Chat]]) -> Callable[[], Chat]:
    provider = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY)
    PROVIDERS.append(provider)

    def make() -> Chat:
        chat = Chat(provider=provider).with_tools(look, ship)
        refs.append(weakref.ref(chat))
        return chat

    return make


def _alive(refs: list[weakref.ref[Chat]]) -> int:
    gc.collect()
    return sum(1 for r in refs if r() is not None)


def _freed(refs: list[weakref.ref[Chat]]) -> bool:
    """Whether every chat is freed, waiting (boundedly) for threads that finish with one."""
    for _ in range(500):
        if _alive(refs) == 0:
            return True
        time.sleep(0.01)
    return False


PROMPTS = [f"Work on item{i}" for i in range(6)]


def test_without_a_store_a_done_rows_chat_is_let_go_and_its_log_kept(
    server: FakeLLMServer,
) -> None:
    """A done row can no longer change: the run keeps its chat's record (the log), not the
    chat (issue 28: 39 KiB per finished chat were never given back)."""
    refs: list[weakref.ref[Chat]] = []
    make = _factory(server, refs)
    frames = [nbagent.batch(PROMPTS, make, progress=False, name=f"free-{n}") for n in range(3)]
    assert _alive(refs) == 0  # every row is done: no chat is kept, frames or not
    for df in frames:
        log = nbagent.read_log(df)
        assert len(log) == 6 and set(log["status"]) == {"ok"}
        assert set(log["chat_id"]) == set(df["chat_id"])
    subset = frames[0][frames[0].index < 2]  # pandas operations keep the run
    assert len(nbagent.read_log(subset)) == 2
    box = nbagent.inbox(frames[0])
    assert len(box.pending) == 0
    box.close()
    del box, df, log
    frames.clear()
    assert len(nbagent.read_log(subset)) == 2
    del subset


@tool(name="look")
def lock_for(item: str) -> Any:
    """A lock for an item (a return value that cannot be pickled).

    Args:
        item: The item.
    """
    return threading.Lock()


def test_without_a_store_a_done_rows_log_keeps_none_of_its_messages_alive(
    server: FakeLLMServer,
) -> None:
    """The log a done row keeps without a store is small: its messages (and the record
    holding them) are freed, and every kind of log reads exactly as off the live chats."""
    held: list[Chat] = []
    messages: list[weakref.ref[Any]] = []
    make = _factory(server, [])

    def keep() -> Chat:
        chat = make()
        chat.on(MessageAdded, lambda e: messages.append(weakref.ref(e.message)))
        held.append(chat)
        return chat

    df = nbagent.batch(PROMPTS, keep, progress=False, name="packed")
    assert list(df["status"]) == ["done"] * 6
    live = {kind: nbagent.read_log(held, kind) for kind in ("calls", "steps", "messages")}
    held.clear()
    gc.collect()
    assert len(messages) == 6 * 4
    assert [r for r in messages if r() is not None] == []
    for kind, frame in live.items():
        order = ["chat_id", "step"] if kind != "messages" else ["chat_id", "index"]
        got = nbagent.read_log(df, kind).sort_values(order).reset_index(drop=True)
        want = frame.sort_values(order).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want)


def test_without_a_store_a_done_row_whose_tool_returned_an_unpicklable_value_keeps_its_log(
    server: FakeLLMServer,
) -> None:
    provider = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY)
    PROVIDERS.append(provider)
    df = nbagent.batch(
        PROMPTS[:2],
        lambda: Chat(provider=provider).with_tools(lock_for),
        progress=False,
        name="unpicklable",
    )
    assert list(df["status"]) == ["done"] * 2
    log = nbagent.read_log(df)
    assert len(log) == 2 and set(log["status"]) == {"ok"}
    assert set(log["chat_id"]) == set(df["chat_id"])


def test_without_a_store_a_chat_the_user_holds_is_the_log_read(server: FakeLLMServer) -> None:
    """A done row's chat the user kept (and continued) is read live, not its record."""
    held: list[Chat] = []
    make = _factory(server, [])

    def keep() -> Chat:
        held.append(make())
        return held[-1]

    df = nbagent.batch(PROMPTS[:2], keep, progress=False, name="held")
    chat = next(c for c in held if c.id == df["chat_id"][0])
    before = nbagent.read_log(df, "steps")
    assert len(before[before["chat_id"] == chat.id]) == 2  # a tool round, then the answer
    chat.ask("Work on item9")  # continued after the batch: one more step
    after = nbagent.read_log(df, "steps")
    assert len(after[after["chat_id"] == chat.id]) == 3
    assert len(after) == len(before) + 1


def test_with_a_store_a_done_rows_chat_is_let_go_and_read_back_from_the_store(
    server: FakeLLMServer, tmp_path: Path
) -> None:
    refs: list[weakref.ref[Chat]] = []
    make = _factory(server, refs)
    df = nbagent.batch(PROMPTS, make, store=tmp_path / "m.db", progress=False, name="stored")
    assert list(df["status"]) == ["done"] * 6
    assert _alive(refs) == 0  # every row is in the store: no chat is kept, frame or not
    log = nbagent.read_log(df)  # read from the store
    assert len(log) == 6 and set(log["status"]) == {"ok"}
    assert set(log["chat_id"]) == set(df["chat_id"])
    assert len(nbagent.read_log(df[df.index < 2])) == 2
    box = nbagent.inbox(df)
    assert len(box.pending) == 0
    box.close()
    with SQLiteStore(tmp_path / "m.db") as store:  # a done row's chat, opened again
        again = Chat.load(df.loc[0, "chat_id"], store=store, tools=[look])
        assert again.last_assistant_message.content == "finished Work on item0"


def test_a_done_rows_messages_are_freed_while_the_shared_provider_lives(
    server: FakeLLMServer, tmp_path: Path
) -> None:
    """The provider every chat shares builds each message's wire form once; it must not
    keep the messages of chats long done (issue 28: it held every message of a 5,000-row
    batch, about 5 KiB per chat, as long as the provider lived)."""
    provider = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY)
    PROVIDERS.append(provider)
    messages: list[weakref.ref[Any]] = []

    def make() -> Chat:
        chat = Chat(provider=provider).with_tools(look)
        chat.on(MessageAdded, lambda e: messages.append(weakref.ref(e.message)))
        return chat

    df = nbagent.batch(PROMPTS, make, store=tmp_path / "w.db", progress=False, name="wire")
    assert list(df["status"]) == ["done"] * 6
    assert len(messages) == 6 * 4  # prompt, calls, result, answer
    gc.collect()
    assert [r for r in messages if r() is not None] == []
    assert provider.model == "gpt-4.1-mini"  # the provider itself is alive and usable
    again = Chat(provider=provider).with_tools(look)
    assert again.ask("Work on item7").content == "finished Work on item7"


def test_a_parked_row_keeps_its_chat_until_decided_then_lets_it_go(
    server: FakeLLMServer, tmp_path: Path
) -> None:
    """A script's batch stopped with a row parked: the frame keeps that chat (the inbox
    decides and continues it); once done, it is let go like the others."""
    RAN.clear()
    refs: list[weakref.ref[Chat]] = []
    make = _factory(server, refs)
    prompts = [*PROMPTS[:3], "Ship parcel"]
    df = nbagent.batch(prompts, make, store=tmp_path / "p.db", progress=False, name="parked")
    assert list(df["status"]) == ["done"] * 3 + ["awaiting_approval"]
    assert _alive(refs) == 1  # the parked one
    box = nbagent.inbox(df)
    assert list(box.pending["tool"]) == ["ship"]
    box.approve(box.pending)  # the inbox continues the chat: the batch stopped watching
    box.close()
    del box
    fresh = nbagent.batch_results(df)
    for _ in range(1000):  # the continuation runs on nbagent's loop
        if fresh.loc[3, "status"] == "done":
            break
        time.sleep(0.02)
        fresh = nbagent.batch_results(df)
    assert list(fresh["status"]) == ["done"] * 4
    assert fresh.loc[3, "reply"] == "finished Ship parcel"
    assert RAN.count("ship parcel") == 1
    assert _freed(refs)  # once the inbox's continuation let go of it too
    assert len(nbagent.read_log(fresh)) == 4


def test_in_a_kernel_a_run_watching_parked_rows_lives_without_its_frame_until_final(
    server: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The frame is dropped while a row waits for approval: the row still continues
    when decided through the store, and then the run and every chat are freed."""
    batch_module = importlib.import_module("nbagent.batch._batch")
    monkeypatch.setattr(batch_module, "in_kernel", lambda: True)
    RAN.clear()
    SHIPPED.clear()
    refs: list[weakref.ref[Chat]] = []
    make = _factory(server, refs)
    path = tmp_path / "k.db"
    prompts = [*PROMPTS[:2], "Ship box"]

    async def cell() -> pd.DataFrame:  # a kernel runs cells inside a running loop
        return nbagent.batch(
            prompts, make, store=path, name="kernel", poll_interval=0.05, progress=False
        )

    df = asyncio.run(cell())
    assert list(df["status"]) == ["done", "done", "awaiting_approval"]
    run = weakref.ref(df.attrs["nbagent_batch"])
    chat_id = df.loc[2, "chat_id"]
    del df
    gc.collect()
    assert run() is not None and run().running  # type: ignore[union-attr]
    assert _alive(refs) == 1  # the parked chat, held by its running run
    with SQLiteStore(path) as store:
        (call,) = store.pending_approvals()
        store.approve(call, by="elsewhere")
    assert SHIPPED.wait(20)
    for _ in range(500):  # the run ends after its last row, on nbagent's loop
        gc.collect()
        if run() is None:
            break
        time.sleep(0.02)
    assert run() is None
    assert _freed(refs)
    assert RAN.count("ship box") == 1
    with SQLiteStore(path) as store:
        messages = store.load(chat_id).messages
    assert messages[-1]["role"] == "assistant"
    assert messages[-1]["content"] == "finished Ship box"
