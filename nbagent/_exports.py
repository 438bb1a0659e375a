"""Public objects report the module users import them from.

``nbagent.SQLiteStore.__module__`` is ``"nbagent"``, not ``"nbagent.store._sqlite"``:
reprs, tracebacks, docs and pickles then name the public path, and the private
modules behind it stay free to move. Each public package calls :func:`publish`
for what it exports; ``nbagent`` runs last and names what it re-exports.
"""

from __future__ import annotations

import inspect
from typing import Any

ROOT_LAZY = {
    "AnthropicProvider": "nbagent.providers",
    "DemoProvider": "nbagent.providers",
    "Inbox": "nbagent.inbox",
    "MCPServer": "nbagent.mcp",
    "MCPTool": "nbagent.mcp",
    "OpenAIProvider": "nbagent.providers",
    "PostgresStore": "nbagent.store",
    "SQLiteStore": "nbagent.store",
    "Store": "nbagent.store",
    "batch": "nbagent.batch",
    "batch_async": "nbagent.batch",
    "batch_results": "nbagent.batch",
    "compare": "nbagent.comparison",
    "evaluate": "nbagent.evaluation",
    "evaluate_async": "nbagent.evaluation",
    "inbox": "nbagent.inbox",
    "instrument": "nbagent.otel",
    "open_store": "nbagent.store",
    "read_log": "nbagent.log",
    "suggest_policies": "nbagent.evaluation",
    "uninstrument": "nbagent.otel",
}
"""What ``nbagent`` exports but loads on first use, and from where: ``import nbagent``
loads only what a first ``Chat()`` needs, not the SDKs, the demo model's reading, the
wings a chat plugs in only when asked (store, MCP) or the many-chat ones (batch, inbox,
comparison, evaluation). The core imports ``asyncio`` inside the functions that need a
loop, not at import: a sync chat runs its coroutines inline. Each of these reports
``"nbagent"`` whichever module loads it first (:func:`publish_one`), as the names
``nbagent`` imports at once do."""


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
        home = ROOT_LAZY.get(obj.__name__)
        root = home is not None and obj.__module__.startswith(home)
        obj.__module__ = "nbagent" if root else module
    return obj


__all__ = ["ROOT_LAZY", "publish", "publish_one"]
