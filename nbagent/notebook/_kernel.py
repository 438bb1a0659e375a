"""Where we are running: inside an IPython kernel or not, and the cell being run."""

from __future__ import annotations

import sys

from .._notice import in_kernel

__all__ = ["execution_count", "in_kernel"]


def execution_count() -> int | None:
    """The execution count of the cell being run, if any."""
    ipython = sys.modules.get("IPython")
    ip = ipython.get_ipython() if ipython is not None else None
    count = getattr(ip, "execution_count", None)
    return count if isinstance(count, int) else None
