"""Placeholder log (replaced by the DataFrame log)."""

from __future__ import annotations

from typing import Any

from ._events import Event
from ._types import Usage


def cost_of(model: str, usage: Usage) -> float | None:
    try:
        from .providers._models import cost_of as _cost
    except ImportError:
        return None
    return _cost(model, usage)


class CallLog:
    def __init__(self, chat: Any):
        self.chat_id = chat.id
        self.events: list[Event] = []

    def on_event(self, event: Event) -> None:
        self.events.append(event)

    def calls(self) -> Any:
        raise NotImplementedError

    def steps(self) -> Any:
        raise NotImplementedError

    def messages(self) -> Any:
        raise NotImplementedError
