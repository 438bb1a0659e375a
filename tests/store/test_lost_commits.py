"""A write whose commit went through but whose answer was lost (the connection dropped during
``COMMIT``) is retried by the chat like any failed write: the store recognises its own rows
and its own claim, so the retry is not mistaken for another process driving the chat, and
nothing runs twice. On SQLite and on PostgreSQL."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, StoreError, tool
from nbagent.store import StoreConflictWarning

sys.path.insert(0, str(Path(__file__).parent))
from _helpers import store_ext

ran: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    ran.append(key)
    return f"value of {key}"


def _lose_answer(store: Any, method: str, when: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``store.<method>`` commits, then raises once as if the answer had been lost, for the
    first call whose entries hold an event of type ``when``."""
    real = getattr(store, method)
    armed = [True]

    def lossy(chat_id: str, *args: Any, **kwargs: Any) -> Any:
        result = real(chat_id, *args, **kwargs)
        entries = args[2] if method == "claim" and len(args) > 2 else args[0]
        if armed[0] and any(e.type == when for e in entries):
            armed[0] = False
            raise StoreError("the connection was lost while committing")
        return result

    monkeypatch.setattr(store, method, lossy)


def _same_as_stored(chat: Chat, backend: Any) -> None:
    with backend.open() as other:
        loaded = Chat.load(chat.id, store=other, tools=[lookup])
        assert loaded.transcript == chat.transcript
        assert [(c.id, c.status) for c in loaded.tool_calls] == [
            (c.id, c.status) for c in chat.tool_calls
        ]
        seqs = [e.seq for e in other.iter_events(chat.id)]
        assert len(seqs) == len(set(seqs))
        loaded.close()


def test_a_result_written_twice_is_the_same_result(
    store: Any, backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran.clear()
    _lose_answer(store, "write", "tool_call_finished", monkeypatch)
    chat = Chat(model="demo", store=store).with_tools(lookup)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat.ask("lookup the key alpha")
        chat.ask("lookup the key beta")
    assert not [w for w in caught if issubclass(w.category, StoreConflictWarning)]
    assert store_ext(chat).detached is None
    assert chat.status == "complete" and ran == ["alpha", "beta"]
    chat.close()
    _same_as_stored(chat, backend)


def test_a_claim_committed_twice_is_still_this_processs_claim(
    store: Any, backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran.clear()
    _lose_answer(store, "claim", "model_request_finished", monkeypatch)
    chat = Chat(model="demo", store=store).with_tools(lookup)
    with pytest.raises(StoreError, match="was not run, and runs at the next step"):
        chat.ask("lookup the key alpha")
    assert ran == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreConflictWarning)
        chat.complete()  # claims again: the claim it already holds
    assert chat.status == "complete" and ran == ["alpha"]
    chat.close()
    _same_as_stored(chat, backend)
