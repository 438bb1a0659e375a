"""A chat whose one call blocks its thread (a sync tool sleeping), for
test_ray_sync_tools.py: importable by name on the Ray workers (see conftest).

The prompt ``"block <marks> <row>"`` asks for ``block(marks, row)``, which appends
``start <row> <time>`` to the file ``marks``, sleeps :data:`SECONDS`, appends
``end <row> <time>``; then the model answers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from nbagent import Chat, tool
from nbagent.providers import OpenAIProvider
from nbagent.testing import FakeToolCall, RecordedRequest, Turn

SECONDS = 0.5
PROVIDERS: dict[str, OpenAIProvider] = {}


@tool
def block(marks: str, row: str) -> str:
    """Work on a row, blocking this thread (a sync database call).

    Args:
        marks: The file to append to.
        row: The row.
    """
    with open(marks, "a") as f:
        f.write(f"start {row} {time.time()}\n")
    time.sleep(SECONDS)
    with open(marks, "a") as f:
        f.write(f"end {row} {time.time()}\n")
    return f"worked on {row}"


def handler(request: RecordedRequest) -> Turn:
    messages: list[dict[str, Any]] = request.body["messages"]
    prompt = next(m["content"] for m in messages if m["role"] == "user")
    if messages[-1]["role"] == "user":
        _, marks, row = prompt.split(" ", 2)
        return Turn(tool_calls=[FakeToolCall("block", {"marks": marks, "row": row})])
    return Turn(text=f"done {prompt}")


@dataclass(frozen=True)
class BlockingChat:
    """The factory the driver pickles; the chat is built on the worker."""

    base_url: str

    def __call__(self) -> Chat:
        provider = PROVIDERS.get(self.base_url)
        if provider is None:
            provider = PROVIDERS[self.base_url] = OpenAIProvider(
                "gpt-4.1-mini", base_url=self.base_url, api_key="sk-ray-test-not-a-secret"
            )
        return Chat(provider=provider, stream=False).with_tools(block)
