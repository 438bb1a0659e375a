"""A batch cancelled at any moment (the stop button, a cancelled task) and run again with
its store: every row ends ``done`` with the model's reply, its prompt asked once, and no
tool call runs twice. Real chats through the real OpenAI SDK against the fake server."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import tempfile
import threading
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _batch_setup import first_user_text, tool_messages
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, Event, tool
from nbagent._aio import run_sync
from nbagent.providers import OpenAIProvider
from nbagent.store import SQLiteStore
from nbagent.testing import FakeLLMServer, FakeToolCall, RecordedRequest, Turn

KEY = "sk-test-cancel-00000000000000"
RAN: list[str] = []
_ran_lock = threading.Lock()


@tool
def look(item: str) -> str:
    """Look at an item.

    Args:
        item: The item.
    """
    with _ran_lock:
        RAN.append(item)
    return f"looked at {item}"


def handler(request: RecordedRequest) -> Turn:
    """One ``look`` per chat, then an answer naming the prompt."""
    prompt = first_user_text(request)
    if tool_messages(request) == 0:
        return Turn(tool_calls=[FakeToolCall("look", {"item": prompt})])
    return Turn(text=f"finished {prompt}")


def _check_store(path: Path, batch_id: str, prompts: list[str]) -> None:
    """Each input's stored chat: its prompt once, the model's answer last."""
    with SQLiteStore(path) as store:
        recorded = store.batch_chats(batch_id)
        assert len(recorded) == len(prompts)
        for key, chat_id in recorded.items():
            messages = store.load(chat_id).messages
            users = [m["content"] for m in messages if m["role"] == "user"]
            assert users == [prompts[int(key)]], (key, messages)
            assert messages[-1]["role"] == "assistant", (key, messages)


async def _rerun(prompts: list[str], make: Any, path: Path, name: str | None = None) -> Any:
    result = await nbagent.batch_async(
        prompts, make, store=path, name=name, concurrency=2, progress=False
    )
    assert list(result["status"]) == ["done"] * len(prompts), result[["status", "error"]]
    assert list(result["reply"]) == [f"finished {p}" for p in prompts]
    assert list(result["calls"]) == [1] * len(prompts)
    return result


class GatedStore(SQLiteStore):
    """A SQLite store that holds the batch record of one key until ``go`` is set, before
    or after writing it: the batch is cancelled meanwhile, before the chat got its prompt.

    Its writes wait, so it says so (``writes_inline``): the batch makes them on a worker
    thread and its loop stays free to be cancelled (a store written inline is written
    whole before the loop can deliver a cancellation)."""

    writes_inline = False

    def __init__(self, path: Path, key: str, *, before: bool = False) -> None:
        super().__init__(path)
        self.key, self.before = key, before
        self.reached = threading.Event()
        self.go = threading.Event()

    def add_batch_chat(self, batch_id: str, key: str, chat_id: str) -> str:
        gated = key == self.key and not self.reached.is_set()
        if gated and self.before:
            self.reached.set()
            self.go.wait(30)
        recorded = super().add_batch_chat(batch_id, key, chat_id)
        if gated and not self.before:
            self.reached.set()
            self.go.wait(30)
        return recorded


def test_a_batch_cancelled_between_recording_a_chat_and_its_prompt_asks_it_on_rerun(
    tmp_path: Path,
) -> None:
    RAN.clear()
    prompts = [f"p{i}" for i in range(6)]
    path = tmp_path / "c.db"
    with FakeLLMServer(handler=handler, strict=True) as server:
        provider = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY)

        def make() -> Chat:
            return Chat(provider=provider).with_tools(look)

        async def scenario() -> None:
            gated = GatedStore(path, key="2")
            task = asyncio.ensure_future(
                nbagent.batch_async(
                    prompts, make, store=gated, name="gated", concurrency=1, progress=False
                )
            )
            await asyncio.to_thread(gated.reached.wait, 30)
            task.cancel()
            gated.go.set()
            with pytest.raises(asyncio.CancelledError):
                await task
            gated.close()
            assert sorted(RAN) == ["p0", "p1"]
            first = await _rerun(prompts, make, path, "gated")
            again = await _rerun(prompts, make, path, "gated")  # all read back from the store
            assert list(again["chat_id"]) == list(first["chat_id"])
            await provider.aclose()

        asyncio.run(scenario())
    assert sorted(RAN) == prompts  # each call ran once
    _check_store(path, "gated", prompts)


def test_a_cancelled_batch_returns_only_once_the_record_it_was_writing_is_written(
    tmp_path: Path,
) -> None:
    """Cancelled while a row's batch record is on its way to the store, the batch waits for
    it: a rerun started right after finds it (no second chat for the input, no conflict)."""
    RAN.clear()
    prompts = [f"p{i}" for i in range(4)]
    path = tmp_path / "s.db"
    with FakeLLMServer(handler=handler, strict=True) as server:
        provider = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY)

        def make() -> Chat:
            return Chat(provider=provider).with_tools(look)

        async def scenario() -> None:
            gated = GatedStore(path, key="1", before=True)
            task = asyncio.ensure_future(
                nbagent.batch_async(
                    prompts, make, store=gated, name="late", concurrency=1, progress=False
                )
            )
            await asyncio.to_thread(gated.reached.wait, 30)
            task.cancel()
            for _ in range(500):  # every loop turn the cancellation needs, and many more
                await asyncio.sleep(0)
            assert not task.done()  # the record is still being written: the batch waits
            gated.go.set()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert "1" in gated.batch_chats("late")  # written before the batch returned
            first = await _rerun(prompts, make, path, "late")
            assert first.loc[1, "chat_id"] == gated.batch_chats("late")["1"]
            await provider.aclose()
            gated.close()

        asyncio.run(scenario())
    assert sorted(RAN) == prompts


def test_a_stored_chat_completed_without_its_prompt_is_asked_again_not_read_as_done(
    tmp_path: Path,
) -> None:
    """A store an earlier nbagent left with a batch chat completed empty (no prompt, no
    model step, last step "complete") is repaired by the next run, not reported done."""
    RAN.clear()
    path = tmp_path / "old.db"
    with FakeLLMServer(handler=handler, strict=True) as server:
        provider = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY)
        with SQLiteStore(path) as store:
            empty = Chat(provider=provider, store=store).with_tools(look)
            store.add_batch_chat("old", "0", empty.id)
            empty.complete()  # what the earlier rerun did: an idle chat, "complete"
            assert store.load(empty.id).state["last_step"] == "complete"
            empty.close()
        try:
            result = nbagent.batch(
                ["p0"],
                lambda: Chat(provider=provider).with_tools(look),
                store=path,
                name="old",
                progress=False,
            )
        finally:  # the async client of this thread's loop (batch() ran there)
            run_sync(provider.aclose())
    assert result.loc[0, "status"] == "done"
    assert result.loc[0, "reply"] == "finished p0"
    assert result.loc[0, "chat_id"] == empty.id  # the recorded chat, continued
    assert RAN == ["p0"]
    _check_store(path, "old", ["p0"])


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(cut=st.integers(min_value=0, max_value=90), concurrency=st.sampled_from([1, 2, 3]))
def test_a_batch_cancelled_at_any_moment_finishes_on_rerun_without_running_a_call_twice(
    cut: int, concurrency: int
) -> None:
    """The cancel lands after the ``cut``-th thing the batch did (a batch record written,
    an event of any chat): the rerun finishes every row; a call that may have run is
    never run again (it is in doubt instead)."""
    RAN.clear()
    prompts = [f"q{i}" for i in range(4)]
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(handler=handler) as server:
        path = Path(tmp) / "p.db"
        provider = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY)
        seen = Counter[str]()
        state: dict[str, Any] = {}

        def tick() -> None:
            with _ran_lock:
                seen["n"] += 1
                if seen["n"] != cut:
                    return
            loop, task = state["loop"], state["task"]
            loop.call_soon_threadsafe(task.cancel)

        class CountingStore(SQLiteStore):
            def add_batch_chat(self, batch_id: str, key: str, chat_id: str) -> str:
                tick()
                return super().add_batch_chat(batch_id, key, chat_id)

        def counted(event: Event) -> None:
            tick()

        def make() -> Chat:
            chat = Chat(provider=provider).with_tools(look)
            chat.on(Event, counted)
            return chat

        def plain() -> Chat:
            return Chat(provider=provider).with_tools(look)

        async def scenario() -> None:
            store = CountingStore(path)
            state["loop"] = asyncio.get_running_loop()
            task = state["task"] = asyncio.ensure_future(
                nbagent.batch_async(
                    prompts, make, store=store, concurrency=concurrency, progress=False
                )
            )
            with contextlib.suppress(asyncio.CancelledError):
                await task
            first = await _rerun(prompts, plain, path)
            again = await _rerun(prompts, plain, path)  # all read back from the store
            assert list(again["chat_id"]) == list(first["chat_id"])
            state["batch_id"] = again.attrs["nbagent_batch"].id
            await provider.aclose()
            store.close()

        asyncio.run(scenario())
        counts = Counter(RAN)
        assert all(n == 1 for n in counts.values()), counts  # no call ran twice
        with SQLiteStore(path) as store:
            log = nbagent.read_log(store)
        items = [(json.loads(a) if isinstance(a, str) else a)["item"] for a in log["arguments"]]
        statuses = dict(zip(items, log["status"], strict=True))
        assert sorted(statuses) == prompts
        for item, status in statuses.items():
            assert status in ("ok", "in_doubt"), (item, status)
            if status == "ok":
                assert counts[item] == 1, item  # a finished call ran exactly once
        _check_store(path, state["batch_id"], prompts)


# ------------------------------------------------------------ a cancelled call's coroutine
@tool
async def never_started() -> str:
    """A call cancelled before its task's first step."""
    return "ran"


def test_an_async_call_cancelled_before_it_starts_leaves_no_unawaited_coroutine() -> None:
    """The runner made the tool's coroutine before its task ran: a task cancelled first
    (``on_error="raise"`` stopping the other rows) left it never awaited, and Python warned
    "coroutine '_call_async' was never awaited" at the next garbage collection."""
    from nbagent._runner import Job, ToolRunner
    from nbagent._types import ToolCall

    job = Job(ToolCall(id="c1", name="never_started", arguments={}), never_started, {})

    async def cancel_before_it_starts() -> None:
        import contextvars

        outer = asyncio.ensure_future(ToolRunner._in_task(job, contextvars.copy_context()))
        await asyncio.sleep(0)  # the outer task made the call's task, and awaits it
        outer.cancel()  # the call's task is cancelled before its first step
        with pytest.raises(asyncio.CancelledError):
            await outer

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(cancel_before_it_starts())
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)], [
        str(w.message) for w in caught
    ]
