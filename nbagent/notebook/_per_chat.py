"""One object per chat, made on first use and gone with the chat (state, continuation)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class PerChat(Generic[T]):
    """``registry.get(chat)`` returns the chat's object, made once by ``make(chat)`` under a lock;
    the registry holds chats weakly."""

    def __init__(self, make: Callable[[Any], T]):
        self._make = make
        self._objects: weakref.WeakKeyDictionary[Any, T] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, chat: Any) -> T:
        with self._lock:
            obj = self._objects.get(chat)
            if obj is None:
                obj = self._objects[chat] = self._make(chat)
            return obj

    def __contains__(self, chat: Any) -> bool:
        return chat in self._objects
