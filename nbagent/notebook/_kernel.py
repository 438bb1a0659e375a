"""Where we are running: inside an IPython kernel or not, and the cell being run."""

from __future__ import annotations

from .._notice import in_kernel, shell

__all__ = ["execution_count", "in_kernel", "prompt_number"]


def execution_count() -> int | None:
    """The execution count of the cell being run, if any."""
    count = getattr(shell(), "execution_count", None)
    return count if isinstance(count, int) else None


def prompt_number(count: int | None) -> int | None:
    """The ``In [n]`` of the cell that was running when :func:`execution_count` said ``count``.

    IPython counts the cell as run when it starts, so during a cell the shell's
    count is already the next prompt's number.
    """
    return None if count is None else max(count - 1, 1)
