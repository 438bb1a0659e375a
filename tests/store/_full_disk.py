"""A worker process whose files can only grow so far: a full disk, for real.

``RLIMIT_FSIZE`` caps the size of every file this process writes: past it, the kernel
refuses the write (``EFBIG``, or a short write), exactly where a full disk refuses one
(``ENOSPC``), and SQLite fails the statement as it would then (``SQLITE_IOERR_WRITE``,
``SQLITE_FULL``), rolling the transaction back itself. It is set here, in a process of
its own, so the test runner's files are never capped.

Reads one JSON scenario per line on stdin and prints one JSON line per scenario::

    {"dir": DIR, "room": BYTES, "verdicts": [true, false, ...]}

A chat on ``DIR/agent.db`` runs one turn per verdict: the model asks for ``refund`` of
that turn's order (gated: approved when the verdict is true, denied otherwise) and an
ungated ``lookup``, then answers. The files may grow ``room`` bytes past their size
when the chat was made; the chat is driven (decisions, ``complete()``, the next
question) while the writes fail, then the room comes back and the chat is driven to
the end. The reply says what ran, what every failed call raised, and whether a fresh
connection loads the same chat.
"""

from __future__ import annotations

import json
import resource
import signal
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

import nbagent
from nbagent import Chat, StoreError, Tool, tool
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

ran: list[tuple[str, Any]] = []


class Refund(Tool):
    """Refund an order (a side effect: runs at most once)."""

    name = "refund"
    requires_approval = True

    def execute(self, order_id: int) -> str:
        """Refund.

        Args:
            order_id: The order to refund.
        """
        ran.append(("refund", order_id))
        return f"refunded order {order_id}: " + "r" * 1500  # results that fill pages


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    ran.append(("lookup", city))
    return f"{city}: " + "l" * 2500


def _cap(size: int | None) -> None:
    resource.setrlimit(
        resource.RLIMIT_FSIZE,
        (resource.RLIM_INFINITY if size is None else size, resource.RLIM_INFINITY),
    )


def _lifecycle(chat: Chat) -> list[Any]:
    return [
        [c.id, c.name, c.arguments, c.status, c.decision and c.decision.verdict, c.result]
        for c in chat.tool_calls
    ]


def run(directory: str, room: int, verdicts: list[bool]) -> dict[str, Any]:
    ran.clear()
    db = Path(directory) / "agent.db"
    script = []
    for i, _ in enumerate(verdicts):
        script.append(call_tools(("refund", {"order_id": i}), ("lookup", {"city": f"city {i}"})))
        script.append(reply(f"Turn {i} done. " + "a" * 800))
    store = SQLiteStore(db)
    chat = Chat(provider=ScriptedProvider(script), store=store).with_tools(Refund, lookup)
    errors: list[str] = []
    broken: list[str] = []  # a failed decision that still decided something
    turn = 0

    def attempt(fn: Any, *args: Any) -> bool:
        try:
            fn(*args)
        except StoreError as exc:
            errors.append(str(exc))
            return False
        return True

    def drive(limit: int) -> None:
        nonlocal turn
        for _ in range(limit):
            status = chat.status
            if status in ("idle", "complete"):
                if turn == len(verdicts):
                    return
                before = len(chat.transcript)
                attempt(chat.ask, f"Turn {turn}")
                if len(chat.transcript) > before:  # a question the store refused is not kept
                    turn += 1
            elif status == "awaiting_approval":
                for call in list(chat.pending_approvals):
                    if verdicts[call.arguments["order_id"]]:
                        done = attempt(chat.approve, call)
                    else:
                        done = attempt(chat.deny, call, "not this one")
                    if not done and (
                        call.decision is not None or call not in chat.pending_approvals
                    ):
                        broken.append(f"{call.id}: {call.status} after a failed decision")
                attempt(chat.complete)
            else:
                attempt(chat.complete)

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a refused write fails; it does not kill
    size = max(p.stat().st_size for p in db.parent.iterdir() if p.is_file())
    _cap(size + room)
    try:
        drive(12 * len(verdicts))
    finally:
        _cap(None)  # the disk has room again
    drive(12 * len(verdicts) + 12)
    status = chat.status
    mine = [chat.transcript, _lifecycle(chat), chat.status]
    chat.close()
    store.close()
    with SQLiteStore(db) as fresh:
        loaded = Chat.load(
            chat.id, store=fresh, tools=[Refund, lookup], provider=ScriptedProvider([])
        )
        stored = [loaded.transcript, _lifecycle(loaded), loaded.status]
        loaded.close()
    return {
        "status": status,
        "turns": turn,
        "ran": ran,
        "calls": _lifecycle_json(mine[1]),
        "errors": errors,
        "broken": broken,
        "same_when_loaded": stored == mine,
    }


def _lifecycle_json(lifecycle: Any) -> list[Any]:
    return [[str(x) if i == 5 else x for i, x in enumerate(row)] for row in lifecycle]


def main() -> None:
    nbagent.configure(quiet=True, display=False)
    warnings.simplefilter("ignore")  # "could not be written ... retried": expected here
    for line in sys.stdin:
        scenario = json.loads(line)
        try:
            out = run(scenario["dir"], scenario["room"], scenario["verdicts"])
        except BaseException:  # said to the test, which shows it; the worker goes on
            _cap(None)
            out = {"crash": traceback.format_exc()}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
