"""A Ray row approved while it was parked continues on a worker as the chat its
``make_chat`` made: with the subscriber, callbacks, extension and ``always_allow``
predicate ``make_chat`` set it up with in code (``_ray_template_agents``).

Before, the continuation on a worker loaded the stored chat with the template's tools and
provider only: g1's refund, vetoed by the extension's ``claim()``, ran; no audit line was
written for the approved calls; g2's second refund, which its predicate approves, parked
again. The local backend's own continuation honoured them all (test_batch_continue_as_made.py).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from _ray_template_agents import make_chat

import nbagent
from nbagent.store import SQLiteStore

RAN = ["claim ok", "before", "audit", "after"]


def _approve_when_all_parked(db: Path, n: int) -> threading.Thread:
    def go() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with SQLiteStore(db) as store:  # its own connection, as another process has
                pending = store.pending_approvals()
                if len(pending) == n:
                    for call in pending:
                        store.approve(call, by="ops")
                    return
            time.sleep(0.1)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread


def test_a_row_continued_on_a_worker_keeps_what_make_chat_set_up(
    ray_cluster: Any, tmp_path: Path
) -> None:
    db, log = tmp_path / "b.db", tmp_path / "log.txt"
    approving = _approve_when_all_parked(db, 3)
    result = nbagent.batch(
        [{"item": k, "log": str(log)} for k in ("g0", "g1", "g2")],
        make_chat,
        prompt="Work on {item}",
        key="item",
        store=str(db),
        backend="ray",
        backend_options={"workers": 2},
        progress=False,
        wait_for_decisions=30,
    )
    approving.join(5)
    notes: dict[str, list[str]] = {}
    for line in (log.read_text() if log.exists() else "").splitlines():  # none: no hook ran
        what, item = line.rsplit(" ", 1)
        notes.setdefault(item, []).append(what)
    assert notes == {"g0": RAN, "g1": ["claim VETO"], "g2": RAN, "g2-auto": RAN}
    assert list(result["status"][[0, 2]]) == ["done", "done"], result[["status", "error"]]
    with SQLiteStore(db) as store:
        ran = {
            c.arguments["item"]: c.status
            for chat_id in result["chat_id"]
            for c in store.load(chat_id).calls
        }
    assert ran["g0"] == ran["g2"] == ran["g2-auto"] == "ok"
    assert ran["g1"] != "ok"  # vetoed on the worker: it never ran
