"""Run a store command as an unprivileged user: root writes any file, whatever its mode.

    python _as_user.py UID open DB          -> {"error": ..., "files": {name: mode}}
    python _as_user.py UID new DB           -> _agent.py's commands, as that user
    python _as_user.py UID approve DB CALL_ID

Run by root, it does everything that needs reading the interpreter's files (imports, a
whole chat on a scratch store, so that nothing is imported later) and then becomes UID
(its group too, no supplementary groups), as ``setpriv --reuid=UID --regid=UID
--clear-groups`` would; run by anyone else, it is that user already. Prints one JSON line.
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

import nbagent
from nbagent import StoreError
from nbagent.store import SQLiteStore


def _warm() -> None:
    """Every module a command imports late is imported now, while the interpreter's files
    can be read (a root-only ``~/.pyenv``)."""
    counter = os.environ.pop("NBAGENT_TEST_COUNTER", None)
    with tempfile.TemporaryDirectory() as scratch:
        for i, verdict in enumerate(([], ["--deny", "no"])):
            db = os.path.join(scratch, f"warm{i}.db")
            out = _agent._main(["new", db])
            _agent._main(["approve", db, out["call_id"], *verdict])
        with contextlib.suppress(StoreError):
            SQLiteStore(os.path.join(scratch, "none", "x.db"))
    if counter is not None:
        os.environ["NBAGENT_TEST_COUNTER"] = counter


def _files(db: str) -> dict[str, str]:
    folder = os.path.dirname(db)
    return {
        name: oct(os.stat(os.path.join(folder, name)).st_mode & 0o777)
        for name in sorted(os.listdir(folder))
    }


def _main(argv: list[str]) -> dict[str, Any]:
    uid, cmd, db = int(argv[0]), argv[1], argv[2]
    nbagent.configure(quiet=True, display=False)
    if os.geteuid() == 0 and uid != 0:
        _warm()
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    if cmd == "open":
        try:
            SQLiteStore(db).close()
            error = None
        except StoreError as exc:
            error = str(exc)
        return {"error": error, "files": _files(db)}
    try:
        return {"error": None, **_agent._main([cmd, db, *argv[3:]])}
    except StoreError as exc:
        return {"error": str(exc), "files": _files(db)}


if __name__ == "__main__":
    print(json.dumps(_main(sys.argv[1:])), flush=True)
