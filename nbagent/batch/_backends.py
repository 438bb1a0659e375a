"""Which backends exist: ``"local"`` always, others registered (or imported) by name.

``nbagent.batch(..., backend="ray")`` imports ``nbagent.batch._ray`` on first
use, which registers itself with :func:`register_backend`; a backend object
(anything with ``name`` and ``run``, see :class:`~nbagent.batch.Backend`) is
used as it is.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable

from ._backend import Backend

_lock = threading.Lock()
_factories: dict[str, Callable[[], Backend]] = {}
_MODULES = {"ray": "nbagent.batch._ray"}
"""Backends shipped with nbagent whose module is imported when first asked for."""


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Make ``backend=name`` build its backend with ``factory()``."""
    with _lock:
        _factories[name] = factory


def get_backend(backend: str | Backend) -> Backend:
    """The backend object for ``backend`` (a name or a backend).

    Raises:
        ValueError: An unknown name.
    """
    if not isinstance(backend, str):
        if isinstance(backend, Backend):
            return backend
        raise TypeError(
            f"backend must be a name ('local', 'ray') or an object with name and run(), "
            f"got {type(backend).__name__}"
        )
    if backend == "local":
        from ._local import LocalBackend

        return LocalBackend()
    with _lock:
        factory = _factories.get(backend)
    if factory is None and backend in _MODULES:
        importlib.import_module(_MODULES[backend])
        with _lock:
            factory = _factories.get(backend)
    if factory is None:
        known = sorted({"local", *_factories, *_MODULES})
        raise ValueError(f"unknown batch backend {backend!r}; known: {known}")
    return factory()


__all__ = ["get_backend", "register_backend"]
