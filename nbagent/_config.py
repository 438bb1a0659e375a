"""Process-wide defaults, set with :func:`nbagent.configure`.

A chat's own options always win over these; passing ``None`` for a chat
option falls back to the value here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields, replace
from typing import Any

from ._errors import ToolOptionError
from ._types import ConcurrencyMode


@dataclass(frozen=True)
class Config:
    """Defaults for every chat in this process.

    Attributes:
        tool_concurrency: ``False`` (sequential), ``True``/``"threads"`` or ``"async"``.
        max_concurrency: Most calls of one round running at once.
        tool_timeout: Default seconds before a call is abandoned (``None``: no limit).
        max_steps: Steps ``complete()`` takes before it stops with ``budget_exhausted``.
        max_cost_usd: Dollars a chat may spend (whole chat) before it parks with
            ``budget_exhausted`` (``None``: no budget).
        max_total_tokens: Input plus output tokens a chat may use (whole chat;
            ``None``: no budget).
        stream: Stream responses (text and arguments arrive as events).
        result_max_rows: Rows of a DataFrame result shown to the model.
        result_max_chars: Characters of any result shown to the model.
        quiet: Do not announce the provider picked by ``Chat()``.
        display: Render chats live when running in a notebook.
        approval_wait: Seconds ``await chat.ask_async`` waits for a click before
            ``approval_fallback`` applies (only where the kernel can wait).
        approval_fallback: ``"park"`` (return with approval pending) or ``"deny"``.
    """

    tool_concurrency: bool | str = False
    max_concurrency: int = 8
    tool_timeout: float | None = None
    max_steps: int = 25
    max_cost_usd: float | None = None
    max_total_tokens: int | None = None
    stream: bool = True
    result_max_rows: int = 20
    result_max_chars: int = 20_000
    quiet: bool = False
    display: bool = True
    approval_wait: float = 300.0
    approval_fallback: str = "park"


_lock = threading.Lock()
_config = Config()
_NULLABLE = frozenset({"tool_timeout", "max_cost_usd", "max_total_tokens"})


def get_config() -> Config:
    return _config


def configure(**options: Any) -> Config:
    """Change process-wide defaults; returns the new configuration.

    Example:
        ``nbagent.configure(tool_concurrency="threads", max_steps=50)``

    Raises:
        TypeError: An unknown option.
    """
    global _config
    known = {f.name for f in fields(Config)}
    unknown = set(options) - known
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; known: {sorted(known)}")
    from ._budget import check_budgets

    check_budgets(options.get("max_cost_usd"), options.get("max_total_tokens"))
    if "tool_concurrency" in options:
        options["tool_concurrency"] = normalize_concurrency(options["tool_concurrency"])
    with _lock:
        defaults = Config()
        resolved = {
            k: (getattr(defaults, k) if v is None and k not in _NULLABLE else v)
            for k, v in options.items()
        }
        _config = replace(_config, **resolved)
        return _config


def normalize_concurrency(value: Any) -> ConcurrencyMode:
    """``False``/``"sequential"``/``"none"`` -> sequential; ``True``/``"threads"``; ``"async"``."""
    if value is False or value in ("sequential", "none", "off"):
        return "sequential"
    if value is True or value == "threads":
        return "threads"
    if value == "async":
        return "async"
    raise ToolOptionError(f"concurrency must be True, 'threads', 'async' or False, got {value!r}")
