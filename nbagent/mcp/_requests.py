"""A server's requests to nbagent: elicitation and sampling become pending inputs; roots
are answered from ``MCPServer(..., roots=[...])`` without asking.

On the older protocol a server sends these in the middle of a tool call. The
call's code registers the chat's way to ask (``current_input_asker()``, the
core's) for as long as the call is in flight (:meth:`Requests.calling`); a
request that arrives then parks on that chat as a
:class:`~nbagent.PendingInput` while the call waits, bounded by the call's
``timeout=``. An input still waiting when its call ends is withdrawn
(recorded as cancelled) and the server is told ``cancel``. With no chat call in
flight (``server.call()`` in code) nobody can answer: the server gets an error.

That protocol does not say which call a request is for (the SDK's client hands the
callback no related request id or progress token, and the stdio wire carries none), so
a request is given to a call only when that cannot be wrong: every call in flight on
the server belongs to one chat (its oldest call takes it). While calls of two chats, or
a chat's and one made in code, are in flight, the request is refused with an error
saying it cannot be attributed: one chat's content (a sampling request quoting its
data) must never reach another chat's person, provider, budget or record. On
2026-07-28 the request comes back inside its own call, so it always finds it.

Text the server sends in a request (an elicitation's message and schema, a sampling
request's messages and system prompt) has the server's own secrets replaced by ``***``
(:attr:`Requests.scrub`) before anyone sees it or a provider is sent it.

Passing the callbacks to the SDK's ``Client`` is what declares the
``elicitation`` (form and URL), ``sampling`` and ``roots`` capabilities, so a
server that hides tools from clients without them (the reference
``everything`` server) offers them all.

Every callback runs on nbagent's background loop (the session's), as does
:meth:`calling`; the list of calls in flight is only touched there.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from os import PathLike
from pathlib import Path
from typing import Any

from .._errors import MCPServerError
from .._inputs import SamplingRefused
from .._tools import InputAsker
from .._types import ChatMessage

NO_CHAT = "no chat call is in flight on this server to ask a person (nbagent)"
AMBIGUOUS = (
    "calls of more than one chat (or a call made in code) are in flight on this server, and "
    "this protocol version does not say which call the request is for; nbagent does not "
    "guess, so it cannot be attributed to a person and is refused (nbagent)"
)

log = logging.getLogger("nbagent.mcp")


class _Call:
    """One call in flight: the chat's way to ask (``None``: a call made in code) and the
    ids of the inputs it waits for. Compared by identity."""

    __slots__ = ("asker", "task", "waiting")

    def __init__(self, asker: InputAsker | None):
        self.asker = asker
        self.waiting: set[str] = set()
        self.task: asyncio.Task[Any] | None = None  # the call's own task (its cancel is ours)

    def ending(self) -> bool:
        """Whether the call is being ended here (its timeout, a cancel: its task cancelled):
        a request of its server cancelled then was withdrawn because of that, and the chat
        says so as it ends the call (``the call ended (timed_out) before an answer``)."""
        task = self.task
        return task is not None and (task.done() or task.cancelling() > 0)

    @property
    def owner(self) -> object:
        """Who answers for it: the asker's chat (a core ``CallAsker``), else the asker."""
        return getattr(self.asker, "_chat", self.asker) if self.asker is not None else self


def _same(text: str) -> str:
    return text


_asking: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
    "nbagent_mcp_asking", default=None
)
"""The call whose request this task serves: on 2026-07-28 the SDK answers an
``InputRequiredResult`` inside the call's own task, so its requests find their call here."""


def as_roots(roots: Iterable[str | PathLike[str]] | None) -> tuple[tuple[str, str], ...]:
    """``roots=`` as ``(uri, name)`` pairs: a path becomes its absolute ``file://`` URI.

    Raises:
        TypeError: An entry is neither a path nor a string.
    """
    out: list[tuple[str, str]] = []
    for root in roots or ():
        if isinstance(root, str) and "://" in root:
            uri = root
            name = root.rstrip("/").rsplit("/", 1)[-1] or root
        elif isinstance(root, str | PathLike):
            path = Path(root).expanduser().resolve()
            uri, name = path.as_uri(), path.name or str(path)
        else:
            raise TypeError(f"roots= takes paths or URIs, got {type(root).__name__}")
        out.append((uri, name))
    return tuple(out)


class Requests:
    """One server's answers to its requests: the chats' calls in flight and its roots."""

    def __init__(self, label: str, roots: tuple[tuple[str, str], ...] = (), sampling: Any = None):
        self.label = label
        self.roots = roots
        self.sampling = sampling  # the provider approved sampling requests run on (None: chat's)
        self._in_flight: list[_Call] = []
        self.scrub: Callable[[str], str] = _same  # the server's secrets out of its text

    def callbacks(self) -> dict[str, Any]:
        """The SDK ``Client``'s callbacks (which declare the client's capabilities)."""
        return {
            "elicitation_callback": self.elicit,
            "sampling_callback": self.sample,
            "list_roots_callback": self.list_roots,
        }

    @contextlib.asynccontextmanager
    async def calling(self, asker: InputAsker | None) -> AsyncIterator[None]:
        """While a chat's call is in flight, a request the server sends is asked of its chat.

        On the way out, what it still waits for is withdrawn (the call ended first). A call
        that raised, timed out or was cancelled leaves that to its chat, which ends the call
        with its status and withdraws the call's inputs saying it (``the call ended
        (timed_out) before an answer``): two withdrawals racing made the reason depend on
        which thread came first.
        """
        entry = _Call(asker)  # a call made in code (None) counts too: it makes requests ambiguous
        entry.task = asyncio.current_task()
        self._in_flight.append(entry)
        token = _asking.set(entry)
        try:
            yield
        except BaseException:
            _asking.reset(token)
            self._in_flight.remove(entry)
            raise
        _asking.reset(token)
        self._in_flight.remove(entry)
        if asker is not None:
            for input_id in list(entry.waiting):
                asker.withdraw(input_id, "the call ended before an answer was given")

    async def _ask(
        self, kind: Any, message: str, content: dict[str, Any], schema: dict[str, Any] | None
    ) -> tuple[InputAsker, str, str, Any] | str:
        """Park the request on its call; ``(asker, id, action, data)``, or an error message
        for the server (:data:`NO_CHAT`, :data:`AMBIGUOUS`).

        Its call is the task's own (2026-07-28: the SDK answers an
        ``InputRequiredResult`` inside the call), else, for a request sent in the
        middle of a call (the older protocol, which does not say which call it is
        for), the oldest call in flight on this server, only if every call in flight
        belongs to the same chat.
        """
        entry = _asking.get()
        if entry is None or all(entry is not e for e in self._in_flight):
            calls = list(self._in_flight)
            if not calls:
                return NO_CHAT
            if any(c.owner is not calls[0].owner for c in calls[1:]):
                log.warning(
                    "MCP server %r sent a %s request while calls of several chats were in "
                    "flight; refused: it cannot be attributed to one of them",
                    self.label,
                    kind,
                )
                return AMBIGUOUS
            entry = calls[0]
        asker, waiting = entry.asker, entry.waiting
        if asker is None:
            return NO_CHAT
        input_id, future = asker.ask(kind, message, content, schema, self.label)
        waiting.add(input_id)
        try:
            action, data = await asyncio.wrap_future(future)
        except asyncio.CancelledError:  # the server gave up (it cancelled its request)
            # ... on its own; or because this call is ending here (timed out, cancelled: the
            # server cancels what it asked as its call is cancelled), which its chat records
            # as it ends the call: the reason then depended on which came first
            if not entry.ending():
                asker.withdraw(input_id, "the server withdrew its request")
            raise
        finally:
            waiting.discard(input_id)
        return asker, input_id, action, data

    async def elicit(self, context: Any, params: Any) -> Any:
        """An elicitation: a form from its JSON Schema, or a URL to visit (and say Done)."""
        from mcp import types

        asked = await self._ask(*self._elicitation(params))
        if isinstance(asked, str):
            return types.ErrorData(code=types.INVALID_REQUEST, message=asked)
        _, _, action, data = asked
        return _elicit_result(action, data)

    async def sample(self, context: Any, params: Any) -> Any:
        """A sampling request: the exact messages, approved (run on the chat's provider) or
        answered by the person's own text, or declined."""
        from mcp import types

        asked = await self._ask(*self._sampling(params))
        if isinstance(asked, str):
            return types.ErrorData(code=types.INVALID_REQUEST, message=asked)
        asker, input_id, action, data = asked
        if action != "accept":
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"the user {'declined' if action == 'decline' else 'cancelled'} "
                "the sampling request",
            )
        try:
            return await self._sampled(asker, input_id, params, data)
        except SamplingRefused as exc:  # the chat's budget is spent: the server's error reply,
            # not an exception the SDK's handler logs with its traceback
            return types.ErrorData(code=types.INVALID_REQUEST, message=str(exc))

    def _elicitation(self, params: Any) -> tuple[Any, str, dict[str, Any], dict[str, Any] | None]:
        """An elicitation as a pending input: ``(kind, message, content, schema)``."""
        message = self.scrub(str(getattr(params, "message", "") or ""))
        if getattr(params, "mode", None) == "url" or hasattr(params, "url"):
            content = {
                "message": message,
                "url": self.scrub(str(params.url)),
                "elicitationId": getattr(params, "elicitation_id", None),
            }
            return "elicitation_url", message, content, None
        schema = self._scrubbed(
            dict(getattr(params, "requested_schema", None) or {"type": "object"})
        )
        return "elicitation", message, {"message": message, "requestedSchema": schema}, schema

    def _sampling(self, params: Any) -> tuple[Any, str, dict[str, Any], None]:
        """A sampling request as a pending input: ``(kind, message, content, schema)``."""
        content = self._scrubbed(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        last = self.scrub(_neutral(params.messages[-1]).content) if params.messages else ""
        shown = last if len(last) <= 200 else last[:197] + "..."
        return "sampling", f"{self.label} asks the model: {shown}", content, None

    async def _sampled(self, asker: InputAsker, input_id: str, params: Any, data: Any) -> Any:
        """An accepted sampling request's result: the person's own reply (text), or the
        model's, run on the chat's provider (or ``sampling=``'s)."""
        from mcp import types

        if isinstance(data, str):  # the person wrote the reply
            return types.CreateMessageResult(
                role="assistant",
                content=types.TextContent(type="text", text=data),
                model="human",
                stop_reason="endTurn",
            )
        system = params.system_prompt
        response = await asker.sample(
            input_id,
            [ChatMessage(m.role, self.scrub(m.content)) for m in map(_neutral, params.messages)],
            self.scrub(system) if system else system,
            params.max_tokens,
            self.sampling,
        )
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=response.text),
            model=response.model or "unknown",
            stop_reason="maxTokens" if response.stop_reason == "max_tokens" else "endTurn",
        )

    def _scrubbed(self, value: Any) -> Any:
        """JSON from the server with the scrub applied to every string in it."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {k: self._scrubbed(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._scrubbed(v) for v in value]
        return value

    # -- 2026-07-28: requests carried by an InputRequiredResult, parked with the call ------------
    def describe(self, request: Any) -> tuple[Any, str, dict[str, Any], dict[str, Any] | None]:
        """An embedded input request as a pending input: ``(kind, message, content, schema)``
        (the same content and schema as the older protocol's mid-call request)."""
        if getattr(request, "method", "") == "sampling/createMessage":
            return self._sampling(request.params)
        return self._elicitation(request.params)

    def roots_result(self) -> Any:
        """``roots/list``'s answer: the roots given to the server (``roots=``)."""
        from mcp import types

        return types.ListRootsResult(
            roots=[types.Root(uri=uri, name=name) for uri, name in self.roots]  # type: ignore[arg-type]
        )

    async def responses(self, asker: InputAsker, resume: dict[str, Any]) -> dict[str, Any]:
        """The ``input_responses`` a parked call is retried with, from its answers (an approved
        sampling request runs now, on the chat's provider or ``sampling=``'s).

        Raises:
            MCPServerError: A sampling request was declined (the server is not called again:
                as the SDK's driver, a refused sampling request ends the call).
        """
        from mcp import types

        out: dict[str, Any] = {}
        for key, value in (resume.get("ready") or {}).items():
            out[key] = types.ListRootsResult.model_validate(value)
        for key, answer in resume["answers"].items():
            action, data = answer["action"], answer["data"]
            if answer["kind"] != "sampling":
                out[key] = _elicit_result(action, data)
                continue
            if action != "accept":
                raise MCPServerError(
                    f"the user {'declined' if action == 'decline' else 'cancelled'} "
                    f"{self.label}'s sampling request; the call is not retried"
                )
            params = types.CreateMessageRequestParams.model_validate(answer["content"])
            out[key] = await self._sampled(asker, answer["input_id"], params, data)
        return out

    async def list_roots(self, context: Any) -> Any:
        """The roots given to the server (``roots=``), never asked of anyone."""
        return self.roots_result()


def _elicit_result(action: str, data: Any) -> Any:
    """An elicitation's answer: the form's values when accepted, else declined or cancelled."""
    from mcp import types

    if action == "accept":
        return types.ElicitResult(action="accept", content=data if isinstance(data, dict) else None)
    return types.ElicitResult(action="cancel" if action == "cancel" else "decline")


def _neutral(message: Any) -> ChatMessage:
    """A sampling message as the chat's providers take it (text; other parts named)."""
    blocks = message.content if isinstance(message.content, list) else [message.content]
    texts: list[str] = []
    for block in blocks:
        text = getattr(block, "text", None)
        texts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'part')}]")
    if message.role == "assistant":
        return ChatMessage("assistant", "\n".join(texts))
    return ChatMessage("user", "\n".join(texts))
