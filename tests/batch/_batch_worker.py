"""A batch run in its own process (tests/batch/test_batch_resume.py starts it twice).

Every tool execution appends a line to ``ran.txt`` next to the store, so the test
counts what ran across both processes. Row "r2"'s factory raises in the first
process (``FIRST=1``); rows "r3" and "r4" call a gated tool and park.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pandas as pd

import nbagent
from nbagent import Chat, LLMToolResponse, ModelRequest, ToolResultMessage, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

HERE = Path(sys.argv[1])


def _mark(what: str) -> str:
    with open(HERE / "ran.txt", "a") as f:
        f.write(f"{what} {os.getpid()}\n")
    return f"did {what}"


@tool
def look(item: str) -> str:
    """Look at an item.

    Args:
        item: The item.
    """
    return _mark(item)


@tool(requires_approval=True)
def ship(item: str) -> str:
    """Ship an item.

    Args:
        item: The item.
    """
    return _mark(f"ship {item}")


def make(row: dict[str, Any]) -> Chat:
    if row["key"] == "r2" and os.environ.get("FIRST") == "1":
        raise ConnectionError("model endpoint unreachable")
    name = "ship" if row["gated"] else "look"

    def answer(request: ModelRequest) -> LLMToolResponse:
        # like a model: call the tool first, answer once its result (or denial) is in
        if any(isinstance(m, ToolResultMessage) for m in request.messages):
            return reply(f"finished {row['key']}")
        return call_tools((name, {"item": row["key"]}))

    return Chat(provider=ScriptedProvider([answer], repeat_last=True)).with_tools(look, ship)


frame = pd.DataFrame(
    {"key": ["r0", "r1", "r2", "r3", "r4"], "gated": [False, False, False, True, True]}
)
result = nbagent.batch(
    frame, make, prompt="Work on {key}", key="key", store=HERE / "b.db", progress=False
)
result.drop(columns=["reply"]).to_json(HERE / f"result-{os.environ.get('FIRST', '0')}.json")
