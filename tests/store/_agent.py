"""Tools and a command-line worker for the store's multi-process tests.

Imported by the tests and run as a script in separate processes::

    python _agent.py new DB                    -> parks a chat on an approval
    python _agent.py allow DB                  -> parks one, always allows refund, dies
                                                  (DB: a file, or a postgresql:// DSN)
    python _agent.py approve DB CALL_ID [--deny REASON]
    python _agent.py complete DB CHAT_ID [--barrier DIR --name N] [--idempotent]

Each command prints one JSON line. The tools append a line to the file named
by ``NBAGENT_TEST_COUNTER`` every time they run; ``NBAGENT_TEST_SLEEP`` makes
them slow, ``NBAGENT_TEST_CRASH=1`` kills the process right after the effect.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import nbagent
from nbagent import Chat, Tool
from nbagent.store import StoreConflictWarning, open_store


def _effect(order_id: int) -> str:
    counter = os.environ.get("NBAGENT_TEST_COUNTER")
    if counter:
        with open(counter, "a") as f:
            f.write(f"{os.getpid()} {order_id}\n")
    if os.environ.get("NBAGENT_TEST_CRASH") == "1":
        os._exit(3)  # the process dies after the effect, before the result is recorded
    time.sleep(float(os.environ.get("NBAGENT_TEST_SLEEP", "0")))
    return f"refunded order {order_id}"


class Refund(Tool):
    """Refund an order (a side effect: runs at most once)."""

    name = "refund"
    requires_approval = True

    def execute(self, order_id: int) -> str:
        """Refund.

        Args:
            order_id: The order to refund.
        """
        return _effect(order_id)


class IdempotentRefund(Refund):
    """Refund an order (safe to repeat: the payment system deduplicates)."""

    name = "refund"
    idempotent = True

    def execute(self, order_id: int) -> str:
        """Refund.

        Args:
            order_id: The order to refund.
        """
        return _effect(order_id)


def count(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def _main(argv: list[str]) -> dict[str, Any]:
    nbagent.configure(quiet=True, display=False)
    cmd, db = argv[0], argv[1]
    if cmd == "new":
        chat = Chat(model="demo", store=db).with_tools(Refund)
        chat.ask("Refund order 42")
        return {"chat_id": chat.id, "call_id": chat.pending_approvals[0].id, "status": chat.status}
    if cmd == "allow":  # parks, always allows the tool, and dies at once (a killed kernel)
        chat = Chat(model="demo", store=db).with_tools(Refund)
        chat.ask("Refund order 42")
        call_id = chat.pending_approvals[0].id
        chat.always_allow(Refund)
        print(json.dumps({"chat_id": chat.id, "call_id": call_id}), flush=True)
        os._exit(0)  # no close, no finalizers: only what was written already survives
    if cmd == "approve":
        with open_store(db) as store:
            if "--deny" in argv:
                call = store.deny(argv[2], reason=argv[argv.index("--deny") + 1], by="script")
            else:
                call = store.approve(argv[2], by="script")
        return {"status": call.status}
    if cmd == "complete":
        tools = [IdempotentRefund if "--idempotent" in argv else Refund]
        chat = Chat.load(argv[2], store=db, tools=tools)
        if "--barrier" in argv:
            folder = Path(argv[argv.index("--barrier") + 1])
            (folder / f"ready-{argv[argv.index('--name') + 1]}").touch()
            deadline = time.monotonic() + 60
            while not (folder / "go").exists() and time.monotonic() < deadline:
                time.sleep(0.005)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            chat.complete()
        last = chat.last_step
        return {
            "kind": last.kind if last else None,
            "status": chat.status,
            "conflict": any(issubclass(w.category, StoreConflictWarning) for w in caught),
        }
    raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    print(json.dumps(_main(sys.argv[1:])), flush=True)
