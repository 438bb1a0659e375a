"""Public objects report the module users import them from.

``nbagent.SQLiteStore.__module__`` is ``"nbagent"``, not ``"nbagent.store._sqlite"``:
reprs, tracebacks, docs and pickles then name the public path, and the private
modules behind it stay free to move. Each public package calls :func:`publish`
for what it exports; ``nbagent`` runs last and names what it re-exports.
"""

from __future__ import annotations

import inspect
from typing import Any


def publish(module: str, namespace: dict[str, Any], names: list[str]) -> None:
    """Set ``__module__`` of the classes and functions ``names`` of ``namespace`` to ``module``.

    Names not in the namespace yet (loaded lazily) are skipped: :func:`publish_one`
    names them when they are first loaded.
    """
    for name in names:
        if name in namespace:
            publish_one(module, namespace[name])


def publish_one(module: str, obj: Any) -> Any:
    """Set ``obj.__module__`` to ``module`` if it is a class or a function; returns ``obj``.

    An object ``nbagent`` itself exports keeps ``"nbagent"`` (its shortest public
    path), even when a subpackage re-exports it under another name.
    """
    if (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__ != "nbagent":
        obj.__module__ = module
    return obj


__all__ = ["publish", "publish_one"]
