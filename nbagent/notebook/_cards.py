"""A tool call as HTML: one card per call, readable, compact once it is over.

- A call that is not over (requested, awaiting approval, approved, running) is a
  full card: the tool's name once (the call id only on hover, in ``title``),
  its arguments (on the head line when they are short, else one row per
  argument: text with newlines as a text block, long values folded behind a
  ``<details>``), the defaults the tool will use for what the model left out
  (marked as such), the reason it needs a decision when there is a real one,
  and, in the live view, a slot (``.nba-controls``) where the card's buttons go.
- A finished call is one line, a ``<details>`` whose ``<summary>`` says tool,
  short arguments, status, duration and the start of the result (or the error,
  or the decision); a click (no script needed: static HTML too) shows the rest:
  all arguments, the edit as a diff, the error with its newlines and the
  traceback, the result (a DataFrame as its table, see ``_rich``).

Everything a model or a tool produced goes through :func:`~._html.esc`; the only
HTML not built here is a rich result's, which ``_rich`` rebuilt from an allowlist.
Every size is bounded, whatever the arguments or the result hold.
"""

from __future__ import annotations

import difflib
import html
import json
from itertools import islice
from typing import Any

from .._html import (
    ARGUMENTS_CHARS,
    STATUS_WORDS,
    VALUE_CHARS,
    clip,
    compact_json,
    esc,
    fmt_ms,
    json_preview,
    preview,
    printable,
    redacted,
    short_json,
)
from .._record import InputRecord
from .._secrets import redact_keys
from .._types import FINAL_STATUSES, PendingInput
from ._state import CallEntry, Thumb

ONE_LINE = 80  # arguments whose compact JSON is at most this long show on the head line
VALUE_LINE = 120  # a value longer than this folds: its start, then the rest on a click
BLOCK_LINES = 8  # a text block with more lines folds
MAX_KEYS = 40  # argument rows shown; a note counts the rest
DIFF_LINES = 200  # lines of a text diff shown
ERROR_CHARS = 4_000
SAVED_PREVIEW = 60  # characters of a result on a call's line saved folded


SENT = " (sent to the provider)"
"""What a hosted call's decision words end with: the decision went to the provider."""


def call_card_html(e: CallEntry, *, decision: str, live: bool = False) -> str:
    """``e`` as a card (see the module docstring); ``decision`` is who decided, in words."""
    if e.r.status in FINAL_STATUSES:
        return _finished(e, decision)
    return _open(e, decision, live)


# ------------------------------------------------------------------------------- cards
def _open(e: CallEntry, decision: str, live: bool) -> str:
    inline = inline_arguments(e)
    head = [*_name(e)]
    if inline is not None:
        head.append(f'<code class="nba-args1">{esc(inline)}</code>')
    head.append(_edited_tag(e))
    head.append(_badge(e.r.status, status_word(e)))
    head.append(_always_chip(e))
    meta = _meta(e)
    if meta:
        head.append(f'<span class="nba-dim">{esc(meta)}</span>')
    parts = [f'<div class="nba-head">{"".join(head)}</div>']
    if inline is None:
        parts.append(_arguments(e))
    parts.append(_defaults(e))
    parts.append(_original(e))
    if e.r.status == "awaiting_approval":
        why = reason_words(e)
        if why:
            parts.append(f'<div class="nba-note nba-reason">{esc(why)}</div>')
    if decision:
        parts.append(f'<div class="nba-note">{esc(decision)}</div>')
    if e.r.status == "running":
        parts.append(progress_html(e))
    parts.append(logs_html(e))
    if not live:  # the live view draws each input as a card of its own, with its buttons
        parts.append(inputs_done_html(e))
        parts.extend(input_html(i) for i in e.inputs)
    if live and e.gated:
        parts.append('<div class="nba-controls"></div>')
    return (
        f'<div class="nba-entry nba-card nba-call nba-st-{esc(e.r.status)}" '
        f'data-call-id="{esc(e.r.call_id)}">{"".join(parts)}</div>'
    )


def _finished(e: CallEntry, decision: str) -> str:
    inline = inline_arguments(e)
    short = inline if inline is not None else short_json(current_arguments(e), 60)
    head = [*_name(e), f'<code class="nba-args1">{esc(short)}</code>', _edited_tag(e)]
    head.append(_badge(e.r.status, status_word(e)))
    head.append(_always_chip(e))
    meta = _meta(e)
    if meta:
        head.append(f'<span class="nba-dim">{esc(meta)}</span>')
    if e.ran_before:
        names = [f"<code>{esc(n)}</code>" for n in e.ran_before]
        head.append(f'<span class="nba-ran-before">{ran_before_words(names)}</span>')
    head.append(_outcome(e, decision))
    peek = _peek(e)
    if peek:
        head.append(peek)
    body = []
    if inline is None:
        body.append(_arguments(e))
    body.append(_defaults(e))
    body.append(_original(e))
    if decision:
        body.append(f'<div class="nba-note">{esc(decision)}</div>')
    if e.r.error:
        body.append(f'<div class="nba-err">{esc(clip(e.r.error, ERROR_CHARS))}</div>')
    body.append(inputs_done_html(e))
    body.append(logs_html(e))
    if e.traceback:
        body.append(
            '<details class="nba-tb"><summary>traceback</summary>'
            f'<pre class="nba-result">{esc(e.traceback)}</pre></details>'
        )
    if e.r.hosted:  # the answer is the decision sent to the provider, not a result
        if e.result is not None and e.r.status != "denied":
            body.append(f'<div class="nba-note">{esc(clip(e.result))}</div>')
    elif e.result is not None and e.r.status != "denied" and not e.r.error:
        if e.result_html is not None:
            body.append(f'<div class="nba-rich">{e.result_html}</div>')
        else:
            body.append(f'<pre class="nba-result">{esc(clip(e.result))}</pre>')
        # the images are on the line already (each once in the notebook): the sounds' players
        shown = tuple(t for t in e.result_images if t.audio) if peek else e.result_images
        body.append(thumbs_html(shown))
    peeking = " nba-peeking" if peek else ""
    return (
        f'<details class="nba-entry nba-card nba-call nba-done nba-st-{esc(e.r.status)}" '
        f'data-call-id="{esc(e.r.call_id)}"><summary class="nba-head{peeking}">'
        f"{''.join(head)}</summary>"
        f'<div class="nba-body">{"".join(body)}</div></details>'
    )


def saved_line_html(e: CallEntry, *, decision: str) -> str:
    """A finished call saved folded: its one line and nothing under it.

    What the static HTML shows for a call in the folded older part of a long chat (see
    ``_render.conversation_html``): tool, short arguments, status, duration and the start
    of the result (or the error, or the decision), with no body: the rest stays in the
    chat (``chat.tool_calls``) and its store, not in every saved notebook. Text is
    escaped without quotes (no attribute holds it), which keeps JSON readable and small.
    """
    inline = inline_arguments(e)
    short = inline if inline is not None else short_json(current_arguments(e), 60)
    icon = "&#9729;" if e.r.hosted else "&#9881;"
    parts = [f"{icon} <b>{_text(call_label(e))}</b> <code>{_text(preview(short, 60))}</code>"]
    parts.append(f" {_badge(e.r.status, status_word(e))}")
    meta = _meta(e)
    if meta:
        parts.append(f" {_text(meta)}")
    if by_always_allow(e):
        parts.append(" (always allowed)")
    if e.r.status == "ok" and e.result is not None and not e.r.hosted:
        parts.append(f" &#8594; {_text(e.result_label or preview(e.result, SAVED_PREVIEW))}")
    elif e.r.error:
        first = e.r.error.strip().splitlines()[0] if e.r.error.strip() else e.r.error
        parts.append(f' <span class="nba-err-line">{_text(preview(first, SAVED_PREVIEW))}</span>')
    elif decision:
        parts.append(f" {_text(preview(decision, SAVED_PREVIEW))}")
    return f'<div class="nba-entry nba-line nba-st-{esc(e.r.status)}">{"".join(parts)}</div>'


def _text(text: object) -> str:
    """Text content escaped for HTML outside attributes (``&``, ``<`` and ``>``)."""
    return html.escape(printable(str(text)), quote=False)


def _name(e: CallEntry) -> list[str]:
    out = [
        '<span class="nba-icon" title="run by the provider, not here">&#9729;</span>'
        if e.r.hosted
        else '<span class="nba-icon">&#9881;</span>'
    ]
    if e.r.server:
        where = "MCP server run by the provider" if e.r.hosted else "MCP server"
        out.append(
            f'<span class="nba-server" title="{where} {esc(e.r.server)}">{esc(e.r.server)}</span>'
            '<span class="nba-dim"> · </span>'
        )
    out.append(f'<span class="nba-tool" title="call {esc(e.r.call_id)}">{esc(tool_name(e))}</span>')
    return out


def tool_name(e: CallEntry) -> str:
    """The call's tool name as shown: the model writes it (an unknown tool's name may hold
    ``password=...``), so it is read by ``redact_keys`` as the answer the model gets is; the
    record keeps the name as sent."""
    return redact_keys(e.r.tool)


def call_label(e: CallEntry) -> str:
    """``server · tool`` for a tool of an MCP server (hosted or not), else the tool's name."""
    return f"{e.r.server} · {tool_name(e)}" if e.r.server else tool_name(e)


def status_word(e: CallEntry) -> str:
    """The status in words; an approved hosted call's answer is "sent to the provider"."""
    if e.r.hosted and e.r.status == "ok":
        return "sent to the provider"
    return STATUS_WORDS.get(e.r.status, e.r.status)


def _badge(status: str, words: str | None = None) -> str:
    return (
        f'<span class="nba-badge nba-b-{esc(status)}">'
        f"{esc(words or STATUS_WORDS.get(status, status))}</span>"
    )


def by_always_allow(e: CallEntry) -> bool:
    """Whether an "Always allow" rule approved the call (no one was asked)."""
    return (e.r.decided_by or "").startswith("policy:always_allow")


def _always_chip(e: CallEntry) -> str:
    """A visible mark on a call an "Always allow" rule approved (the live card adds
    **Stop always allowing** under it while the rule holds)."""
    if not by_always_allow(e):
        return ""
    return (
        f'<span class="nba-chip nba-always" title="approved by an always-allow rule for '
        f'{esc(tool_name(e))}: no one was asked">always allowed</span>'
    )


def _meta(e: CallEntry) -> str:
    # Of the runner's modes, the default (sequential) goes unsaid.
    mode = e.r.concurrency if e.r.concurrency not in (None, "sequential") else ""
    replayed = "recorded result" if e.r.replayed else ""
    return " · ".join(x for x in (fmt_ms(e.r.duration_ms), mode, replayed) if x)


def ran_before_words(names: list[str]) -> str:
    """The note "ran before `insert` was decided", from the earlier calls' names, already
    formatted (code spans): those gated calls of its response still waited when this one
    ran (``order="ready"``), so its result cannot reflect them."""
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return f"ran before {listed} {'was' if len(names) == 1 else 'were'} decided"


def _outcome(e: CallEntry, decision: str) -> str:
    """The end of a finished call's line: the result's start, the error, or the decision."""
    if e.r.hosted and decision:  # the badge says it was sent; its run shows as an item
        return f'<span class="nba-sum">{esc(preview(decision.removesuffix(SENT), 120))}</span>'
    if e.r.status == "ok" and e.result is not None:
        what = e.result_label or preview(e.result, 100)
        return f'<span class="nba-sum">&#8594; {esc(what)}</span>'
    if e.r.error:
        first = e.r.error.strip().splitlines()[0] if e.r.error.strip() else e.r.error
        return f'<span class="nba-sum nba-err-line">{esc(preview(first, 120))}</span>'
    if decision:
        return f'<span class="nba-sum">{esc(preview(decision, 120))}</span>'
    if e.result is not None:
        return f'<span class="nba-sum">{esc(preview(e.result, 100))}</span>'
    return ""


def _peek(e: CallEntry) -> str:
    """What a finished call's folded line shows of a result that is more than text: its
    images as thumbnails (small while the line is folded, larger once open: they are the
    result's images, not repeated in the body, so a saved notebook holds each once) and a
    table's first rows (hidden once the line is opened, where the whole table shows)."""
    if e.r.status != "ok" or e.r.hosted or e.r.error:
        return ""
    parts = []
    if e.result_images:  # sounds by their label: a player here put their bytes in twice
        media = thumbs_html(e.result_images, players=False)
        parts.append(f'<div class="nba-peek nba-peek-media">{media}</div>')
    if e.result_peek is not None:
        parts.append(f'<div class="nba-peek"><div class="nba-rich">{e.result_peek}</div></div>')
    return "".join(parts)


def reason_words(e: CallEntry) -> str:
    """Why the call waits for a decision, when that says more than the card's badge.

    A tool's static ``requires_approval`` says nothing the badge does not (its
    note does: an MCP tool's "the notes server marks it destructive"); a
    resolver that left the call to a human says so (with its note when it
    failed); a hosted call says the provider runs it once approved; any other
    reason (a store's, a policy's) is shown as it is.
    """
    reason = (e.r.approval_reason or "").strip()
    if e.r.hosted and e.r.approval_source == "provider":
        where = f" on {e.r.server}" if e.r.server else ""
        return (
            f"The provider runs {tool_name(e)}{where} once you approve: your decision is sent "
            "to it, nothing runs here."
        )
    static = f"{e.r.tool} requires approval before it runs"
    rule = f"{e.r.tool} decides per call with an approval rule"
    if reason.startswith(static):
        return reason[len(static) :].strip().removeprefix("(").removesuffix(")")
    if reason.startswith(rule):
        note = reason[len(rule) :].strip()
        return "its approval rule left this call to you" + (f" {note}" if note else "")
    return redact_keys(reason)  # a store's, a policy's: may name the call as the model did


# --------------------------------------------------------------------------- arguments
def current_arguments(e: CallEntry) -> dict[str, Any]:
    """The arguments the call runs (or ran) with, as shown (secrets as ``***``): the edit's
    once it was edited, else the model's (which an edited card keeps behind a fold, see
    :func:`_original`)."""
    edited = e.shown_edited
    return edited if edited is not None else e.shown_arguments


def inline_arguments(e: CallEntry) -> str | None:
    """The current arguments as one line of JSON, when that is short and hides no text block."""
    if e.raw_arguments is not None and not e.r.arguments:
        return None
    text = compact_json(current_arguments(e), ONE_LINE)
    if text is None or "\\n" in text:
        return None
    return text


def _arguments(e: CallEntry) -> str:
    if e.raw_arguments is not None and not e.r.arguments:
        return (
            '<div class="nba-note">arguments (not valid JSON):</div>'
            f'<pre class="nba-block">{esc(clip(e.shown_raw_arguments or ""))}</pre>'
        )
    arguments = current_arguments(e)
    n = len(arguments)
    if n == 0:
        return '<div class="nba-args nba-dim">no arguments</div>'
    budget = max(VALUE_CHARS, ARGUMENTS_CHARS // min(n, MAX_KEYS))
    rows = [
        f'<div class="nba-arg"><span class="nba-key">{esc(_key(k))}</span>{_value(v, budget)}</div>'
        for k, v in islice(arguments.items(), MAX_KEYS)
    ]
    if n > MAX_KEYS:
        rows.append(f'<div class="nba-dim">… {n - MAX_KEYS:,} more arguments</div>')
    return f'<div class="nba-args">{"".join(rows)}</div>'


def _key(key: Any) -> str:
    text = str(key)
    return text if len(text) <= VALUE_LINE else text[:VALUE_LINE] + "…"


def _value(v: Any, budget: int) -> str:
    """One argument's value: short JSON inline, text as a block, long values folded."""
    if isinstance(v, str):
        if "\n" in v:
            return _block(v, budget)
        if len(v) <= VALUE_LINE:
            return f'<span class="nba-val">{esc(json.dumps(v, ensure_ascii=False))}</span>'
        start = json.dumps(v[:VALUE_LINE], ensure_ascii=False)[:-1] + "…"
        return _fold(
            f"{start} ({len(v):,} characters)",
            f'<pre class="nba-block">{esc(clip(v, budget, sep=""))}</pre>',
        )
    compact = compact_json(v, VALUE_LINE)
    if compact is not None:
        return f'<span class="nba-val">{esc(compact)}</span>'
    text = json_preview(v, limit=budget, value_chars=min(VALUE_CHARS, budget))[0]
    return _fold(_size(v), f'<pre class="nba-block">{esc(text)}</pre>')


def _block(text: str, budget: int) -> str:
    """Text with newlines, shown as text; past :data:`BLOCK_LINES` lines, folded."""
    lines = text[: 200 * BLOCK_LINES].split("\n")
    if len(lines) <= BLOCK_LINES and len(text) <= 200 * BLOCK_LINES:
        return f'<pre class="nba-block">{esc(text)}</pre>'
    head = "\n".join(lines[:BLOCK_LINES])
    total = text.count("\n") + 1
    return f'<pre class="nba-block">{esc(head)}</pre>' + _fold(
        f"show all ({total:,} lines, {len(text):,} characters)",
        f'<pre class="nba-block">{esc(clip(text, budget, sep=""))}</pre>',
    )


def _fold(summary: str, body: str) -> str:
    return f'<details class="nba-fold"><summary>{esc(summary)}</summary>{body}</details>'


def _size(v: Any) -> str:
    if isinstance(v, dict):
        return f"{{…}} {len(v):,} key{'s' if len(v) != 1 else ''}"
    if isinstance(v, (list, tuple)):
        return f"[…] {len(v):,} item{'s' if len(v) != 1 else ''}"
    return f"{type(v).__name__} (long)"


def _defaults(e: CallEntry) -> str:
    """The defaults the tool will use for the parameters the call leaves out, marked (a
    parameter an edit set is the edit's, not a default)."""
    arguments = current_arguments(e)
    defaults = {k: v for k, v in e.defaults.items() if k not in arguments}
    if not defaults:
        return ""
    items = [
        f'<span class="nba-default"><span class="nba-key">{esc(_key(k))}</span> = '
        f"{esc(short_json(v, VALUE_LINE))}</span>"
        for k, v in islice(defaults.items(), MAX_KEYS)
    ]
    return (
        '<div class="nba-defaults" title="The model left these out; the tool uses its defaults">'
        f'<span class="nba-tag">defaults</span> {" · ".join(items)}</div>'
    )


# -------------------------------------------------------------------------------- edits
def _edited_tag(e: CallEntry) -> str:
    if e.r.edited_arguments is None:
        return ""
    return '<span class="nba-tag nba-edited" title="run with edited arguments">edited</span>'


def _original(e: CallEntry) -> str:
    """An edited call's card shows the edit as its arguments; the model's original, as a
    diff against the edit, is one click away (folded), never shown as if current."""
    edited = e.shown_edited
    if edited is None:
        return ""
    return (
        '<details class="nba-fold nba-original"><summary>the model\'s original arguments'
        f"</summary>{_diff(e.shown_arguments, edited)}</details>"
    )


def _diff(old: dict[str, Any], new: dict[str, Any]) -> str:
    """What an edit changed: one line per changed, added or removed argument."""
    rows: list[str] = []
    keys = list(dict.fromkeys([*islice(old, MAX_KEYS * 4), *islice(new, MAX_KEYS * 4)]))
    unchanged = 0
    for k in keys:
        if len(rows) >= MAX_KEYS:
            rows.append('<div class="nba-dim">… more changes</div>')
            break
        name = f'<span class="nba-key">{esc(_key(k))}</span>'
        if k not in new:
            rows.append(f'<div class="nba-del">&#8722; {name} {esc(_one(old[k]))}</div>')
        elif k not in old:
            rows.append(f'<div class="nba-add">+ {name} {esc(_one(new[k]))}</div>')
        elif old[k] == new[k]:
            unchanged += 1
        elif _is_text(old[k]) or _is_text(new[k]):
            rows.append(f'<div class="nba-chg">{name}</div>{_text_diff(str(old[k]), str(new[k]))}')
        else:
            rows.append(
                f'<div class="nba-chg">{name} <del>{esc(_one(old[k]))}</del> &#8594; '
                f"<ins>{esc(_one(new[k]))}</ins></div>"
            )
    if unchanged:
        rows.append(f'<div class="nba-dim">{unchanged:,} unchanged</div>')
    return (
        f'<div class="nba-diff"><div class="nba-note">the edit changed:</div>{"".join(rows)}</div>'
    )


def _one(v: Any) -> str:
    return short_json(v, VALUE_LINE)


def _is_text(v: Any) -> bool:
    return isinstance(v, str) and ("\n" in v or len(v) > VALUE_LINE)


def _text_diff(old: str, new: str) -> str:
    a = old[:ARGUMENTS_CHARS].split("\n")
    b = new[:ARGUMENTS_CHARS].split("\n")
    lines = []
    for line in islice(difflib.unified_diff(a, b, lineterm="", n=1), 2, 2 + DIFF_LINES):
        cls = {"+": "nba-add", "-": "nba-del", "@": "nba-dim"}.get(line[:1], "")
        lines.append(f'<span class="{cls}">{esc(line)}</span>' if cls else esc(line))
    return f'<pre class="nba-block nba-textdiff">{chr(10).join(lines)}</pre>'


def _number(x: float) -> str:
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.3g}"


def progress_words(e: CallEntry) -> str:
    """A running call's latest progress in words ("3 of 10 (30%) · indexing"), or ""."""
    r = e.r
    if r.progress is None:
        return ""
    if r.progress_total:
        share = max(0.0, min(1.0, r.progress / r.progress_total))
        words = f"{_number(r.progress)} of {_number(r.progress_total)} ({share:.0%})"
    else:
        words = f"{_number(r.progress)} so far"
    if r.progress_message:
        words += f" · {preview(r.progress_message, 120)}"
    return words


def progress_html(e: CallEntry) -> str:
    """A running call's progress bar (a native ``<progress>``: no script, static HTML too;
    indeterminate while nothing, or no total, was reported) and its words."""
    r = e.r
    if r.progress is not None and r.progress_total:
        share = max(0.0, min(1.0, r.progress / r.progress_total))
        bar = f'<progress class="nba-progress" max="1" value="{share:.4f}"></progress>'
    else:
        bar = '<progress class="nba-progress"></progress>'
    words = progress_words(e)
    said = f' <span class="nba-dim">{esc(words)}</span>' if words else ""
    return f'<div class="nba-progress-row">{bar}{said}</div>'


LOG_LINES = 50  # a call's server log messages shown on its card (the newest)


def log_lines(e: CallEntry) -> list[str]:
    """The call's server log messages as lines ("warning [db] disk almost full")."""
    return [
        f"{line.level}{f' [{line.logger}]' if line.logger else ''} {line.message}"
        for line in e.r.logs[-LOG_LINES:]
    ]


def logs_html(e: CallEntry) -> str:
    """The log messages a server sent while the call ran, folded (a click shows them)."""
    if not e.r.logs:
        return ""
    n = e.r.log_messages
    shown = "\n".join(clip(line, VALUE_CHARS) for line in log_lines(e))
    worst = max((_LEVELS.get(line.level, 0) for line in e.r.logs), default=0)
    cls = " nba-logs-bad" if worst >= _LEVELS["warning"] else ""
    more = f", the last {LOG_LINES}" if n > LOG_LINES else ""
    return (
        f'<details class="nba-logs{cls}"><summary>{n} server log message'
        f"{'s' if n != 1 else ''}{more}</summary>"
        f'<pre class="nba-result">{esc(shown)}</pre></details>'
    )


_LEVELS = {
    "debug": 0,
    "info": 1,
    "notice": 2,
    "warning": 3,
    "error": 4,
    "critical": 5,
    "alert": 6,
    "emergency": 7,
}


def thumbs_html(images: tuple[Thumb, ...], players: bool = True) -> str:
    """Images as thumbnails (``src``: a ``data:`` URL nbagent encoded), sounds as players
    (``<audio controls>``, nothing loaded until played; without ``players``, by their
    label), files and what is too large as labels."""
    if not images:
        return ""
    out = []
    for t in images:
        label = esc(t.label)
        if t.audio and (t.src is None or not players):
            out.append(f'<span class="nba-thumb-label">[{label}]</span>')
        elif t.audio:
            out.append(
                f'<audio class="nba-audio" controls preload="none" src="{esc(t.src)}" '
                f'title="{label}" aria-label="{label}"></audio>'
            )
        elif t.src is not None:
            out.append(f'<img class="nba-thumb" src="{esc(t.src)}" alt="{label}" title="{label}">')
        else:
            out.append(f'<span class="nba-thumb-label">[{label}]</span>')
    return f'<div class="nba-thumbs">{"".join(out)}</div>'


# ------------------------------------------------------------------------------- inputs
_INPUT_TITLES = {
    "external": "waiting for its result",
    "ask_user": "asks you",
    "elicitation": "asks you to fill in",
    "elicitation_url": "asks you to visit a page",
    "sampling": "asks to run the model on",
}


def input_html(p: PendingInput, *, live: bool = False) -> str:
    """A pending input: what is asked (the question and its choices, the form's fields, the
    URL, the exact sampling messages) and how to answer it in code.

    ``live``: the input's card in the live view, where ``approval.js`` draws the form's
    fields, the choices and the buttons into its ``.nba-controls`` slot (so neither the
    field list nor the choices are written here).
    """
    who = f"{p.server} " if p.server else ""
    body = [
        f'<div class="nba-head"><span class="nba-badge nba-st-awaiting_input">input</span> '
        f"{esc(who + _INPUT_TITLES.get(p.kind, p.kind))}"
        + (
            f' <span class="nba-dim">for <code>{esc(p.tool)}</code></span>'
            if live and p.tool
            else ""
        )
        + "</div>"
    ]
    if p.message and p.kind != "external":
        body.append(
            f'<div class="nba-note nba-ask">{esc(clip(redact_keys(p.message), 2000))}</div>'
        )
    if p.kind == "external":
        body.append(_external(p))
    if p.kind == "ask_user" and p.choices and not live:
        options = "".join(f"<li><code>{esc(redact_keys(str(c)))}</code></li>" for c in p.choices)
        body.append(f'<ul class="nba-choices">{options}</ul>')
    elif p.kind == "elicitation" and not live:
        body.append(_form_fields(p.schema or {}))
    elif p.kind == "elicitation_url":
        body.append(f'<div class="nba-note">{url_link(str(p.content.get("url") or ""))}</div>')
    elif p.kind == "sampling":
        body.append(_sampling(p.content))
    if live:
        body.append('<div class="nba-controls"></div>')
    body.append(
        f'<div class="nba-note nba-dim">{"or in code" if live else "answer"}: '
        f"<code>chat.answer({esc(repr(p.id))}, ...)</code>"
        f" or <code>chat.decline({esc(repr(p.id))})</code></div>"
    )
    return f'<div class="nba-input" data-input-id="{esc(p.id)}">{"".join(body)}</div>'


def settled_input_words(r: InputRecord, by_hand: bool) -> str:
    """An answered input in words: its kind, then :func:`input_summary`'s line."""
    return input_summary(
        r.kind,
        r.status,
        r.answered_by,
        wait_ms=r.wait_ms,
        by_hand=by_hand,
        elsewhere=r.elsewhere,
        reason=r.reason,
        own_reply=r.kind == "sampling" and isinstance(r.data, str),
    )


def inputs_done_html(e: CallEntry) -> str:
    """What the call asked a person, and how each was answered (one line each)."""
    if not e.settled_inputs:
        return ""
    lines = [
        f'<div class="nba-note nba-input-done"><span class="nba-tag">'
        f"{esc(_INPUT_NAMES.get(r.kind, r.kind))}</span> {esc(settled_input_words(r, hand))}</div>"
        for r, hand in e.settled_inputs[-20:]
    ]
    return "".join(lines)


_INPUT_NAMES = {
    "elicitation": "form",
    "elicitation_url": "page",
    "sampling": "sampling",
    "ask_user": "question",
    "external": "result",
}


def url_link(url: str) -> str:
    """An http(s) URL as a link that opens in a new tab (escaped, no opener); any other
    URL as code, never a link."""
    if url.startswith(("https://", "http://")):
        return (
            f'<a href="{esc(url)}" target="_blank" rel="noopener noreferrer" '
            f'class="nba-url">{esc(url)}</a>'
        )
    return f"<code>{esc(url)}</code>"


def _external(p: PendingInput) -> str:
    """An external call's arguments (what the result is for)."""
    arguments = p.content.get("arguments")
    if not isinstance(arguments, dict) or not arguments:
        return ""
    shown = json.dumps(redacted(arguments), ensure_ascii=False, indent=1, default=str)
    return f'<pre class="nba-block">{esc(clip(shown, 2000))}</pre>'


_SUMMARY_VERBS = {
    ("accept", "sampling"): "Approved",
    ("accept", "elicitation_url"): "Done",
    ("decline", "sampling"): "Denied",
    ("decline", ""): "Declined",
    ("cancel", ""): "Cancelled",
}


def input_summary(
    kind: str,
    action: str,
    by: str | None,
    *,
    wait_ms: float | None = None,
    by_hand: bool = False,
    elsewhere: bool = False,
    reason: str | None = None,
    own_reply: bool = False,
) -> str:
    """An answered input's card as one line: "Answered by you after 12 s", "Declined by
    you: not now", "Approved in code after 3 s", "Cancelled by nbagent: the call ended"."""
    verb = (
        "Answered"
        if own_reply
        else _SUMMARY_VERBS.get((action, kind)) or _SUMMARY_VERBS.get((action, ""), "Answered")
    )
    if elsewhere:
        who = " elsewhere" + (f" by {by}" if by and by != "user" else "")
    elif by == "user":
        who = " by you" if by_hand else " in code"
    else:
        who = f" by {by}" if by else ""
    words = verb + who
    if own_reply:
        words += " (your own reply, the model was not asked)"
    if wait_ms is not None and action == "accept":
        words += f" after {wait_words(wait_ms)}"
    if reason:
        words += f": {reason}"
    return words


def wait_words(ms: float) -> str:
    """How long an input waited: ``0.4 s``, ``12 s``, ``3 min 5 s``, ``2 h 4 min``."""
    s = max(0.0, ms / 1000.0)
    if s < 1:
        return f"{s:.1f} s"
    if s < 60:
        return f"{s:.0f} s"
    m, sec = divmod(int(s), 60)
    if m < 60:
        return f"{m} min {sec} s" if sec else f"{m} min"
    h, m = divmod(m, 60)
    return f"{h} h {m} min" if m else f"{h} h"


def _form_fields(schema: dict[str, Any]) -> str:
    """An elicitation form's fields as a list: name, type, whether required, the choices."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    rows = []
    for name, spec in props.items() if isinstance(props, dict) else ():
        spec = spec if isinstance(spec, dict) else {}
        kind = spec.get("type", "value")
        what = [
            str(spec.get("title") or name),
            f"({kind}{', required' if name in required else ''})",
        ]
        if isinstance(spec.get("enum"), list):
            what.append("one of " + ", ".join(str(v) for v in spec["enum"]))
        if spec.get("description"):
            what.append(f"- {spec['description']}")
        shown = redact_keys(" ".join(what))
        rows.append(f"<li><code>{esc(redact_keys(str(name)))}</code> {esc(shown)}</li>")
    return f'<ul class="nba-form">{"".join(rows)}</ul>' if rows else ""


def _sampling(content: dict[str, Any]) -> str:
    """The exact messages a server wants the model to answer (and its limits)."""
    lines = []
    if content.get("systemPrompt"):
        lines.append(f"system: {content['systemPrompt']}")
    for m in content.get("messages") or ():
        block = m.get("content") if isinstance(m, dict) else None
        blocks = block if isinstance(block, list) else [block]
        text = " ".join(
            str(b.get("text"))
            if isinstance(b, dict) and "text" in b
            else f"[{(b or {}).get('type', 'part')}]"
            for b in blocks
            if b is not None
        )
        lines.append(f"{m.get('role', 'user') if isinstance(m, dict) else 'user'}: {text}")
    if content.get("maxTokens"):
        lines.append(f"(at most {content['maxTokens']} tokens)")
    prefs = _preferences(content.get("modelPreferences"))
    if prefs:
        lines.append(f"(model preferences: {prefs})")
    return f'<pre class="nba-result">{esc(clip(redact_keys(chr(10).join(lines)), 4000))}</pre>'


def _preferences(prefs: Any) -> str:
    """A sampling request's model preferences in words: hinted models, then priorities."""
    if not isinstance(prefs, dict):
        return ""
    out = []
    hints = [
        h.get("name") for h in prefs.get("hints") or () if isinstance(h, dict) and h.get("name")
    ]
    if hints:
        out.append("models like " + ", ".join(str(h) for h in hints))
    for key, word in (
        ("intelligencePriority", "intelligence"),
        ("speedPriority", "speed"),
        ("costPriority", "cost"),
    ):
        if isinstance(prefs.get(key), int | float):
            out.append(f"{word} {prefs[key]:g}")
    return ", ".join(out)
