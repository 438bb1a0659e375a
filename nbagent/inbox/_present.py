"""Rows as the inbox shows them: readable arguments, ages, decisions in words, HTML and text.

Pure functions. Everything a model or a tool produced (arguments, titles,
reasons, tool and server names) goes through :func:`shown`: control
characters made visible, anything shaped like an API key or URL credentials
replaced by ``***`` (:func:`~nbagent._errors.redact_keys`); the HTML fallback
escapes it on top (:func:`~nbagent._html.esc`), and the widget's
front end only ever writes it with ``textContent``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .._errors import redact_keys
from .._html import clip, esc, preview, printable
from .._secrets import redact_named, shown_as
from ._sources import Outcome, Row

SHORT = 100  # characters of an argument shown on the row; longer ones fold
FULL = 20_000  # at most this much of one argument when unfolded
TITLE = 60


def shown(text: str) -> str:
    """Text from a model, a tool or a store, safe to show: no secrets, no control characters."""
    return printable(redact_keys(text))


def argument_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True, default=str)


def arguments_view(row: Row) -> list[dict[str, Any]]:
    """``[{"key", "short", "full"}]``: one line per argument; ``full`` only when it folds."""
    if row.raw_arguments is not None and not row.arguments:
        raw = printable(redact_named(row.raw_arguments))
        return [{"key": "(unparsed)", "short": preview(raw, SHORT), "full": clip(raw, FULL)}]
    out = []
    for key, value in row.arguments.items():
        text = shown(argument_text(shown_as(value, key)))  # "password": "***" as on a card
        short = preview(text, SHORT)
        folded = short != text
        out.append(
            {"key": shown(str(key)), "short": short, "full": clip(text, FULL) if folded else ""}
        )
    return out


def age_words(at: datetime | None, now: datetime | None = None) -> str:
    if at is None:
        return ""
    seconds = max(0, int(((now or datetime.now(UTC)) - at).total_seconds()))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h {seconds % 3600 // 60}m"
    return f"{seconds // 86400}d"


def short_id(chat_id: str) -> str:
    """The end of a chat id: ids are time-ordered, so chats made together share their start."""
    return f"…{chat_id[-6:]}" if len(chat_id) > 8 else chat_id


def chat_name(row: Row) -> str:
    """What the user knows the chat by: its batch row's key, else the end of its id."""
    if row.batch_key is not None:
        return f"row {preview(shown(row.batch_key), 24)}"
    return short_id(row.chat_id)


def chat_label(row: Row) -> str:
    title = preview(shown(row.title or ""), TITLE) if row.title else ""
    return f"{chat_name(row)} · {title}" if title else chat_name(row)


def row_view(row: Row, matching: bool) -> dict[str, Any]:
    """What the widget draws for one pending row (plain values; the front end escapes).

    No age: the front end counts it from ``requested_at`` and the kernel's clock
    (the widget's ``clock``), so a row is sent again only when it changes.
    """
    return {
        "key": row.key,
        "chat_id": row.chat_id,
        "chat": chat_label(row),
        "call_id": shown(row.call_id),
        "tool": shown(row.tool),
        "server": shown(row.server or ""),
        "args": arguments_view(row),
        "reason": shown(row.reason),
        "requested_at": row.requested_at.isoformat() if row.requested_at else "",
        "hosted": row.hosted,
        "source": row.source,
        "match": matching,
    }


def decided_words(outcome: Outcome, by_inbox: str) -> str:
    """``approved in this inbox``, ``denied elsewhere by ops at 10:02:03 UTC: too big``."""
    verdict = outcome.verdict or outcome.outcome
    if outcome.outcome == "error":
        return f"not decided: {shown(outcome.detail)}"
    if outcome.outcome == "no longer pending":
        return "no longer pending" + (f": {shown(outcome.detail)}" if outcome.detail else "")
    if outcome.outcome in ("approved", "denied"):
        words = f"{verdict} in this inbox"
    else:
        who = outcome.by or "?"
        words = f"{verdict} elsewhere" + (
            f" by {shown(who)}" if who != by_inbox else " (another inbox)"
        )
        if outcome.at is not None:
            words += f" at {outcome.at.astimezone(UTC):%H:%M:%S} UTC"
    if outcome.detail:
        words += f": {shown(outcome.detail)}"
    return words


def one_line(row: Row) -> str:
    """``write_file(path='/tmp/a', mode='w')`` for previews and plain text."""
    if row.raw_arguments is not None and not row.arguments:
        inner = preview(shown(row.raw_arguments), SHORT)
    else:
        inner = ", ".join(
            f"{shown(str(k))}="
            + preview(shown(json.dumps(shown_as(v, k), ensure_ascii=False, default=str)), 60)
            for k, v in row.arguments.items()
        )
    server = f"{shown(row.server)}: " if row.server else ""
    return f"{server}{shown(row.tool)}({inner})"


# ------------------------------------------------------------ fallbacks
def count_words(shown_rows: int, total: int, filter_words: str) -> str:
    """``3 pending`` or, with a filter, ``1 pending matching the filter order_id=42 (3 in
    all)``: every count the inbox shows says which calls it counts."""
    if not filter_words:
        return f"{shown_rows} pending"
    return f"{shown_rows} pending matching the filter {shown(filter_words)} ({total} in all)"


def _none_words(total: int, filter_words: str) -> str:
    if filter_words and total:
        return "no pending call matches the filter (inbox.filter() with no arguments clears it)"
    return "nothing waits for a decision"


def text_table(
    rows: Sequence[Row],
    describe: str,
    now: datetime,
    *,
    total: int | None = None,
    filter_words: str = "",
) -> str:
    """The plain-text view; ``total``: the pending calls before ``filter_words`` (the
    current filter in words, ``""``: none) picked ``rows``."""
    total = len(rows) if total is None else total
    head = f"Approvals inbox: {count_words(len(rows), total, filter_words)} ({shown(describe)})"
    lines = [head]
    for r in rows:
        age = age_words(r.requested_at, now)
        lines.append(f"  [{chat_name(r)}] {one_line(r)}  {age}  ({shown(r.reason)})")
    if not rows:
        lines.append("  " + _none_words(total, filter_words))
    return "\n".join(lines)


def html_table(
    rows: Sequence[Row],
    describe: str,
    now: datetime,
    *,
    total: int | None = None,
    filter_words: str = "",
) -> str:
    """The static view: a table of the pending calls (every value escaped)."""
    total = len(rows) if total is None else total
    counted = count_words(len(rows), total, filter_words)
    out = [
        '<div class="nba-inbox-static">',
        f"<p><b>Approvals inbox</b>: {esc(counted)} ({esc(shown(describe))}). "
        "Decide with <code>inbox.approve(...)</code> / "
        "<code>inbox.deny(..., reason=...)</code>.</p>",
    ]
    if not rows:
        none = _none_words(total, filter_words)
        out.append(f"<p>{esc(none[0].upper() + none[1:])}.</p></div>")
        return "".join(out)
    out.append(
        "<table><thead><tr><th>chat</th><th>server</th><th>tool</th><th>arguments</th>"
        "<th>why gated</th><th>age</th></tr></thead><tbody>"
    )
    for r in rows:
        args = "<br>".join(
            f"<code>{esc(a['key'])}</code>="
            + (
                f"<details><summary>{esc(a['short'])}</summary><pre>{esc(a['full'])}</pre></details>"
                if a["full"]
                else esc(a["short"])
            )
            for a in arguments_view(r)
        )
        out.append(
            f"<tr><td>{esc(chat_label(r))}</td><td>{esc(shown(r.server or ''))}</td>"
            f"<td><code>{esc(shown(r.tool))}</code></td><td>{args}</td>"
            f"<td>{esc(shown(r.reason))}</td><td>{esc(age_words(r.requested_at, now))}</td></tr>"
        )
    out.append("</tbody></table></div>")
    return "".join(out)
