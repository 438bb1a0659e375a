"""What the provider ran itself (:class:`~nbagent.ProviderItem`) as one folded line each.

A hosted MCP server's tool listing and calls (OpenAI ``mcp_list_tools`` /
``mcp_call``, Anthropic ``mcp_tool_use`` / ``mcp_tool_result``), a web search,
and any item of a type nbagent does not know: never run here, shown where they
happened (under their step's line, before the step's text) in the same
``<details>`` style as a finished call: a one-line ``<summary>`` (server, tool,
short arguments, status, the start of the output or the error) and, on a
click, the rest (arguments, output, error, the item as it came). A hosted call
the provider ran against the chat's decision (status ``ran_despite_denial`` or
``ran_unapproved``, see ``nbagent._hosted.audit_items``) is drawn as a failure
whose line says so first.

:func:`item_view` reads an item once into plain words; :func:`item_html`,
:func:`item_markdown` and :func:`item_text` draw them. Everything the provider
sent is escaped by the callers' primitives (:func:`~nbagent._html.esc`, the markdown
escapes) and bounded (:func:`~nbagent._html.json_preview`, :func:`~nbagent._html.clip`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from .._errors import redact_keys
from .._hosted import RAN_DESPITE_DENIAL, RAN_UNAPPROVED
from .._html import clip, esc, json_preview, preview, short_json
from .._types import ProviderItem

ARGS_LINE = 80  # arguments whose compact JSON is at most this long show on the summary line
RAW_CHARS = 4_000  # the item as it came, shown (bounded) for items without a readable body
LISTED = 12  # tool names on a listing's summary line
BREACH_WORDS = {
    RAN_DESPITE_DENIAL: "ran although its approval was denied",
    RAN_UNAPPROVED: "ran without the approval it needed",
}
"""What the view says of a hosted call the provider ran against the chat's decision."""


@dataclass(frozen=True)
class ItemView:
    """An item in words: ``who`` (server · tool, or what it is), ``args`` (short, one line),
    ``status`` (``ok`` / ``error`` / the provider's own word / ""), ``outcome`` (the start of
    the output or the error), and ``sections`` (label, text) for the folded body."""

    kind: str
    who: str
    args: str = ""
    status: str = ""
    outcome: str = ""
    failed: bool = False
    sections: list[tuple[str, str]] = field(default_factory=list)


def item_view(item: ProviderItem) -> ItemView:
    """What ``item`` says, in words (see :class:`ItemView`), anything shaped like an API key
    or URL credentials as ``***`` (a hosted tool's arguments and output are the model's and
    a server's: shown like a call's own)."""
    v = _item_view(item)
    return dataclasses.replace(
        v,
        who=redact_keys(v.who),
        args=redact_keys(v.args),
        outcome=redact_keys(v.outcome),
        sections=[(label, redact_keys(text)) for label, text in v.sections],
    )


def _item_view(item: ProviderItem) -> ItemView:
    raw = item.raw if isinstance(item.raw, dict) else {}
    t = item.type
    server = item.server or ""
    failed = item.status == "error"
    if t == "mcp_list_tools":
        listed = raw.get("tools")
        tools: list[Any] = listed if isinstance(listed, list) else []
        names = [str(x.get("name")) for x in tools if isinstance(x, dict) and x.get("name")]
        shown = ", ".join(names[:LISTED])
        if len(names) > LISTED:
            shown += f", … {len(names) - LISTED} more"
        lines = [
            f"{x.get('name')}: {preview(str(x.get('description') or ''), 160)}"
            for x in tools
            if isinstance(x, dict)
        ]
        error = _error_text(raw.get("error"))
        sections = [("tools", "\n".join(lines))] if lines else []
        if error:
            sections.append(("error", error))
        return ItemView(
            "mcp listing",
            _who(server, "listed tools"),
            status=item.status or "",
            outcome=error or (f"{len(names)} tools: {shown}" if names else "no tools"),
            failed=failed,
            sections=sections,
        )
    if t == "mcp_call":
        args = _arguments(raw.get("arguments"))
        output = _output_text(raw.get("output"))
        error = _error_text(raw.get("error"))
        sections = [("arguments", _pretty(args))]
        if output:
            sections.append(("output", output))
        if error:
            sections.append(("error", error))
        breach = BREACH_WORDS.get(item.status or "")
        if breach:
            request = raw.get("approval_request_id")
            asked = f" (approval request {request})" if request else ""
            sections.insert(0, ("warning", f"the provider {breach}{asked}"))
        return ItemView(
            "mcp call",
            _who(server, item.name or "?"),
            args=_short(args),
            status=item.status or "",
            outcome=f"{breach}: {error or output}" if breach else error or output,
            failed=failed or breach is not None,
            sections=sections,
        )
    if t in ("mcp_tool_use", "server_tool_use"):
        args = raw.get("input")
        return ItemView(
            "mcp call" if t == "mcp_tool_use" else "provider tool",
            _who(server, item.name or "?"),
            args=_short(args),
            status="requested",
            outcome="run by the provider",
            sections=[("arguments", _pretty(args))],
        )
    if t.endswith("_tool_result"):
        output = _output_text(raw.get("content"))
        return ItemView(
            "result",
            _who(server, item.name or t.removesuffix("_tool_result").replace("_", " ")),
            status=item.status or "",
            outcome=output,
            failed=failed,
            sections=[("error" if failed else "output", output)] if output else [],
        )
    if t == "web_search_call":
        act = raw.get("action")
        action: dict[str, Any] = act if isinstance(act, dict) else {}
        query = action.get("query") or action.get("url") or action.get("pattern") or ""
        return ItemView(
            "web search",
            str(action.get("type") or "search").replace("_", " "),
            args=preview(str(query), ARGS_LINE) if query else "",
            status=str(raw.get("status") or item.status or ""),
            failed=failed,
            sections=[("item", _raw(raw))],
        )
    what = t.replace("_", " ")
    if not item.known:
        return ItemView(
            "unknown item",
            f"{t} (a provider item nbagent does not know: kept and sent back as it came)",
            status=str(raw.get("status") or ""),
            sections=[("item", _raw(raw))],
        )
    return ItemView(
        "provider item",
        _who(server, item.name or what),
        status=str(raw.get("status") or item.status or ""),
        failed=failed,
        sections=[("item", _raw(raw))],
    )


# ----------------------------------------------------------------------------- drawing
def item_html(item: ProviderItem) -> str:
    """One folded line (``<details>``), everything escaped."""
    v = item_view(item)
    head = [
        '<span class="nba-icon" title="run by the provider, not here">&#9729;</span>',
        f'<span class="nba-tag">{esc(v.kind)}</span>',
        f'<span class="nba-tool">{esc(v.who)}</span>',
    ]
    if v.args:
        head.append(f'<code class="nba-args1">{esc(v.args)}</code>')
    if v.status:
        cls = "error" if v.failed else "ok" if v.status in ("ok", "completed") else "requested"
        head.append(f'<span class="nba-badge nba-b-{cls}">{esc(v.status)}</span>')
    if v.outcome:
        line = v.outcome.strip().splitlines()[0] if v.outcome.strip() else ""
        cls = "nba-sum nba-err-line" if v.failed else "nba-sum"
        head.append(f'<span class="{cls}">&#8594; {esc(preview(line, 100))}</span>')
    body = "".join(
        f'<div class="nba-note">{esc(label)}:</div><pre class="nba-result">{esc(clip(text))}</pre>'
        for label, text in v.sections
        if text
    )
    st = "error" if v.failed else "ok"
    body = body or '<div class="nba-dim">nothing more</div>'
    return (
        f'<details class="nba-entry nba-card nba-call nba-done nba-item nba-st-{st}" '
        f'data-item-type="{esc(item.type)}"><summary class="nba-head">{"".join(head)}</summary>'
        f'<div class="nba-body">{body}</div></details>'
    )


def item_words(item: ProviderItem) -> str:
    """One line of plain words (unescaped: the caller escapes for its format)."""
    v = item_view(item)
    line = f"{v.kind}: {v.who}"
    if v.args:
        line += f" {v.args}"
    if v.status:
        line += f" -> {v.status}"
    if v.outcome:
        first = v.outcome.strip().splitlines()[0] if v.outcome.strip() else ""
        line += f": {preview(first, 200)}"
    return line


# ------------------------------------------------------------------------------ pieces
def _who(server: str, what: str) -> str:
    return f"{server} · {what}" if server else what


def _arguments(value: Any) -> Any:
    """OpenAI sends arguments as a JSON string: parsed when it is one, else as it came."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _short(value: Any) -> str:
    return "" if value is None or value == {} else short_json(value, ARGS_LINE)


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        return clip(value)
    return json_preview(value)[0]


def _raw(raw: dict[str, Any]) -> str:
    return json_preview(raw, limit=RAW_CHARS, value_chars=400)[0]


def _output_text(value: Any) -> str:
    """An output as text: a string as it is, content blocks' text joined, else JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [b.get("text") for b in value if isinstance(b, dict)]
        if texts and all(isinstance(x, str) for x in texts):
            return "\n".join(t for t in texts if isinstance(t, str))
    return _pretty(value)


def _error_text(value: Any) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, dict):
        message = value.get("message")
        if isinstance(message, str):
            return message
    return value if isinstance(value, str) else _pretty(value)
