"""Turning tracing on and off for the whole process: ``instrument`` and ``uninstrument``.

One :class:`Instrumentation` at a time holds the tracer and the content switch; it
registers a factory with the core's process-wide extensions
(:func:`nbagent._extension.auto_extend`), so every chat, made before or after, gets a
:class:`~nbagent.otel._spans.Tracer`. Off (never instrumented, or after
``uninstrument()``) nothing listens to any chat: no per-event work at all.

Runs of many chats (a batch, a Ray worker's rows) carry the caller's trace as a W3C
``traceparent`` carrier (:func:`carrier`, :func:`attached`), so their chats' spans are
children of the run's span wherever they run.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import threading
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

from .._extension import auto_extend, stop_auto_extend
from .._optional import require

_LOCK = threading.Lock()
_CURRENT: Instrumentation | None = None
_FROM_RUN = False
"""The instrumentation in force was made by :func:`worker_traces` for a traced run (a Ray
worker following its driver), not by this process's own ``instrument()``."""


class Instrumentation:
    """What ``instrument()`` set up: the tracer, the content switch, the chats it traces."""

    def __init__(self, tracer_provider: Any, content: bool):
        trace = require("opentelemetry.trace", "nbagent.instrument()")
        self.provider = tracer_provider
        self.tracer = trace.get_tracer("nbagent", _version(), tracer_provider=tracer_provider)
        self.content = content
        self.tracers: weakref.WeakSet[Any] = weakref.WeakSet()
        self._global = trace.get_tracer_provider  # where spans go without tracer_provider
        self._exit_for: Any = None  # the provider spans went to when _at_exit was registered

    def exit_first(self) -> None:
        """Have :func:`_at_exit` run before the shutdown of the provider spans go to now (it
        registers its own exit hook when it is made, and exit hooks run last registered
        first): the global provider may be made after ``instrument()``, and its shutdown
        then ran first, dropping the interrupted spans. Each tracer calls this as it keeps
        a burst's first change (so before any span of the burst is made): nothing is done
        unless the provider changed since."""
        provider = self.provider if self.provider is not None else self._global()
        if provider is self._exit_for:
            return
        with _LOCK:
            if _CURRENT is not self:
                return  # replaced or stopped: its successor's hook, or none
            self._exit_for = provider
            atexit.unregister(_at_exit)
            atexit.register(_at_exit)

    def extension_for(self, chat: Any) -> Any:
        """The factory given to the core: a tracer for ``chat``."""
        from ._spans import Tracer

        tracer = Tracer(self)
        self.tracers.add(tracer)
        return tracer

    def stop(self, outcome: str = "detached") -> None:
        """No chat is traced any more: each open turn ends with ``outcome``."""
        stop_auto_extend(self.extension_for)
        for tracer in list(self.tracers):
            tracer.detach(outcome)

    def force_flush(self) -> None:
        """Hand every ended span to the exporters now (the provider's processors)."""
        provider = self.provider
        if provider is None:
            from opentelemetry import trace

            provider = trace.get_tracer_provider()
        flush = getattr(provider, "force_flush", None)
        if callable(flush):
            flush()


def _at_exit() -> None:
    """The process exits (a kernel shut down or restarted) while tracing is on: a turn still
    running ends now, ``interrupted`` (its calls still running say ``running``), and every
    span is flushed, before the SDK's own shutdown (registered when its provider was made,
    before ``instrument()``, or before the chat's first span when the global provider was
    made after it: :meth:`Instrumentation.exit_first`; exit hooks run last registered
    first). Left open, its spans already exported had a parent that never was."""
    global _CURRENT, _FROM_RUN
    with _LOCK:
        inst, _CURRENT, _FROM_RUN = _CURRENT, None, False
    if inst is None:
        return
    with contextlib.suppress(Exception):
        inst.stop("interrupted")
    with contextlib.suppress(Exception):
        inst.force_flush()


@functools.cache
def _version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nbagent")
    except PackageNotFoundError:
        return None


def instrument(tracer_provider: Any = None, *, content: bool = False) -> None:
    """Export every chat of this process as OpenTelemetry GenAI spans.

    A turn is an ``invoke_agent`` span, each model request a ``chat`` span (model,
    usage, cost, finish reasons) and each tool call an ``execute_tool`` span whose
    events are its approval (requested; decided: verdict, who, reason, wait) and whose
    attributes say how it ended (``nbagent.call.status``: ``ok``, ``denied``,
    ``in_doubt``, ``timed_out``...; hosted; the MCP server). Chats made before the call
    are traced from their next event on. Calling it again replaces the settings.

    Args:
        tracer_provider: Where spans go (an ``opentelemetry.sdk.trace.TracerProvider``
            with its exporters); ``None``: OpenTelemetry's global provider.
        content: Also export what was said: prompts, answers, tool arguments and
            results (``gen_ai.input.messages``, ``gen_ai.tool.call.arguments``...).
            Off by default: only names, numbers, statuses and decisions leave.
            Secrets never do (API keys, MCP server env and headers, DSN passwords are
            never in a chat's events; key-shaped text is masked in everything exported).

    Raises:
        ModuleNotFoundError: OpenTelemetry is not installed, or, with no
            ``tracer_provider``, its SDK is not (one line naming the ``otel`` extra).
        TypeError: ``tracer_provider`` is not a tracer provider, or ``content`` is not
            ``True`` or ``False`` (``"false"`` read from an environment variable would be
            true: every prompt would leave); tracing stays as it was.
    """
    global _CURRENT, _FROM_RUN
    if not isinstance(content, bool):
        raise TypeError(f"content is True or False, got {type(content).__name__} {content!r}")
    if tracer_provider is not None and not callable(getattr(tracer_provider, "get_tracer", None)):
        raise TypeError(
            "tracer_provider is an OpenTelemetry TracerProvider (it has get_tracer()), got "
            f"{type(tracer_provider).__name__}"
        )
    if tracer_provider is None:
        # OpenTelemetry's API alone (the model SDKs bring it) makes every span a no-op: the
        # global provider exports only once the SDK (the otel extra) sets one up. Another
        # implementation's provider is given as tracer_provider.
        require("opentelemetry.sdk", "nbagent.instrument()")
    inst = Instrumentation(tracer_provider, content)
    with _LOCK:
        old, _CURRENT, _FROM_RUN = _CURRENT, inst, False
    if old is not None:
        old.stop()
    auto_extend(inst.extension_for)
    inst.exit_first()  # registered anew: after the provider's own shutdown hook


def uninstrument() -> bool:
    """Stop exporting spans (open turn spans end now); whether tracing was on."""
    global _CURRENT, _FROM_RUN
    with _LOCK:
        old, _CURRENT, _FROM_RUN = _CURRENT, None, False
    atexit.unregister(_at_exit)
    if old is None:
        return False
    old.stop()
    return True


def instrumented() -> bool:
    """Whether :func:`instrument` is in force."""
    return _CURRENT is not None


def current() -> Instrumentation | None:
    """The instrumentation in force, if any."""
    return _CURRENT


CONTENT_KEY = "nbagent-content"
"""A carrier's own entry: whether the tracing process exports content (``"1"``)."""


def carrier() -> dict[str, str]:
    """The caller's trace as a W3C carrier (``{"traceparent": ...}``); empty when off."""
    inst = _CURRENT
    if inst is None:
        return {}
    from opentelemetry.propagate import inject

    out: dict[str, str] = {}
    inject(out)
    if out and inst.content:
        out[CONTENT_KEY] = "1"
    return out


def worker_traces(carried: Mapping[str, str]) -> None:
    """A process running chats for runs of many chats (a Ray worker) traces them as the
    run's driver does, each run anew: a kept worker follows the latest run.

    Its spans go to this process's global tracer provider (configure it in the worker,
    e.g. Ray's ``worker_process_setup_hook``); ``content`` follows the run's, and a run
    not traced (nothing carried) turns it off again. A process that called
    :func:`instrument` itself keeps its own settings.
    """
    global _FROM_RUN
    inst = _CURRENT
    if inst is not None and not _FROM_RUN:
        return  # this process's own instrument(): its settings stand
    if not carried:
        if inst is not None:  # the last run was traced, this one is not
            uninstrument()
        return
    content = carried.get(CONTENT_KEY) == "1"
    if inst is not None and inst.content == content:
        return
    instrument(content=content)
    _FROM_RUN = True


@contextlib.contextmanager
def attached(carried: Mapping[str, str] | None) -> Iterator[None]:
    """Run the block inside the trace ``carried`` names (a run's span): chats started
    here are its children. Does nothing when off or when nothing was carried."""
    if not carried or _CURRENT is None:
        yield
        return
    from opentelemetry import context
    from opentelemetry.propagate import extract

    token = context.attach(extract(dict(carried)))
    try:
        yield
    finally:
        context.detach(token)


@contextlib.contextmanager
def run_span(name: str, attributes: Mapping[str, Any]) -> Iterator[dict[str, str]]:
    """A span around a run of many chats (``invoke_workflow {name}``, its
    ``gen_ai.workflow.name`` ``name``), current in the block; yields its carrier for the
    run's chats (empty when off)."""
    inst = _CURRENT
    if inst is None:
        yield {}
        return
    from opentelemetry import trace
    from opentelemetry.propagate import inject

    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.workflow.name": name,
    }
    attrs.update(attributes)
    with inst.tracer.start_as_current_span(
        f"invoke_workflow {name}", kind=trace.SpanKind.INTERNAL, attributes=attrs
    ):
        out: dict[str, str] = {}
        inject(out)
        if out and inst.content:
            out[CONTENT_KEY] = "1"
        yield out
