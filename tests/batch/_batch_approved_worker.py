"""Six rows whose one call each is gated (tests/batch/test_batch_killed_approved_rows.py).

``python _batch_approved_worker.py DIR``: rows "g0".."g5", each chat asks ``refund`` once
(a sync tool, ``requires_approval=True``) and then answers. ``wait_for_decisions=False``:
a first run parks every row; once their calls are approved (through the store, by the
test), a run continues them, ``NBAGENT_ROWS_AT_ONCE`` at a time (default 4). ``refund``
appends ``start <item>`` to ``DIR/ran.txt`` as it begins (flushed: the test kills this
process with SIGKILL while calls run) and ``end <item>`` once it slept
``NBAGENT_REFUND_SECONDS``. The store is ``NBAGENT_ROWS_DSN`` (PostgreSQL), else
``DIR/b.db``; the frame goes to ``DIR/result.json``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbagent
from nbagent import Chat, tool
from nbagent.providers import OpenAIProvider
from nbagent.testing import FakeLLMServer, FakeToolCall, RecordedRequest, Turn

sys.path.insert(0, str(Path(__file__).parent))
from _batch_setup import first_user_text, tool_messages

HERE = Path(sys.argv[1])
SLEEP = float(os.environ.get("NBAGENT_REFUND_SECONDS", "0"))


def _mark(kind: str, item: str) -> None:
    with open(HERE / "ran.txt", "a") as f:
        f.write(f"{kind} {item}\n")


@tool(requires_approval=True)
def refund(item: str) -> str:
    """Refund an item.

    Args:
        item: The item.
    """
    _mark("start", item)
    time.sleep(SLEEP)
    _mark("end", item)
    return f"refunded {item}"


def handler(request: RecordedRequest) -> Turn:
    prompt = first_user_text(request)
    if tool_messages(request) == 0:
        return Turn(tool_calls=[FakeToolCall("refund", {"item": prompt.rsplit(" ", 1)[-1]})])
    return Turn(text=f"finished {prompt}")


with FakeLLMServer(handler=handler, strict=True) as server:
    provider = OpenAIProvider(
        "gpt-4.1-mini", base_url=server.openai_base_url, api_key="sk-test-0000000000"
    )
    result = nbagent.batch(
        [{"key": f"g{i}"} for i in range(6)],
        lambda: Chat(provider=provider).with_tools(refund),
        prompt="Refund {key}",
        key="key",
        store=os.environ.get("NBAGENT_ROWS_DSN") or HERE / "b.db",
        concurrency=int(os.environ.get("NBAGENT_ROWS_AT_ONCE", "4")),
        name="approved",
        progress=False,
        wait_for_decisions=False,
    )
result.to_json(HERE / "result.json")
