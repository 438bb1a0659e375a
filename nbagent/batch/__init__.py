"""Many chats at once: ``nbagent.batch(inputs, make_chat)`` runs one chat per input.

The backend seam (where chats run) is :mod:`nbagent.batch._backend`.
"""

from __future__ import annotations

from ._backend import Backend, Job, RowResult, RowUpdate, RunSpec

__all__ = ["Backend", "Job", "RowResult", "RowUpdate", "RunSpec"]
