"""The demo model's thinking: what it decided for a request, said before it answers.

Asked to reason (``Chat(reasoning=...)``), the demo model returns a short
:class:`~nbagent.Reasoning` item: which message it is answering, which tools it
will call with which arguments (and which it guessed), or why it calls none.
Nothing is invented: the text is read off the response the demo already made,
so the view's *Thinking* section shows offline what a real model's would.
"""

from __future__ import annotations

from typing import Any

from .._types import ChatMessage, LLMToolResponse, Message, Reasoning, ToolResultMessage

_QUOTE = 160


def _quoted(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= _QUOTE else one_line[: _QUOTE - 3] + "..."


def _label(name: str, arguments: dict[str, Any]) -> str:
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


def _fields(schema: dict[str, Any]) -> str:
    props = schema.get("properties")
    return ", ".join(props) if isinstance(props, dict) and props else ""


def thought(
    messages: list[Message],
    response: LLMToolResponse,
    *,
    tools: list[str],
    output: tuple[str, dict[str, Any]] | None,
    effort: str | int,
) -> Reasoning:
    """The demo's reasoning for ``response``, the answer it made to ``messages``."""
    last = messages[-1] if messages else None
    user = next(
        (m for m in reversed(messages) if isinstance(m, ChatMessage) and m.role == "user"), None
    )
    lines: list[str] = []
    failed = False
    if isinstance(last, ToolResultMessage):
        results = []
        for m in reversed(messages):
            if not isinstance(m, ToolResultMessage):
                break
            results.append(m)
        statuses = ", ".join(f"{r.name or 'a tool'} {r.status}" for r in reversed(results))
        lines.append(f"{len(results)} tool result(s) came back ({statuses}).")
        failed = any(r.status != "ok" for r in results)
    elif user is not None and user.content:
        lines.append(f'Reading the request: "{_quoted(user.content)}".')
    if response.tool_calls:
        calls = "; ".join(_label(c.name, c.arguments) for c in response.tool_calls)
        lines.append(f"It matches my tools; I will call {calls}.")
        if response.text:
            lines.append("I say with the calls which arguments I guessed.")
    elif isinstance(last, ToolResultMessage):
        also = ", and say which calls did not succeed" if failed else ""
        lines.append(f"I will answer from these results{also}.")
    elif user is not None and user.parts:
        lines.append(
            f"It comes with {len(user.parts)} image(s) or file(s). I cannot see: I will "
            "report their size and dominant colours."
        )
    elif tools and user is not None and user.content:
        lines.append(f"None of my tools ({', '.join(tools)}) matches it: I will say so.")
    else:
        lines.append("There is no tool to call: I will answer in text.")
    if output is not None and not response.tool_calls:
        name, schema = output
        fields = _fields(schema)
        what = f"{name} ({fields})" if fields else name
        lines.append(f"The answer must be {what}: I will fill it with plausible values.")
    lines.append(f"(demo model, reasoning={effort!r}: it thinks the same at any effort.)")
    text = " ".join(lines)
    raw = {"type": "thinking", "thinking": text}
    return Reasoning("demo", "thinking", raw, text=text, resend=False)
