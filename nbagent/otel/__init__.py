"""OpenTelemetry traces of every chat: ``nbagent.instrument()`` and ``nbagent.uninstrument()``.

Spans follow the GenAI semantic conventions: ``invoke_agent`` per turn, ``chat`` per
model request, ``execute_tool`` per tool call with its approval as span events (see
:mod:`nbagent.otel._spans`). Needs the ``otel`` extra (``pip install 'nbagent[otel]'``);
importing this package imports no OpenTelemetry module.

For the rest of nbagent (not in ``__all__``): :func:`run_span` (a span around a run of
many chats: a batch), :func:`carrier` and :func:`attached` (a trace carried into the
place a chat runs: a batch row, a Ray worker), :func:`instrumented`.
"""

from __future__ import annotations

from ._instrument import attached as attached
from ._instrument import carrier as carrier
from ._instrument import instrument as instrument
from ._instrument import instrumented as instrumented
from ._instrument import run_span as run_span
from ._instrument import uninstrument as uninstrument
from ._instrument import worker_traces as worker_traces

__all__ = ["instrument", "uninstrument"]
