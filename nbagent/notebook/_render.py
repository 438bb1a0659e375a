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
  :func:`~nbagent.notebook._state.json_preview`);
- the assistant's text is the exception that is rendered: as Markdown, with raw
  HTML and unsafe links off (``_markdown``); a tool call's card is built in
  ``_cards``, a rich result's table in ``_rich``.

Colours come from JupyterLab's theme variables (with fallbacks for nbconvert
and other front ends), so light and dark themes both work.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from datetime import UTC

from ._cards import (
    SENT,
    call_card_html,
    call_label,
    inline_arguments,
    ran_before_words,
    reason_words,
    status_word,
    thumbs_html,
)
from ._html import clip, esc, fmt_ms, preview, printable
from ._items import item_html, item_words
from ._markdown import markdown_html
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
    Thumb,
    Totals,
    UserEntry,
)

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
.nba-thumbs { display: flex; flex-wrap: wrap; gap: 4px; margin: 3px 0; white-space: normal; }
.nba-thumb { max-height: 160px; max-width: 100%; height: auto; object-fit: contain;
  border: 1px solid var(--jp-border-color2, #e0e0e0); background: #fff; }
.nba-thumb-label { color: var(--jp-ui-font-color2, #616161); font-style: italic; }
.nba-who { font-weight: 600; margin-right: 6px; color: var(--jp-ui-font-color2, #616161); }
.nba-text { padding: 3px 8px; word-break: break-word;
  border-left: 3px solid var(--jp-border-color2, #e0e0e0); }
.nba-plain { white-space: pre-wrap; }
.nba-thinking { padding: 1px 8px; color: var(--jp-ui-font-color2, #616161);
  border-left: 3px dotted var(--jp-border-color2, #e0e0e0); word-break: break-word; }
.nba-thinking > summary { cursor: pointer; font-style: italic; }
.nba-streaming::after { content: "\\258D"; color: var(--jp-brand-color1, #1976d2); }
.nba-md > :first-child { margin-top: 0; }
.nba-md > :last-child { margin-bottom: 0; }
.nba-md p, .nba-md ul, .nba-md ol, .nba-md pre, .nba-md table, .nba-md blockquote {
  margin: 0 0 6px 0; }
.nba-md ul, .nba-md ol { padding-left: 22px; }
.nba-md h1, .nba-md h2, .nba-md h3, .nba-md h4, .nba-md h5, .nba-md h6 {
  font-size: var(--jp-ui-font-size2, 15px); margin: 6px 0 4px 0; line-height: 1.3; }
.nba-md h1, .nba-md h2 { font-size: var(--jp-ui-font-size3, 17px); }
.nba-md code { font-family: var(--jp-code-font-family, monospace);
  font-size: var(--jp-code-font-size, 12px); background: var(--jp-layout-color2, #eeeeee);
  padding: 0 3px; border-radius: 3px; }
.nba-md pre { background: var(--jp-layout-color2, #eeeeee); padding: 4px 8px; overflow: auto;
  border-radius: 3px; }
.nba-md pre code { background: none; padding: 0; white-space: pre; }
.nba-md blockquote { border-left: 3px solid var(--jp-border-color1, #bdbdbd); padding-left: 8px;
  color: var(--jp-ui-font-color2, #616161); }
.nba-md a { color: var(--jp-content-link-color, #1976d2); }
.nba-md table, .nba-rich table { border-collapse: collapse;
  font-size: var(--jp-ui-font-size1, 13px); }
.nba-md th, .nba-md td, .nba-rich th, .nba-rich td {
  border: 1px solid var(--jp-border-color2, #e0e0e0); padding: 2px 8px; text-align: left; }
.nba-rich td { text-align: right; }
.nba-md th, .nba-rich th { background: var(--jp-layout-color2, #eeeeee); font-weight: 600; }
.nba-rich { overflow: auto; max-height: 28em; margin: 2px 0; white-space: normal; }
.nba-rich p { margin: 2px 0; color: var(--jp-ui-font-color2, #616161);
  font-size: var(--jp-ui-font-size0, 11px); }
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
.nba-card.nba-st-running, .nba-card.nba-st-approved {
  border-left: 3px solid var(--jp-brand-color1, #1976d2); }
.nba-card.nba-done { padding: 1px 8px; }
.nba-head { display: flex; flex-wrap: wrap; gap: 6px; align-items: baseline; }
.nba-chat details.nba-done > summary.nba-head { display: flex; flex-wrap: nowrap;
  overflow: hidden; white-space: nowrap; color: inherit; font-size: inherit; list-style: none; }
.nba-chat details.nba-done > summary.nba-head::-webkit-details-marker { display: none; }
.nba-chat details.nba-done > summary.nba-head::before { content: "\\25B8";
  color: var(--jp-ui-font-color2, #616161); }
.nba-chat details.nba-done[open] > summary.nba-head::before { content: "\\25BE"; }
.nba-done > summary > * { flex: none; }
.nba-done > summary > .nba-sum, .nba-done > summary > .nba-args1 { flex: 0 1 auto;
  min-width: 0; overflow: hidden; text-overflow: ellipsis; }
.nba-body { padding: 2px 0 2px 14px; }
.nba-tool { font-family: var(--jp-code-font-family, monospace); font-weight: 600; }
.nba-server { font-family: var(--jp-code-font-family, monospace);
  border: 1px solid var(--jp-border-color1, #bdbdbd); border-radius: 6px; padding: 0 4px;
  color: var(--jp-ui-font-color2, #616161); }
.nba-item .nba-tag { font-size: var(--jp-ui-font-size0, 11px); }
.nba-args1 { font-family: var(--jp-code-font-family, monospace);
  font-size: var(--jp-code-font-size, 12px); color: var(--jp-content-font-color1, inherit);
  background: none; padding: 0; }
.nba-sum { color: var(--jp-ui-font-color2, #616161); }
.nba-err-line { color: var(--jp-error-color1, #d32f2f); }
.nba-args { display: grid; grid-template-columns: max-content 1fr; column-gap: 10px;
  row-gap: 1px; margin: 2px 0; }
.nba-arg { display: contents; }
.nba-args > .nba-arg > * { min-width: 0; overflow-wrap: anywhere; }
.nba-fold > summary { overflow-wrap: anywhere; }
.nba-key { font-family: var(--jp-code-font-family, monospace);
  color: var(--jp-ui-font-color2, #616161); }
.nba-val { font-family: var(--jp-code-font-family, monospace);
  font-size: var(--jp-code-font-size, 12px); word-break: break-word; }
.nba-defaults { color: var(--jp-ui-font-color2, #616161); font-size: var(--jp-ui-font-size0, 11px);
  margin: 1px 0; }
.nba-tag { font-style: italic; border: 1px dashed var(--jp-border-color1, #bdbdbd);
  border-radius: 6px; padding: 0 4px; }
.nba-diff { margin: 2px 0; font-family: var(--jp-code-font-family, monospace);
  font-size: var(--jp-code-font-size, 12px); }
.nba-diff .nba-note { font-family: var(--jp-ui-font-family, system-ui, sans-serif); }
.nba-add, .nba-diff ins { color: var(--jp-success-color1, #388e3c); text-decoration: none; }
.nba-del, .nba-diff del { color: var(--jp-error-color1, #d32f2f); }
.nba-dim { color: var(--jp-ui-font-color2, #616161); font-size: var(--jp-ui-font-size0, 11px); }
.nba-ran-before { color: var(--jp-warn-color0, #f57c00); font-size: var(--jp-ui-font-size0, 11px); }
.nba-badge { font-size: var(--jp-ui-font-size0, 11px); padding: 0 6px; border-radius: 8px;
  background: var(--jp-layout-color3, #bdbdbd); color: var(--jp-ui-inverse-font-color1, #fff); }
.nba-b-ok { background: var(--jp-success-color1, #388e3c); }
.nba-b-error, .nba-b-timed_out { background: var(--jp-error-color1, #d32f2f); }
.nba-b-denied { background: var(--jp-error-color2, #e57373); }
.nba-b-awaiting_approval { background: var(--jp-warn-color0, #f57c00); }
.nba-b-running, .nba-b-approved { background: var(--jp-brand-color1, #1976d2); }
.nba-chat pre.nba-json, .nba-chat pre.nba-result, .nba-chat pre.nba-block {
  font-family: var(--jp-code-font-family, monospace);
  font-size: var(--jp-code-font-size, 12px); background: var(--jp-layout-color2, #eeeeee);
  color: var(--jp-content-font-color1, inherit); margin: 2px 0; padding: 3px 6px; max-height: 14em;
  overflow: auto; white-space: pre-wrap; word-break: break-word; border: 0; }
.nba-args pre.nba-block { margin: 0; }
.nba-chat details > summary { cursor: pointer; color: var(--jp-ui-font-color2, #616161);
  font-size: var(--jp-ui-font-size0, 11px); }
.nba-err { color: var(--jp-error-color1, #d32f2f); white-space: pre-wrap; word-break: break-word; }
.nba-note { color: var(--jp-ui-font-color2, #616161); font-size: var(--jp-ui-font-size0, 11px); }
.nba-controls:empty { display: none; }
.nba-chat table.nba-parsed { border-collapse: collapse; margin: 2px 0; }
.nba-chat table.nba-parsed caption { text-align: left; color: var(--jp-ui-font-color2, #616161);
  font-size: var(--jp-ui-font-size0, 11px); }
.nba-chat table.nba-parsed th, .nba-chat table.nba-parsed td { text-align: left;
  vertical-align: top; padding: 1px 10px 1px 0; border: 0; font-weight: normal; }
.nba-status { border-top: 1px solid var(--jp-border-color2, #e0e0e0); margin-top: 4px;
  padding: 2px 8px; color: var(--jp-ui-font-color2, #616161);
  font-size: var(--jp-ui-font-size0, 11px); }
.nba-phase-awaiting { color: var(--jp-warn-color0, #f57c00); font-weight: 600; }
.nba-phase-error { color: var(--jp-error-color1, #d32f2f); font-weight: 600; }
.nba-phase-complete { color: var(--jp-success-color1, #388e3c); font-weight: 600; }
.nba-phase-busy { color: var(--jp-brand-color1, #1976d2); font-weight: 600; }
.nba-chat .nba-more { width: auto; max-width: 100%; height: auto; min-height: 24px;
  padding: 1px 10px; overflow: visible; align-self: flex-start;
  font-size: var(--jp-ui-font-size0, 11px); }
.nba-chat .nba-more .widget-label-basic, .nba-chat .nba-more span { overflow: visible;
  text-overflow: clip; white-space: nowrap; }
"""


def style_tag() -> str:
    return f"<style>{CSS}</style>"


# --------------------------------------------------------------------------- pieces
def fmt_tokens(n: int) -> str:
    return f"{n:,}"


def fmt_cost(usd: float) -> str:
    if usd == 0:
        return "$0"
    return f"${usd:.4f}" if usd < 1 else f"${usd:.2f}"


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
    if e.hosted:
        words += SENT
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
        if e.replayed:  # the recorded tokens follow; nothing was spent now
            parts.append("replayed")
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
def _labels(images: tuple[Thumb, ...]) -> str:
    return "".join(f"\n[{t.label}]" for t in images)


def entry_html(e: Entry, *, live: bool = False) -> str:
    """One entry as an HTML fragment (everything escaped); ``live`` in the widget view."""
    if isinstance(e, UserEntry):
        return (
            f'<div class="nba-entry nba-user"><span class="nba-who">You</span>{esc(e.text)}'
            f"{thumbs_html(e.images)}</div>"
        )
    if isinstance(e, TextEntry):
        head = thinking_html(e)
        if e.streaming:  # plain while it streams; Markdown once the step settles
            body = esc(e.text)
            if not body:
                return head
            return head + f'<div class="nba-entry nba-text nba-plain nba-streaming">{body}</div>'
        if e.parsed is not None:
            return head + f'<div class="nba-entry nba-text">{parsed_html(e.parsed, e.text)}</div>'
        if not e.text:
            return head
        return head + f'<div class="nba-entry nba-text nba-md">{text_markdown_html(e)}</div>'
    if isinstance(e, StepEntry):
        cls = "nba-entry nba-step" + (" nba-failed" if e.status == "failed" else "")
        cls += " nba-replayed" if e.replayed else ""
        body = esc(step_words(e))
        if e.status == "failed":
            body += f'<div class="nba-err">{esc(e.error_type)}: {esc(preview(e.error, 600))}</div>'
        return f'<div class="{cls}">{body}</div>' + "".join(item_html(i) for i in e.items)
    if isinstance(e, CallEntry):
        return call_card_html(e, decision=decision_words(e), live=live)
    if isinstance(e, BudgetEntry):
        return budget_html(e)
    if isinstance(e, ErrorEntry):
        return (
            f'<div class="nba-entry nba-card nba-error-card"><div class="nba-err">'
            f"{esc(e.title)}</div><details><summary>details</summary>"
            f'<pre class="nba-result">{esc(clip(e.detail))}</pre></details></div>'
        )
    return f'<div class="nba-entry">{esc(e)}</div>'


def thinking_html(e: TextEntry) -> str:
    """The step's *Thinking* section: open while it streams, folded once it is done."""
    if not e.thinking:
        return ""
    state = " open" if e.streaming else ""
    return (
        f'<details class="nba-entry nba-thinking"{state}><summary>Thinking</summary>'
        f'<div class="nba-plain">{esc(e.thinking)}</div></details>'
    )


def text_markdown_html(e: TextEntry) -> str:
    """The assistant's text as rendered Markdown (kept on the entry for its text)."""
    cached = e._html
    if cached is None or cached[0] is not e.text:
        cached = e._html = (e.text, markdown_html(e.text))
    return cached[1]


def parsed_html(parsed: tuple[str, tuple[tuple[str, str], ...]], raw: str) -> str:
    """A structured answer: a key / value table, and the JSON the model wrote, folded."""
    name, rows = parsed
    body = "".join(
        f'<tr><th class="nba-key">{esc(k)}</th><td class="nba-val">{esc(preview(v, 300))}</td></tr>'
        for k, v in rows
    )
    caption = f"<caption>{esc(name)}</caption>" if name else ""
    return (
        f'<table class="nba-parsed">{caption}<tbody>{body}</tbody></table>'
        f'<details><summary>JSON</summary><pre class="nba-json">{esc(clip(raw))}</pre></details>'
    )


def _parsed_markdown(parsed: tuple[str, tuple[tuple[str, str], ...]]) -> str:
    name, rows = parsed
    lines = ["| field | value |", "|---|---|"]
    lines += [f"| {code_span(k)} | {md_inline(preview(v, 300))} |" for k, v in rows]
    return (f"*{md_inline(name)}*\n\n" if name else "") + "\n".join(lines)


BUDGET_WORDS = {"steps": "step", "cost": "cost", "tokens": "token"}
"""A budget's name in "The ... budget ran out"."""


def budget_html(e: BudgetEntry) -> str:
    name = BUDGET_WORDS.get(e.budget, "step")
    what = {
        "pending": f"The {name} budget ran out. Continue, or stop here.",
        "continued": f"The {name} budget ran out; continued.",
        "stopped": f"The {name} budget ran out; stopped.",
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
        return f"**You:** {md_text(e.text + _labels(e.images))}"
    if isinstance(e, TextEntry):
        if e.parsed is not None:
            said = "**Assistant:**\n\n" + _parsed_markdown(e.parsed)
        else:
            said = f"**Assistant:** {md_text(e.text)}" if e.text else ""
        if not e.thinking:
            return said
        thought = f"> *Thinking:* {md_inline(preview(e.thinking, 600))}"
        return thought + (f"\n\n{said}" if said else "")
    if isinstance(e, StepEntry):
        return (
            f"*{md_inline(step_words(e))}*"
            + (
                f"  \n**{md_inline(e.error_type)}:** {md_inline(preview(e.error, 600))}"
                if e.status == "failed"
                else ""
            )
            + "".join(f"\n\n> *provider ran* {md_inline(item_words(i))}" for i in e.items)
        )
    if isinstance(e, CallEntry):
        words = md_inline(status_word(e))
        inline = inline_arguments(e)  # short arguments on the head line
        head = f"**tool {code_span(call_label(e))}**" + (f" {code_span(inline)}" if inline else "")
        head += f" · {words}"
        if e.duration_ms is not None:
            head += f" · {md_inline(fmt_ms(e.duration_ms))}"
        lines = [head] if inline else [head, _fence(e.arguments_text, "json")]
        if e.gated and e.status == "awaiting_approval":
            why = reason_words(e)
            lines.append("> needs approval" + (f": {md_inline(why)}" if why else ""))
        words = decision_words(e)
        if words:
            lines.append(f"> {md_inline(words)}")
        if e.ran_before:
            lines.append(f"> {ran_before_words([code_span(n) for n in e.ran_before])}")
        if e.error:
            lines.append(f"> error: {md_inline(preview(e.error, 600))}")
        if e.result is not None and e.status != "denied" and not e.hosted:
            lines.append("result:\n" + _fence(clip(e.result, 2000)))
        return "\n\n".join(lines)
    if isinstance(e, BudgetEntry):
        name = BUDGET_WORDS.get(e.budget, "step")
        return f"> {name} budget exhausted ({md_inline(e.status)})"
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
        return f"You: {e.text}{_labels(e.images)}"
    if isinstance(e, TextEntry):
        if e.parsed is not None:
            name, rows = e.parsed
            width = max((len(k) for k, _ in rows), default=0)
            lines = [f"  {k.ljust(width)}  {preview(v, 300)}" for k, v in rows]
            said = f"Assistant: {name or 'answer'}\n" + "\n".join(lines)
        else:
            said = f"Assistant: {e.text}" if e.text else ""
        if not e.thinking:
            return said
        return f"(thinking: {preview(e.thinking, 300)})" + (f"\n{said}" if said else "")
    if isinstance(e, StepEntry):
        line = f"[{step_words(e)}]"
        if e.status == "failed":
            line += f"\n  {e.error_type}: {preview(e.error, 600)}"
        for item in e.items:
            line += f"\n  provider ran {item_words(item)}"
        return line
    if isinstance(e, CallEntry):
        args = preview(e.arguments_text, 200)
        line = f"  tool {call_label(e)}({args}) -> {status_word(e)}"
        if e.duration_ms is not None:
            line += f" [{fmt_ms(e.duration_ms)}]"
        extra = []
        if e.gated and e.status == "awaiting_approval":
            why = reason_words(e)
            extra.append("    needs approval" + (f": {why}" if why else ""))
        words = decision_words(e)
        if words:
            extra.append(f"    {words}")
        if e.ran_before:
            extra.append(f"    {ran_before_words([f'`{n}`' for n in e.ran_before])}")
        if e.error:
            extra.append(f"    error: {preview(e.error, 300)}")
        elif e.result is not None and e.status != "denied" and not e.hosted:
            extra.append(f"    result: {preview(e.result, 300)}")
        return "\n".join([line, *extra])
    if isinstance(e, BudgetEntry):
        return f"  ({BUDGET_WORDS.get(e.budget, 'step')} budget exhausted: {e.status})"
    if isinstance(e, ErrorEntry):
        return f"  ERROR: {e.title}"
    return str(e)


def conversation_text(entries: Sequence[Entry], totals: Totals) -> str:
    lines = [entry_text(e) for e in entries]
    lines.append(f"-- {printable(status_words(totals))}")
    return "\n".join(lines)
