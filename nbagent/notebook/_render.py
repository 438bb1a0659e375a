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
  :func:`~nbagent._html.json_preview`);
- the assistant's text is the exception that is rendered: as Markdown, with raw
  HTML and unsafe links off (``_markdown``); a tool call's card is built in
  ``_cards``, a rich result's table in ``_rich``.

Colours come from JupyterLab's theme variables (with fallbacks for nbconvert
and other front ends), so light and dark themes both work.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from datetime import UTC

from .._errors import redact_keys
from .._html import (
    clip,
    esc,
    fmt_cost,
    fmt_ms,
    json_preview,
    md_inline,
    md_text,
    preview,
    printable,
    style_tag,
)
from .._types import FINAL_STATUSES, Usage
from ._cards import (
    SENT,
    call_card_html,
    call_label,
    inline_arguments,
    log_lines,
    progress_words,
    ran_before_words,
    reason_words,
    saved_line_html,
    status_word,
    thumbs_html,
)
from ._items import item_html, item_words
from ._markdown import markdown_html
from ._state import (
    AWAITING,
    BUDGET,
    COMPLETE,
    ELSEWHERE,
    FAILED,
    STOPPED,
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


# --------------------------------------------------------------------------- pieces
def fmt_tokens(n: int) -> str:
    return f"{n:,}"


def decision_words(e: CallEntry) -> str:
    """'approved by you' (a click), 'denied, decided in code: reason' (``chat.deny`` in a
    cell), 'approved' (a person's decision made before this kernel watched the chat),
    'approved: always allowed' (plain text);
    a decision made elsewhere says who made it and when: 'approved elsewhere by ops at
    2026-12-01 06:03:04 UTC'."""
    if e.verdict is None:
        return ""
    by = e.r.decided_by or "?"
    if e.decided_elsewhere:
        who = {"user": "a user", "resolver": "the tool's approval rule"}.get(by, by)
        if by.startswith("policy:always_allow"):
            who = "an always-allow rule"
        elif by.startswith("policy:always_deny"):
            who = "an always-deny rule"
        elif by == "rule":
            who = "a rule"
        words = f"{e.verdict} elsewhere by {who}"
        if e.r.decided_at is not None:
            words += f" at {e.r.decided_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
        if e.r.reason:
            words += f": {e.r.reason}"
    elif by.startswith("policy:always_allow"):
        words = f"{e.verdict}: always allowed" + (
            " (when its rule holds)" if by.endswith(":when") else ""
        )
    elif by == "rule" and e.r.reason:  # chat.add_rule: "Denied by rule: tool refund, amount > 500"
        words = e.r.reason
    elif by.startswith("policy:always_deny"):  # a rule accepted before rules were data
        words = f"{e.verdict}: always denied" + (f" ({e.r.reason})" if e.r.reason else "")
    else:
        who = {"user": "you", "resolver": "the tool's approval rule"}.get(by, by)
        words = f"{e.verdict} by {who}"
        if by == "user" and e.decided_in_code:  # chat.approve(...) in a cell, not a click
            words = f"{e.verdict}, decided in code"
        elif by == "user" and not e.decided_by_hand:  # before this kernel watched: who is
            words = e.verdict  # not known ("by you" is a click's, "in code" a cell's)
        if e.r.reason:
            words += f": {e.r.reason}"
    if e.r.edited_arguments is not None and e.verdict == "approved":
        words += " with edited arguments"
    if e.r.hosted:
        words += SENT
    return words


def call_notes(
    e: CallEntry, say: Callable[[str], str], code: Callable[[str], str], limit: int
) -> list[str]:
    """A call's notes for markdown or plain text: why it waits, the decision, the calls it
    ran before, its error (words through ``say``, tool names through ``code``)."""
    notes = []
    if e.gated and e.pending:
        why = reason_words(e)
        notes.append(say("needs approval" + (f": {why}" if why else "")))
    words = decision_words(e)
    if words:
        notes.append(say(words))
    if e.ran_before:
        notes.append(ran_before_words([code(name) for name in e.ran_before]))
    if e.r.error:
        notes.append(say(f"error: {preview(e.r.error, limit)}"))
    if e.r.status == "running" and e.r.progress is not None:
        notes.append(say(f"progress: {progress_words(e)}"))
    if e.r.logs:
        n = e.r.log_messages
        last = log_lines(e)[-1]
        notes.append(
            say(f"{n} server log message{'s' if n != 1 else ''}; last: {preview(last, limit)}")
        )
    return notes


def step_words(e: StepEntry) -> str:
    """'step 3 · gpt-4.1 · 812 in / 40 out tokens · 1.20 s' (the chat's step number, as in
    the log and ``max_steps``: step 2 was the tool round between two requests)."""
    s = e.r
    parts = [f"step {s.step}", s.model or s.provider or "model"]
    if e.status == "running":
        parts.append("generating…")
        if e.streaming_calls:
            parts.append("calling " + ", ".join(e.streaming_calls.values()))
    elif e.status == "failed":
        parts.append(f"failed after {fmt_ms(s.latency_ms)}")
    else:
        if s.replayed:  # the recorded tokens follow; nothing was spent now
            parts.append("replayed")
        usage = s.usage or Usage()
        tokens = (
            f"{fmt_tokens(usage.input_tokens)} in / {fmt_tokens(usage.output_tokens)} out tokens"
        )
        if usage.cached_tokens:
            tokens += f" ({fmt_tokens(usage.cached_tokens)} cached)"
        parts.append(tokens)
        if s.latency_ms is not None:
            parts.append(fmt_ms(s.latency_ms))
        if s.cost_usd is not None:
            parts.append(fmt_cost(s.cost_usd))
        if s.n_tool_calls:
            parts.append(f"{s.n_tool_calls} tool call{'s' if s.n_tool_calls != 1 else ''}")
        # A deliberate subset of StopReason: the ordinary endings go unsaid.
        if s.stop_reason not in (None, "", "end", "tool_use"):
            parts.append(f"stopped: {s.stop_reason}")
    return " · ".join(parts)


def _failure(e: StepEntry) -> tuple[str, str]:
    """A failed request's error type and the start of its message."""
    return e.r.error_type or "", preview(e.r.error or "", 600)


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
            '<div class="nba-entry nba-user"><span class="nba-who">You</span>'
            f"{esc(redact_keys(e.text))}{thumbs_html(e.images)}</div>"
        )
    if isinstance(e, TextEntry):
        head = thinking_html(e) + commentary_html(e)
        if e.streaming:  # plain while it streams; Markdown once the step settles
            body = esc(redact_keys(e.text))
            if not body:
                return head
            return head + f'<div class="nba-entry nba-text nba-plain nba-streaming">{body}</div>'
        if e.parsed is not None:
            return head + f'<div class="nba-entry nba-text">{parsed_html(e.parsed, e.text)}</div>'
        if not e.text:
            return head
        answer = f'<div class="nba-entry nba-text nba-md">{text_markdown_html(e)}</div>'
        return head + answer + sources_html(e) + claims_html(e)
    if isinstance(e, StepEntry):
        cls = "nba-entry nba-step" + (" nba-failed" if e.status == "failed" else "")
        cls += " nba-replayed" if e.r.replayed else ""
        body = esc(step_words(e))
        if e.status == "failed":
            body += f'<div class="nba-err">{esc(": ".join(_failure(e)))}</div>'
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


CLAIMS_TITLE = "This answer claims what did not happen"


def _sources(e: TextEntry) -> list[tuple[str, str]]:
    """The answer's sources as shown: a URL's credentials (and any key in a title) as ``***``."""
    return [(redact_keys(title), redact_keys(url)) for title, url in e.sources]


def _parsed(
    parsed: tuple[str, tuple[tuple[str, str], ...]],
) -> tuple[str, list[tuple[str, str]]]:
    """A structured answer's rows as shown: secrets in keys and values as ``***``."""
    name, rows = parsed
    return redact_keys(name), [(redact_keys(k), redact_keys(v)) for k, v in rows]


def claims_html(e: TextEntry) -> str:
    """The notice under a final answer that claims actions its calls did not do."""
    if not e.claims:
        return ""
    lines = "".join(f"<li>{esc(redact_keys(c))}</li>" for c in e.claims)
    return (
        f'<div class="nba-entry nba-claims nba-err">\u26a0 {CLAIMS_TITLE}:'
        f'<ul style="margin:2px 0">{lines}</ul></div>'
    )


def thinking_html(e: TextEntry) -> str:
    """The step's *Thinking* section: open while it streams, folded once it is done."""
    if not e.thinking:
        return ""
    state = " open" if e.streaming else ""
    return (
        f'<details class="nba-entry nba-thinking"{state}><summary>Thinking</summary>'
        f'<div class="nba-plain">{esc(redact_keys(e.thinking))}</div></details>'
    )


def commentary_html(e: TextEntry) -> str:
    """What the model said on the way (between tool calls): marked as such, not the answer."""
    if not e.commentary:
        return ""
    return (
        '<div class="nba-entry nba-commentary nba-plain"><span class="nba-who">Commentary</span>'
        f"{esc(redact_keys(e.commentary))}</div>"
    )


def _web(url: str) -> bool:
    return url.lower().startswith(("https://", "http://"))


def sources_html(e: TextEntry) -> str:
    """The answer's cited sources under it: a web source is a link (escaped), a document's
    passage its title."""
    if not e.sources:
        return ""
    items = "".join(
        f'<li><a href="{esc(url)}" target="_blank" rel="noopener noreferrer">{esc(title)}</a></li>'
        if _web(url)
        else f"<li>{esc(title)}</li>"
        for title, url in _sources(e)
    )
    return f'<div class="nba-entry nba-sources">Sources<ol>{items}</ol></div>'


def text_markdown_html(e: TextEntry) -> str:
    """The assistant's text as rendered Markdown (kept on the entry for its text)."""
    cached = e._html
    if cached is None or cached[0] is not e.text:
        cached = e._html = (e.text, _answer_html(e.text))
    return cached[1]


_MARK = chr(0xE000)  # a private-use character: Markdown reads it as a letter


def _answer_html(text: str) -> str:
    """The answer's Markdown as HTML, secrets as ``***`` (not read as emphasis: two of them
    in a line would make the text between them bold)."""
    if _MARK in text:
        return markdown_html(redact_keys(text))
    marked = redact_keys(text, hidden=_MARK)  # every secret hidden, each one marked
    if marked == text:
        return markdown_html(text)
    return markdown_html(marked).replace(_MARK, "***")


def parsed_html(parsed: tuple[str, tuple[tuple[str, str], ...]], raw: str) -> str:
    """A structured answer: a key / value table, and the JSON the model wrote, folded."""
    name, rows = _parsed(parsed)
    body = "".join(
        f'<tr><th class="nba-key">{esc(k)}</th><td class="nba-val">{esc(preview(v, 300))}</td></tr>'
        for k, v in rows
    )
    caption = f"<caption>{esc(name)}</caption>" if name else ""
    return (
        f'<table class="nba-parsed">{caption}<tbody>{body}</tbody></table>'
        f'<details><summary>JSON</summary><pre class="nba-json">{esc(clip(redact_keys(raw)))}</pre>'
        "</details>"
    )


def _parsed_markdown(parsed: tuple[str, tuple[tuple[str, str], ...]]) -> str:
    name, rows = _parsed(parsed)
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
        STOPPED: "nba-phase-awaiting",
        FAILED: "nba-phase-error",
        COMPLETE: "nba-phase-complete",
    }.get(phase, "nba-phase-busy")
    rest = status_words(totals, phase)[len(phase) :]
    # Only the view's own words and numbers (rendered on every event): escaped as HTML,
    # with no control characters to look for.
    own = html.escape
    return f'<div class="nba-status"><span class="{cls}">{own(phase)}</span>{own(rest)}</div>'


def _arguments_text(e: CallEntry) -> str:
    """The arguments the call runs with as (pretty, bounded) JSON: an edit's, once edited."""
    edited = e.shown_edited
    if edited is not None:
        return json_preview(edited)[0]
    return e.arguments_text


def fold_point(entries: Sequence[Entry], keep: int) -> int:
    """Where to fold ``entries`` so that at least the last ``keep`` show: at the start of
    the turn the cut would fall in (never inside a turn), unless what would show from
    there is more than twice ``keep`` (a long last turn, or a chat of one turn): then at
    the start of a model step after it, as the live view's pages end
    (``ChatView._paginate``). 0 (nothing folds) when there is no such start."""
    if len(entries) <= keep:
        return 0
    last = len(entries) - keep  # the latest start that still shows `keep`
    turn_cut = next((i for i in range(last, 0, -1) if entries[i].turn != entries[i - 1].turn), 0)
    if turn_cut and len(entries) - turn_cut <= 2 * keep:
        return turn_cut
    step_cut = next((i for i in range(last, turn_cut, -1) if isinstance(entries[i], StepEntry)), 0)
    return step_cut or turn_cut


def conversation_html(
    entries: Sequence[Entry],
    totals: Totals,
    *,
    title: str = "",
    collapse_after: int = COLLAPSE_AFTER,
) -> str:
    """The whole conversation (or one turn) as static HTML, older entries folded (see
    :func:`fold_point`) and saved folded: a finished call there is its one line
    (:func:`saved_entry_html`)."""
    parts = [style_tag(), '<div class="nba-chat">']
    if title:
        parts.append(f'<div class="nba-step">{esc(title)}</div>')
    cut = fold_point(entries, collapse_after)
    older, recent = entries[:cut], entries[cut:]
    if older:
        parts.append(f"<details><summary>{folded_words(older, entries)}</summary>")
        parts.extend(saved_entry_html(e) for e in older)
        parts.append("</details>")
    parts.extend(entry_html(e) for e in recent)
    parts.append(status_html(totals))
    parts.append("</div>")
    return "".join(parts)


def saved_entry_html(e: Entry) -> str:
    """An entry of the folded older part of the static HTML: a finished call as its line
    alone (``_cards.saved_line_html``), anything else as it shows anyway."""
    if isinstance(e, CallEntry) and e.r.status in FINAL_STATUSES:
        return saved_line_html(e, decision=decision_words(e))
    return entry_html(e)


def folded_words(older: Sequence[Entry], entries: Sequence[Entry]) -> str:
    """What the folded part holds: ``1,963 earlier entries`` (one turn) or ``3 earlier turns``."""
    if len({e.turn for e in entries}) > 1:
        turns = len({e.turn for e in older})
        return f"{turns:,} earlier turn{'s' if turns != 1 else ''}"
    return f"{len(older):,} earlier entries"


def _recent(entries: Sequence[Entry], short: bool) -> tuple[str, Sequence[Entry]]:
    """For a short text form: the words for what folds, and what shows (see :func:`fold_point`)."""
    cut = fold_point(entries, COLLAPSE_AFTER) if short else 0
    if not cut:
        return "", entries
    return f"{folded_words(entries[:cut], entries)} not shown here: the HTML form lists them", (
        entries[cut:]
    )


# --------------------------------------------------------------------------- markdown
def code_span(text: str) -> str:
    """``text`` as one inline code span (on one line) that nothing inside can close."""
    text = printable(text).replace("\n", " ")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fence_block(text: str, lang: str = "") -> str:
    """A fenced code block longer than any run of backticks in ``text``: nothing closes it."""
    text = printable(text)
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def entry_markdown(e: Entry) -> str:
    if isinstance(e, UserEntry):
        return f"**You:** {md_text(redact_keys(e.text) + _labels(e.images))}"
    if isinstance(e, TextEntry):
        if e.parsed is not None:
            said = "**Assistant:**\n\n" + _parsed_markdown(e.parsed)
        else:
            said = f"**Assistant:** {md_text(redact_keys(e.text))}" if e.text else ""
        if e.sources and said:
            said += "\n\n*Sources:* " + "; ".join(
                md_inline(f"{title} ({url})" if url else title) for title, url in _sources(e)
            )
        said += "".join(
            f"\n\n> \u26a0 **{CLAIMS_TITLE}:** {md_inline(redact_keys(c))}"
            for c in e.claims
            if said
        )
        if e.commentary:
            said = f"> *Commentary:* {md_inline(preview(redact_keys(e.commentary), 600))}" + (
                f"\n\n{said}" if said else ""
            )
        if not e.thinking:
            return said
        thought = f"> *Thinking:* {md_inline(preview(redact_keys(e.thinking), 600))}"
        return thought + (f"\n\n{said}" if said else "")
    if isinstance(e, StepEntry):
        return (
            f"*{md_inline(step_words(e))}*"
            + (
                "  \n**{}:** {}".format(*map(md_inline, _failure(e)))
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
        if e.r.duration_ms is not None:
            head += f" · {md_inline(fmt_ms(e.r.duration_ms))}"
        lines = [head] if inline else [head, fence_block(_arguments_text(e), "json")]
        lines += [f"> {note}" for note in call_notes(e, md_inline, code_span, 600)]
        if e.result is not None and e.r.status != "denied" and not e.r.hosted:
            lines.append("result:\n" + fence_block(clip(e.result, 2000)))
        return "\n\n".join(lines)
    if isinstance(e, BudgetEntry):
        name = BUDGET_WORDS.get(e.budget, "step")
        return f"> {name} budget exhausted ({md_inline(e.status)})"
    if isinstance(e, ErrorEntry):
        return f"> **error:** {md_inline(e.title)}"
    return md_inline(str(e))


def conversation_markdown(entries: Sequence[Entry], totals: Totals, *, short: bool = False) -> str:
    """The conversation as Markdown; ``short``: the older entries the HTML folds left out
    (one line says so), as a view's saved ``text/markdown`` is."""
    folded, entries = _recent(entries, short)
    blocks = [f"*{md_inline(folded)}*"] if folded else []
    blocks += [entry_markdown(e) for e in entries]
    blocks.append(f"---\n*{md_inline(status_words(totals))}*")
    return "\n\n".join(blocks)


# --------------------------------------------------------------------------- plain text
def entry_text(e: Entry) -> str:
    """One entry as plain text (control characters shown as escapes)."""
    return printable(_entry_text(e))


def _entry_text(e: Entry) -> str:
    if isinstance(e, UserEntry):
        return f"You: {redact_keys(e.text)}{_labels(e.images)}"
    if isinstance(e, TextEntry):
        if e.parsed is not None:
            name, rows = _parsed(e.parsed)
            width = max((len(k) for k, _ in rows), default=0)
            lines = [f"  {k.ljust(width)}  {preview(v, 300)}" for k, v in rows]
            said = f"Assistant: {name or 'answer'}\n" + "\n".join(lines)
        else:
            said = f"Assistant: {redact_keys(e.text)}" if e.text else ""
        if e.sources and said:
            said += "".join(f"\n  source: {t}" + (f" <{u}>" if u else "") for t, u in _sources(e))
        said += "".join(f"\n\u26a0 {CLAIMS_TITLE}: {redact_keys(c)}" for c in e.claims if said)
        if e.commentary:
            said = f"(commentary: {preview(redact_keys(e.commentary), 300)})" + (
                f"\n{said}" if said else ""
            )
        if not e.thinking:
            return said
        return f"(thinking: {preview(redact_keys(e.thinking), 300)})" + (
            f"\n{said}" if said else ""
        )
    if isinstance(e, StepEntry):
        line = f"[{step_words(e)}]"
        if e.status == "failed":
            line += "\n  " + ": ".join(_failure(e))
        for item in e.items:
            line += f"\n  provider ran {item_words(item)}"
        return line
    if isinstance(e, CallEntry):
        if e.asks and inline_arguments(e) is None:
            # what a person decides on, as markdown shows it: the bounded preview, every key
            line = f"  tool {call_label(e)} -> {status_word(e)}\n" + _indented(_arguments_text(e))
        else:
            args = preview(_arguments_text(e), 200)
            line = f"  tool {call_label(e)}({args}) -> {status_word(e)}"
        if e.r.duration_ms is not None:
            line += f" [{fmt_ms(e.r.duration_ms)}]"
        extra = [f"    {note}" for note in call_notes(e, str, lambda name: f"`{name}`", 300)]
        if not e.r.error and e.result is not None and e.r.status != "denied" and not e.r.hosted:
            extra.append(f"    result: {preview(e.result, 300)}")
        return "\n".join([line, *extra])
    if isinstance(e, BudgetEntry):
        return f"  ({BUDGET_WORDS.get(e.budget, 'step')} budget exhausted: {e.status})"
    if isinstance(e, ErrorEntry):
        return f"  ERROR: {e.title}"
    return str(e)


def _indented(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.split("\n"))


def conversation_text(entries: Sequence[Entry], totals: Totals, *, short: bool = False) -> str:
    """The conversation as plain text; ``short``: the older entries the HTML folds left out
    (one line says so), as a view's saved ``text/plain`` is."""
    folded, entries = _recent(entries, short)
    lines = [f"[{folded}]"] if folded else []
    lines += [entry_text(e) for e in entries]
    lines.append(f"-- {printable(status_words(totals))}")
    return "\n".join(lines)
