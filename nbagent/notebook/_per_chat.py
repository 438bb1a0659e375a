"""One object per chat, made on first use and gone with the chat (state, continuation).

The objects are kept by the chat itself, in an extension with no hooks
(:class:`Kept`): they tell the chat's views, and a view holds its chat, so a
registry keyed weakly by the chat would keep every chat a kernel ever showed
(a dictionary's values keep its weak keys alive). Kept by the chat, a chat its
user dropped goes with its views, its state and its continuation, unless
something still acts on it (a live card's widget, a follower of decisions
made elsewhere, a running turn).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from .._extension import Extension

T = TypeVar("T")


class Kept(Extension):
    """The notebook's objects for one chat (``chat.extensions`` shows it); no hooks."""

    fragments = False

    def __init__(self) -> None:
        self.objects: dict[PerChat[Any], Any] = {}

    def __repr__(self) -> str:
        return f"<nbagent notebook objects: {', '.join(r.name for r in self.objects)}>"


def _kept(chat: Any, make: bool) -> Kept | None:
    """The chat's first :class:`Kept` (made if ``make``). No lock of ours is held around
    ``chat.extend``, which takes the chat's: two threads may each add one, and both then
    use the first."""
    found = next((e for e in chat.extensions if type(e) is Kept), None)
    if found is not None or not make:
        return found
    chat.extend(Kept())
    return next(e for e in chat.extensions if type(e) is Kept)


class PerChat(Generic[T]):
    """``registry.get(chat)`` returns the chat's object, made once by ``make(chat)`` under
    a lock and kept by the chat (see the module docstring)."""

    def __init__(self, make: Callable[[Any], T], name: str = ""):
        self._make = make
        self.name = name or getattr(make, "__name__", "object")
        self._lock = threading.RLock()  # a maker may make another registry's object

    def get(self, chat: Any) -> T:
        kept = _kept(chat, make=True)
        assert kept is not None
        obj = kept.objects.get(self)
        if obj is not None:
            return obj
        with self._lock:
            obj = kept.objects.get(self)
            if obj is None:
                obj = kept.objects[self] = self._make(chat)
            return obj

    def forget(self, chat: Any) -> T | None:
        """Drop the chat's object (the next :meth:`get` makes a new one); it, if it had one."""
        kept = _kept(chat, make=False)
        if kept is None:
            return None
        with self._lock:
            return kept.objects.pop(self, None)

    def peek(self, chat: Any) -> T | None:
        """The chat's object if it has one (none is made)."""
        kept = _kept(chat, make=False)
        return None if kept is None else kept.objects.get(self)
