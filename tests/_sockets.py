"""Where an unclosed socket was opened, when the suite finds one.

The suite makes warnings errors, so a socket left open and collected later fails whichever
test is running then, with only the socket's addresses to go on (one clean-clone run hit it
under load and it did not come back). This notes where each socket of the test process is
opened (a few frames, dropped when it is closed) and, when an unclosed one is reported,
adds those frames to the report: the next time it happens, the failure names its maker.
It costs a short stack per socket opened, nothing per allocation (``tracemalloc`` would).
"""

from __future__ import annotations

import socket
import sys
import traceback
from typing import Any

_opened: dict[int, str] = {}


def _where(stack: list[traceback.FrameSummary]) -> str:
    """The frames that say who opened a socket, in order: the suite's and nbagent's (an
    SDK's own frames go many deep between them and the socket), and the innermost few."""

    def ours(f: traceback.FrameSummary) -> bool:
        name = f.filename
        return not (name.startswith("<") or "/site-packages/" in name or "/lib/python" in name)

    inner = len(stack) - 3
    kept = [f for i, f in enumerate(stack) if i >= inner or ours(f)]
    mine = [i for i, f in enumerate(kept) if ours(f)]
    start = mine[-8] if len(mine) > 8 else 0  # the last eight of ours are enough
    return "".join(traceback.StackSummary.from_list(kept[start:]).format())


def install() -> None:
    """Note sockets' openings from now on, and wrap the current unraisable hook."""
    cls = socket.socket
    if getattr(cls, "_nbagent_noted", False):
        return
    init, close, detach = cls.__init__, cls.close, cls.detach

    def noted_init(self: socket.socket, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        _opened[id(self)] = _where(traceback.extract_stack()[:-1])

    def noted_close(self: socket.socket) -> None:
        _opened.pop(id(self), None)
        close(self)

    def noted_detach(self: socket.socket) -> int:
        _opened.pop(id(self), None)
        return detach(self)

    cls.__init__ = noted_init  # type: ignore[method-assign]
    cls.close = noted_close  # type: ignore[method-assign,assignment]
    cls.detach = noted_detach  # type: ignore[method-assign,assignment]
    cls._nbagent_noted = True  # type: ignore[attr-defined]
    hook = sys.unraisablehook

    def told(unraisable: Any) -> None:
        where = _opened.pop(id(unraisable.object), None)
        if where is not None and isinstance(unraisable.exc_value, ResourceWarning):
            unraisable.exc_value.add_note(f"the socket was opened at:\n{where}")
        hook(unraisable)

    sys.unraisablehook = told
