"""A batch whose process dies mid-row (tests/batch/test_batch_resume.py runs it again and again).

``python _batch_crash_worker.py DIR CRASH``: six rows ("r0".."r5"),
``concurrency=1``, a SQLite store at ``DIR/b.db``, chats talking to a loopback
fake OpenAI server through the real SDK. Each row's model calls ``look`` once,
then answers. ``CRASH`` says where the process dies (``os._exit(9)``, like
``kill -9``) while it works on row "r2":

- ``first_request``: the row's first model request (its chat and batch
  record are in the store, its prompt not yet);
- ``second_request``: the request after its tool ran;
- ``in_tool``: inside the tool, after it did its work (the call is in doubt);
- ``none``: nothing dies; the result frame is written to ``DIR/result.json``.

Every tool run appends a line to ``DIR/ran.txt``, so the test counts what ran
across processes. ``NBAGENT_CRASH_DSN`` puts the store on PostgreSQL instead, and
``NBAGENT_CRASH_CONCURRENCY`` runs that many rows at once (their writes grouped).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbagent
from nbagent import Chat, tool
from nbagent.providers import OpenAIProvider
from nbagent.testing import FakeLLMServer, FakeToolCall, RecordedRequest, Turn

sys.path.insert(0, str(Path(__file__).parent))
from _batch_setup import first_user_text, tool_messages

HERE = Path(sys.argv[1])
CRASH = sys.argv[2]
VICTIM = "Work on r2"


@tool
def look(item: str) -> str:
    """Look at an item.

    Args:
        item: The item.
    """
    with open(HERE / "ran.txt", "a") as f:
        f.write(f"{item}\n")
    if CRASH == "in_tool" and item == "r2":
        os._exit(9)
    return f"looked at {item}"


def handler(request: RecordedRequest) -> Turn:
    prompt = first_user_text(request)
    done = tool_messages(request)
    if prompt == VICTIM and (
        (CRASH == "first_request" and done == 0) or (CRASH == "second_request" and done == 1)
    ):
        os._exit(9)
    if done == 0:
        return Turn(tool_calls=[FakeToolCall("look", {"item": prompt.rsplit(" ", 1)[-1]})])
    return Turn(text=f"finished {prompt}")


with FakeLLMServer(handler=handler, strict=True) as server:
    provider = OpenAIProvider(
        "gpt-4.1-mini", base_url=server.openai_base_url, api_key="sk-test-0000000000"
    )
    result = nbagent.batch(
        [{"key": f"r{i}"} for i in range(6)],
        lambda: Chat(provider=provider).with_tools(look),
        prompt="Work on {key}",
        key="key",
        store=os.environ.get("NBAGENT_CRASH_DSN") or HERE / "b.db",
        concurrency=int(os.environ.get("NBAGENT_CRASH_CONCURRENCY", "1")),
        name="crashy",
        progress=False,
    )
result.to_json(HERE / "result.json")
