"""Analyse what agents did: the tool-call log across chats, summaries, plots, export.

Every chat keeps its own log (``chat.log``, ``chat.steps``, ``chat.messages``;
the columns are documented in :mod:`nbagent.log._projection` and listed by
:func:`dtypes`). This module works on one chat, many chats, a store, or a
frame you already have::

    from nbagent import log
    df = nbagent.read_log([chat1, chat2])           # one row per tool call
    log.summary(df)                                  # per tool: calls, error/denial rates, p50/p95
    log.plot_timeline(chat)                          # what ran concurrently, per step
    log.plot_durations(df)                           # duration distribution by tool
    log.to_parquet(df, "calls.parquet"); log.read_parquet("calls.parquet")

pandas and matplotlib are imported only when a function here needs them. The
plots need the ``plots`` extra (matplotlib), Parquet the ``parquet`` extra
(pyarrow); without it they fail with a line saying so.
"""

from __future__ import annotations

import inspect
import json
import operator
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from .._display import enable_inline_png
from .._errors import safe_display
from .._events import Event
from .._exports import publish as _publish
from .._optional import require
from .._record import ChatRecord, fold_chats
from ._projection import (
    CALL_COLUMNS,
    MESSAGE_COLUMNS,
    SCHEMAS,
    STEP_COLUMNS,
    STEPS_ATTR,
    ColumnKind,
    StepsRef,
    build_frame,
    dtypes,
    pandas_dtype,
)
from ._projection import (
    CallLog as CallLog,  # Chat's frames (chat.log, chat.steps, chat.messages)
)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Kind = Literal["calls", "steps", "messages"]

SUMMARY_COLUMNS: dict[str, ColumnKind] = {
    "calls": "Int64",
    "ok": "Int64",
    "errors": "Int64",
    "error_rate": "Float64",
    "denied": "Int64",
    "denial_rate": "Float64",
    "pending": "Int64",
    "p50_ms": "Float64",
    "p95_ms": "Float64",
    "tokens": "Int64",
    "cost_usd": "Float64",
}
"""Columns of :func:`summary` (indexed by the grouping column, ``tool`` by default)."""

STATUS_COLORS: dict[str, str] = {
    "ok": "#2e7d32",
    "error": "#c62828",
    "timed_out": "#ef6c00",
    "cancelled": "#757575",
    "denied": "#6a1b9a",
    "skipped": "#bdbdbd",
    "in_doubt": "#8d6e63",
    "running": "#1565c0",
    "approved": "#64b5f6",
    "awaiting_approval": "#fbc02d",
    "requested": "#90a4ae",
    "ran_despite_denial": "#b71c1c",
    "ran_unapproved": "#d84315",
}
"""Colour of each call status in the plots."""

_DECIDED = ("approved", "denied", "policy")  # decided gated calls: denial_rate's denominator
_NA_TOKEN = "<NA>"  # what CSV files write for a missing value (pandas reads it as NA too)


# -------------------------------------------------------------- reading
def read_log(source: Any, kind: Kind = "calls", **query: Any) -> pd.DataFrame:
    """The calls, steps or messages of one or many chats, as one DataFrame.

    Args:
        source: A ``Chat``; a list of chats; a store (any object with
            ``iter_events(**query)`` yielding events in per-chat ``seq`` order);
            an iterable of events; or the result of ``nbagent.batch`` (or a
            selection of its rows): the chats of its rows.
        kind: ``"calls"`` (one row per tool call), ``"steps"`` (one row per
            model request) or ``"messages"`` (one row per message).
        **query: Passed to the store's ``iter_events``: ``chat_id`` (a chat's
            id, a ``Chat``, or a list of them) for those chats only. A store's
            decisions no chat has taken yet (``store.approve``, the inbox, from
            another process) are read as made: ``untaken=False`` reads only what
            the chats recorded. A call running now reads ``running`` (``started_at``:
            its claim's time), or ``in_doubt`` once its claim's owner is gone (what
            ``Chat.load`` would report): ``running=False`` reads only the chats' events.

    Returns:
        A frame with the fixed columns and dtypes of ``kind`` (see :func:`dtypes`);
        empty, with the same columns, when there is nothing yet.
    """
    if kind not in SCHEMAS:
        raise ValueError(f"kind must be 'calls', 'steps' or 'messages', got {kind!r}")
    # displayed with secrets as *** as chat.log is (its values stay the calls' own)
    return safe_display(build_frame(_logs_of(source, query), kind))


def _logs_of(source: Any, query: dict[str, Any]) -> list[ChatRecord]:
    run = _batch_run(source)
    if run is not None:  # a batch result: its rows' chats, live or stored
        if query:
            raise TypeError(f"filters {sorted(query)} only apply to a store with iter_events()")
        ids = [c for c in source["chat_id"].tolist() if isinstance(c, str)]
        return _logs_of(run.log_sources(ids), {})
    if isinstance(source, ChatRecord):
        logs = [source]
    elif isinstance(getattr(source, "record", None), ChatRecord):
        logs = [source.record]  # a Chat
    elif callable(getattr(source, "iter_events", None)):  # a store
        return _read_store(source, query)
    elif _is_dataframe(source):  # iterating a frame gives its column names: say what it is
        raise TypeError(f"read_log() reads chats, not a DataFrame: {_frame_hint(source)}")
    elif isinstance(source, Iterable) and not isinstance(source, (str, bytes)):
        items = list(source)
        if items and all(isinstance(i, Event) for i in items):
            logs = fold_chats(items)
        else:
            logs = [log for item in items for log in _logs_of(item, {})]
    else:
        hint = ""
        if isinstance(source, (str, PathLike)):  # a store's path or URL, most likely; not
            # echoed, as a PostgreSQL URL may hold a password
            hint = "; for a store's path or URL, pass nbagent.store.open_store(it)"
        raise TypeError(
            f"read_log() takes a Chat, a list of chats, a store with iter_events() or events; "
            f"got {type(source).__name__}{hint}"
        )
    if query:
        raise TypeError(f"filters {sorted(query)} only apply to a store with iter_events()")
    return logs


def _read_store(store: Any, query: dict[str, Any]) -> list[ChatRecord]:
    """A store's chats; ``chat_id`` may be an id, a Chat, or a list of them. A decision made
    through the store that no chat has taken yet is read as made (``untaken=True``, where
    the store's ``iter_events`` takes it): the inbox's decisions count before the chats
    run on. A call claimed and not finished reads ``running`` from its claim's time, or
    ``in_doubt`` when its claim's owner is gone (``running=True``, the same way): its start
    event is stored only with its finish."""
    if "untaken" not in query and _takes(store.iter_events, "untaken"):
        query = {**query, "untaken": True}
    if "running" not in query and _takes(store.iter_events, "running"):
        query = {**query, "running": True}
    if "chat_id" not in query or query["chat_id"] is None:
        return fold_chats(store.iter_events(**query))
    rest = {k: v for k, v in query.items() if k != "chat_id"}
    given = query["chat_id"]
    many = isinstance(given, (list, tuple, set, frozenset))
    ids = [_chat_id(c) for c in (given if many else [given])]
    if not many:
        return fold_chats(store.iter_events(chat_id=ids[0], **rest))
    return [
        log
        for chat_id in dict.fromkeys(ids)
        for log in fold_chats(store.iter_events(chat_id=chat_id, **rest))
    ]


def _takes(fn: Any, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _chat_id(value: Any) -> str:
    """A chat's id from an id or a Chat (anything with a record and an ``id``)."""
    if isinstance(value, str):
        return value
    chat_id = getattr(value, "id", None)
    if isinstance(getattr(value, "record", None), ChatRecord) and isinstance(chat_id, str):
        return chat_id
    raise TypeError(
        f"chat_id takes a chat's id (str), a Chat, or a list of them; got {type(value).__name__}"
    )


def _is_dataframe(source: Any) -> bool:
    pd = sys.modules.get("pandas")  # not imported: there is no DataFrame to tell apart
    return pd is not None and isinstance(source, pd.DataFrame)


_CALL_KEYS = ("tool", "status", "decision", "duration_ms", "chat_id", "step")
"""The columns a frame needs to be read as a calls frame (summary, plots)."""


def _frame_hint(df: pd.DataFrame) -> str:
    """What the frame ``df`` looks like, and what to pass instead."""
    cols = {str(c) for c in df.columns}
    if set(_CALL_KEYS) <= cols and "call_id" in cols:
        return (
            "this is a calls frame (chat.log, read_log(...)) already: pass it to "
            "log.summary() or the plots as it is"
        )
    if {"n_messages", "input_tokens", "stop_reason"} <= cols:
        return (
            "this is a steps frame (chat.steps): pass the chat, or its calls frame "
            "(chat.log), to summarise or plot its tool calls"
        )
    if {"role", "kind", "content"} <= cols:
        return (
            "this is a messages frame (chat.messages): pass the chat, or its calls frame "
            "(chat.log), to summarise or plot its tool calls"
        )
    if "chat_id" in cols:
        return (
            "a frame of chat ids without its chats (a batch's result or a scorecard "
            "after pd.concat or a copy that dropped them): pass the results themselves, "
            "e.g. read_log([result1, result2]), or the chats"
        )
    missing = [c for c in _CALL_KEYS if c not in cols]
    return f"it lacks the calls columns {missing}; pass a Chat, a list of chats or chat.log"


def _batch_run(source: Any) -> Any:
    """The run behind a batch result frame (``attrs["nbagent_batch"]``), duck-typed: the
    log sits below the batch and never imports it."""
    attrs = getattr(source, "attrs", None)
    run = attrs.get("nbagent_batch") if isinstance(attrs, dict) else None
    if run is None or not callable(getattr(run, "log_sources", None)):
        return None
    return run if "chat_id" in getattr(source, "columns", ()) else None


def _frame(source: Any, what: str) -> pd.DataFrame:
    """The calls frame of ``source`` for ``what`` (a function's name): a calls frame as it
    is, else read; a frame that is not one is a ``TypeError`` saying what to pass."""
    if not _is_frame_of(source):
        return read_log(source, "calls")
    if not set(_CALL_KEYS) <= {str(c) for c in source.columns}:
        raise TypeError(
            f"{what} takes a calls frame or what read_log() takes; {_frame_hint(source)}"
        )
    return source


def _is_frame_of(source: Any) -> bool:
    """``source`` is a log frame as it is (a batch's result is a frame of rows: read)."""
    import pandas as pd

    return isinstance(source, pd.DataFrame) and _batch_run(source) is None


# -------------------------------------------------------------- summary
def summary(
    source: Any,
    *,
    steps: pd.DataFrame | None = None,
    by: str | Sequence[str] = "tool",
    shared: bool = False,
) -> pd.DataFrame:
    """Per tool (or per ``by``): calls, outcomes, error and denial rates, durations, tokens.

    The frame is rounded to be read in a notebook cell:

    - ``errors`` counts ``error`` and ``timed_out``; ``error_rate`` is
      errors over calls that ran to an end (``ok``/``error``/``timed_out``);
    - ``denied`` counts every ``denied`` call (a declined external input too);
      ``denial_rate`` is the denials among the gated calls that were decided
      (by anyone: ``decision`` ``approved``, ``denied`` or ``policy``) over
      those calls; calls still ``pending``, rejected before a decision
      (``none``) or never gated (``auto``: a declined input) are not in it.
      Rates are fractions (0.25 = 25 %) to 3 decimals, NA when nothing counts;
    - ``p50_ms``/``p95_ms`` are over calls that ran, to 0.1 ms (a replayed
      call, whose result was a recorded one, did not run: not in them);
    - ``tokens`` (input + output) and ``cost_usd`` are those of the model
      request that asked for the call, split among the calls of it in the
      frame and summed: the tokens in whole tokens (the first calls get one
      more where they do not divide), so the column adds up to the requests'
      tokens exactly; the cost evenly, to 4 significant digits (both NA
      without the steps; cost also NA for a group with a call asked for by a
      request whose model's prices are unknown: its known part alone would
      understate the bill);
    - the rows a fork copied from its parent (``shared``) are left out: those calls
      ran, and those tokens were spent, in the parent, which a store's summary
      counts already (``shared=True`` keeps them). A fork's own call asked for by a
      request it shares (``fork(call, decision=...)``) has a share of 0 tokens and $0.

    Args:
        source: A calls frame (``chat.log``, :func:`read_log`) or anything
            :func:`read_log` takes. ``chat.log`` (and a frame made from it:
            a selection, a copy) brings its chat's steps along; a frame
            :func:`read_log` built, or one joined from several chats', holds
            no requests: give ``steps`` with it, else its ``tokens`` and
            ``cost_usd`` are NA.
        steps: The matching steps frame, to attribute tokens and cost to
            tools; read from ``source`` when it is not a frame.
        by: Column(s) to group by.
        shared: Keep the rows a fork shares with its parent.

    Returns:
        One row per group, columns :data:`SUMMARY_COLUMNS`.
    """
    import pandas as pd

    calls = _frame(source, "log.summary()")
    if steps is None:
        steps = _attached_steps(source) if _is_frame_of(source) else read_log(source, "steps")
    parents: pd.DataFrame | None = None  # the steps a fork shares (their tokens: the parent's)
    if not shared:
        calls = _own(calls)
        if steps is not None:
            parents = _shared_rows(steps)
            steps = _own(steps)
    keys = [by] if isinstance(by, str) else list(by)
    status = calls["status"].astype("string")
    decision = calls["decision"].astype("string")
    flags = calls[keys].copy()
    asked, copied = _hosted_pairs(calls)
    flags["calls"] = (~asked).astype("int64")
    flags["ok"] = ((status == "ok").fillna(False) & ~asked).astype("int64")
    flags["errors"] = status.isin(["error", "timed_out"]).astype("int64")
    flags["_ran"] = (status.isin(["ok", "error", "timed_out"]) & ~asked).astype("int64")
    denied = (status == "denied").fillna(False)
    decided = decision.isin(_DECIDED) & ~copied
    flags["denied"] = denied.astype("int64")
    flags["_decided"] = decided.astype("int64")
    # the rate's denials are among its decided calls: a declined external input is
    # ``denied`` with decision ``auto`` (nobody was asked to approve it)
    flags["_denied_decided"] = (denied & decided).astype("int64")
    flags["pending"] = (decision == "pending").fillna(False).astype("int64")
    flags["_ms"] = calls["duration_ms"].astype("float64").where(~_replayed(calls))
    shares = _token_shares(calls, steps, parents)
    flags["tokens"] = shares["tokens"]
    flags["cost_usd"] = shares["cost_usd"]
    flags["_unpriced"] = flags["cost_usd"].isna().astype("int64")
    groups = flags.groupby(keys, sort=True, dropna=False, observed=True)
    counts = groups[
        ["calls", "ok", "errors", "_ran", "denied", "_decided", "_denied_decided", "pending"]
    ].sum()
    ms = groups["_ms"]
    out = pd.DataFrame(index=counts.index)
    out["calls"] = counts["calls"]
    out["ok"] = counts["ok"]
    out["errors"] = counts["errors"]
    out["error_rate"] = (counts["errors"] / counts["_ran"].where(counts["_ran"] > 0)).round(3)
    out["denied"] = counts["denied"]
    out["denial_rate"] = (
        counts["_denied_decided"] / counts["_decided"].where(counts["_decided"] > 0)
    ).round(3)
    out["pending"] = counts["pending"]
    out["p50_ms"] = ms.quantile(0.5).round(1)
    out["p95_ms"] = ms.quantile(0.95).round(1)
    out["tokens"] = groups["tokens"].sum(min_count=1).round()
    # a group with a call asked for by an unpriced request has no known cost: summed, the
    # known part alone would understate the bill (as ``chat.cost_usd`` is None then)
    cost = groups["cost_usd"].sum(min_count=1).where(groups["_unpriced"].sum() == 0)
    out["cost_usd"] = _significant(cost, 4)
    return out.astype({c: pandas_dtype(SUMMARY_COLUMNS[c]) for c in out.columns})


def _hosted_pairs(calls: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """A hosted call the provider ran after an approval is two rows: the approval request
    (its decision; "ok" there means sent to the provider) and the provider's call (its
    outcome, the decision copied, with its time). One call, one decision: the approval rows
    a provider's call answered, and the provider's calls whose decision is an approval's."""
    import pandas as pd

    none = pd.Series(False, index=calls.index)
    if "item_type" not in calls.columns or not calls["hosted"].fillna(False).any():
        return none, none
    kind = calls["item_type"].astype("string")
    when = calls["chat_id"].astype("string") + "|" + calls["decided_at"].astype("string")
    approvals = (kind == "mcp_approval_request").fillna(False) & calls["decided_at"].notna()
    runs = (kind == "mcp_call").fillna(False) & calls["decided_at"].notna()
    asked = approvals & when.isin(set(when[runs]))
    copied = runs & when.isin(set(when[approvals]))
    return asked.fillna(False), copied.fillna(False)


def _attached_steps(calls: pd.DataFrame) -> pd.DataFrame | None:
    """The steps frame a chat's calls frame (``chat.log``) carries a way to, if any."""
    ref = calls.attrs.get(STEPS_ATTR)
    return ref() if isinstance(ref, StepsRef) else None


def _replayed(calls: pd.DataFrame) -> pd.Series:
    """Calls whose result was a recorded one (``replay_tools``): the tool did not run."""
    import pandas as pd

    if "replayed" not in calls.columns:
        return pd.Series(False, index=calls.index)
    return calls["replayed"].astype("boolean").fillna(False).astype(bool)


def _shared_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``frame`` a fork copied from its parent (``shared`` true)."""
    if "shared" not in frame.columns:
        return frame.iloc[:0]
    return frame[frame["shared"].astype("boolean").fillna(False).astype(bool)]


def _own(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` less the rows a fork copied from its parent (``shared`` true)."""
    if "shared" not in frame.columns:
        return frame
    copied = frame["shared"].astype("boolean").fillna(False).astype(bool)
    return frame[~copied] if copied.any() else frame


def _significant(values: pd.Series, digits: int) -> pd.Series:
    """``values`` rounded to ``digits`` significant digits (NA stays NA)."""
    return values.astype("float64").map(lambda v: float(f"{v:.{digits}g}"), na_action="ignore")


def _token_shares(
    calls: pd.DataFrame, steps: pd.DataFrame | None, parents: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per call: its share of the asking request's tokens and cost.

    The tokens (input + output) are whole: each of the ``n`` calls a request asked for
    gets ``tokens // n``, and the first ``tokens % n`` of them (in the frame's order) one
    more, so the shares add up to the request's tokens exactly. The cost is divided evenly.

    ``parents``: the steps a fork shares with its parent, left out of ``steps``. A fork's
    own call asked for by one of them (a fork at a call: its decision, result or
    arguments changed) spent nothing of the fork's on that request, which its parent
    counts: its share is 0 (it was NA, and made its tool's summed cost NA).
    """
    import numpy as np
    import pandas as pd

    empty = pd.DataFrame(
        {
            "tokens": pd.array([None] * len(calls), dtype="Int64"),
            "cost_usd": pd.Series(float("nan"), index=calls.index),
        },
        index=calls.index,
    )
    if steps is None or steps.empty or calls.empty:
        return empty
    cols = ["input_tokens", "output_tokens", "cost_usd"]
    ok = steps[steps["error"].isna()].drop_duplicates(["chat_id", "step"], keep="last")
    keyed = calls[["chat_id", "step"]].reset_index(drop=True)
    keyed["_rank"] = keyed.groupby(["chat_id", "step"], dropna=False).cumcount()
    per_step = keyed.groupby(["chat_id", "step"], dropna=False).size().rename("_n").reset_index()
    merged = keyed.merge(per_step, on=["chat_id", "step"], how="left").merge(
        ok[["chat_id", "step", *cols]], on=["chat_id", "step"], how="left"
    )
    total = merged["input_tokens"].astype("Int64") + merged["output_tokens"].astype("Int64")
    n = merged["_n"].astype("int64")
    base = total // n
    extra = (merged["_rank"].astype("int64") < (total - base * n)).astype("Int64")
    cost = merged["cost_usd"].astype("float64") / n.astype("float64")
    if parents is not None and not parents.empty:
        asked = pd.MultiIndex.from_frame(merged[["chat_id", "step"]])
        theirs = pd.MultiIndex.from_frame(parents[["chat_id", "step"]])
        spent_there = pd.Series(asked.isin(theirs)) & merged["input_tokens"].isna()
        base = base.mask(spent_there.to_numpy(), 0)
        extra = extra.mask(spent_there.to_numpy(), 0)
        cost = cost.mask(spent_there.to_numpy(), 0.0)
    return pd.DataFrame(
        {"tokens": (base + extra).array, "cost_usd": np.asarray(cost, dtype="float64")},
        index=calls.index,
    )


# ---------------------------------------------------------------- plots
def _axes(ax: Axes | None, size: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is not None:
        fig = ax.get_figure()
        assert fig is not None
        return fig, ax  # type: ignore[return-value]
    from matplotlib.figure import Figure

    enable_inline_png()
    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.add_subplot()


def _plain(text: Any) -> str:
    """``text`` drawn as it is, as a label (a tick's, the legend's): matplotlib reads text
    between two ``$`` as mathematics (a chat's title "Is it $5 or $6?" came out in
    italics; "$\\foo{$" made savefig raise). An escaped ``\\$`` is drawn as ``$``, so
    every ``$`` is escaped (a ``\\$`` too). Text nbagent places itself is drawn with
    ``parse_math=False`` instead."""
    return str(text).replace("$", r"\$")


def _placeholder(fig: Figure, ax: Axes, text: str) -> Figure:
    ax.text(
        0.5,
        0.5,
        text,
        parse_math=False,  # drawn as it is (see _plain)
        ha="center",
        va="center",
        fontsize=12,
        color="#616161",
        transform=ax.transAxes,
    )
    ax.set_axis_off()
    return fig


def plot_timeline(
    source: Any, ax: Axes | None = None, *, max_rows: int | None = 60, relative: bool = True
) -> Figure:
    """Horizontal bars of tool calls, one row per call, grouped by the step that ran them.

    Calls of one concurrent round overlap on the x axis; colour says the
    status. Calls that never ran (denied, skipped, pending...) are drawn as
    markers at their round's start. With several chats, each step's note
    names its chat: its first user message, shortened, when ``source`` has it
    (chats, a store, events; not a bare frame), else ``chat`` and the shortest
    suffix of the ids (6 characters or more) that tells the chats apart.

    Args:
        source: A calls frame or anything :func:`read_log` takes.
        ax: Draw into these axes instead of a new figure.
        max_rows: Show at most this many calls (the latest): a positive int, or None
            for all of them.
        relative: x is milliseconds since the round's first start (else wall-clock time).

    Returns:
        The matplotlib ``Figure`` (it displays as a PNG in a notebook).
    """
    require("matplotlib", "log.plot_timeline()")
    import pandas as pd

    max_rows = _max_rows(max_rows)
    if _is_frame_of(source):
        df, titles = _frame(source, "log.plot_timeline()"), {}
    else:
        logs = _logs_of(source, {})
        df, titles = build_frame(logs, "calls"), {log.chat_id: log.title for log in logs}
    n_total = len(df)
    rows = n_total if max_rows is None else min(n_total, max_rows)
    df = df.tail(rows).copy()
    chats = list(dict.fromkeys(df["chat_id"].tolist()))
    chat_label = _chat_labels(chats, titles) if len(chats) > 1 else {}
    # the step notes right of the axes grow with the chat labels: so does a new figure
    # (about 0.065 in a character at 8 pt), to keep the axes as wide as with "chat 9d0c1e"
    extra = 0.065 * max(0, max(map(len, chat_label.values()), default=0) - 11)
    fig, ax = _axes(ax, (9.0 + extra, min(2.0 + 0.3 * max(rows, 1), 22.0)))
    if df.empty:
        return _placeholder(fig, ax, "no tool calls yet")
    df["_group"] = df["run_step"].fillna(df["step"])
    df["_chat"] = df["chat_id"].map({c: i for i, c in enumerate(chats)}).astype("int64")
    df["_order"] = range(len(df))
    df = df.sort_values(["_chat", "_group", "started_at", "_order"], na_position="last")
    now = pd.Timestamp(datetime.now(UTC))
    origin = df.groupby(["_chat", "_group"])["started_at"].transform("min")
    origin = origin.fillna(df["requested_at"])
    end = df["finished_at"].where(df["finished_at"].notna(), now)
    seen: set[str] = set()
    y_of_group: dict[tuple[int, Any], list[int]] = {}
    start = df["started_at"]
    ran = start.notna().tolist()
    if relative:
        x0s: list[Any] = ((start - origin).dt.total_seconds() * 1e3).fillna(0.0).tolist()
        widths: list[Any] = ((end - start).dt.total_seconds() * 1e3).fillna(0.0).tolist()
    else:
        when = start.fillna(df["requested_at"]).fillna(df["finished_at"])
        x0s = [None if pd.isna(t) else t.to_pydatetime() for t in when]
        widths = [
            (e - b).to_pytimedelta() if ok else None
            for b, e, ok in zip(start, end, ran, strict=True)
        ]
    groups = list(zip(df["_chat"].tolist(), df["_group"].tolist(), strict=True))
    statuses = df["status"].astype("string").fillna("requested").tolist()
    for y, (x0, width, did_run, status, key) in enumerate(
        zip(x0s, widths, ran, statuses, groups, strict=True)
    ):
        y_of_group.setdefault(key, []).append(y)
        if x0 is None:  # no time known at all (a partial replay): a label, no mark
            continue
        color = STATUS_COLORS.get(status, "#9e9e9e")
        label = _plain(status) if status not in seen else None
        seen.add(status)
        if did_run:
            ax.barh(y, width, left=x0, height=0.7, color=color, edgecolor="white", label=label)
        else:
            ax.scatter([x0], [y], marker="X", s=60, color=color, zorder=3, label=label)
    labels = [_plain(t) for t in df["tool"].astype("string").fillna("?").tolist()]
    modes = df.groupby(["_chat", "_group"])["concurrency"].agg(
        lambda s: ", ".join(sorted({str(m) for m in s.dropna()}))
    )
    for i, ((chat, group), ys) in enumerate(y_of_group.items()):
        if i % 2 == 0:
            ax.axhspan(min(ys) - 0.5, max(ys) + 0.5, color="#f5f5f5", zorder=0)
        name = f"step {group}" if len(chats) == 1 else f"{chat_label[chats[chat]]} · step {group}"
        mode = modes.get((chat, group), "")
        name += f" · {mode}" if mode else " · not run"
        ax.annotate(
            name,
            parse_math=False,  # a chat's title drawn as it is (see _plain)
            xy=(1.0, (min(ys) + max(ys)) / 2),
            xycoords=("axes fraction", "data"),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
            color="#616161",
        )
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlabel("ms since the round started" if relative else "time (UTC)")
    shown = f"latest {rows} of {n_total} calls" if rows < n_total else f"{n_total} calls"
    ax.set_title(f"Tool calls per step ({shown})", fontsize=11, loc="left")
    _finish_axes(ax, len(seen))
    return fig


def _max_rows(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError("max_rows must be a positive int (or None for all), got bool")
    if not isinstance(value, int):
        try:
            value = operator.index(value)  # numpy integers too
        except TypeError:
            raise TypeError(
                f"max_rows must be a positive int (or None for all), got {type(value).__name__}"
            ) from None
    if value < 1:
        raise ValueError(f"max_rows must be a positive int (or None for all), got {value}")
    return value


def _chat_labels(
    chat_ids: Sequence[str], titles: Mapping[str, str | None], width: int = 28
) -> dict[str, str]:
    """A short label per chat, never the same for two chats.

    The chat's title (its first user message) in quotes, shortened to ``width``
    characters, when the log has it; else ``chat`` and the shortest suffix of
    the ids, at least 6 characters, that tells them all apart (version-7 ids of
    chats made together share their time prefix, not their random tail). Chats
    whose titles shorten alike get the suffix too: ``“Weather in Paris” (9d0c1e)``.
    No two labels are equal: suffix labels start with ``chat``, title labels with
    a quote; a quoted title ends with a quote, a disambiguated one with ``)``.
    """
    ids = list(dict.fromkeys(chat_ids))
    size = 6
    while len({i[-size:] for i in ids}) < len(ids):
        size += 1  # ends: at the longest id's length every suffix is a whole, distinct id
    labels: dict[str, str] = {}
    for i in ids:
        text = " ".join((titles.get(i) or "").split())
        if text:
            labels[i] = f"“{text}”" if len(text) <= width else f"“{text[: width - 1].rstrip()}…”"
    counts = Counter(labels.values())
    for i in ids:
        if i not in labels:
            labels[i] = f"chat {i[-size:]}"
        elif counts[labels[i]] > 1:
            labels[i] += f" ({i[-size:]})"
    return labels


def _finish_axes(ax: Axes, n_legend: int) -> None:
    """The look both plots share: light x grid behind the data, legend above the axes."""
    ax.grid(axis="x", color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(
        loc="lower right",
        bbox_to_anchor=(1.0, 1.0),
        fontsize=8,
        frameon=False,
        ncols=min(n_legend, 5),
        borderaxespad=0.2,
    )


def plot_durations(source: Any, ax: Axes | None = None) -> Figure:
    """Distribution of run time by tool: a box per tool with every call as a point.

    Args:
        source: A calls frame or anything :func:`read_log` takes.
        ax: Draw into these axes instead of a new figure.

    Replayed calls (``replayed``: their result was a recorded one) did not run and are
    left out; the title says how many.

    Returns:
        The matplotlib ``Figure``; the x axis is logarithmic when durations span
        more than two orders of magnitude.
    """
    require("matplotlib", "log.plot_durations()")
    import numpy as np

    df = _frame(source, "log.plot_durations()")
    # a replayed call's duration is that of reading its recorded result: it did not run
    ran = df[df["duration_ms"].notna() & ~_replayed(df)]
    tools = (
        ran.groupby("tool")["duration_ms"].median().sort_values().index.tolist()
        if not ran.empty
        else []
    )
    fig, ax = _axes(ax, (8.0, min(1.8 + 0.45 * max(len(tools), 1), 16.0)))
    if df.empty:
        return _placeholder(fig, ax, "no tool calls yet")
    replayed = int((df["duration_ms"].notna() & _replayed(df)).sum())
    left_out = f"; {replayed} replayed left out" if replayed else ""
    if ran.empty:
        return _placeholder(fig, ax, f"no tool call has run yet{left_out}")
    data = [ran.loc[ran["tool"] == t, "duration_ms"].astype("float64").to_numpy() for t in tools]
    import inspect

    horizontal: dict[str, Any] = (  # matplotlib >= 3.10 deprecates vert=
        {"orientation": "horizontal"}
        if "orientation" in inspect.signature(ax.boxplot).parameters
        else {"vert": False}
    )
    ax.boxplot(
        data,
        widths=0.6,
        showfliers=False,
        medianprops={"color": "#212121"},
        boxprops={"color": "#9e9e9e"},
        whiskerprops={"color": "#9e9e9e"},
        capprops={"color": "#9e9e9e"},
        **horizontal,
    )
    rng = np.random.default_rng(0)
    seen: set[str] = set()
    for i, t in enumerate(tools, start=1):
        sub = ran[ran["tool"] == t]
        for status, part in sub.groupby(sub["status"].astype("string")):
            jitter = rng.uniform(-0.18, 0.18, len(part))
            label = _plain(status) if status not in seen else None
            seen.add(str(status))
            ax.scatter(
                part["duration_ms"].astype("float64"),
                i + jitter,
                s=14,
                alpha=0.7,
                color=STATUS_COLORS.get(str(status), "#9e9e9e"),
                label=label,
                zorder=3,
            )
    ax.set_yticks(range(1, len(tools) + 1), [_plain(t) for t in tools])
    values = ran["duration_ms"].astype("float64")
    positive = values[values > 0]
    if not positive.empty and positive.max() / positive.min() > 100:
        ax.set_xscale("log")
    ax.set_xlabel("duration (ms)")
    ax.set_title(f"Tool call durations ({len(ran)} runs{left_out})", fontsize=11, loc="left")
    _finish_axes(ax, len(seen))
    return fig


# --------------------------------------------------------------- export
_FORMAT = 2  # 1: dtypes chosen by column name; 2: every column's own dtype in the file
# The first line of a CSV file written by nbagent e65eeb3..: the JSON of its columns' dtypes.
# CSV files are plain now (any tool reads them); a file with this line still reads with them.
_CSV_MARK = "#nbagent "
_NA_LIKE = r"\\*<NA>"  # a string the missing-value token would swallow: written escaped


def _known_kinds() -> dict[str, ColumnKind]:
    known: dict[str, ColumnKind] = {}
    for schema in (*SCHEMAS.values(), SUMMARY_COLUMNS):
        known.update(schema)
    return known


def _json_columns(df: pd.DataFrame) -> list[str]:
    """Object columns holding dicts or lists (written as JSON text)."""
    out = []
    for name in df.columns:
        if df[name].dtype == object:
            values = df[name].dropna()
            if (_known_kinds().get(str(name)) == "json" and values.empty) or (
                not values.empty and values.map(lambda v: isinstance(v, (dict, list))).all()
            ):
                out.append(str(name))
    return out


def _encode(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``df`` as written: its index as columns (unless the default one), dict columns as
    JSON text, and no ``attrs`` (a batch's run, a chat's steps: nothing a file holds)."""
    import pandas as pd

    # a non-default index is written as columns
    df = df.reset_index(drop=isinstance(df.index, pd.RangeIndex) and df.index.name is None)
    df.attrs = {}
    json_cols = _json_columns(df)
    if json_cols:
        df = df.copy()
        for name in json_cols:
            df[name] = pd.array(
                [
                    None if v is None else json.dumps(v, ensure_ascii=False, default=str)
                    for v in df[name]
                ],
                dtype="string",
            )
    return df, json_cols


def _specs(df: pd.DataFrame, json_cols: Sequence[str]) -> list[dict[str, Any]]:
    """Each column's name and dtype, as the file records them (JSON)."""
    import pandas as pd

    specs = []
    for i, name in enumerate(df.columns):
        dtype = df.iloc[:, i].dtype
        spec: dict[str, Any] = {"name": str(name)}
        if not isinstance(name, str) and isinstance(name, (int, float)):
            spec["key"] = name  # restored as it was (an int column name stays an int)
        if str(name) in json_cols:
            spec["dtype"] = "json"
        elif isinstance(dtype, pd.CategoricalDtype):
            spec["dtype"], spec["ordered"] = "category", bool(dtype.ordered)
            categories = dtype.categories.tolist()
            if all(isinstance(c, (str, int, float)) for c in categories):
                spec["categories"] = categories
                spec["categories_dtype"] = str(dtype.categories.dtype)
        else:
            spec["dtype"] = str(dtype)
        specs.append(spec)
    return specs


def _dtype_of(spec: Mapping[str, Any]) -> Any:
    """The pandas dtype a file's column spec names, or None (unknown here: kept as read)."""
    import pandas as pd

    kind = spec["dtype"]
    if kind == "category":
        categories = spec.get("categories")
        if categories is None:
            return pd.CategoricalDtype()
        try:  # the categories' own dtype: an empty list is no str, int or float
            index = pd.Index(categories, dtype=spec.get("categories_dtype"))
        except (TypeError, ValueError):
            index = pd.Index(categories)
        return pd.CategoricalDtype(index, ordered=bool(spec.get("ordered")))
    if kind == "json":
        return None
    try:
        return pd.api.types.pandas_dtype(kind)
    except (TypeError, ValueError):
        return None


def _as(values: pd.Series, want: Any) -> pd.Series:
    """``values`` as dtype ``want`` when it converts, else as they are."""
    if want is None or values.dtype == want:
        return values
    try:
        return values.astype(want)
    except (TypeError, ValueError):
        return values


def _escape_na(df: pd.DataFrame, json_cols: Sequence[str]) -> pd.DataFrame:
    """Strings that read as the missing-value token (``<NA>``, ``\\<NA>``...) with one more
    backslash in front, so a CSV cell ``<NA>`` is always a missing value."""
    import pandas as pd

    out = df
    for i, name in enumerate(df.columns):
        values = df.iloc[:, i]
        textual = values.dtype == object or isinstance(
            values.dtype, (pd.StringDtype, pd.CategoricalDtype)
        )
        if str(name) in json_cols or not textual:
            continue
        hit = values.map(lambda v: isinstance(v, str) and re.fullmatch(_NA_LIKE, v) is not None)
        hit = hit.astype("boolean").fillna(False).astype(bool)
        if hit.any():
            if out is df:
                out = df.copy()
            escaped = values.astype(object).copy()
            escaped[hit] = "\\" + escaped[hit].astype(str)
            out.isetitem(i, escaped.array)
    return out


def _unescape_na(values: pd.Series) -> pd.Series:
    return values.str.replace(r"^\\(\\*<NA>)$", r"\1", regex=True)


def _decode_json(df: pd.DataFrame, names: Iterable[Any]) -> None:
    """Columns ``names`` from JSON text to dicts, those whose values are all JSON (a
    column of your own named ``arguments`` holding plain text stays as read)."""
    import numpy as np

    for name in names:
        if name in df.columns:
            arr = np.empty(len(df), dtype=object)
            try:
                arr[:] = [None if _isna(v) else json.loads(v) for v in df[name]]
            except (TypeError, ValueError):
                continue
            df[name] = arr


def _isna(v: Any) -> bool:
    import pandas as pd

    return v is None or (not isinstance(v, (dict, list)) and bool(pd.isna(v)))


def _coerce(df: pd.DataFrame) -> pd.DataFrame:
    """A file without dtypes (a CSV file, a Parquet file of version 1): every column named
    as one of the nbagent schemas' gets that column's dtype, when its values fit it (a
    batch's ``status``, ``done``, is no call status: it stays as read, not wiped to NA; a
    float ``step`` stays a float, a column of flags is not made numbers)."""
    known = _known_kinds()
    for name in df.columns:
        kind = known.get(str(name))
        if kind is None or kind == "json":
            continue
        want = pandas_dtype(kind)
        if _fits(df[name], want):
            df[name] = _as(df[name], want)
    return df


def _fits(values: pd.Series, want: Any) -> bool:
    """Whether ``values`` (as read) are of the kind dtype ``want`` holds, so converting
    them keeps each value (a number that is no whole number is refused by ``astype``)."""
    import pandas as pd

    have = values.dtype
    present = values.dropna()
    if isinstance(want, pd.CategoricalDtype):
        return bool(present.isin(want.categories).all())
    if isinstance(want, pd.DatetimeTZDtype):
        return isinstance(have, pd.DatetimeTZDtype) or present.empty
    if isinstance(want, pd.BooleanDtype):
        return pd.api.types.is_bool_dtype(have) or all(isinstance(v, bool) for v in present)
    if isinstance(want, pd.StringDtype):
        textual = pd.api.types.is_object_dtype(have) or isinstance(have, pd.StringDtype)
        return textual and all(isinstance(v, str) for v in present)
    if pd.api.types.is_numeric_dtype(want):
        return present.empty or (
            pd.api.types.is_numeric_dtype(have) and not pd.api.types.is_bool_dtype(have)
        )
    return True


def _restore(df: pd.DataFrame, meta: Mapping[str, Any]) -> pd.DataFrame | None:
    """``df`` as read, given back the columns' names and dtypes its file records; None
    for a file that records none (version 1) or does not match them."""
    import pandas as pd

    specs = meta.get("columns")
    if not isinstance(specs, list) or len(specs) != len(df.columns):
        return None
    for i, spec in enumerate(specs):
        values = df.iloc[:, i]
        if spec["dtype"] == "json":
            restored = pd.Series(_json_values(values), index=df.index, dtype=object)
        else:
            restored = _as(values, _dtype_of(spec))
        # a Series, not its array: pandas would take an object array of text for "str"
        df.isetitem(i, cast(Any, restored))
    df.columns = [spec.get("key", spec["name"]) for spec in specs]
    return df


def _json_values(values: pd.Series) -> Any:
    import numpy as np

    arr = np.empty(len(values), dtype=object)
    arr[:] = [None if _isna(v) else json.loads(v) for v in values]
    return arr


def _check_version(meta: Mapping[str, Any], path: Path) -> None:
    version = meta.get("version", 1)
    if not isinstance(version, int) or version > _FORMAT:
        raise ValueError(
            f"{path.name} was written by a newer nbagent (log format {version!r}; this one "
            f"reads up to {_FORMAT}): upgrade nbagent to read it"
        )


def to_parquet(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a frame to Parquet so :func:`read_parquet` gives it back unchanged.

    Any frame: a log frame, a summary, a batch's result, a scorecard, your own. Each
    column's dtype is recorded in the file's metadata and restored from it (categories,
    nullable dtypes and UTC datetimes are kept); dict columns are stored as JSON text. A
    non-default index is written as columns; ``attrs`` are not written.
    """
    require("pyarrow", "log.to_parquet()")
    import pyarrow as pa
    import pyarrow.parquet as pq

    out, json_cols = _encode(df)
    table = pa.Table.from_pandas(out, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[b"nbagent"] = json.dumps(
        {"version": _FORMAT, "json_columns": json_cols, "columns": _specs(out, json_cols)}
    ).encode()
    path = Path(path)
    pq.write_table(table.replace_schema_metadata(meta), path)
    return path


def read_parquet(path: str | Path) -> pd.DataFrame:
    """Read a frame written by :func:`to_parquet` with its dtypes and dict columns.

    A file written by nbagent 0.x before the dtypes were recorded (or by another tool)
    gets the dtypes of the nbagent schemas by column name, where the values fit them.
    """
    require("pyarrow", "log.read_parquet()")
    import pyarrow.parquet as pq

    path = Path(path)
    table = pq.read_table(path)
    meta = json.loads((table.schema.metadata or {}).get(b"nbagent", b"{}"))
    _check_version(meta, path)
    df = table.to_pandas()
    restored = _restore(df, meta)
    if restored is not None:
        return restored
    _decode_json(df, meta.get("json_columns", []))
    return _coerce(df)


def to_csv(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a frame to a plain CSV file, which any tool reads; :func:`read_csv` gives
    the log's frames back with their dtypes.

    Any frame: a log frame, a summary, a batch's result, a scorecard, your own. The
    file is a header row and the values, nothing else (``pd.read_csv(path)``, Excel
    and the like read it as it is). Missing values are written as ``<NA>`` (so an
    empty string stays an empty string); a string that is ``<NA>`` itself is written
    ``\\<NA>`` (one more backslash in front of ``\\<NA>``...), so the two never meet.
    Dict columns are JSON text, times ISO 8601 with their offset; a non-default index
    is written as columns; ``attrs`` are not written. Dtypes are not written: for a
    frame's exact dtypes, use :func:`to_parquet`.
    """
    out, json_cols = _encode(df)
    path = Path(path)
    with path.open("w", encoding="utf-8", newline="") as f:
        _escape_na(out, json_cols).to_csv(f, index=False, na_rep=_NA_TOKEN)
    return path


def read_csv(path: str | Path) -> pd.DataFrame:
    """Read a CSV written by :func:`to_csv` (or any plain CSV).

    A column named as in the nbagent schemas (``status``, ``step``, ``started_at``...)
    gets the log's dtype where its values fit it, so a calls, steps or messages frame
    comes back with its dtypes; where they do not (a batch's ``status`` ``done``, a
    float ``step``), and for every other column, the values are kept as pandas parses
    them. ``<NA>`` is a missing value, ``\\<NA>`` the string ``<NA>``.

    A file with a first line ``#nbagent {...}`` (written by nbagent versions that
    recorded each column's dtype in the CSV) gets those dtypes back.
    """
    path = Path(path)
    with path.open(encoding="utf-8", newline="") as f:
        first = f.readline()
        if first.startswith(_CSV_MARK):
            meta = json.loads(first[len(_CSV_MARK) :])
            _check_version(meta, path)
            return _read_csv_columns(f, meta["columns"])
    return _read_plain_csv(path)


def _parsed_by_pandas(want: Any) -> bool:
    """Whether ``pd.read_csv`` parses a column of dtype ``want`` itself: numbers, booleans
    and strings (the others are read as text, then converted)."""
    import numpy as np
    import pandas as pd

    if want is None or isinstance(want, pd.CategoricalDtype):
        return False
    if isinstance(want, (pd.StringDtype, pd.BooleanDtype)):
        return True
    if isinstance(want, np.dtype):
        return want.kind in "biuf"
    return pd.api.types.is_extension_array_dtype(want) and pd.api.types.is_numeric_dtype(want)


def _read_csv_columns(f: Any, specs: list[dict[str, Any]]) -> pd.DataFrame:
    """The rest of a CSV file (its header row on) whose columns ``specs`` describes."""
    import pandas as pd

    if not specs:
        return pd.DataFrame()
    parse: dict[int, Any] = {}
    for i, spec in enumerate(specs):
        want = _dtype_of(spec)
        simple = _parsed_by_pandas(want)
        parse[i] = want if simple else object
    df = pd.read_csv(
        f,
        header=0,
        names=list(range(len(specs))),
        dtype=parse,
        keep_default_na=False,
        na_values=[_NA_TOKEN],
    )
    for i, spec in enumerate(specs):
        values = df[i]
        want = _dtype_of(spec)
        if spec["dtype"] == "json":
            df[i] = pd.Series(_json_values(values), index=df.index, dtype=object)
            continue
        if values.dtype == object or isinstance(values.dtype, pd.StringDtype):
            values = _unescape_na(values) if len(values) else values
        if values.dtype == object:  # text and missing values (None, as pandas makes them)
            values = values.astype(object).where(values.notna(), None)
        if isinstance(want, pd.CategoricalDtype):
            lookup = {str(c): c for c in want.categories} if want.categories is not None else {}
            if lookup:
                values = pd.Series(
                    [lookup.get(v, v) if isinstance(v, str) else v for v in values],
                    index=values.index,
                    dtype=object,
                )
            values = pd.Series(pd.Categorical(values, dtype=want), index=values.index)
        elif isinstance(want, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(want):
            tz = getattr(want, "tz", None)
            parsed = pd.to_datetime(values, utc=tz is not None, format="ISO8601")
            if tz is not None:
                parsed = parsed.dt.tz_convert(tz)
            values = parsed.dt.as_unit(want.unit) if len(parsed) else parsed.astype(want)
        df[i] = _as(values, want)
    df.columns = [spec.get("key", spec["name"]) for spec in specs]
    return df


def _read_plain_csv(path: Path) -> pd.DataFrame:
    """A CSV file without dtypes: the log's dtypes by column name where the values fit
    them; pandas' own parsing for the other columns."""
    import pandas as pd

    options: dict[str, Any] = {
        "keep_default_na": False,
        "na_values": [_NA_TOKEN],
    }
    try:
        header = pd.read_csv(path, nrows=0).columns
    except pd.errors.EmptyDataError:  # a frame without columns, written as an empty line
        return pd.DataFrame()
    known = _known_kinds()
    # text, times, dicts and categories read as text (a result_preview "42" is no number)
    as_text = [
        i
        for i, name in enumerate(header)
        if (kind := known.get(str(name))) in ("datetime", "json", "string")
        or isinstance(kind, tuple)
    ]
    df = pd.read_csv(path, dtype=dict.fromkeys(as_text, object), **options)
    unfit: list[int] = []
    for i in as_text:
        values = _unescaped(df.iloc[:, i])
        kind = known[str(df.columns[i])]
        if kind == "datetime":
            try:
                parsed = pd.to_datetime(values, utc=True, format="ISO8601")
            except (TypeError, ValueError):
                unfit.append(i)  # not times
                continue
            values = parsed.dt.as_unit("ns") if len(df) else parsed.astype("datetime64[ns, UTC]")
        elif kind == "json":
            try:
                values = pd.Series(_json_values(values), index=df.index, dtype=object)
            except (TypeError, ValueError):
                unfit.append(i)  # not JSON
                continue
        elif isinstance(kind, tuple) and not _fits(values, pandas_dtype(kind)):
            unfit.append(i)  # not of the log's categories (a batch's status 'done')
            continue
        df.isetitem(i, values)
    if unfit:  # those columns as pandas parses them
        again = pd.read_csv(path, usecols=unfit, **options)
        for k, i in enumerate(unfit):
            df.isetitem(i, _unescaped(again.iloc[:, k]))
    for i in range(len(df.columns)):
        if i not in as_text:
            df.isetitem(i, _unescaped(df.iloc[:, i]))
    return _coerce(df)


def _unescaped(values: pd.Series) -> pd.Series:
    """Text as read from a CSV file: a string written ``\\<NA>`` is ``<NA>`` (and
    ``\\\\<NA>`` is ``\\<NA>``...); missing values are None in an object column."""
    import pandas as pd

    if values.dtype == object:
        values = values.astype(object).where(values.notna(), None)
        text = values.map(lambda v: isinstance(v, str)).astype(bool)
        if text.any():
            values = values.copy()
            values[text] = _unescape_na(values[text].astype(str)).to_numpy(dtype=object)
        return values
    if isinstance(values.dtype, pd.StringDtype):
        return _unescape_na(values)
    return values


__all__ = [
    "CALL_COLUMNS",
    "MESSAGE_COLUMNS",
    "STATUS_COLORS",
    "STEP_COLUMNS",
    "SUMMARY_COLUMNS",
    "dtypes",
    "plot_durations",
    "plot_timeline",
    "read_csv",
    "read_log",
    "read_parquet",
    "summary",
    "to_csv",
    "to_parquet",
]

_publish(__name__, globals(), __all__)
