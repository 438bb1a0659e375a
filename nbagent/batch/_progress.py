"""A batch's progress: counts per status, tokens, cost and ETA, and how they read.

:class:`Progress` folds the backend's :class:`~nbagent.batch.RowUpdate` values
(thread-safe: a remote backend reports from another thread) into totals;
:meth:`Progress.snapshot` freezes them into a :class:`Snapshot`, which the
pure functions :func:`progress_html` and :func:`progress_text` render (the
widget, the saved notebook's fallback, the terminal bar).

The time shown is the batch's **working time**: the time during which some
row was queued or running. Time when every unfinished row is parked on an
approval (the batch waits for people, not the other way round) is not counted,
so "ran 40s" stays 40s over a lunch break. The ETA is the rows left (queued and
running) over the rate at which rows finished in that working time, and is only
given once a few rows did.

A run stopped before its rows settled (the stop button, an error raised through it)
says so (:meth:`Progress.stop`): its clock stops, the rows that were queued or running
count as *not finished*, and no ETA is given; the bar says how to go on.

While rows are parked and the batch goes on watching them (in a kernel), the
bar itself says how they continue (:attr:`Progress.parked_hint`), with the
live count: a separate notice would go stale as decisions come in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .._html import esc, fmt_cost
from ._backend import FINAL, RowStatus, RowUpdate

STATUSES: tuple[RowStatus, ...] = ("queued", "running", "awaiting_approval", "done", "failed")
_LABELS = {k: k.replace("_", " ") for k in STATUSES}  # "awaiting approval"


@dataclass(frozen=True)
class Snapshot:
    """The progress of a batch at one moment."""

    total: int
    counts: dict[str, int]
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    elapsed: float
    eta: float | None
    concurrency: int | None = None
    finished: bool = False
    parked_hint: bool = False
    stopped: bool = False

    @property
    def unfinished(self) -> int:
        """Rows queued or running (after a stop: the rows it left not finished)."""
        return self.counts["queued"] + self.counts["running"]

    @property
    def settled(self) -> int:
        return self.counts["done"] + self.counts["failed"] + self.counts["awaiting_approval"]


class Progress:
    """Totals of a batch, folded from row updates (see the module docstring)."""

    def __init__(
        self,
        keys: list[str],
        settled: dict[str, RowUpdate] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._rows: dict[str, RowUpdate] = {k: RowUpdate(k, "queued") for k in keys}
        self._counts: dict[str, int] = dict.fromkeys(STATUSES, 0)
        self._counts["queued"] = len(self._rows)
        self._tokens_in = self._tokens_out = 0
        self._cost = 0.0
        self._unpriced: set[str] = set()
        self._worked = 0.0  # working time before _busy_since (see the module docstring)
        self._busy_since: float | None = None
        self._finished_here = 0  # rows that reached done/failed in this run (for the rate)
        self.concurrency: Callable[[], int | None] | None = None
        """How many rows may run at once now (the backend's adaptive limit), if it says."""
        self.finished = False
        self._parked_hint = False
        self._stopped = False
        self.version = 0
        for update in (settled or {}).values():
            self.apply(update, count_rate=False)
        self._mark_busy()

    @property
    def parked_hint(self) -> bool:
        """The bar says how parked rows continue (set while the run watches them)."""
        return self._parked_hint

    @parked_hint.setter
    def parked_hint(self, value: bool) -> None:
        with self._lock:
            self._parked_hint = bool(value)
            self.version += 1  # redrawn at the next tick

    @property
    def stopped(self) -> bool:
        """The run was stopped before its rows settled (see :meth:`stop`)."""
        return self._stopped

    def stop(self) -> None:
        """The run stops with rows queued or running: its clock stops for good, and the bar
        says stopped (those rows not finished, no ETA). Nothing when none is."""
        with self._lock:
            if self._stopped or self._counts["queued"] + self._counts["running"] == 0:
                return
            self._stopped = True
            if self._busy_since is not None:
                self._worked += self._clock() - self._busy_since
                self._busy_since = None
            self.version += 1

    def _mark_busy(self) -> None:
        """Start or stop the working clock as rows are (or no longer are) queued or running."""
        if self._stopped:
            return  # stopped: the clock stays as it was
        busy = self._counts["queued"] + self._counts["running"] > 0
        if busy and self._busy_since is None:
            self._busy_since = self._clock()
        elif not busy and self._busy_since is not None:
            self._worked += self._clock() - self._busy_since
            self._busy_since = None

    def _elapsed(self) -> float:
        since = self._busy_since
        return self._worked + (self._clock() - since if since is not None else 0.0)

    def apply(self, update: RowUpdate, *, count_rate: bool = True) -> None:
        with self._lock:
            old = self._rows.get(update.key)
            if old is None:
                return
            self._rows[update.key] = update
            self._counts[old.status] -= 1
            self._counts[update.status] += 1
            self._tokens_in += update.input_tokens - old.input_tokens
            self._tokens_out += update.output_tokens - old.output_tokens
            if update.cost_usd is None:
                self._unpriced.add(update.key)
            else:
                self._unpriced.discard(update.key)
                self._cost += update.cost_usd - (old.cost_usd or 0.0)
            if count_rate and update.status in FINAL and old.status not in FINAL:
                self._finished_here += 1
            self._mark_busy()
            self.version += 1

    def snapshot(self) -> Snapshot:
        with self._lock:
            counts: dict[str, int] = dict(self._counts)
            elapsed = self._elapsed()
            left = counts["queued"] + counts["running"]
            eta = None
            if self._stopped:
                pass  # nothing more runs: no ETA
            elif left == 0:
                eta = 0.0
            elif self._finished_here >= 3 and elapsed > 0:
                eta = left * elapsed / self._finished_here
            return Snapshot(
                total=len(self._rows),
                counts=counts,
                input_tokens=self._tokens_in,
                output_tokens=self._tokens_out,
                cost_usd=None if self._unpriced else self._cost,
                elapsed=elapsed,
                eta=eta,
                concurrency=self.concurrency() if self.concurrency is not None else None,
                finished=self.finished,
                parked_hint=self._parked_hint,
                stopped=self._stopped,
            )


# ------------------------------------------------------------------ rendering
def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, s = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{s:02d}s"
    hours, m = divmod(minutes, 60)
    return f"{hours}h{m:02d}m"


def _cost(cost: float | None) -> str:
    return "cost n/a" if cost is None else fmt_cost(cost)


STOPPED_WORDS = (
    "the run was stopped; run the cell again to go on (with a store, finished rows are read "
    "back, not rerun)"
)
"""What a stopped bar says about going on."""


def summary_line(s: Snapshot) -> str:
    """``done 40/50 · failed 2 · awaiting approval 3 · 12,345 tokens · $0.0123 · ETA 12s``
    (stopped: ``stopped · done 16/40 · not finished 24 · ... · ran 7s (how to go on)``)."""
    c = s.counts
    if s.stopped:
        parts = ["stopped", f"done {c['done']}/{s.total}"]
        parts += [f"{_LABELS[k]} {c[k]}" for k in ("failed", "awaiting_approval") if c[k]]
        if s.unfinished:
            parts.append(f"not finished {s.unfinished}")
        parts += [
            f"{s.input_tokens + s.output_tokens:,} tokens",
            _cost(s.cost_usd),
            f"ran {_duration(s.elapsed)}",
        ]
        return f"{' · '.join(parts)} — {STOPPED_WORDS}"
    parts = [f"done {c['done']}/{s.total}"]
    parts += [
        f"{_LABELS[k]} {c[k]}" for k in ("failed", "awaiting_approval", "running", "queued") if c[k]
    ]
    parts.append(f"{s.input_tokens + s.output_tokens:,} tokens")
    parts.append(_cost(s.cost_usd))
    if s.eta is not None and (c["queued"] or c["running"]):
        parts.append(f"ETA {_duration(s.eta)}")
    else:
        parts.append(f"ran {_duration(s.elapsed)}" if s.finished or not c["running"] else "")
    line = " · ".join(p for p in parts if p)
    hint = parked_words(s)
    return f"{line} ({hint})" if hint else line


def parked_words(s: Snapshot) -> str:
    """How the parked rows continue, with their count now (empty when none is parked,
    or the run no longer watches them)."""
    n = s.counts["awaiting_approval"]
    if not s.parked_hint or not n:
        return ""
    rows, verbs, self_ = (
        ("1 row", ("awaits", "continues"), "itself")
        if n == 1
        else (
            f"{n} rows",
            ("await", "continue"),
            "themselves",
        )
    )
    return (
        f"{rows} {verbs[0]} approval and {verbs[1]} by {self_} once decided: "
        "nbagent.inbox(result), chat.approve or "
        "store.approve; nbagent.batch_results(result, wait=60) gives the frame once they finish"
    )


def progress_text(s: Snapshot, width: int = 24) -> str:
    """One terminal line: a bar of the settled share, then :func:`summary_line`."""
    share = s.settled / s.total if s.total else 1.0
    filled = round(share * width)
    return f"batch [{'#' * filled}{'.' * (width - filled)}] {summary_line(s)}"


_COLORS = {
    "done": "#2e7d32",
    "failed": "#c62828",
    "awaiting_approval": "#ef6c00",
    "running": "#1565c0",
    "queued": "#9e9e9e",
}


def progress_html(s: Snapshot, title: str = "batch") -> str:
    """The widget's HTML: a stacked bar (one segment per status) and the summary line.

    Only numbers and fixed words go in; ``title`` is escaped.
    """
    if s.stopped:
        return _stopped_html(s, title)
    total = max(s.total, 1)
    segments = "".join(
        f'<span class="nba-batch-{k}" title="{_LABELS[k]}: {s.counts[k]}" '
        f'style="display:inline-block;height:100%;width:{100 * s.counts[k] / total:.3f}%;'
        f'background:{_COLORS[k]}"></span>'
        for k in ("done", "failed", "awaiting_approval", "running", "queued")
        if s.counts[k]
    )
    counts = " ".join(
        f'<span class="nba-batch-count" data-status="{k}" style="color:{_COLORS[k]}">'
        f"{_LABELS[k]}&nbsp;<b>{s.counts[k]}</b></span>"
        for k in STATUSES
    )
    eta = ""
    if s.eta is not None and (s.counts["queued"] or s.counts["running"]):
        eta = f" · ETA {_duration(s.eta)}"
    limit = ""
    if s.concurrency is not None and (s.counts["queued"] or s.counts["running"]):
        limit = f" · {s.concurrency} at once"
    hint = parked_words(s)
    note = f'<div class="nba-batch-parked">{esc(hint)}</div>' if hint else ""
    ran = (
        '<span title="working time: time when every unfinished row waits for an approval '
        f'is not counted">ran {_duration(s.elapsed)}</span>'
    )
    return (
        f'<div class="nba-batch" style="font-family:var(--jp-ui-font-family,sans-serif);'
        f'font-size:12px;max-width:720px">'
        f"<div><b>{esc(title)}</b> · done {s.counts['done']}/{s.total} · "
        f"{s.input_tokens + s.output_tokens:,} tokens · {_cost(s.cost_usd)}"
        f" · {ran}{eta}{limit}</div>"
        f'<div style="height:8px;background:#eee;border-radius:4px;overflow:hidden;'
        f'margin:4px 0;display:flex">{segments}</div>'
        f"<div>{counts}</div>{note}</div>"
    )


def _stopped_html(s: Snapshot, title: str) -> str:
    """The bar of a run stopped before its rows settled: what it finished, what it did not,
    how to go on; no ETA, no running clock."""
    total = max(s.total, 1)
    shown = [(k, s.counts[k]) for k in ("done", "failed", "awaiting_approval")]
    shown.append(("stopped", s.unfinished))
    colors: dict[str, str] = {**_COLORS, "stopped": "#bdbdbd"}
    labels: dict[str, str] = {k: v for k, v in _LABELS.items()}
    labels["stopped"] = "not finished"
    segments = "".join(
        f'<span class="nba-batch-{k}" title="{labels[k]}: {n}" '
        f'style="display:inline-block;height:100%;width:{100 * n / total:.3f}%;'
        f'background:{colors[k]}"></span>'
        for k, n in shown
        if n
    )
    counts = " ".join(
        f'<span class="nba-batch-count" data-status="{k}" style="color:{colors[k]}">'
        f"{labels[k]}&nbsp;<b>{n}</b></span>"
        for k, n in shown
    )
    return (
        f'<div class="nba-batch nba-batch-stopped" style="font-family:var(--jp-ui-font-family,'
        f'sans-serif);font-size:12px;max-width:720px">'
        f"<div><b>{esc(title)}</b> · <b>stopped</b> · done {s.counts['done']}/{s.total} · "
        f"{s.input_tokens + s.output_tokens:,} tokens · {_cost(s.cost_usd)}"
        f" · ran {_duration(s.elapsed)}</div>"
        f'<div style="height:8px;background:#eee;border-radius:4px;overflow:hidden;'
        f'margin:4px 0;display:flex">{segments}</div>'
        f'<div>{counts}</div><div class="nba-batch-parked">{esc(STOPPED_WORDS)}.</div></div>'
    )


__all__ = [
    "STATUSES",
    "Progress",
    "Snapshot",
    "parked_words",
    "progress_html",
    "progress_text",
    "summary_line",
]
