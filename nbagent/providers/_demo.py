"""The offline demo model: deterministic, schema-aware, no network.

It is what ``Chat()`` uses when no API key is set, and what the example
notebooks run on in CI. Given the user's latest message it:

1. reads the request against the tools' schemas (:mod:`._demo_plan`): quoted
   text, SQL, paths, URLs, emails and dates stay whole; phrases that name a
   parameter (``subject "Hi"``, ``amount=5``, ``order 42``) fill it; the rest is
   matched by type; one request becomes several calls of a tool only when it
   lists values ("weather in Paris, Tokyo and Oslo");
2. says, in the text that comes with its tool calls, which arguments it guessed
   from the words and which it made up;
3. honours ``tool_choice`` and ``calls="one"`` (its answer then names the calls
   it did not make);
4. after the tool results come back, answers from them, starting with the calls
   themselves (so answers to different requests differ from their first words),
   with the arguments a human edited, DataFrames as Markdown tables and its notes
   after a blank line (and says plainly when a call was denied or failed);
5. asked for a structured answer (``output=``), answers with the schema filled
   with plausible values (:mod:`._demo_output`); a type no real provider's strict
   structured output can express (``dict[str, int]``, ``Any``, a tuple, a list at
   the top) is refused as their adapters refuse it (``OutputSchemaError``), so a
   type prototyped offline works online;
6. describes the images it is sent, with a question or in a tool's result: their
   size and dominant colours (:mod:`._demo_images`);
7. asked to reason (``Chat(reasoning=...)``), first says what it decided: the
   request it read, the calls it will make or why it makes none
   (:mod:`._demo_thinking`), streamed as reasoning like a real model's.

It never raises on unusual tool schemas.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from .._errors import OutputSchemaError, ToolOptionError
from .._output import Dialect, Output
from .._result_text import without_edit_note
from .._types import (
    AssistantToolCallMessage,
    ChatMessage,
    LLMToolResponse,
    Message,
    Part,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
)
from ._base import DeltaSink, InProcessProvider, ModelRequest, StreamDelta
from ._demo_images import describe
from ._demo_output import fill
from ._demo_plan import Planned, plan
from ._demo_thinking import thought

_DIALECTS: tuple[Dialect, ...] = ("openai", "anthropic")
"""The strict structured outputs a demo model's ``output=`` must fit: every real provider's."""


def _summarise(content: str, limit: int = 300) -> str:
    """A result on one line: a flat JSON object as ``key value`` pairs, cut at ``limit``."""
    text = " ".join(content.split())
    try:
        data = json.loads(text)
    except (ValueError, TypeError):
        data = None
    if (
        isinstance(data, dict)
        and data
        and all(not isinstance(v, (dict, list)) for v in data.values())
    ):
        text = ", ".join(f"{k} {v}" for k, v in data.items())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _user_parts(messages: list[Message]) -> tuple[Part, ...]:
    """The images and files of the latest user message (the one being answered)."""
    for m in reversed(messages):
        if isinstance(m, ChatMessage) and m.role == "user":
            return m.parts
    return ()


def _seen(parts: tuple[Part, ...], user_text: str) -> str:
    if len(parts) == 1:
        said = f"I see {describe(parts[0])}."
    else:
        said = "I see " + "; ".join(f"({n}) {describe(p)}" for n, p in enumerate(parts, 1)) + "."
    asked = f' You asked: "{user_text}".' if user_text else ""
    return (
        f"(demo model) {said}{asked} I can only tell sizes and colours; set "
        "OPENAI_API_KEY or ANTHROPIC_API_KEY for a model that sees."
    )


def _label(name: str, arguments: dict[str, Any]) -> str:
    """``name(k=v, ...)`` on one line: a value's line breaks become spaces (the card and the
    log keep it whole)."""
    shown = ", ".join(f"{k}={' '.join(str(v).split())}" for k, v in arguments.items())
    return f"{name}({shown})"


_COLUMNS = re.compile(r"\s{2,}")
_PART_LABEL = re.compile(r"^\[(?:image|file) \d+: [^\]]*\]$")
_ROWS_LEFT_OUT = re.compile(r"\[\d+ of \d+ rows not shown\]")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(content: str) -> str | None:
    """A DataFrame's text (``to_string``, as a tool result carries it) as a Markdown table.

    None when ``content`` does not read as one (one line, a Series, a cell with two spaces
    in a row, a MultiIndex): the caller shows it as a fenced block instead.
    """
    lines = content.rstrip("\n").split("\n")
    note = lines.pop() if lines and _ROWS_LEFT_OUT.fullmatch(lines[-1]) else ""
    if len(lines) < 2 or not lines[0].startswith(" "):
        return None
    columns = _COLUMNS.split(lines[0].strip())
    index_name = ""
    rows = lines[1:]
    named = _COLUMNS.split(rows[0].strip())
    if len(named) == 1 and rows[0].rstrip() == rows[0].strip() and len(rows) > 1:
        index_name, rows = named[0], rows[1:]  # a named index has a line of its own
    cells = [_COLUMNS.split(r.strip()) for r in rows]
    if not cells or any(len(c) != len(columns) + 1 for c in cells):
        return None
    out = [
        "| " + " | ".join(_cell(c) for c in [index_name, *columns]) + " |",
        "|" + "---|" * (len(columns) + 1),
        *("| " + " | ".join(_cell(c) for c in row) + " |" for row in cells),
    ]
    return "\n".join(out) + (f"\n\n{note}" if note else "")


def _edited_arguments(content: str) -> dict[str, Any] | None:
    """The arguments a call ran with after a human edited them (read off the model's note)."""
    rest = without_edit_note(content, edited=True)
    if rest == content:
        return None
    note = content[: len(content) - len(rest)].strip()
    try:
        value = json.loads(note[note.index("{") : note.rindex("}") + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _gist(text: str, limit: int = 200) -> str:
    """The user's words on one line, for an answer that starts by naming them."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _guess_note(planned: list[Planned]) -> str:
    """What the demo model guessed, said with its tool calls ("" when it guessed nothing)."""
    guessed = list(dict.fromkeys(p for c in planned for p in c.guessed))
    made_up = list(dict.fromkeys(p for c in planned for p in c.made_up))
    parts = []
    if guessed:
        parts.append("arguments guessed from your words: " + ", ".join(guessed))
    if made_up:
        parts.append("not in your words, made up: " + ", ".join(made_up))
    return f"(demo model: {'; '.join(parts)})" if parts else ""


class DemoProvider(InProcessProvider):
    """An offline, deterministic stand-in for a real model (see the module docstring).

    Args:
        model: Reported model name.
        chunk_words: Words per streamed text fragment.
    """

    name = "demo"

    def __init__(self, model: str = "demo", *, chunk_words: int = 3):
        self.model = model
        self.chunk_words = chunk_words
        self._counter = 0

    def __repr__(self) -> str:
        return f"DemoProvider(model={self.model!r})"

    # -- the neutral API ----------------------------------------------------
    def check_hosted(self, tool: Any) -> None:
        """The demo model runs offline: it cannot use a provider-hosted tool."""
        raise ToolOptionError(
            f"{tool!r} is a provider-hosted tool, and the offline demo model has no provider "
            "to host it: use OpenAIProvider(model, api='responses')"
        )

    def check_output(self, output: Output) -> None:
        """Raise :class:`~nbagent.OutputSchemaError` for a structured answer a real provider's
        strict structured output cannot express (OpenAI's or Anthropic's), as their adapters
        do: a type prototyped on the demo model then works on them."""
        for dialect in _DIALECTS:
            try:
                output.strict_schema(dialect)
            except OutputSchemaError as exc:
                raise OutputSchemaError(
                    f"{exc} (The demo model refuses what the real providers refuse.)"
                ) from None

    def complete(self, request: ModelRequest) -> LLMToolResponse:
        for hosted in request.hosted:
            self.check_hosted(hosted)
        if request.output is not None:
            self.check_output(request.output)
        response = self._respond(
            list(request.messages), list(request.tools), request.tool_choice, request.calls
        )
        if request.output is not None and not response.tool_calls:
            # a structured answer: the schema filled, its free-text fields with what it would say
            user = next(
                (
                    m.content
                    for m in reversed(request.messages)
                    if isinstance(m, ChatMessage) and m.role == "user"
                ),
                "",
            )
            filled = fill(request.output.schema, response.text, request=user)
            text = json.dumps(filled, ensure_ascii=False)
            response = dataclasses.replace(response, text=text)
        if request.reasoning is not None:
            response = self._think(request, response)
        if request.stream and request.on_delta is not None:
            self._stream(response, request.on_delta)
        return response

    # -- behaviour ------------------------------------------------------------
    def _think(self, request: ModelRequest, response: LLMToolResponse) -> LLMToolResponse:
        """``response`` with what the demo decided, as a :class:`Reasoning` item before it."""
        output = (request.output.name, request.output.schema) if request.output else None
        item = thought(
            list(request.messages),
            response,
            tools=[s.name for s in request.tools] if request.tool_choice != "none" else [],
            output=output,
            effort=request.reasoning if request.reasoning is not None else "",
        )
        spent = max(1, len(item.text) // 4)
        return dataclasses.replace(
            response,
            items=(item, *response.items),
            output_tokens=response.output_tokens + spent,
            reasoning_tokens=spent,
        )

    def _chunks(self, text: str) -> list[str]:
        words = text.split(" ") if text else []
        n = self.chunk_words
        return [
            " ".join(words[i : i + n]) + (" " if i + n < len(words) else "")
            for i in range(0, len(words), n)
        ]

    def _stream(self, response: LLMToolResponse, on_delta: DeltaSink) -> None:
        for r in response.reasoning:
            for piece in self._chunks(r.text):
                on_delta(StreamDelta("reasoning", piece))
        for piece in self._chunks(response.text):
            on_delta(StreamDelta("text", piece))
        for n, call in enumerate(response.tool_calls):
            on_delta(StreamDelta("tool_call", json.dumps(call.arguments), n, call.id, call.name))

    def _usage(self, messages: list[Message], out: str) -> tuple[int, int]:
        size = 0
        for m in messages:
            size += len(getattr(m, "content", "") or "")
            for c in getattr(m, "tool_calls", ()):
                size += len(json.dumps(c.arguments))
        return max(1, size // 4), max(1, len(out) // 4)

    def _respond(
        self, messages: list[Message], specs: list[ToolSpec], choice: str, calls: str
    ) -> LLMToolResponse:
        last = messages[-1] if messages else None
        user_text = ""
        for m in reversed(messages):
            if isinstance(m, ChatMessage) and m.role == "user":
                user_text = m.content
                break
        if isinstance(last, ToolResultMessage) and choice in ("auto", "none"):
            text = self._answer_from_results(messages)
            if calls == "one":
                text += self._skipped(messages, user_text, specs)
            return self._text(messages, text)
        # Number calls after the ones already in the transcript: ids stay unique in a
        # chat even when a new provider object continues it (Chat.load).
        self._counter = max(self._counter, sum(len(getattr(m, "tool_calls", ())) for m in messages))
        planned = plan(user_text, specs, choice)
        if calls == "one":
            planned = planned[:1]
        if planned:
            tool_calls = tuple(ToolCall(self._new_id(), c.name, c.arguments) for c in planned)
            note = _guess_note(planned)
            i, o = self._usage(messages, note + json.dumps([c.arguments for c in tool_calls]))
            return LLMToolResponse(
                text=note,
                tool_calls=tool_calls,
                input_tokens=i,
                output_tokens=o,
                model=self.model,
                provider=self.name,
                stop_reason="tool_use",
                raw_stop_reason="tool_use",
            )
        images = _user_parts(messages)
        if images:
            return self._text(messages, _seen(images, user_text))
        if not user_text:
            return self._text(
                messages, "Hello! I'm nbagent's offline demo model. Ask me something."
            )
        if specs and choice != "none":
            names = ", ".join(s.name for s in specs)
            text = (
                f'"{_gist(user_text)}": none of my tools ({names}) matches this.\n\n'
                "(demo model) Mention what a tool does, and I will call it."
            )
        else:
            text = (
                f'"{_gist(user_text)}": that needs a real model.\n\n'
                "(demo model) I'm an offline stand-in; set OPENAI_API_KEY or "
                "ANTHROPIC_API_KEY to talk to a real model."
            )
        return self._text(messages, text)

    def _skipped(self, messages: list[Message], user_text: str, specs: list[ToolSpec]) -> str:
        """With ``calls="one"``: the calls the request asked for that were not made."""
        made: list[ToolCall] = []
        for m in reversed(messages):
            if isinstance(m, ChatMessage) and m.role == "user":
                break
            if isinstance(m, AssistantToolCallMessage):
                made[:0] = m.tool_calls
        wanted = plan(user_text, specs, "auto")
        if len(made) != 1 or len(wanted) < 2 or wanted[0].name != made[0].name:
            return ""
        done, rest = made[0], wanted[1:]
        item = wanted[0].item_param
        if item and item in done.arguments and all(c.item_param == item for c in rest):
            did = f"{done.name} for {done.arguments[item]}"
            todo = _and([str(c.arguments.get(item)) for c in rest])
        else:
            did = _label(done.name, done.arguments)
            todo = _and([_label(c.name, c.arguments) for c in rest])
        return (
            f"\n\nI only called {did}: one tool call per response is allowed "
            f'(calls="one"); ask again for {todo}.'
        )

    def _text(self, messages: list[Message], text: str) -> LLMToolResponse:
        i, o = self._usage(messages, text)
        return LLMToolResponse(
            text=text,
            input_tokens=i,
            output_tokens=o,
            model=self.model,
            provider=self.name,
            stop_reason="end",
            raw_stop_reason="end_turn",
        )

    def _new_id(self) -> str:
        self._counter += 1
        return f"demo_call_{self._counter}"

    def _answer_from_results(self, messages: list[Message]) -> str:
        results: list[ToolResultMessage] = []
        for m in reversed(messages):
            if isinstance(m, ToolResultMessage):
                results.append(m)
            else:
                break
        results.reverse()
        calls: dict[str, ToolCall] = {}
        for m in messages:
            if isinstance(m, AssistantToolCallMessage):
                for c in m.tool_calls:
                    calls[c.id] = c
        blocks: list[str] = []  # list lines, and tables each a block of their own
        for r in results:
            call = calls.get(r.tool_call_id)
            name = call.name if call else r.name or "the tool"
            edited = _edited_arguments(r.content) if r.status == "ok" else None
            label = _label(name, edited if edited is not None else call.arguments if call else {})
            if edited is not None:  # by a person or in code: the result does not say which
                label += " (arguments edited before it ran)"
            content = without_edit_note(r.content, edited=edited is not None)
            if r.parts:  # "I see ..." below says what the images are: not their labels too
                content = "\n".join(ln for ln in content.split("\n") if not _PART_LABEL.match(ln))
            if r.status == "ok":
                table = _table(content)
                seen = f" I see {'; '.join(describe(p) for p in r.parts)}." if r.parts else ""
                if table is not None:
                    blocks.append(f"{label}:{seen}\n\n{table}")
                elif "\n" in content.strip() and len(content) <= 2000:
                    blocks.append(f"{label}:{seen}\n\n```text\n{content.strip()}\n```")
                else:
                    blocks.append(f"- {label}: {_summarise(content)}{seen}")
            elif r.status == "denied":
                try:
                    reason = json.loads(r.content).get("reason")
                except (ValueError, AttributeError):
                    reason = None
                why = f" (reason: {reason})" if reason else ""
                blocks.append(f"- {label} was denied{why}, so it was not run.")
            else:
                blocks.append(f"- {label} did not succeed ({r.status}): {_summarise(content)}")
        # The answer starts with the calls themselves (answers to different requests differ
        # from their first words), list items together, a table or a note after a blank line.
        text = ""
        for block in blocks:
            glue = (
                "\n"
                if text and block.startswith("- ") and text.split("\n")[-1].startswith("- ")
                else "\n\n"
            )
            text = block if not text else text + glue + block
        if len(blocks) == 1 and text.startswith("- "):
            text = text[2:]  # one call: a sentence, not a list of one
        ok = sum(1 for r in results if r.status == "ok")
        if ok != len(results):
            text += f"\n\n{ok} of {len(results)} tool call(s) succeeded."
        return text
