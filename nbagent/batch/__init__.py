"""Many chats at once: one chat per input of a DataFrame or a list, run concurrently.

::

    import nbagent
    from nbagent import Chat

    result = nbagent.batch(df, lambda: Chat("demo"), prompt="Summarise {title}")
    result[["status", "reply", "tokens", "cost_usd"]]
    nbagent.read_log(result)            # every tool call of every chat

:func:`batch` (and :func:`batch_async`) runs a chat per input with adaptive
concurrency, shows live progress, and returns a DataFrame with one row per
input. With ``store=`` the batch is resumable; rows that wait for an approval
park while the rest go on. Where chats run is a backend
(:class:`Backend`: ``"local"``, ``"ray"`` or :class:`RayBackend` for its
options); the seam is described in
:mod:`nbagent.batch._backend`.
"""

from __future__ import annotations

from .._exports import publish as _publish
from ._backend import Backend, Job, ProgressSink, RowResult, RowStatus, RowUpdate, RunSpec
from ._backends import register_backend
from ._batch import batch, batch_async, batch_results

# Left out of __all__: this face's API for the rest of nbagent (evaluate and sweep pass
# the row to a factory by the batch's one rule).
from ._batch import takes_row as takes_row
from ._inputs import BatchInputError, InputError
from ._ray import RayBackend, RayUnavailable
from ._run import COLUMNS, BatchRun

__all__ = [
    "COLUMNS",
    "Backend",
    "BatchInputError",
    "BatchRun",
    "InputError",
    "Job",
    "ProgressSink",
    "RayBackend",
    "RayUnavailable",
    "RowResult",
    "RowStatus",
    "RowUpdate",
    "RunSpec",
    "batch",
    "batch_async",
    "batch_results",
    "register_backend",
]

_publish(__name__, globals(), __all__)
