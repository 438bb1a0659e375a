"""Process-wide defaults, set with :func:`nbagent.configure`.

A chat's own options always win over these; passing ``None`` for a chat
option falls back to the value here.
"""

from __future__ import annotations

import decimal
import math
import numbers
import operator
import os
import reprlib
import threading
from collections.abc import Callable
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
        replay: ``"off"`` (always ask the model), ``"auto"`` (answer a request
            from a recording of an identical one, else ask and record) or
            ``"only"`` (never ask the model; a miss raises ``ReplayMissError``).
            Every response is recorded whatever this says.
        replay_tools: Replay recorded tool results instead of running the tools
            (``True``, or tool names); a call with no recorded outcome runs.
        recordings: A directory where recordings are also kept (one JSON file
            per request), so a notebook rerun in a fresh kernel replays
            (``None``: the process and the chat's store only).
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
    replay: str = "off"
    replay_tools: bool | frozenset[str] = False
    recordings: str | None = None


_lock = threading.Lock()
_config = Config()
_NULLABLE = frozenset({"tool_timeout", "max_cost_usd", "max_total_tokens", "recordings"})


def get_config() -> Config:
    return _config


def configure(**options: Any) -> Config:
    """Change process-wide defaults; returns the new configuration.

    Only the options passed change; ``None`` resets one to its default (or, for
    ``tool_timeout``, the budgets and ``recordings``, to no limit / none). Every value
    is checked before any is applied: a bad one raises and changes nothing.

    Example:
        ``nbagent.configure(tool_concurrency="threads", max_steps=50)``

    Raises:
        TypeError: An unknown option.
        ValueError: A value the option cannot take (named in the message).
    """
    global _config
    known = {f.name for f in fields(Config)}
    unknown = set(options) - known
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; known: {sorted(known)}")
    cost, tokens = check_budgets(options.get("max_cost_usd"), options.get("max_total_tokens"))
    if "max_cost_usd" in options:
        options["max_cost_usd"] = cost
    if "max_total_tokens" in options:
        options["max_total_tokens"] = tokens
    checked: dict[str, Any] = {
        k: v if v is None else _CHECKS.get(k, _same)(v) for k, v in options.items()
    }
    with _lock:
        defaults = Config()
        resolved: dict[str, Any] = {
            k: (getattr(defaults, k) if v is None and k not in _NULLABLE else v)
            for k, v in checked.items()
        }
        _config = replace(_config, **resolved)
        return _config


def positive_int(value: Any, name: str, least: int = 1) -> int:
    """``value`` as an int of at least ``least`` (a numpy integer too); else ``ValueError``."""
    try:
        number = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        number = None
    if number is None or number < least:
        what = "a positive int" if least == 1 else f"an int of at least {least}"
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return number


def seconds(value: Any, name: str, zero: bool = False) -> float:
    """``value`` as a finite number of seconds, above 0 (or 0 too); else ``ValueError``."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = float(value)
        if math.isfinite(number) and (number > 0 or (zero and number == 0)):
            return number
    least = "0 or more" if zero else "more than 0"
    raise ValueError(f"{name} must be a finite number of seconds, {least}, got {value!r}")


def check_budgets(cost: Any, tokens: Any) -> tuple[float | None, int | None]:
    """The budgets in their stored form: ``cost`` a float of dollars above 0 (any real
    number: an int, a NumPy scalar, a ``Decimal``, a ``Fraction``; not a bool),
    ``tokens`` a positive int (``None``: no budget); else ``ValueError``."""
    dollars: float | None = None
    if cost is not None:
        if isinstance(cost, bool) or not isinstance(cost, numbers.Real | decimal.Decimal):
            raise ValueError(f"max_cost_usd must be a positive number of dollars, got {cost!r}")
        try:
            dollars = float(cost)
        except OverflowError:  # 10**400
            dollars = -math.inf if str(cost).startswith("-") else math.inf
        except ValueError:  # a signalling Decimal NaN
            dollars = math.nan
        shown = reprlib.repr(cost)
        if math.isnan(dollars) or not dollars > 0:
            raise ValueError(f"max_cost_usd must be a positive number of dollars, got {shown}")
        if math.isinf(dollars):
            raise ValueError(
                f"max_cost_usd must be a finite number of dollars (use None for no budget), "
                f"got {shown}"
            )
    return dollars, None if tokens is None else positive_int(tokens, "max_total_tokens")


def check_steps(value: Any) -> int | None:
    """A ``max_steps``: a positive int, or ``None`` (the default); else ``ValueError``."""
    return None if value is None else positive_int(value, "max_steps")


def check_flag(value: Any, name: str) -> bool:
    """``True`` or ``False``; else ``ValueError``."""
    if value is True or value is False:
        return value
    raise ValueError(f"{name} must be True or False, got {value!r}")


def _same(value: Any) -> Any:
    return value


def _choice(name: str, allowed: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise ValueError(f"{name} must be {' or '.join(map(repr, allowed))}, got {value!r}")
        return value

    return check


def _path(value: Any) -> str:
    try:
        path = os.fspath(value)
    except TypeError:
        raise ValueError(f"recordings must be a directory path, got {value!r}") from None
    return path if isinstance(path, str) else os.fsdecode(path)


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "tool_concurrency": lambda v: normalize_concurrency(v, "tool_concurrency"),
    "max_concurrency": lambda v: positive_int(v, "max_concurrency"),
    "tool_timeout": lambda v: seconds(v, "tool_timeout"),
    "max_steps": check_steps,
    "stream": lambda v: check_flag(v, "stream"),
    "result_max_rows": lambda v: positive_int(v, "result_max_rows", least=0),
    "result_max_chars": lambda v: positive_int(v, "result_max_chars"),
    "quiet": lambda v: check_flag(v, "quiet"),
    "display": lambda v: check_flag(v, "display"),
    "approval_wait": lambda v: seconds(v, "approval_wait", zero=True),
    "approval_fallback": _choice("approval_fallback", ("park", "deny")),
    "replay": lambda v: check_replay(v),
    "replay_tools": lambda v: check_replay_tools(v),
    "recordings": _path,
}
"""What each option may be, and its stored form (the budgets: ``check_budgets``)."""


def normalize_concurrency(value: Any, name: str = "concurrency") -> ConcurrencyMode:
    """``False``/``"sequential"``/``"none"`` -> sequential; ``True``/``"threads"``; ``"async"``
    (``"fibers"`` too: RubyLLM's ``:fibers``, cooperative tasks on one thread, are asyncio's)."""
    if value is False or value in ("sequential", "none", "off"):
        return "sequential"
    if value is True or value == "threads":
        return "threads"
    if value in ("async", "fibers"):
        return "async"
    raise ToolOptionError(
        f"{name} must be True, 'threads', 'async' ('fibers') or False, got {value!r}"
    )


def check_replay(value: Any) -> str:
    """``"auto"``, ``"only"`` or ``"off"`` (``True``: auto, ``False``: off); else ``ValueError``."""
    if value is True:
        return "auto"
    if value is False:
        return "off"
    if value not in ("auto", "only", "off"):
        raise ValueError(f"replay must be 'auto', 'only' or 'off', got {value!r}")
    return str(value)


def check_replay_tools(value: Any) -> bool | frozenset[str]:
    """A bool, or tool names (only those tools' results are replayed); else ``ValueError``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return frozenset({value})
    try:
        names = frozenset(value)
    except TypeError:
        names = frozenset({0})
    if not all(isinstance(n, str) for n in names):
        raise ValueError(f"replay_tools must be True, False or tool names, got {value!r}")
    return names
