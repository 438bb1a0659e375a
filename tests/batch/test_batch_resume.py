"""Resumability with a SQLite store, across two processes, and a store that goes away
mid-batch: nothing finished is lost or rerun."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import nbagent
from nbagent import Chat, StoreError, tool
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

WORKER = Path(__file__).with_name("_batch_worker.py")


def _run_worker(tmp: Path, first: bool) -> pd.DataFrame:
    env = {**os.environ, "FIRST": "1" if first else "0", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(WORKER), str(tmp)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return pd.read_json(tmp / f"result-{'1' if first else '0'}.json", dtype={"key": str})


def _ran(tmp: Path) -> list[tuple[str, str]]:
    lines = (tmp / "ran.txt").read_text().splitlines()
    return [tuple(line.rsplit(" ", 1)) for line in lines]  # type: ignore[misc]


def test_a_second_process_skips_finished_rows_and_continues_failed_and_parked_ones(
    tmp_path: Path,
) -> None:
    first = _run_worker(tmp_path, first=True)
    assert list(first["status"]) == [
        "done",
        "done",
        "failed",
        "awaiting_approval",
        "awaiting_approval",
    ]
    assert "model endpoint unreachable" in first.loc[2, "error"]
    ran = _ran(tmp_path)
    assert sorted(w for w, _ in ran) == ["r0", "r1"]
    # decided elsewhere while no batch runs (say, the inbox of another notebook)
    with SQLiteStore(tmp_path / "b.db") as store:
        pending = {c.arguments["item"]: c for c in store.pending_approvals()}
        assert sorted(pending) == ["r3", "r4"]
        store.approve(pending["r3"], by="reviewer")
        store.deny(pending["r4"], reason="out of stock", by="reviewer")

    second = _run_worker(tmp_path, first=False)
    assert list(second["status"]) == ["done"] * 5
    # finished rows came back from the store: same chats, not rerun
    assert list(second["chat_id"][:2]) == list(first["chat_id"][:2])
    assert list(second["chat_id"][3:]) == list(first["chat_id"][3:])  # parked ones continued
    ran = _ran(tmp_path)
    assert sorted(w for w, _ in ran) == ["r0", "r1", "r2", "ship r3"]  # once each, r4 denied
    pids = {w: p for w, p in ran}
    assert pids["r0"] == pids["r1"] != pids["r2"] == pids["ship r3"]
    assert list(second["calls"]) == [1, 1, 1, 1, 1]
    assert list(second["tokens"][:2]) == list(first["tokens"][:2])  # read back from the store
    with SQLiteStore(tmp_path / "b.db") as store:
        assert len(store.batch_chats(_batch_id(store))) == 5
        log = nbagent.read_log(store)
    assert sorted(log["status"]) == ["denied", "ok", "ok", "ok", "ok"]


def _batch_id(store: SQLiteStore) -> str:
    with store._read() as conn:  # the test's only look under the protocol
        (batch_id,) = conn.execute("SELECT DISTINCT batch_id FROM batch_chats").fetchone()
    return str(batch_id)


# ------------------------------------------------------------ the store goes away
class FlakyStore:
    """A SQLite store whose database "goes away" (every call raises StoreError) while
    ``down`` is set: the connection to a database server dropping mid-batch."""

    def __init__(self, path: Path) -> None:
        self.inner = SQLiteStore(path)
        self.down = False

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if not callable(value) or name in ("close",):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise StoreError(f"store {self.inner.location}: the database went away")
            return value(*args, **kwargs)

        return call


RUNS: list[str] = []
STORE: list[FlakyStore] = []


@tool
def work(item: str) -> str:
    """Work on an item; working on "c" takes the database down.

    Args:
        item: The item.
    """
    RUNS.append(item)
    if item == "c":
        STORE[0].down = True
    return f"worked on {item}"


def _make(row: str) -> Chat:
    script = [call_tools(("work", {"item": row})), reply(f"done {row}")]
    return Chat(provider=ScriptedProvider(script)).with_tools(work)


def test_an_input_changed_under_the_same_name_is_not_answered_by_its_old_chat(
    tmp_path: Path,
) -> None:
    asked: list[str] = []

    def echo(request: Any) -> Any:
        text = request.messages[-1].content
        asked.append(text)
        return reply(f"you asked: {text}")

    make = lambda: Chat(provider=ScriptedProvider([echo], repeat_last=True))  # noqa: E731
    db = tmp_path / "named.db"
    first = nbagent.batch(["Status of order 41", "Status of order 7"], make, store=db,
                          name="orders", progress=False)  # fmt: skip
    again = nbagent.batch(["Status of order 42", "Status of order 7"], make, store=db,
                          name="orders", progress=False)  # fmt: skip
    assert asked == ["Status of order 41", "Status of order 7"]  # nothing asked again
    assert again["status"].tolist() == ["failed", "done"]
    assert again.loc[1, "reply"] == "you asked: Status of order 7"  # unchanged: from the store
    assert pd.isna(again.loc[0, "reply"]) and pd.isna(again.loc[0, "chat_id"])
    assert again.loc[0, "error_type"] == "PromptChanged"
    assert again.loc[0, "error"] == (
        f"the stored chat {first.loc[0, 'chat_id']} of input '0' was asked 'Status of order "
        "41', not 'Status of order 42' (the input changed under the same key and name=): to "
        "run this input again and keep the other rows, give it a new key (its index, or its "
        "key= column) under the same name=; another name=, or none (the default id follows "
        "every key and prompt), is a new batch, whose every row runs again, tools included"
    )
    fresh = nbagent.batch(["Status of order 42", "Status of order 7"], make, store=db,
                          progress=False)  # fmt: skip
    assert fresh["reply"].str.removeprefix("you asked: ").tolist() == [
        "Status of order 42", "Status of order 7",
    ]  # fmt: skip


def test_a_store_that_goes_away_mid_batch_fails_only_the_rows_it_touched(tmp_path: Path) -> None:
    RUNS.clear()
    STORE[:] = [FlakyStore(tmp_path / "flaky.db")]
    inputs = ["a", "b", "c", "d"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "could not write; retrying"
        first = nbagent.batch(
            inputs, _make, store=STORE[0], concurrency=1, name="flaky", progress=False
        )
    assert list(first["status"]) == ["done", "done", "failed", "failed"]
    assert set(first["error_type"][2:]) == {"StoreError"}
    assert "the database went away" in first.loc[2, "error"]
    assert "the store could not record this input's chat" in first.loc[3, "error"]
    assert RUNS == ["a", "b", "c"]

    STORE[0].down = False  # the database is back: rerun the batch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        second = nbagent.batch(
            inputs, _make, store=STORE[0], concurrency=1, name="flaky", progress=False
        )
    assert list(second["status"]) == ["done"] * 4
    assert RUNS == ["a", "b", "c", "d"]  # c's finished call was not rerun
    assert second.loc[2, "reply"] == "done c"
    assert list(second["chat_id"][:3]) == list(first["chat_id"][:3])
    STORE[0].inner.close()


def test_a_store_without_batch_records_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    class Bare:
        def __init__(self, inner: SQLiteStore) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            if name in ("add_batch_chat", "batch_chats"):
                raise AttributeError(name)
            return getattr(self.inner, name)

    bare = Bare(SQLiteStore(tmp_path / "x.db"))
    with pytest.raises(TypeError, match="cannot record batches"):
        nbagent.batch(["a"], lambda: Chat("demo"), store=bare, progress=False)
    bare.inner.close()


STOPPED_RUNS: list[str] = []


@tool
def slow_step(item: str) -> str:
    """One step of work.

    Args:
        item: The item.
    """
    STOPPED_RUNS.append(item)
    return f"stepped {item}"


def test_a_batch_interrupted_mid_flight_resumes_without_rerunning_a_call(tmp_path: Path) -> None:
    """The stop button (KeyboardInterrupt cancels the batch's task): rerunning with the
    store finishes every row and no tool call runs twice."""
    import asyncio

    from nbagent.testing import FakeLLMServer, FakeToolCall, RecordedRequest, Turn

    def handler(request: RecordedRequest) -> Turn:
        done = sum(1 for m in request.body["messages"] if m.get("role") == "tool")
        prompt = request.body["messages"][0]["content"]
        if done < 2:
            return Turn(
                tool_calls=[FakeToolCall("slow_step", {"item": f"{prompt}/{done}"})], delay=0.05
            )
        return Turn(text=f"finished {prompt}", delay=0.05)

    STOPPED_RUNS.clear()
    prompts = [f"p{i}" for i in range(12)]
    with FakeLLMServer(handler=handler) as server:
        from nbagent.providers import OpenAIProvider

        def make() -> Chat:
            provider = OpenAIProvider(
                "gpt-4.1-mini", base_url=server.openai_base_url, api_key="sk-test-0000000000"
            )
            return Chat(provider=provider).with_tools(slow_step)

        async def interrupted() -> None:
            task = asyncio.ensure_future(
                nbagent.batch_async(
                    prompts, make, store=tmp_path / "s.db", concurrency=4, progress=False
                )
            )
            while len(STOPPED_RUNS) < 5:  # some calls ran, most did not
                await asyncio.sleep(0.005)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(interrupted())
        partial = len(STOPPED_RUNS)
        assert 0 < partial < 24
        result = asyncio.run(
            nbagent.batch_async(
                prompts, make, store=tmp_path / "s.db", concurrency=4, progress=False
            )
        )
    assert list(result["status"]) == ["done"] * 12, result[["status", "error"]]
    assert list(result["reply"]) == [f"finished {p}" for p in prompts]
    assert sorted(STOPPED_RUNS) == sorted(f"{p}/{i}" for p in prompts for i in range(2))


# ------------------------------------------------------------ killed mid-row
CRASH_WORKER = Path(__file__).with_name("_batch_crash_worker.py")


def _crash_worker(tmp: Path, crash: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **extra}
    return subprocess.run(
        [sys.executable, str(CRASH_WORKER), str(tmp), crash],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("crash", ["first_request", "second_request", "in_tool"])
def test_a_batch_killed_mid_row_finishes_every_row_on_rerun_and_runs_no_call_twice(
    tmp_path: Path, crash: str
) -> None:
    """kill -9 while row r2 works (its chat and batch record may be stored before its
    prompt): the next run finishes every row with a reply and a model step, the run after
    reads them all back, and no tool call ran twice (one in doubt stays in doubt)."""
    died = _crash_worker(tmp_path, crash)
    assert died.returncode == 9, died.stderr
    chat_ids = None
    for _ in range(2):  # the first rerun continues r2.., the second reads all from the store
        again = _crash_worker(tmp_path, "none")
        assert again.returncode == 0, again.stderr
        result = pd.read_json(tmp_path / "result.json", dtype={"key": str})
        assert list(result["status"]) == ["done"] * 6, result[["status", "error"]]
        assert list(result["reply"]) == [f"finished Work on r{i}" for i in range(6)]
        assert list(result["calls"]) == [1] * 6
        assert chat_ids is None or list(result["chat_id"]) == chat_ids
        chat_ids = list(result["chat_id"])
    ran = (tmp_path / "ran.txt").read_text().splitlines()
    assert sorted(ran) == [f"r{i}" for i in range(6)]  # each tool call ran exactly once
    with SQLiteStore(tmp_path / "b.db") as store:
        recorded = store.batch_chats("crashy")
        assert sorted(recorded) == [f"r{i}" for i in range(6)]
        for key, chat_id in recorded.items():
            roles = [m["role"] for m in store.load(chat_id).messages]
            assert roles[0] == "user" and roles[-1] == "assistant", (key, roles)
            assert roles.count("user") == 1, (key, roles)  # the prompt was asked once
        log = nbagent.read_log(store)
    expected = ["in_doubt" if crash == "in_tool" else "ok"] + ["ok"] * 5
    assert sorted(log["status"]) == sorted(expected)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("crash", ["second_request", "in_tool"])
def test_a_batch_killed_mid_flight_with_rows_at_once_runs_every_call_once_on_rerun(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str, crash: str
) -> None:
    """The same kill -9, with every row at once (their writes and claims sent together,
    one commit per group, on SQLite as on PostgreSQL): the rerun finishes every row, and
    no tool call ran twice; a call the kill caught running stays in doubt and did not run
    again."""
    from nbagent.store import PostgresStore

    extra = {"NBAGENT_CRASH_CONCURRENCY": "6"}
    if kind == "postgres":
        extra["NBAGENT_CRASH_DSN"] = request.getfixturevalue("postgres_dsn")
    died = _crash_worker(tmp_path, crash, **extra)
    assert died.returncode == 9, died.stderr
    again = _crash_worker(tmp_path, "none", **extra)
    assert again.returncode == 0, again.stderr
    result = pd.read_json(tmp_path / "result.json", dtype={"key": str})
    assert list(result["status"]) == ["done"] * 6, result[["status", "error"]]
    assert list(result["reply"]) == [f"finished Work on r{i}" for i in range(6)]
    ran = (tmp_path / "ran.txt").read_text().splitlines()
    assert len(ran) == len(set(ran))  # no call ran twice
    opened = (
        PostgresStore(extra["NBAGENT_CRASH_DSN"])
        if kind == "postgres"
        else SQLiteStore(tmp_path / "b.db")
    )
    with opened as store:
        recorded = store.batch_chats("crashy")
        assert sorted(recorded) == [f"r{i}" for i in range(6)]
        statuses = {}
        for key, chat_id in recorded.items():
            calls = store.calls(chat_id)
            assert len(calls) == 1, (key, calls)
            statuses[key] = calls[0].status
            roles = [m["role"] for m in store.load(chat_id).messages]
            assert roles.count("user") == 1, (key, roles)  # the prompt was asked once
    # every call that finished ok ran exactly once; one in doubt ran at most once
    assert sorted(k for k, s in statuses.items() if s == "ok") == sorted(
        set(ran) - {k for k, s in statuses.items() if s == "in_doubt"}
    ), (statuses, ran)
    assert set(statuses.values()) <= {"ok", "in_doubt"}
    if crash == "in_tool":
        assert statuses["r2"] == "in_doubt" and "r2" in ran
