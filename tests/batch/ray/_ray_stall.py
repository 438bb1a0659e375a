"""Stall a Ray process as a loaded machine does: SIGSTOP it as soon as it appears, SIGCONT
it some seconds later (what ``test_ray_start`` does to one run's dashboard agent).

Only processes whose command line names the run's own temporary directory are matched, so
other Ray instances on the machine (other tests, other users) are never touched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def stall_first(temp_dir: str, needle: str, seconds: float) -> list[int]:
    """Stop the first process whose command line has ``temp_dir`` and ``needle`` (not a
    raylet: its command line names its agents) for ``seconds``; the list gets its pid."""
    stopped: list[int] = []

    def resume(pid: int) -> None:
        time.sleep(seconds)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGCONT)

    def watch() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                cmd = _cmdline(int(name))
                if temp_dir in cmd and needle in cmd and not cmd.split(" ")[0].endswith("raylet"):
                    os.kill(int(name), signal.SIGSTOP)
                    stopped.append(int(name))
                    threading.Thread(target=resume, args=(int(name),), daemon=True).start()
                    return
            time.sleep(0.01)

    threading.Thread(target=watch, daemon=True).start()
    return stopped


def processes_of(temp_dir: str) -> list[int]:
    """The processes whose command line names ``temp_dir`` (a run's Ray processes)."""
    return [int(n) for n in os.listdir("/proc") if n.isdigit() and temp_dir in _cmdline(int(n))]
