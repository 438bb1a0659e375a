"""The store as a place recordings live: its ``recordings`` table and its call records.

:class:`StoreRecordings` adapts a :class:`~nbagent.store.Store` to the core's
:class:`~nbagent._replay.Recordings` (what ``StoreExtension.recordings()``
returns): a response is found by its request's key in any chat of the store,
and a call's recorded result is read from ``tool_calls`` (the latest run of
that call id by a chat whose step had the key), so nothing is stored twice.
A store without the four recording methods (one written before them) is no
place for recordings: the chat then records in the process (and a directory).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .._recording import RecordedResult, Recording
from .._result_text import without_edit_note
from ._protocol import Store

_METHODS = ("record_response", "recording", "recordings", "recorded_result")


def store_recordings(
    store: Store, queue: Callable[[Recording, str, int, bool], None] | None = None
) -> StoreRecordings | None:
    """``store`` as recordings, or ``None`` if it has no recording methods."""
    if all(callable(getattr(store, m, None)) for m in _METHODS):
        return StoreRecordings(store, queue)
    return None


class StoreRecordings:
    """A store's recordings (see the module docstring).

    ``queue``: where new recordings go instead of being written at once (the
    chat's store extension writes them with its next batch, after the
    assistant message they refer to, and keeps them while the store cannot be
    written, like its events).
    """

    def __init__(
        self, store: Any, queue: Callable[[Recording, str, int, bool], None] | None = None
    ):
        self.store = store
        self.queue = queue

    def __repr__(self) -> str:
        return f"the store {self.store.location}"

    def find(self, key: str) -> Recording | None:
        found: Recording | None = self.store.recording(key)
        return found

    def add(self, recording: Recording, chat_id: str, step: int, replayed: bool) -> None:
        if self.queue is not None:
            self.queue(recording, chat_id, step, replayed)
        else:
            self.store.record_response(recording, chat_id, step, replayed)

    def candidates(self, fp: dict[str, Any]) -> Iterable[Recording]:
        same_model: list[Recording] = self.store.recordings(model=fp.get("model"), limit=200)
        return same_model or self.store.recordings(limit=200)

    def result(self, key: str, call_id: str) -> RecordedResult | None:
        call = self.store.recorded_result(key, call_id)
        if call is None or call.result is None:
            return None
        edit = call.decision.arguments if call.decision is not None else None
        content = without_edit_note(call.result.content, edit is not None)
        ran_with = edit if edit is not None else call.arguments
        return RecordedResult(call.status, content, tuple(call.result.parts), ran_with)

    def add_result(self, key: str, call_id: str, result: RecordedResult) -> None:
        """Nothing to do: the store's call records hold every result already."""


__all__ = ["StoreRecordings", "store_recordings"]
