"""Batches whose tool raises ``KeyboardInterrupt``, in a process of their own (run by
tests/batch/test_batch_faults.py, which reads what it prints and what asyncio said at exit).

``python _batch_fault_worker.py DIR MODE``: MODE is where the batch's loop runs:

- ``main``: ``nbagent.batch`` in a script (its loop on the main thread, where Ctrl-C lands);
- ``background``: ``nbagent.batch`` called inside a running loop (a notebook's cell): the
  batch runs on nbagent's background loop thread;
- ``thread``: ``nbagent.batch`` called from a thread of the program's own.

Two batches run on one store: the first has row "t2" whose tool raises
``KeyboardInterrupt`` (once per process), the second is the same inputs again. Each
prints one JSON line: ``{"batch": n, "statuses": [...], "error_types": [...]}`` or
``{"batch": n, "raised": "KeyboardInterrupt"}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path
from typing import Any

import nbagent
from nbagent import Chat, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

HERE = Path(sys.argv[1])
MODE = sys.argv[2]
RAISED: list[str] = []


@tool
async def interrupt(order: str) -> str:
    """Raises KeyboardInterrupt the first time (a library converting a child's SIGINT).

    Args:
        order: The order.
    """
    if not RAISED:
        RAISED.append(order)
        raise KeyboardInterrupt
    return f"done {order}"


@tool
async def work(order: str) -> str:
    """Works a moment.

    Args:
        order: The order.
    """
    await asyncio.sleep(0.2)
    return f"worked {order}"


def make_chat(row: Any) -> Chat:
    name = "interrupt" if row.startswith("interrupt") else "work"
    script = [call_tools((name, {"order": row})), reply(f"answered {row}")] * 2
    return Chat(provider=ScriptedProvider(script)).with_tools(interrupt, work)


PROMPTS = ["interrupt t2", "work t3", "work t4"]


def one(n: int) -> None:
    try:
        result = nbagent.batch(PROMPTS, make_chat, store=HERE / "b.db", progress=False)
    except BaseException as exc:
        print(json.dumps({"batch": n, "raised": type(exc).__name__}), flush=True)
        return
    print(
        json.dumps(
            {
                "batch": n,
                "statuses": list(result["status"]),
                "error_types": result["error_type"]
                .astype(object)
                .where(result["error_type"].notna(), None)
                .tolist(),
                "errors": result["error"]
                .astype(object)
                .where(result["error"].notna(), None)
                .tolist(),
            }
        ),
        flush=True,
    )


def both() -> None:
    one(1)
    one(2)


if MODE == "main":
    both()
elif MODE == "background":

    async def cell() -> None:
        both()  # a cell calling the sync API while its loop runs

    asyncio.run(cell())
elif MODE == "thread":
    worker = threading.Thread(target=both)
    worker.start()
    worker.join()
else:
    raise SystemExit(f"unknown mode {MODE}")
