"""The README's first example runs as written, offline, and does what its comments say."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).parent.parent / "README.md"


def test_fifteen_line_example_runs() -> None:
    text = README.read_text()
    section = text[text.index("## Fifteen lines") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    namespace: dict[str, Any] = {}
    exec(compile(code.group(1), "README.md", "exec"), namespace)
    chat = namespace["chat"]
    assert chat.status == "complete"
    log = chat.log
    assert list(log["tool"]) == ["get_weather", "get_weather", "issue_refund"]
    assert list(log["status"]) == ["ok", "ok", "ok"]
    assert list(log["decision"]) == ["auto", "auto", "approved"]
    assert "refunded order 42" in chat.transcript[-1].content
