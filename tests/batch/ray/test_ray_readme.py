"""The README's Ray example runs as written (on the shared local Ray) and gives the local rows."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[3] / "README.md"


def _code(heading: str) -> str:
    text = README.read_text()
    found = re.search(r"```python\n(.*?)```", text[text.index(heading) :], re.S)
    assert found is not None
    return found.group(1)


def test_the_ray_example_runs(
    ray_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    first = _code("## Many chats at once").partition("store = SQLiteStore")[0]
    exec(compile(first, "README.md", "exec"), namespace)  # the tools, tickets, make_chat
    local = namespace["result"]
    exec(compile(_code("### On Ray"), "README.md", "exec"), namespace)
    on_ray = namespace["result"]
    columns = ["status", "reply", "pending", "calls", "tokens"]
    assert on_ray[columns].equals(local[columns])
    assert list(on_ray["status"]) == ["done", "awaiting_approval", "done"]
    assert (tmp_path / "batch-ray.db").exists()  # the workers wrote the driver's file
