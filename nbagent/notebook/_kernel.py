"""Where we are running: inside an IPython kernel or not, and the cell being run."""

from __future__ import annotations

import sys


def in_kernel() -> bool:
    """Inside an IPython kernel (not terminal IPython, not plain Python).

    Reads ``sys.modules`` rather than importing IPython: in a kernel it is
    always imported already, and ``Chat()`` asks this on every construction.
    """
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    ip = ipython.get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def execution_count() -> int | None:
    """The execution count of the cell being run, if any."""
    ipython = sys.modules.get("IPython")
    ip = ipython.get_ipython() if ipython is not None else None
    count = getattr(ip, "execution_count", None)
    return count if isinstance(count, int) else None
