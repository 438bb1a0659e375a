"""Telling the user something in passing: where we run, and one informational line.

``Chat()`` says once which provider it picked (or that there is no API key and
it uses the offline demo model); the notebook view says once when it has to
show cards without buttons. That is information, not an error: in a Jupyter
kernel it is a small neutral line in the cell's output, not a stderr stream,
which front ends draw as an error box; elsewhere it is one line on stderr,
where a script's or a terminal's diagnostics belong.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def shell() -> Any:
    """The running IPython shell, or ``None`` (plain Python).

    Reads ``sys.modules`` rather than importing IPython: in a kernel it is
    always imported already, and ``Chat()`` asks this on every construction.
    """
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def in_kernel() -> bool:
    """Inside an IPython kernel (not terminal IPython, not plain Python)."""
    return getattr(shell(), "kernel", None) is not None


def notice(message: str) -> None:
    """Show ``nbagent: <message>`` as information (see the module docstring)."""
    line = f"nbagent: {message}"
    if in_kernel():
        try:
            import html  # here, not at import nbagent: html.entities is a big table

            from IPython.display import display

            html_line = f'<small class="nba-notice">{html.escape(line)}</small>'
            display({"text/plain": line, "text/html": html_line}, raw=True)
            return
        except Exception:  # a notice must never break the cell; fall back to the line
            pass
    print(line, file=sys.stderr)


_SKIPPED = (os.path.dirname(__file__) + os.sep, os.path.dirname(os.__file__) + os.sep)
"""Where a warning's frames are not the user's: this package and the standard library."""


def user_stacklevel(default: int = 2) -> int:
    """The ``stacklevel`` that points a warning at the first frame outside nbagent (and the
    standard library): the user's cell or script, however deep in the loop the warning was
    raised (fixed levels pointed into ``_base_chat.py``). ``default`` when no frame is
    outside (a tool's thread)."""
    frame = sys._getframe(1)  # the function calling warnings.warn: stacklevel 1
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_SKIPPED):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level if frame is not None else default
