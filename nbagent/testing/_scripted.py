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

``provider.requests`` keeps every request; the requests of one conversation
share one copy of its transcript, so a long conversation costs memory in
proportion to its length, not to its square.
"""

from __future__ import annotations

import itertools
import json
import operator
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, overload

from .._types import LLMToolResponse, Message, StopReason, ToolCall
from ..providers import InProcessProvider, ModelRequest, StreamDelta

_ids = itertools.count(1)


ScriptedRequest = ModelRequest
"""What the chat sent for one request: the request value itself (the name is kept for
code written before the seam took a :class:`~nbagent.ModelRequest`)."""

ScriptEntry = LLMToolResponse | BaseException | Callable[[ModelRequest], LLMToolResponse]


_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "cache_write_tokens",
)


def reply(text: str, *, stop_reason: StopReason = "end", **usage: int) -> LLMToolResponse:
    """A text answer. ``usage``: any of ``input_tokens`` (default 10), ``output_tokens``
    (default 5), ``cached_tokens``, ``reasoning_tokens``, ``cache_write_tokens`` (default 0);
    another name is a ``TypeError`` (a misspelt count would otherwise read 0)."""
    unknown = sorted(set(usage) - set(_USAGE_KEYS))
    if unknown:
        raise TypeError(
            f"reply() got unexpected usage keyword(s) {', '.join(unknown)}; "
            f"known: {', '.join(_USAGE_KEYS)}"
        )
    return LLMToolResponse(
        text=text,
        stop_reason=stop_reason,
        input_tokens=usage.get("input_tokens", 10),
        output_tokens=usage.get("output_tokens", 5),
        cached_tokens=usage.get("cached_tokens", 0),
        reasoning_tokens=usage.get("reasoning_tokens", 0),
        cache_write_tokens=usage.get("cache_write_tokens", 0),
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


class RecordedRequests(Sequence[ModelRequest]):
    """The requests a :class:`ScriptedProvider` received, oldest first (a read-only list).

    Each request of a conversation repeats the whole transcript so far; keeping
    every one of them would cost memory in the square of the conversation's
    length. Here the requests of a conversation share one list of its messages:
    an entry is the request without its messages plus how many of the shared
    list it held, and reading an entry rebuilds the :class:`~nbagent.ModelRequest`.
    A request whose messages are not an extension of a recent one (another
    chat, an edited transcript) starts a list of its own.
    """

    _RECENT = 4
    """How many recent shared lists a new request is compared with (interleaved chats)."""

    def __init__(self) -> None:
        self._entries: list[tuple[ModelRequest, list[Message], int]] = []
        self._shared: list[list[Message]] = []

    def append(self, request: ModelRequest) -> None:
        messages = request.messages
        self._entries.append((replace(request, messages=()), self._share(messages), len(messages)))

    def _share(self, messages: tuple[Message, ...]) -> list[Message]:
        for shared in reversed(self._shared[-self._RECENT :]):
            if all(map(operator.is_, shared, messages)):
                if len(messages) > len(shared):
                    shared.extend(messages[len(shared) :])
                return shared
        shared = list(messages)
        self._shared.append(shared)
        return shared

    def _item(self, entry: tuple[ModelRequest, list[Message], int]) -> ModelRequest:
        stub, shared, n = entry
        return replace(stub, messages=tuple(shared[:n]))

    @overload
    def __getitem__(self, index: int) -> ModelRequest: ...

    @overload
    def __getitem__(self, index: slice) -> list[ModelRequest]: ...

    def __getitem__(self, index: int | slice) -> ModelRequest | list[ModelRequest]:
        if isinstance(index, slice):
            return [self._item(e) for e in self._entries[index]]
        return self._item(self._entries[index])

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[ModelRequest]:
        return (self._item(e) for e in self._entries)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (RecordedRequests, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self))


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
        self.requests = RecordedRequests()

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
            if not self._script:
                raise AssertionError(
                    f"ScriptedProvider: script exhausted at request {len(self.requests)} "
                    f"(last message: {request.messages[-1] if request.messages else None!r})"
                )
            keep = self.repeat_last and len(self._script) == 1
            entry = self._script[0] if keep else self._script.pop(0)
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
