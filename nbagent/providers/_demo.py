"""The offline demo model: deterministic, schema-aware, no network.

It is what ``Chat()`` uses when no API key is set, and what the example
notebooks run on in CI. Given the user's latest message it:

1. splits the request into clauses ("weather in Paris and in Tokyo");
2. picks, for each clause, the tool whose name, description and parameters
   share the most words with it (honouring ``tool_choice``; a clause with no
   tool of its own reuses the previous clause's tool when it names a new value);
3. fills the tool's JSON Schema with values taken from the text: enum values
   mentioned, numbers in order, quoted strings, capitalised names, words after
   "for"/"in"/"about"..., else defaults, else a typed placeholder;
4. after the tool results come back, answers from them (and says plainly when a
   call was denied or failed).

It honours ``calls="one"``. It never raises on unusual schemas.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .._types import (
    AssistantToolCallMessage,
    ChatMessage,
    LLMToolResponse,
    Message,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
)
from ._base import DeltaSink, InProcessProvider, ModelRequest, StreamDelta

_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "and",
        "or",
        "is",
        "are",
        "be",
        "me",
        "my",
        "i",
        "you",
        "your",
        "please",
        "what",
        "whats",
        "what's",
        "how",
        "can",
        "could",
        "would",
        "should",
        "do",
        "does",
        "with",
        "from",
        "by",
        "it",
        "this",
        "that",
        "get",
        "give",
        "tell",
        "show",
        "find",
        "current",
        "now",
        "today",
        "some",
        "any",
        "all",
    ]
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]*")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_QUOTED = re.compile(r"\"([^\"]+)\"|'([^']{2,})'|“([^”]+)”")
_CAPITALISED = re.compile(r"\b([A-Z][a-zà-ÿ]+(?:[ -][A-Z][a-zà-ÿ]+)*)\b")
_AFTER_PREP = re.compile(
    r"\b(?:for|in|about|named|called|to|from|of|on)\s+([A-Za-z0-9][\w.@-]*(?:\s+[A-Z][\w-]*)*)"
)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
_PATHLIKE = re.compile(
    r"(?<![\w@/])(?:[a-zA-Z][\w+.-]*://)?(?=[\w~./-]*[A-Za-z])[\w~-]*(?:[./][\w~-]+)+/?"
)


def _words(text: str) -> list[str]:
    out = []
    for w in _WORD.findall(text.lower().replace("_", " ")):
        w = w.strip("'")
        if w and w not in _STOP:
            out.append(w[:-1] if len(w) > 4 and w.endswith("s") else w)
    return out


def _tool_vocab(spec: ToolSpec) -> set[str]:
    vocab = set(_words(spec.name.replace("-", " ")))
    vocab |= set(_words(spec.description.split("\n")[0]))
    for pname in spec.input_schema.get("properties", {}):
        vocab |= set(_words(pname.replace("_", " ")))
    return vocab


def _score(clause: str, spec: ToolSpec) -> float:
    words = set(_words(clause))
    name_words = set(_words(spec.name.replace("-", " ")))
    return 2.0 * len(words & name_words) + len(words & _tool_vocab(spec))


def _split_clauses(text: str) -> list[str]:
    parts = re.split(r"\s*(?:,|;|\band then\b|\bthen\b|\band also\b|\balso\b|\band\b)\s*", text)
    return [p for p in (p.strip(" .?!") for p in parts) if p]


class _Extractor:
    """Pulls typed values out of a clause, each value used at most once."""

    def __init__(self, clause: str, full_text: str):
        self.clause = clause
        self.full = full_text
        self.numbers = [m.group(0) for m in _NUMBER.finditer(clause)]
        self.quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(clause)]
        self.emails = _EMAIL.findall(clause)
        self.paths = [p for p in _PATHLIKE.findall(clause) if p not in self.emails]
        first_word = clause.split(" ", 1)[0]
        self.names = [
            n for n in _CAPITALISED.findall(clause) if n != first_word and n.lower() not in _STOP
        ]
        self.after = [m.group(1) for m in _AFTER_PREP.finditer(clause)]
        self.used: set[str] = set()

    def take(self, pool: list[str]) -> str | None:
        for v in pool:
            if v not in self.used:
                self.used.add(v)
                return v
        return None

    def value_for(self, pname: str, schema: dict[str, Any], required: bool) -> Any:
        schema = _first_concrete(schema)
        typ = schema.get("type")
        enum = schema.get("enum")
        low = self.clause.lower()
        if enum:
            for text in (low, self.full.lower()):
                for v in enum:
                    if isinstance(v, str) and re.search(rf"\b{re.escape(v.lower())}\b", text):
                        return v
            return schema.get("default", enum[0]) if required or "default" in schema else None
        if typ in ("integer", "number"):
            n = self.take(self.numbers)
            if n is None:
                return schema.get("default", 1) if required else None
            return int(float(n)) if typ == "integer" else float(n)
        if typ == "boolean":
            if pname.replace("_", " ") in low:
                return True
            return schema.get("default", False) if required else None
        if typ == "array":
            item = self.value_for(pname, schema.get("items", {"type": "string"}), True)
            return [item] if item is not None else []
        if typ == "object":
            return _fill(schema, self) if required else None
        # strings
        if "email" in pname.lower():
            v = self.take(self.emails)
            if v:
                return v
        for pool in (self.quoted, self.paths, self.names, self.after):
            v = self.take(pool)
            if v:
                return v
        if required:
            if "default" in schema:
                return schema["default"]
            leftover = [w for w in _words(self.clause)]
            return leftover[-1] if leftover else self.clause or pname
        return None


def _first_concrete(schema: dict[str, Any]) -> dict[str, Any]:
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"]
            if options:
                merged = dict(options[0])
                if "default" in schema:
                    merged["default"] = schema["default"]
                return merged
    return schema


def _fill(schema: dict[str, Any], ex: _Extractor) -> dict[str, Any]:
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    args: dict[str, Any] = {}
    for pname, pschema in props.items():
        if "$ref" in pschema:
            continue
        value = ex.value_for(pname, pschema, pname in required)
        if value is not None:
            args[pname] = value
    return args


def _summarise(content: str, limit: int = 300) -> str:
    text = content.strip()
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
    def complete(self, request: ModelRequest) -> LLMToolResponse:
        response = self._respond(
            list(request.messages), list(request.tools), request.tool_choice, request.calls
        )
        if request.stream and request.on_delta is not None:
            self._stream(response, request.on_delta)
        return response

    # -- behaviour ------------------------------------------------------------
    def _stream(self, response: LLMToolResponse, on_delta: DeltaSink) -> None:
        words = response.text.split(" ") if response.text else []
        for i in range(0, len(words), self.chunk_words):
            piece = " ".join(words[i : i + self.chunk_words])
            on_delta(
                StreamDelta("text", piece + (" " if i + self.chunk_words < len(words) else ""))
            )
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
            return self._text(messages, text)
        # Number calls after the ones already in the transcript: ids stay unique in a
        # chat even when a new provider object continues it (Chat.load).
        self._counter = max(self._counter, sum(len(getattr(m, "tool_calls", ())) for m in messages))
        tool_calls = [] if choice == "none" else self._plan_calls(user_text, specs, choice)
        if calls == "one":
            tool_calls = tool_calls[:1]
        if tool_calls:
            out = json.dumps([c.arguments for c in tool_calls])
            i, o = self._usage(messages, out)
            return LLMToolResponse(
                text="",
                tool_calls=tuple(tool_calls),
                input_tokens=i,
                output_tokens=o,
                model=self.model,
                provider=self.name,
                stop_reason="tool_use",
                raw_stop_reason="tool_use",
            )
        if not user_text:
            return self._text(
                messages, "Hello! I'm nbagent's offline demo model. Ask me something."
            )
        if specs and choice != "none":
            names = ", ".join(s.name for s in specs)
            text = (
                f'(demo model) None of my tools ({names}) matches "{user_text}". '
                "Mention what a tool does, and I will call it."
            )
        else:
            text = (
                f'(demo model) You said: "{user_text}". I\'m an offline stand-in; set '
                "OPENAI_API_KEY or ANTHROPIC_API_KEY to talk to a real model."
            )
        return self._text(messages, text)

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

    def _plan_calls(self, text: str, specs: list[ToolSpec], choice: str) -> list[ToolCall]:
        if not specs or not text:
            return []
        by_name = {s.name: s for s in specs}
        out: list[ToolCall] = []
        if choice not in ("auto", "required", "none"):
            spec = by_name.get(choice)
            if spec is None:
                return []
            ex = _Extractor(text, text)
            return [ToolCall(self._new_id(), spec.name, _fill(spec.input_schema, ex))]
        previous: ToolSpec | None = None
        for clause in _split_clauses(text):
            scored = sorted(
                ((_score(clause, s), n, s) for n, s in enumerate(specs)),
                key=lambda t: (-t[0], t[1]),
            )
            best_score, _, best = scored[0]
            if best_score <= 0:
                ex = _Extractor(clause, text)
                if previous is not None and (ex.names or ex.numbers or ex.quoted or ex.paths):
                    best = previous
                else:
                    continue
            args = _fill(best.input_schema, _Extractor(clause, text))
            call = ToolCall(self._new_id(), best.name, args)
            if any(c.name == call.name and c.arguments == call.arguments for c in out):
                continue
            out.append(call)
            previous = best
        if not out and choice == "required":
            spec = specs[0]
            out.append(
                ToolCall(
                    self._new_id(), spec.name, _fill(spec.input_schema, _Extractor(text, text))
                )
            )
        return out

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
        lines = []
        for r in results:
            call = calls.get(r.tool_call_id)
            name = call.name if call else r.name or "the tool"
            args = ", ".join(f"{k}={v}" for k, v in (call.arguments if call else {}).items())
            label = f"{name}({args})"
            if r.status == "ok":
                lines.append(f"- {label}: {_summarise(r.content)}")
            elif r.status == "denied":
                try:
                    reason = json.loads(r.content).get("reason")
                except (ValueError, AttributeError):
                    reason = None
                why = f" (reason: {reason})" if reason else ""
                lines.append(f"- {label} was denied{why}, so it was not run.")
            else:
                lines.append(f"- {label} did not succeed ({r.status}): {_summarise(r.content)}")
        ok = sum(1 for r in results if r.status == "ok")
        head = (
            "Here is what I found:"
            if ok == len(results)
            else f"{ok} of {len(results)} tool call(s) succeeded:"
        )
        return head + "\n" + "\n".join(lines)
