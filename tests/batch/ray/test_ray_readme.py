"""The Ray page's example (docs/ray.md) runs as written, after the batch page's
(docs/batch.md), on the shared local Ray, and gives the local rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _docs import DOCS, python_after

BATCH = DOCS / "batch.md"
RAY = DOCS / "ray.md"


def test_the_ray_example_runs(
    ray_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    first = python_after(BATCH, "# Run over a DataFrame").partition("store = SQLiteStore")[0]
    exec(compile(first, str(BATCH), "exec"), namespace)  # the tools, tickets, make_chat
    local = namespace["result"]
    exec(compile(python_after(RAY, "# Ray"), str(RAY), "exec"), namespace)
    on_ray = namespace["result"]
    columns = ["status", "reply", "pending", "calls", "tokens"]
    assert on_ray[columns].equals(local[columns])
    assert list(on_ray["status"]) == ["done", "awaiting_approval", "done"]
    assert (tmp_path / "batch-ray.db").exists()  # the workers wrote the driver's file
