"""Runs side by side: HTML (the view's styles, light and dark), Markdown and plain text.

Pure functions of :class:`~nbagent.comparison._runs.Run` values. One column per
run, one row per model step (aligned by step); the leading steps every run
shares (a fork's history) fold into one row that shows them once; a field that
differs between runs is highlighted in every run's cell (HTML: a tinted
background and a bar, readable on JupyterLab's light and dark themes;
Markdown and text: a ``≠`` mark). Everything a model or a tool produced is
escaped (:func:`~nbagent._html.esc`, ``md_inline``, ``printable``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import redacted
from .._html import clip, esc, fmt_cost, fmt_ms, md_inline, preview, printable, style_tag
from .._record import CallRecord
from .._types import short_id
from ._runs import (
    Run,
    Step,
    aligned,
    call_label,
    decision_words,
    differing,
    field_names,
    row_values,
    same_prefix,
    shared_prefix,
    shown,
)

TEXT_CHARS = 4_000  # a step's text shown in a cell (the DataFrame keeps all of it)
RESULT_CHARS = 4_000

CSS = """
.nba-chat.nba-cmp table.nba-cmp-table { border-collapse: collapse; width: 100%;
  table-layout: fixed; margin: 0; border: 0; }
.nba-chat.nba-cmp .nba-cmp-table th, .nba-chat.nba-cmp .nba-cmp-table td {
  border: 1px solid var(--jp-border-color2, #e0e0e0); padding: 3px 6px; vertical-align: top;
  text-align: left; background: transparent; }
.nba-chat.nba-cmp .nba-cmp-table tr > th:first-child { width: 7.5em; }
.nba-chat.nba-cmp .nba-cmp-table thead th { background: var(--jp-layout-color2, #eeeeee);
  font-weight: 600; }
.nba-chat.nba-cmp .nba-cmp-table tbody th { color: var(--jp-ui-font-color2, #616161);
  font-weight: 600; font-size: var(--jp-ui-font-size0, 11px); }
.nba-chat.nba-cmp .nba-cmp-table tbody tr { background: transparent; }
.nba-cmp-f { margin: 1px 0; padding: 0 4px; white-space: pre-wrap; word-break: break-word; }
.nba-cmp-diff { background: rgba(255, 171, 0, 0.2);
  box-shadow: inset 3px 0 0 var(--jp-warn-color0, #f57c00); }
.nba-cmp-none { color: var(--jp-ui-font-color3, #9e9e9e); font-style: italic; }
.nba-cmp-call { border-left: 2px solid var(--jp-border-color2, #e0e0e0); margin: 3px 0;
  padding-left: 4px; }
.nba-cmp-cost { color: var(--jp-ui-font-color2, #616161);
  font-size: var(--jp-ui-font-size0, 11px); }
.nba-cmp-cost .nba-cmp-f { display: inline; padding: 0 2px; }
.nba-cmp-shared summary { cursor: pointer; color: var(--jp-ui-font-color2, #616161); }
.nba-chat.nba-cmp .nba-cmp-table tr.nba-cmp-total > * {
  border-top: 2px solid var(--jp-border-color1, #bdbdbd); }
.nba-chat.nba-cmp .nba-cmp-table tr.nba-cmp-total th { color: var(--jp-ui-font-color1, #212121); }
.nba-cmp-total .nba-cmp-cost { color: var(--jp-ui-font-color1, #212121);
  font-size: var(--jp-ui-font-size1, 13px); }
.nba-cmp-total .nba-cmp-more { font-weight: 700; }
"""


# ------------------------------------------------------------------------ HTML
def comparison_html(runs: Sequence[Run]) -> str:
    rows = aligned(runs)
    shared, same = shared_prefix(rows), same_prefix(rows)
    head = "".join(f"<th>{_run_head(r)}</th>" for r in runs)
    names = [r.name for r in runs]
    body: list[str] = []
    if same:
        inner = "".join(
            f"<tr><th>step {k}</th><td>{_cell(row[0], set())}</td></tr>"
            for k, row in enumerate(rows[:same], 1)
            if row[0] is not None
        )
        words = esc(_shared_words(shared, same, len(runs)))
        body.append(
            f'<tr class="nba-cmp-shared"><th>{_span(1, same)}</th>'
            f'<td colspan="{len(runs)}"><details><summary>{words}: show'
            f'</summary><table class="nba-cmp-table">{inner}</table></details></td></tr>'
        )
    for k, row in enumerate(rows[same:], same + 1):
        diff = set(differing(row))
        cells = "".join(f"<td>{_cell(s, diff)}</td>" if s is not None else _missing(k) for s in row)
        body.append(f"<tr><th>step {k}{_own_numbers(k, row, names)}</th>{cells}</tr>")
    body.append(_totals_row(runs))
    return (
        f'{style_tag()}<style>{CSS}</style><div class="nba-chat nba-cmp">'
        f'<table class="nba-cmp-table"><thead><tr><th>step</th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _own_numbers(k: int, row: Sequence[Step | None], names: Sequence[str]) -> str:
    """Under a row's label, each run's own number for its step (``chat.steps``), only where it
    is not the row's: "denied: #3" (a retried request or a tool round takes a number)."""
    own = [
        f"{name}: #{s.record.step}"
        for name, s in zip(names, row, strict=True)
        if s is not None and s.record.step != k
    ]
    if not own:
        return ""
    lines = "".join(f"<div>{esc(w)}</div>" for w in own)
    return f'<div class="nba-dim" title="each run\'s own step number (chat.steps)">{lines}</div>'


def _run_head(r: Run) -> str:
    parts = [
        f"{esc(r.name)}",
        f'<div class="nba-dim">{esc(r.model)} · {esc(short_id(r.chat_id))}</div>',
    ]
    if r.parent is not None:
        parts.append(f'<div class="nba-dim">{esc(fork_words(r.parent))}</div>')
    return "".join(parts)


def fork_words(parent: Any) -> str:
    """``fork of 0a1b2c3d at step 2: decision → approved`` (one line)."""
    where = f"at step {parent.step}"
    if parent.call_id:
        where = f"at call {parent.call_id} (step {parent.step})"
    change = parent.change
    if change == "none":
        return f"fork of {short_id(parent.chat_id)} {where}"
    value = parent.value
    words = preview(shown(value if isinstance(value, str) else str(redacted(value))), 60)
    return f"fork of {short_id(parent.chat_id)} {where}: {change} → {words}"


def _shared_words(shared: int, same: int, runs: int) -> str:
    """What the folded leading rows are: the ``shared`` first a fork's shared history (asked
    and paid once), the rest up to ``same`` the same answers each run asked for itself."""
    every = "both runs" if runs == 2 else "every run"
    words = []
    if shared:
        which = "step 1 is" if shared == 1 else f"steps 1–{shared} are"
        words.append(f"{which} the same in {every} (shared history)")
    if same > shared:
        first = shared + 1
        which = f"step {first} is" if same == first else f"steps {first}–{same} are"
        words.append(f"{which} identical in {every} (asked in each)")
    return "; ".join(words)


def _span(first: int, last: int) -> str:
    return f"step {first}" if first == last else f"steps {first}–{last}"


def _missing(k: int) -> str:
    return f'<td class="nba-cmp-none">no step {k}</td>'


def _f(name: str, diff: set[str], inner: str, tag: str = "div", mark: str = "nba-cmp-diff") -> str:
    """One field's element; marked (``mark``) when the field differs between the runs."""
    cls = f"nba-cmp-f {mark}" if name in diff else "nba-cmp-f"
    return f'<{tag} class="{cls}" data-field="{esc(name)}">{inner}</{tag}>'


def _cell(s: Step, diff: set[str]) -> str:
    v = s.values
    out: list[str] = []
    if v["prompt"] is not None:
        out.append(_f("prompt", diff, f'<span class="nba-who">user</span>{esc(v["prompt"])}'))
    if "model" in diff:
        out.append(_f("model", diff, f'<span class="nba-dim">{esc(v["model"])}</span>'))
    if v["text"] or "text" in diff:
        out.append(_f("text", diff, esc(clip(v["text"], TEXT_CHARS))))
    for i, c in enumerate(s.calls, 1):
        out.append(_call_html(i, c, diff))
    if "stop_reason" in diff:
        out.append(
            _f("stop_reason", diff, f'<span class="nba-dim">stop: {esc(v["stop_reason"])}</span>')
        )
    cost = []
    if v["replayed"] or "replayed" in diff:
        cost.append(
            _f("replayed", diff, "replayed" if v["replayed"] else "asked the model", "span")
        )
    cost += _used(v, s.record.cost_usd, diff)
    out.append(f'<div class="nba-cmp-cost">{" · ".join(cost)}</div>')
    return "".join(out)


def _call_html(i: int, c: CallRecord, diff: set[str]) -> str:
    key = f"call {i}"
    label = f'<span class="nba-tool">{esc(c.tool)}</span> <code class="nba-args1">'
    label += esc(preview(call_label(c)[len(c.tool) :], 200)) + "</code>"
    status = f'<span class="nba-badge nba-b-{esc(c.status)}">{esc(c.status)}</span>'
    parts = [_f(key, diff, f"{label} {status}")]
    if c.requires_approval or c.decided is not None:
        parts.append(
            _f(
                f"{key} decision",
                diff,
                f'<span class="nba-dim">{esc(shown(decision_words(c)))}</span>',
            )
        )
    if c.result is not None:
        text = shown(c.result.content)
        parts.append(
            _f(
                f"{key} result",
                diff,
                f"<details><summary>{esc(preview(text, 120))}</summary>"
                f'<pre class="nba-result">{esc(clip(text, RESULT_CHARS))}</pre></details>',
            )
        )
    return f'<div class="nba-cmp-call">{"".join(parts)}</div>'


def _totals_row(runs: Sequence[Run]) -> str:
    totals = [r.totals for r in runs]
    keys = ("steps", "input_tokens", "output_tokens", "cost_usd", "latency_ms")
    diff = {k for k in keys if any(t[k] != totals[0][k] for t in totals[1:])}
    cells = []
    for t in totals:  # a total that differs is bold, not tinted: it is a sum, not a warning
        steps = f"{t['steps']} step{'s' if t['steps'] != 1 else ''}"
        spans = [_f("steps", diff, steps, "span", "nba-cmp-more")]
        spans += _used(t, t["cost_usd"], diff, "nba-cmp-more")
        cells.append(f'<td><div class="nba-cmp-cost">{" · ".join(spans)}</div></td>')
    return f'<tr class="nba-cmp-total"><th>run total</th>{"".join(cells)}</tr>'


def _used(
    v: dict[str, Any], cost: float | None, diff: set[str], mark: str = "nba-cmp-diff"
) -> list[str]:
    """What a step (or a run) used: tokens in and out, cost, latency; each marked if it differs."""
    return [
        _f("input_tokens", diff, f"in {v['input_tokens']:,}", "span", mark),
        _f("output_tokens", diff, f"out {v['output_tokens']:,}", "span", mark),
        _f("cost_usd", diff, esc(fmt_cost(cost) if cost is not None else "$?"), "span", mark),
        _f("latency_ms", diff, esc(fmt_ms(v["latency_ms"])), "span", mark),
    ]


# -------------------------------------------------------------- markdown, text
def _value_words(value: Any, limit: int) -> str:
    if value is None:
        return "–"
    return preview(str(value), limit)


def _shown(row: Sequence[Step | None]) -> list[tuple[str, bool, list[Any]]]:
    """The fields of an aligned row some run has: name, whether it differs, each run's value."""
    diff = set(differing(row))
    values = row_values(row)
    return [
        (name, name in diff, [v.get(name) for v in values])
        for name in field_names(row)
        if any(v.get(name) is not None for v in values)
    ]


def comparison_markdown(runs: Sequence[Run]) -> str:
    rows = aligned(runs)
    shared, same = shared_prefix(rows), same_prefix(rows)
    lines = ["**Comparing** " + " · ".join(_run_line(r, md=True) for r in runs), ""]
    if same:
        lines += [f"*{md_inline(_shared_words(shared, same, len(runs)))}.*", ""]
    head = "| field | " + " | ".join(md_inline(r.name) for r in runs) + " |"
    rule = "|---" * (len(runs) + 1) + "|"
    for k, row in enumerate(rows[same:], same + 1):
        lines += [f"**Step {k}**", "", head, rule]
        for name, differs, values in _shown(row):
            mark = f"**≠ {md_inline(name)}**" if differs else md_inline(name)
            cells = " | ".join(md_inline(_value_words(v, 160)) for v in values)
            lines.append(f"| {mark} | {cells} |")
        lines.append("")
    return "\n".join(lines)


def _run_line(r: Run, *, md: bool = False) -> str:
    words = f"{r.name} = {r.model} ({short_id(r.chat_id)})"
    if r.parent is not None:
        words += f", {fork_words(r.parent)}"
    return md_inline(words) if md else printable(words)


def comparison_text(runs: Sequence[Run]) -> str:
    rows = aligned(runs)
    shared, same = shared_prefix(rows), same_prefix(rows)
    lines = ["compare: " + "; ".join(_run_line(r) for r in runs)]
    if same:
        lines.append(_shared_words(shared, same, len(runs)))
    width = max((len(r.name) for r in runs), default=1)
    for k, row in enumerate(rows[same:], same + 1):
        lines.append(f"step {k}")
        for name, differs, values in _shown(row):
            if not differs:
                lines.append(f"    {name}: {printable(_value_words(values[0], 100))}")
                continue
            lines.append(f"  ≠ {name}:")
            for r, v in zip(runs, values, strict=True):
                shown = printable(_value_words(v, 100))
                lines.append(f"      {printable(r.name).ljust(width)}  {shown}")
    return "\n".join(lines)


def comparison_bundle(runs: Sequence[Run]) -> dict[str, str]:
    """The three representations (what a notebook, nbconvert, GitHub or a terminal shows)."""
    return {
        "text/html": comparison_html(runs),
        "text/markdown": comparison_markdown(runs),
        "text/plain": comparison_text(runs),
    }


__all__ = [
    "CSS",
    "comparison_bundle",
    "comparison_html",
    "comparison_markdown",
    "comparison_text",
    "fork_words",
]
