"""The Ray backend on a local Ray (2 CPUs), against the fake server.

Rows equal the local backend's; progress reaches the driver; a gated call
parks without holding a worker, and a decision made through the store by
another process continues it on a worker; a worker that dies fails the rows
it was running, and the store lets a rerun continue them.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _ray_agents import FakeServerChat

from nbagent.batch._backend import Job, RowResult, RowUpdate, RunSpec
from nbagent.batch._local import LocalBackend
from nbagent.batch._ray import RayBackend
from nbagent.store import SQLiteStore
from nbagent.testing import FakeLLMServer

PROMPTS = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff"]
COMPARED = ("key", "index", "status", "reply", "calls", "input_tokens", "output_tokens", "error")


def jobs(prompts: Sequence[str], chat_ids: dict[str, str] | None = None) -> list[Job]:
    ids = chat_ids or {}
    return [Job(str(i), i, p, p, chat_id=ids.get(str(i))) for i, p in enumerate(prompts)]


def spec(server: FakeLLMServer, **kwargs: Any) -> RunSpec:
    kwargs.setdefault("concurrency", 4)
    kwargs.setdefault("poll_interval", 0.1)
    return RunSpec("b1", FakeServerChat(server.openai_base_url), **kwargs)


def run(backend: Any, todo: Sequence[Job], run_spec: RunSpec, **kwargs: Any) -> dict[str, Any]:
    """Every result yielded (in order) and every progress update."""
    updates: list[RowUpdate] = []
    results: list[RowResult] = []

    async def go() -> None:
        async for result in backend.run(todo, run_spec, updates.append):
            results.append(result)
            hook = kwargs.get("on_result")
            if hook is not None:
                await asyncio.to_thread(hook, result)

    asyncio.run(asyncio.wait_for(go(), 60))
    final = {r.key: r for r in results}
    return {"results": results, "final": final, "updates": updates}


def compared(result: RowResult) -> tuple[Any, ...]:
    return tuple(getattr(result, name) for name in COMPARED)


def test_rows_equal_the_local_backends(ray_cluster: Any, server: FakeLLMServer) -> None:
    local = run(LocalBackend(), jobs(PROMPTS), spec(server))["final"]
    on_ray = run(RayBackend(), jobs(PROMPTS), spec(server))["final"]
    assert [compared(on_ray[k]) for k in sorted(on_ray)] == [
        compared(local[k]) for k in sorted(local)
    ]
    assert on_ray["2"].reply == "ccc: 6" and on_ray["2"].status == "done"
    assert all(r.latency_s is not None and r.latency_s > 0 for r in on_ray.values())


def test_progress_streams_back_from_the_workers(ray_cluster: Any, server: FakeLLMServer) -> None:
    out = run(RayBackend(), jobs(PROMPTS[:3]), spec(server))
    by_key: dict[str, list[RowUpdate]] = {}
    for update in out["updates"]:
        by_key.setdefault(update.key, []).append(update)
    for key, updates in by_key.items():
        statuses = [u.status for u in updates]
        assert statuses[0] == "running" and statuses[-1] == "done", (key, statuses)
        # tokens counted on the worker reach the driver before the row settles
        assert updates[-1].input_tokens == out["final"][key].input_tokens > 0
        assert updates[-1].chat_id == out["final"][key].chat_id is not None


def test_a_parked_chat_continues_on_a_worker_after_a_decision_from_another_process(
    ray_cluster: Any, server: FakeLLMServer, tmp_path: Path
) -> None:
    db = tmp_path / "batch.db"
    store = SQLiteStore(db)
    decided: list[str] = []

    def approve_elsewhere(result: RowResult) -> None:
        if result.status != "awaiting_approval":
            return
        assert result.pending == 1 and result.chat_id is not None
        (call,) = store.pending_approvals(result.chat_id)
        code = (
            "import sys; from nbagent.store import SQLiteStore; "
            "SQLiteStore(sys.argv[1]).approve(sys.argv[2], chat_id=sys.argv[3], by='inbox')"
        )
        subprocess.run(
            [sys.executable, "-c", code, str(db), call.id, result.chat_id],
            check=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        decided.append(call.id)

    out = run(
        RayBackend(),
        jobs(["gate order 7", "plain"]),
        spec(server, store=store),
        on_result=approve_elsewhere,
    )
    statuses = [(r.key, r.status) for r in out["results"]]
    assert ("0", "awaiting_approval") in statuses and out["final"]["0"].status == "done"
    assert out["final"]["0"].reply == "gate order 7: refunded gate order 7"
    (call_id,) = decided
    stored = store.call(call_id, chat_id=out["final"]["0"].chat_id)
    assert stored.status == "ok" and stored.decision is not None and stored.decision.by == "inbox"
    # it ran once, on a worker: not in this process
    assert stored.claimed_by is not None and f":{os.getpid()}:" not in stored.claimed_by
    assert [u.status for u in out["updates"] if u.key == "0"].count("awaiting_approval") >= 1


def test_a_dead_worker_fails_its_row_and_the_store_continues_it(
    ray_cluster: Any, server: FakeLLMServer, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "batch.db")
    prompts = ["die now", "bb", "ccc", "dddd"]
    # one chat per worker at a time: only the dying chat's row is on its worker
    first = run(RayBackend(workers=2), jobs(prompts), spec(server, store=store, concurrency=2))
    died = first["final"]["0"]
    assert died.status == "failed" and died.error_type == "WorkerDied", died
    assert died.error is not None and died.error.startswith("the Ray worker running this chat died")
    assert "rerun the batch" in died.error and died.chat_id is not None
    assert [first["final"][k].status for k in "123"] == ["done"] * 3, first["final"]
    assert store.batch_chats("b1")["0"] == died.chat_id

    # the rerun continues the stored chat: the crashing call is in doubt, never rerun
    again = run(RayBackend(), jobs(prompts[:1], {"0": died.chat_id}), spec(server, store=store))[
        "final"
    ]["0"]
    assert again.status == "done" and again.chat_id == died.chat_id, again
    (call,) = [c for c in store.calls(died.chat_id) if c.name == "crash"]
    assert call.status == "in_doubt"
