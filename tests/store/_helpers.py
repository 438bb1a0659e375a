"""Reaching a chat's store extension in tests (the chat itself exposes only close/refresh)."""

from __future__ import annotations

from nbagent import Chat
from nbagent.store._extension import StoreExtension


def store_ext(chat: Chat) -> StoreExtension:
    """The store extension attached to ``chat``."""
    return next(e for e in chat.extensions if isinstance(e, StoreExtension))
