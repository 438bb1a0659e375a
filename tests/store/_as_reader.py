"""A reader of a store, as an unprivileged user (``_as_user.py`` drops the privileges).

    python _as_reader.py UID DB [--plain]

Reads commands from stdin, one a line, and answers each with one JSON line:

    read [CHAT_ID]        -> chats, messages, pending call ids, and CHAT_ID's status loaded
                             (or the error of loading it: ``load_error``)
    write CALL_ID CHAT_ID -> the errors of the store's and a loaded chat's approve and deny,
                             and of a new chat; the loaded chat's status after complete();
                             the files of the store's directory
    quit

The store is opened once, ``SQLiteStore(DB, read_only=True)`` (``--plain``: without), and
kept open between commands, so another process may write meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import _agent
import _as_user

import nbagent
from nbagent import Chat, StoreError
from nbagent.store import SQLiteStore


def _warm() -> None:
    """The read-only store's paths and a loaded chat's, while the interpreter's files can be
    read (imports happen late)."""
    _as_user._warm()
    with tempfile.TemporaryDirectory() as scratch:
        db = os.path.join(scratch, "warm.db")
        out = _agent._main(["new", db])
        _look(db, out)  # immutable: no connection open
        with SQLiteStore(db) as writer:
            writer.pending_approvals()
            _look(db, out)  # mode=ro: through the writer's -wal and -shm


def _look(db: str, out: dict[str, Any]) -> None:
    with SQLiteStore(db, read_only=True) as store:
        nbagent.read_log(store)
        store.pending_approvals()
        chat = Chat.load(out["chat_id"], store=store, tools=[_agent.Refund])
        with contextlib.suppress(StoreError):
            store.approve(out["call_id"])
        with contextlib.suppress(StoreError):
            chat.approve(out["call_id"])


def _read(store: SQLiteStore, argv: list[str]) -> dict[str, Any]:
    logs = nbagent.read_log(store)
    messages = nbagent.read_log(store, kind="messages")
    out: dict[str, Any] = {
        "chats": len(logs),
        "messages": len(messages),
        "pending": sorted(c.id for c in store.pending_approvals()),
    }
    if argv:
        try:
            chat = Chat.load(argv[0], store=store, tools=[_agent.Refund])
        except StoreError as exc:
            out["load_error"] = str(exc)
            return out
        out["status"] = chat.status
        out["loaded_pending"] = [c.id for c in chat.pending_approvals]
        chat.close()  # writes nothing (a chat on a read-only store is for looking)
    return out


def _write(store: SQLiteStore, db: str, call_id: str, chat_id: str) -> dict[str, Any]:
    errors: dict[str, str | None] = {}
    chat = Chat.load(chat_id, store=store, tools=[_agent.Refund])
    attempts = {
        "store.approve": lambda: store.approve(call_id, by="reader"),
        "store.deny": lambda: store.deny(call_id, by="reader"),
        "chat.approve": lambda: chat.approve(call_id),
        "chat.deny": lambda: chat.deny(call_id),
        "new chat": lambda: Chat(model="demo", store=store).ask("hello"),
        "chat.complete": chat.complete,  # a chat on a read-only store is for looking
    }
    for name, attempt in attempts.items():
        try:
            attempt()
            errors[name] = None
        except StoreError as exc:
            errors[name] = str(exc)
    return {"errors": errors, "status": chat.status, "files": _as_user._files(db)}


def main(argv: list[str]) -> None:
    uid, db = int(argv[0]), argv[1]
    nbagent.configure(quiet=True, display=False)
    if os.geteuid() == 0 and uid != 0:
        _warm()
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    try:
        store = SQLiteStore(db) if "--plain" in argv else SQLiteStore(db, read_only=True)
    except StoreError as exc:
        print(json.dumps({"error": str(exc), "files": _as_user._files(db)}), flush=True)
        return
    print(json.dumps({"error": None, "files": _as_user._files(db)}), flush=True)
    for line in sys.stdin:
        cmd, *rest = line.split()
        if cmd == "quit":
            break
        try:
            if cmd == "read":
                out = _read(store, rest)
            elif cmd == "write":
                out = _write(store, db, rest[0], rest[1])
            else:
                raise SystemExit(f"unknown command {cmd!r}")
            out["error"] = None
        except StoreError as exc:
            out = {"error": str(exc)}
        print(json.dumps(out), flush=True)
    store.close()
    print(json.dumps({"closed": True, "files": _as_user._files(db)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
