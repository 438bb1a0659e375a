"""A worker process for the stale-copy races (``test_stale_copies.py``).

Reads one JSON job per line on stdin, prints one JSON line per job::

    {"db": DB, "chat": CHAT_ID, "op": "ask" | "complete", "tag": "b", "go": EPOCH}

It loads the chat first (so that two workers hold the same, soon stale, copy), waits
until ``go``, then asks its own question (``ask``) or completes the chat (``complete``)
with a model that answers ``answer of TAG`` after a short latency. The reply says the
last step's kind, the chat's last message, how many requests reached the model, and the
warnings raised (their categories).
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from typing import Any

from nbagent import Chat
from nbagent.store import open_store
from nbagent.testing import ScriptedProvider, reply


def job(spec: dict[str, Any]) -> dict[str, Any]:
    tag = str(spec["tag"])
    asked: list[int] = []

    def model(request: Any) -> Any:
        asked.append(1)
        time.sleep(0.05)  # both workers ask before either writes the answer
        return reply(f"answer of {tag}")

    store = open_store(spec["db"])
    try:
        provider = ScriptedProvider([model], repeat_last=True)
        chat = Chat.load(spec["chat"], store=store, provider=provider, display=False)
        time.sleep(max(0.0, float(spec["go"]) - time.time()))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if spec["op"] == "ask":
                chat.ask(f"question of {tag}")
            else:
                chat.complete()
        last = chat.transcript[-1] if chat.transcript else None
        out = {
            "step": chat.last_step.kind if chat.last_step is not None else None,
            "last": None if last is None else str(last.content),
            "asked": len(asked),
            "warnings": sorted({w.category.__name__ for w in caught}),
        }
        chat.close()
        return out
    finally:
        store.close()


def main() -> None:
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        try:
            out = job(json.loads(line))
        except Exception as exc:
            out = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
