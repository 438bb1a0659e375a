"""On a Ray worker, as in the local backend, a row's sync tool runs off the worker's event
loop: four rows on one worker, each blocking its thread half a second, run their calls at
once. Before, each held the worker's loop: the rows' calls ran one after another, and the
calls the other rows had claimed (their claims committed together) waited, recorded
running, so a worker killed meanwhile left them in doubt, never run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _ray_blocking_agents import BlockingChat, handler

import nbagent
from nbagent.testing import FakeLLMServer


def test_rows_on_one_worker_run_their_blocking_sync_calls_at_once(
    ray_cluster: Any, tmp_path: Path
) -> None:
    marks = tmp_path / "marks.txt"
    rows = [f"block {marks} r{i}" for i in range(4)]
    with FakeLLMServer(handler=handler) as server:
        result = nbagent.batch(
            rows,
            BlockingChat(server.openai_base_url),
            concurrency=4,
            backend="ray",
            backend_options={"workers": 1},
            progress=False,
        )
    assert (result["status"] == "done").all(), result[["status", "error"]].to_dict("records")
    lines = [line.split() for line in marks.read_text().splitlines()]
    starts = {row: float(t) for kind, row, t in lines if kind == "start"}
    ends = {row: float(t) for kind, row, t in lines if kind == "end"}
    assert sorted(starts) == sorted(ends) == [f"r{i}" for i in range(4)]
    # every call began before any ended: no row's blocking tool held up another's
    assert max(starts.values()) < min(ends.values()), lines
