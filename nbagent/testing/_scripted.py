"""An in-process provider that answers from a script: test your agents offline.

::

    from nbagent.testing import ScriptedProvider, reply, call_tools

    provider = ScriptedProvider([
        call_tools(("get_weather", {"city": "Paris"})),
        reply("It is sunny in Paris."),
    ])
    chat = Chat(provider=provider).with_tools(get_weather)
    chat.ask("Weather in Paris?")
    provider.requests[0].tool_choice   # what the chat asked for

Each script entry is an :class:`~nbagent.LLMToolResponse` or a function
``(request) -> LLMToolResponse`` of the :class:`~nbagent.ModelRequest`. An
exception instance in the script is raised instead (to test provider failures).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

from .._types import LLMToolResponse, StopReason, ToolCall
from ..providers._base import InProcessProvider, ModelRequest, StreamDelta

_ids = itertools.count(1)


ScriptedRequest = ModelRequest
"""What the chat sent for one request: the request value itself (the name is kept for
code written before the seam took a :class:`~nbagent.ModelRequest`)."""

ScriptEntry = LLMToolResponse | BaseException | Callable[[ModelRequest], LLMToolResponse]


def reply(text: str, *, stop_reason: StopReason = "end", **usage: int) -> LLMToolResponse:
    """A text answer."""
    return LLMToolResponse(
        text=text,
        stop_reason=stop_reason,
        input_tokens=usage.get("input_tokens", 10),
        output_tokens=usage.get("output_tokens", 5),
        cached_tokens=usage.get("cached_tokens", 0),
        model="scripted",
        provider="scripted",
    )


def call_tools(
    *calls: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str] | ToolCall,
    text: str = "",
    stop_reason: StopReason = "tool_use",
) -> LLMToolResponse:
    """A response asking for tool calls: ``("name", {args})`` or ``("name", {args}, "id")``."""
    out: list[ToolCall] = []
    for c in calls:
        if isinstance(c, ToolCall):
            out.append(c)
        elif len(c) == 3:
            out.append(ToolCall(c[2], c[0], dict(c[1])))
        else:
            out.append(ToolCall(f"call_{next(_ids)}", c[0], dict(c[1])))
    return LLMToolResponse(
        text=text,
        tool_calls=tuple(out),
        stop_reason=stop_reason,
        input_tokens=10,
        output_tokens=5,
        model="scripted",
        provider="scripted",
    )


class ScriptedProvider(InProcessProvider):
    """Answers each request with the next script entry (see the module docstring).

    Args:
        script: Entries consumed in order.
        model: Reported model name.
        repeat_last: Keep answering with the last entry when the script runs out
            (else raise ``AssertionError`` naming the request).
    """

    name = "scripted"

    def __init__(
        self,
        script: Iterable[ScriptEntry] = (),
        *,
        model: str = "scripted",
        repeat_last: bool = False,
    ):
        self.model = model
        self._script = list(script)
        self._lock = threading.Lock()
        self.repeat_last = repeat_last
        self.requests: list[ModelRequest] = []

    def add(self, *entries: ScriptEntry) -> ScriptedProvider:
        with self._lock:
            self._script.extend(entries)
        return self

    @property
    def remaining(self) -> int:
        return len(self._script)

    def complete(self, request: ModelRequest) -> LLMToolResponse:
        with self._lock:
            self.requests.append(request)
            if self._script:
                entry = (
                    self._script[0]
                    if (self.repeat_last and len(self._script) == 1)
                    else (self._script.pop(0))
                )
            else:
                raise AssertionError(
                    f"ScriptedProvider: script exhausted at request {len(self.requests)} "
                    f"(last message: {request.messages[-1] if request.messages else None!r})"
                )
        if isinstance(entry, BaseException):
            raise entry
        response = entry(request) if callable(entry) else entry
        on_delta = request.on_delta
        if request.stream and on_delta is not None:
            if response.text:
                for word in response.text.split(" "):
                    on_delta(StreamDelta("text", word + " "))
            for n, c in enumerate(response.tool_calls):
                on_delta(StreamDelta("tool_call", json.dumps(c.arguments), n, c.id, c.name))
        return response
