"""A test model with prices, registered in the catalog for one test and removed after."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from nbagent.providers import ModelInfo, _catalog, register_model


@contextlib.contextmanager
def registered(info: ModelInfo) -> Iterator[ModelInfo]:
    """Register ``info`` (the catalog is process-wide: other tests must not see it)."""
    register_model(info)
    try:
        yield info
    finally:
        with _catalog._lock:
            _catalog._registry.pop(info.name.lower(), None)
            _catalog._cache.clear()
