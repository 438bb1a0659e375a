"""Pure rendering: view entries -> HTML, markdown and plain text.

Every function here is a pure function of its arguments. Everything a model,
a tool or a user produced is shown as text, whatever it contains:

- control characters (C0 but newline and tab, DEL, C1: what starts a
  terminal's escape sequences) are shown as ``\\x1b``-style escapes
  (:func:`printable`), in every output;
- HTML goes through :func:`html.escape`;
- markdown escapes every character that could start markup, a link or raw HTML
  (:func:`md_text`, :func:`md_inline`), or puts the text in a code span or
  fence longer than any run of backticks inside it, which nothing can close;
- huge values are clipped (the arguments' preview comes from
  :func:`~nbagent.notebook._state.json_preview`).

Colours come from JupyterLab's theme variables (with fallbacks for nbconvert
and other front ends), so light and dark themes both work.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from datetime import UTC
from typing import get_args

from .._types import CallStatus
from ._state import (
    AWAITING,
    BUDGET,
    COMPLETE,
    ELSEWHERE,
    FAILED,
    BudgetEntry,
    CallEntry,
    Entry,
    ErrorEntry,
    StepEntry,
    TextEntry,
    Totals,
    UserEntry,
)

PREVIEW_CHARS = 160
RESULT_CHARS = 20_000
COLLAPSE_AFTER = 40  # entries shown in full by the static fallbacks; older ones fold

CSS = """
.nba-chat { font-family: var(--jp-ui-font-family, system-ui, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px); color: var(--jp-ui-font-color1, #1f1f1f);
  max-width: 100%; }
.nba-chat .widget-html, .nba-chat .widget-html-content { line-height: 1.4; height: auto;
  margin: 0; align-self: stretch; }
.nba-chat .widget-vbox { margin: 0; }
.nba-entry { margin: 3px 0; box-sizing: border-box; width: 100%; }
.nba-user { border-left: 3px solid var(--jp-brand-color1, #1976d2); padding: 3px 8px;
  background: var(--jp-layout-color2, #eeeeee); white-space: pre-wrap; word-break: break-word; }
.nba-who { font-weight: 600; margin-right: 6px; color: var(--jp-ui-font-color2, #616161); }
.nba-text { padding: 3px 8px; white-space: pre-wrap; word-break: break-word;
  border-left: 3px solid var(--jp-border-color2, #e0e0e0); }
.nba-streaming::after { content: "\\258D"; color: var(--jp-brand-color1, #1976d2); }
.nba-step { color: var(--jp-ui-font-color2, #616161); font-size: var(--jp-ui-font-size0, 11px);
  padding: 1px 8px; }
.nba-step.nba-failed { color: var(--jp-error-color1, #d32f2f); }
.nba-card { border: 1px solid var(--jp-border-color2, #e0e0e0); border-radius: 4px;
  padding: 3px 8px; background: var(--jp-layout-color1, #ffffff); }
.nba-card.nba-st-awaiting_approval { border-color: var(--jp-warn-color0, #f57c00);
  border-left-width: 3px; }
.nba-card.nba-st-error, .nba-card.nba-st-timed_out, .nba-card.nba-error-card {
  border-color: var(--jp-error-color1, #d32f2f); border-left-width: 3px; }
.nba-card.nba-st-denied { border-left: 3px solid var(--jp-error-color2, #e57373); }
.nba-card.nba-st-ok { border-left: 3px solid var(--jp-success-color1, #388e3c); }
.nba-card.nba-st-running { border-left: 3px solid var(--jp-brand-color1, #1976d2); }
.nba-head { display: flex; flex-wrap: wrap; gap: 6px; align-items: baseline; }
.nba-tool { font-family: var(--jp-code-font-family, monospace); font-weight: 600; }
.nba-dim { color: var(--jp-ui-font-color2, #616161); font-size: var(--jp-ui-font-size0, 11px); }
.nba-badge { font-size: var(--jp-ui-font-size0, 11px); padding: 0 6px; border-radius: 8px;
  background: var(--jp-layout-color3, #bdbdbd); color: var(--jp-ui-inverse-font-color1, #fff); }
.nba-b-ok { background: var(--jp-success-color1, #388e3c); }
.nba-b-error, .nba-b-timed_out { background: var(--jp-error-color1, #d32f2f); }
.nba-b-denied { background: var(--jp-error-color2, #e57373); }
.nba-b-awaiting_approval { background: var(--jp-warn-color0, #f57c00); }
.nba-b-running, .nba-b-approved { background: var(--jp-brand-color1, #1976d2); }
.nba-chat pre.nba-json, .nba-chat pre.nba-result {
  font-family: var(--jp-code-font-family, monospace);
  font-size: var(--jp-code-font-size, 12px); background: var(--jp-layout-color2, #eeeeee);
  color: var(--jp-content-font-color1, inherit); margin: 2px 0; padding: 3px 6px; max-height: 14em;
  overflow: auto; white-space: pre-wrap; word-break: break-word; border: 0; }
.nba-chat details > summary { cursor: pointer; color: var(--jp-ui-font-color2, #616161);
  font-size: var(--jp-ui-font-size0, 11px); }
.nba-err { color: var(--jp-error-color1, #d32f2f); white-space: pre-wrap; }
.nba-note { color: var(--jp-ui-font-color2, #616161); font-size: var(--jp-ui-font-size0, 11px); }
.nba-status { border-top: 1px solid var(--jp-border-color2, #e0e0e0); margin-top: 4px;
  padding: 2px 8px; color: var(--jp-ui-font-color2, #616161);
  font-size: var(--jp-ui-font-size0, 11px); }
.nba-phase-awaiting { color: var(--jp-warn-color0, #f57c00); font-weight: 600; }
.nba-phase-error { color: var(--jp-error-color1, #d32f2f); font-weight: 600; }
.nba-phase-complete { color: var(--jp-success-color1, #388e3c); font-weight: 600; }
.nba-phase-busy { color: var(--jp-brand-color1, #1976d2); font-weight: 600; }
.nba-more button, .nba-more { font-size: var(--jp-ui-font-size0, 11px); }
"""

# Every call status in words: its name, spaced, except the one that asks for something.
_STATUS_WORDS: dict[str, str] = {
    **{status: status.replace("_", " ") for status in get_args(CallStatus)},
    "awaiting_approval": "needs approval",
}


# Control characters a terminal acts on (C0 but \n and \t, DEL, C1), and line ends.
_CONTROL = re.compile(r"\r\n?|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _show_control(m: re.Match[str]) -> str:
    c = m[0]
    if c == "\r\n":
        return "\n"
    return "\\r" if c == "\r" else f"\\x{ord(c):02x}"


def printable(text: str) -> str:
    """``text`` with its control characters shown as escapes (``\\x1b``, ``\\r``), so an
    escape sequence is seen, not acted on; newlines and tabs stay, CRLF becomes LF."""
    if text.isprintable() or _CONTROL.search(text) is None:  # the first: a fast common case
        return text
    return _CONTROL.sub(_show_control, text)


def esc(text: object) -> str:
    """HTML-escape anything (quotes included, so it is safe in attributes too)."""
    return html.escape(printable(str(text)), quote=True)


def style_tag() -> str:
    return f"<style>{CSS}</style>"


# --------------------------------------------------------------------------- pieces
def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return ""
    if ms < 1:
        return "<1 ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.2f} s"


def fmt_tokens(n: int) -> str:
    return f"{n:,}"


def fmt_cost(usd: float) -> str:
    if usd == 0:
        return "$0"
    return f"${usd:.4f}" if usd < 1 else f"${usd:.2f}"


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """One line of at most ``limit`` characters (looks at the start of ``text`` only)."""
    head = text[: 4 * limit]
    flat = " ".join(head.split())
    if len(flat) <= limit and len(head) == len(text):
        return flat
    return flat[: limit - 1] + "…"


def clip(text: str, limit: int = RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit:,} more characters)"


def decision_words(e: CallEntry) -> str:
    """'approved by you', 'denied by you: reason', 'approved: always allowed' (plain text);
    a decision made elsewhere says who made it and when: 'approved elsewhere by ops at
    2026-12-01 06:03:04 UTC'."""
    if e.verdict is None:
        return ""
    by = e.decided_by or "?"
    if e.decided_elsewhere:
        who = {"user": "a user", "resolver": "the tool's approval rule"}.get(by, by)
        if by.startswith("policy:always_allow"):
            who = "an always-allow rule"
        words = f"{e.verdict} elsewhere by {who}"
        if e.decided_at is not None:
            words += f" at {e.decided_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
        if e.decision_reason:
            words += f": {e.decision_reason}"
    elif by.startswith("policy:always_allow"):
        words = f"{e.verdict}: always allowed" + (
            " (when its rule holds)" if by.endswith(":when") else ""
        )
    else:
        who = {"user": "you", "resolver": "the tool's approval rule"}.get(by, by)
        words = f"{e.verdict} by {who}"
        if e.decision_reason:
            words += f": {e.decision_reason}"
    if e.edited_arguments is not None and e.verdict == "approved":
        words += " with edited arguments"
    return words


def step_words(e: StepEntry) -> str:
    """'step 2 · gpt-4.1 · 812 in / 40 out tokens · 1.20 s' (the step's number in its turn)."""
    parts = [f"step {e.number or e.step}", e.model or e.provider or "model"]
    if e.status == "running":
        parts.append("generating…")
        if e.streaming_calls:
            parts.append("calling " + ", ".join(e.streaming_calls.values()))
    elif e.status == "failed":
        parts.append(f"failed after {fmt_ms(e.latency_ms)}")
    else:
        if e.measured:
            tokens = f"{fmt_tokens(e.input_tokens)} in / {fmt_tokens(e.output_tokens)} out tokens"
            if e.cached_tokens:
                tokens += f" ({fmt_tokens(e.cached_tokens)} cached)"
            parts.append(tokens)
        if e.latency_ms is not None:
            parts.append(fmt_ms(e.latency_ms))
        if e.cost_usd is not None:
            parts.append(fmt_cost(e.cost_usd))
        if e.n_tool_calls:
            parts.append(f"{e.n_tool_calls} tool call{'s' if e.n_tool_calls != 1 else ''}")
        # A deliberate subset of StopReason: the ordinary endings go unsaid.
        if e.stop_reason not in ("", "end", "tool_use"):
            parts.append(f"stopped: {e.stop_reason}")
    return " · ".join(parts)


def status_words(totals: Totals, phase: str | None = None) -> str:
    phase = phase or totals.phase
    parts = [phase]
    parts.append(f"{totals.steps} step{'s' if totals.steps != 1 else ''}")
    parts.append(f"{totals.calls} tool call{'s' if totals.calls != 1 else ''}")
    parts.append(
        f"{fmt_tokens(totals.input_tokens)} in / {fmt_tokens(totals.output_tokens)} out tokens"
    )
    if totals.cost_known:
        parts.append(fmt_cost(totals.cost_usd))
    return " · ".join(parts)


# --------------------------------------------------------------------------- HTML
def entry_html(e: Entry, *, live: bool = False) -> str:
    """One entry as an HTML fragment (everything escaped); ``live`` in the widget view."""
    if isinstance(e, UserEntry):
        return (
            f'<div class="nba-entry nba-user"><span class="nba-who">You</span>{esc(e.text)}</div>'
        )
    if isinstance(e, TextEntry):
        cls = "nba-entry nba-text" + (" nba-streaming" if e.streaming else "")
        return f'<div class="{cls}">{esc(e.text)}</div>'
    if isinstance(e, StepEntry):
        cls = "nba-entry nba-step" + (" nba-failed" if e.status == "failed" else "")
        body = esc(step_words(e))
        if e.status == "failed":
            body += f'<div class="nba-err">{esc(e.error_type)}: {esc(preview(e.error, 600))}</div>'
        return f'<div class="{cls}">{body}</div>'
    if isinstance(e, CallEntry):
        return call_html(e, with_card=live and e.gated)
    if isinstance(e, BudgetEntry):
        return budget_html(e)
    if isinstance(e, ErrorEntry):
        return (
            f'<div class="nba-entry nba-card nba-error-card"><div class="nba-err">'
            f"{esc(e.title)}</div><details><summary>details</summary>"
            f'<pre class="nba-result">{esc(clip(e.detail))}</pre></details></div>'
        )
    return f'<div class="nba-entry">{esc(e)}</div>'


def call_html(e: CallEntry, *, with_card: bool = False) -> str:
    """A tool-call card; ``with_card`` when a live approval card sits under it."""
    status = e.status
    head = [
        '<span class="nba-icon">&#9881;</span>',
        f'<span class="nba-tool">{esc(e.name)}</span>',
        f'<span class="nba-badge nba-b-{esc(status)}">'
        f"{esc(_STATUS_WORDS.get(status, status))}</span>",
    ]
    # Of the runner's modes, the default (sequential) goes unsaid.
    meta = [
        x
        for x in (fmt_ms(e.duration_ms), e.mode if e.mode not in (None, "sequential") else "")
        if x
    ]
    if meta:
        head.append(f'<span class="nba-dim">{esc(" · ".join(meta))}</span>')
    head.append(f'<span class="nba-dim">{esc(e.call_id)}</span>')
    parts = [f'<div class="nba-head">{"".join(head)}</div>']
    parts.append(f'<pre class="nba-json">{esc(e.arguments_text)}</pre>')
    if e.edited_arguments is not None:
        parts.append(
            '<div class="nba-note">run with edited arguments:</div>'
            f'<pre class="nba-json">{esc(e.edited_text)}</pre>'
        )
    if e.gated and e.status == "awaiting_approval" and e.approval_reason and not with_card:
        parts.append(f'<div class="nba-note">&#9888; {esc(e.approval_reason)}</div>')
    words = decision_words(e)
    if words:
        parts.append(f'<div class="nba-note">{esc(words)}</div>')
    if e.error:
        parts.append(f'<div class="nba-err">{esc(preview(e.error, 600))}</div>')
    if e.result is not None and not (e.status == "denied" and e.result_status == "denied"):
        parts.append(
            f'<details class="nba-result-box"><summary>result: {esc(preview(e.result))}</summary>'
            f'<pre class="nba-result">{esc(clip(e.result))}</pre></details>'
        )
    return (
        f'<div class="nba-entry nba-card nba-call nba-st-{esc(status)}" '
        f'data-call-id="{esc(e.call_id)}">{"".join(parts)}</div>'
    )


def budget_html(e: BudgetEntry) -> str:
    what = {
        "pending": "The step budget ran out. Continue, or stop here.",
        "continued": "The step budget ran out; continued.",
        "stopped": "The step budget ran out; stopped.",
    }.get(e.status, e.status)
    return f'<div class="nba-entry nba-card nba-budget nba-st-{esc(e.status)}">{esc(what)}</div>'


def status_html(totals: Totals, phase: str | None = None) -> str:
    phase = phase or totals.phase
    cls = {
        AWAITING: "nba-phase-awaiting",
        BUDGET: "nba-phase-awaiting",
        ELSEWHERE: "nba-phase-awaiting",
        FAILED: "nba-phase-error",
        COMPLETE: "nba-phase-complete",
    }.get(phase, "nba-phase-busy")
    rest = status_words(totals, phase)[len(phase) :]
    # Only the view's own words and numbers (rendered on every event): escaped as HTML,
    # with no control characters to look for.
    own = html.escape
    return f'<div class="nba-status"><span class="{cls}">{own(phase)}</span>{own(rest)}</div>'


def conversation_html(
    entries: Sequence[Entry],
    totals: Totals,
    *,
    title: str = "",
    collapse_after: int = COLLAPSE_AFTER,
) -> str:
    """The whole conversation (or one turn) as static HTML, older entries folded."""
    parts = [style_tag(), '<div class="nba-chat">']
    if title:
        parts.append(f'<div class="nba-step">{esc(title)}</div>')
    older = entries[:-collapse_after] if len(entries) > collapse_after else []
    recent = entries[len(older) :]
    if older:
        parts.append(f"<details><summary>{len(older):,} earlier entries</summary>")
        parts.extend(entry_html(e) for e in older)
        parts.append("</details>")
    parts.extend(entry_html(e) for e in recent)
    parts.append(status_html(totals))
    parts.append("</div>")
    return "".join(parts)


# --------------------------------------------------------------------------- markdown
# Characters that start markup anywhere on a line: HTML and entities (as entities, so
# no renderer's pre-pass sees a tag), emphasis, code, links and images, headings,
# tables, strikethrough, math, e-mail autolinks. A backslash before a bracket is an
# entity too: JupyterLab's math pre-pass reads a doubled backslash there as \( or \[.
_MD_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MD_CHARS = re.compile(
    r"[&<>\\`*_{}\[\]#|~$@]"
    r"|(?<=[0-9A-Za-z]):(?=\S)"  # a scheme's colon: no autolink (http://..., mailto:x)
    r"|(?<=:)/|(?<=:/)/"  # and no protocol-relative //host after it
    r"|(?<=[Ww]{3})\."  # www.host
)
# What starts a block at the start of a line: indentation (an indented code block),
# list items, setext underlines, definition lists.
_MD_LINE = re.compile(r"^(?:([ \t]+)(?=\S)|([-+=:])|(\d+)([.)]))", re.MULTILINE)


def _md_char(m: re.Match[str]) -> str:
    c = m[0]
    if c == "\\" and m.string[m.end() : m.end() + 1] in ("(", ")", "[", "]"):
        return "&#92;"
    return _MD_ESCAPES.get(c) or "\\" + c


def _md_line(m: re.Match[str]) -> str:
    if m[1]:
        return m[1].replace("\t", "    ").replace(" ", "&nbsp;")
    if m[2]:
        return "\\" + m[2]
    return f"{m[3]}\\{m[4]}"


def md_inline(text: str) -> str:
    """Text for a markdown line: every markup character escaped, line breaks as spaces.

    Nothing in it can start a link, an autolink, an image, raw HTML, emphasis,
    code or math; the rendered text reads as written.
    """
    text = printable(text).replace("\n", " ")
    return _MD_CHARS.sub(_md_char, text)


def md_text(text: str) -> str:
    """Text of several lines for markdown: :func:`md_inline` escapes, line breaks kept
    (as hard breaks), and no line can start a block (a list, a quote, a code block...)."""
    text = _MD_CHARS.sub(_md_char, printable(text))
    return _MD_LINE.sub(_md_line, text).replace("\n", "  \n")


def code_span(text: str) -> str:
    """``text`` as one inline code span (on one line) that nothing inside can close."""
    text = printable(text).replace("\n", " ")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fence(text: str, lang: str = "") -> str:
    """A fenced code block longer than any run of backticks in ``text``: nothing closes it."""
    text = printable(text)
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def entry_markdown(e: Entry) -> str:
    if isinstance(e, UserEntry):
        return f"**You:** {md_text(e.text)}"
    if isinstance(e, TextEntry):
        return f"**Assistant:** {md_text(e.text)}"
    if isinstance(e, StepEntry):
        return f"*{md_inline(step_words(e))}*" + (
            f"  \n**{md_inline(e.error_type)}:** {md_inline(preview(e.error, 600))}"
            if e.status == "failed"
            else ""
        )
    if isinstance(e, CallEntry):
        words = md_inline(_STATUS_WORDS.get(e.status, e.status))
        head = f"**tool {code_span(e.name)}** · {words}"
        if e.duration_ms is not None:
            head += f" · {md_inline(fmt_ms(e.duration_ms))}"
        lines = [head, _fence(e.arguments_text, "json")]
        if e.gated and e.status == "awaiting_approval":
            lines.append(f"> needs approval: {md_inline(e.approval_reason)}")
        words = decision_words(e)
        if words:
            lines.append(f"> {md_inline(words)}")
        if e.error:
            lines.append(f"> error: {md_inline(preview(e.error, 600))}")
        if e.result is not None and e.status != "denied":
            lines.append("result:\n" + _fence(clip(e.result, 2000)))
        return "\n\n".join(lines)
    if isinstance(e, BudgetEntry):
        return f"> step budget exhausted ({md_inline(e.status)})"
    if isinstance(e, ErrorEntry):
        return f"> **error:** {md_inline(e.title)}"
    return md_inline(str(e))


def conversation_markdown(entries: Sequence[Entry], totals: Totals) -> str:
    blocks = [entry_markdown(e) for e in entries]
    blocks.append(f"---\n*{md_inline(status_words(totals))}*")
    return "\n\n".join(blocks)


# --------------------------------------------------------------------------- plain text
def entry_text(e: Entry) -> str:
    """One entry as plain text (control characters shown as escapes)."""
    return printable(_entry_text(e))


def _entry_text(e: Entry) -> str:
    if isinstance(e, UserEntry):
        return f"You: {e.text}"
    if isinstance(e, TextEntry):
        return f"Assistant: {e.text}"
    if isinstance(e, StepEntry):
        line = f"[{step_words(e)}]"
        if e.status == "failed":
            line += f"\n  {e.error_type}: {preview(e.error, 600)}"
        return line
    if isinstance(e, CallEntry):
        args = preview(e.arguments_text, 200)
        line = f"  tool {e.name}({args}) -> {_STATUS_WORDS.get(e.status, e.status)}"
        if e.duration_ms is not None:
            line += f" [{fmt_ms(e.duration_ms)}]"
        extra = []
        if e.gated and e.status == "awaiting_approval":
            extra.append(f"    needs approval: {e.approval_reason}")
        words = decision_words(e)
        if words:
            extra.append(f"    {words}")
        if e.error:
            extra.append(f"    error: {preview(e.error, 300)}")
        elif e.result is not None and e.status != "denied":
            extra.append(f"    result: {preview(e.result, 300)}")
        return "\n".join([line, *extra])
    if isinstance(e, BudgetEntry):
        return f"  (step budget exhausted: {e.status})"
    if isinstance(e, ErrorEntry):
        return f"  ERROR: {e.title}"
    return str(e)


def conversation_text(entries: Sequence[Entry], totals: Totals) -> str:
    lines = [entry_text(e) for e in entries]
    lines.append(f"-- {printable(status_words(totals))}")
    return "\n".join(lines)
