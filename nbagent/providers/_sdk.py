"""What the SDK-backed adapters share: the request cycle, sync and async, written once.

An adapter (:class:`~nbagent.providers.OpenAIProvider`,
:class:`~nbagent.providers.AnthropicProvider`) supplies three things:

- ``_prepare(request)``: the wire request for a :class:`~._base.ModelRequest`,
  as a JSON body *already serialised*: each message's JSON is built once and cached
  (:class:`MessageCache`), so a request costs one join over the history, not a
  rebuild of it;
- ``_parse(data)``: a non-streaming response (a plain JSON dict) to an
  :class:`~nbagent.LLMToolResponse`;
- ``_accumulator(on_delta)``: a :class:`StreamAccumulator` that folds stream
  events into the same response while forwarding text and argument fragments.

The request goes through the SDK client's low-level ``post(path, content=...,
cast_to=httpx2.Response)``: the SDK's transport, auth, headers, retries and
status-error handling are kept; its per-request transformation of the whole
history is skipped, and the response body (JSON, or server-sent events parsed
by :class:`SSEParser`) is read as plain dicts instead of pydantic models.
Every SDK exception is mapped at one boundary (:func:`~._errors.sdk_errors`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import math
import re
import uuid
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar

from .._errors import (
    AuthenticationError,
    ModelNotSupportedError,
    ProviderConnectionError,
    ProviderError,
)
from .._hosted import hosted_secrets, redact_body
from .._leases import Release
from .._types import LLMToolResponse, Message, ToolCall, ToolSpec
from .._unicode import MAX_DEPTH
from ._base import CompleteWithToolsMixin, DeltaSink, ModelRequest, check_choice
from ._catalog import lookup_model
from ._clients import async_client as shared_async_client
from ._clients import keep
from ._errors import for_error_type, sdk_errors

T = TypeVar("T")


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON."""
    return _ENCODER.encode(value).encode()


def assemble(fields: Sequence[tuple[str, bytes]]) -> bytes:
    """A JSON object from already-serialised values, in order."""
    return b"{" + b",".join(b'"' + k.encode() + b'":' + v for k, v in fields) + b"}"


def array(items: Sequence[bytes]) -> bytes:
    return b"[" + b",".join(items) + b"]"


def new_call_id(prefix: str = "call_") -> str:
    """An id for a call a server sent without one (ids must be unique in a chat)."""
    return prefix + uuid.uuid4().hex[:24]


TOO_DEEP = f"the arguments are nested more than {MAX_DEPTH} levels deep"
NOT_SHOWN = "(not shown)"
"""The argument text kept for a call whose arguments are too deep to show or send back."""
_BODY_DEPTH = MAX_DEPTH + 16
"""Containers nested deeper than this in a server's JSON are replaced by a marker (see
:func:`loads`); any tool arguments holding one are still deeper than ``MAX_DEPTH``."""
_TOKENS = re.compile(r'"(?:[^"\\]+|\\.)*"|[\[\]{}]')
_OPENING = (b"{", b"[")
"""First bytes of a body that ``json.loads`` would read as UTF-8 (no BOM, not UTF-16/32)."""


def loads(data: bytes | str) -> Any:
    """JSON from a server, never a ``RecursionError``.

    Python's parser recurses once per nesting level; a value nested past
    what it can take (a model's ``[[[[...]]]]`` arguments inside an Anthropic
    body) is replaced by a string marker, so the rest of the answer still
    parses and the call holding it is refused as too deep (:func:`make_call`).
    ``NaN`` and ``Infinity`` parse here; tool arguments holding them are
    refused by :func:`make_call`.

    Raises:
        ValueError: not JSON.
    """
    try:
        if isinstance(data, bytes) and data[:1] in _OPENING and data[1:2] != b"\x00":
            # UTF-8 (what the APIs send): decoded here, as json.loads would after
            # guessing the encoding byte by byte (a fifth of a stream event's parse)
            return json.loads(data.decode("utf-8", "surrogatepass"))
        return json.loads(data)
    except RecursionError:
        text = data.decode("utf-8", "surrogatepass") if isinstance(data, bytes) else data
    try:
        return json.loads(_flatten(text, _BODY_DEPTH))
    except RecursionError:  # only if this thread's stack is nearly full already
        raise ValueError("nested too deeply to parse") from None


def _flatten(text: str, limit: int) -> str:
    """``text`` with every container nested deeper than ``limit`` replaced by ``"(too deep)"``."""
    out: list[str] = []
    depth = start = kept = 0
    for m in _TOKENS.finditer(text):
        token = m.group()
        if token[0] == '"':
            continue
        if token in "[{":
            depth += 1
            if depth == limit + 1:
                start = m.start()
        else:
            if depth == limit + 1:
                out.append(text[kept:start])
                out.append('"(too deep)"')
                kept = m.end()
            depth -= 1
    out.append(text[kept:])
    return "".join(out)


def _problem(value: dict[str, Any] | list[Any]) -> str | None:
    """Why parsed arguments cannot be used (and sent back as JSON), or None.

    Too deep (what the chat refuses too), or a number JSON has no spelling for:
    Python's ``json`` reads ``NaN``, ``Infinity`` and ``1e999``, but the APIs
    refuse a request that carries them.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth >= MAX_DEPTH:
            return TOO_DEEP
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, float):
                if not math.isfinite(child):
                    return f"invalid JSON: {_spelling(child)} is not a JSON number"
            elif isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return None


def _spelling(number: float) -> str:
    return "NaN" if number != number else ("Infinity" if number > 0 else "-Infinity")


def make_call(call_id: str, name: str, arguments: Any) -> ToolCall:
    """A :class:`ToolCall` from wire arguments (a JSON string, an object, or nothing).

    ``""`` and ``None`` mean ``{}``. Text that is not a JSON object, holds
    ``NaN`` or ``Infinity``, or nests more than ``MAX_DEPTH`` levels is kept in
    ``raw_arguments`` (``"(not shown)"`` when too deep) with ``parse_error``
    set; the chat answers such a call with an error result instead of running it.
    """
    if isinstance(arguments, dict):
        problem = _problem(arguments)
        if problem is None:
            return ToolCall(call_id, name, arguments)
        raw = NOT_SHOWN if problem == TOO_DEEP else json.dumps(arguments, ensure_ascii=False)
        return ToolCall(call_id, name, {}, raw_arguments=raw, parse_error=problem)
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return ToolCall(call_id, name, {})
    try:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        parsed = json.loads(text)
    except RecursionError:
        return ToolCall(call_id, name, {}, raw_arguments=NOT_SHOWN, parse_error=TOO_DEEP)
    except ValueError as exc:
        return ToolCall(call_id, name, {}, raw_arguments=text, parse_error=f"invalid JSON: {exc}")
    if not isinstance(parsed, dict):
        kind = type(parsed).__name__
        return ToolCall(
            call_id, name, {}, raw_arguments=text, parse_error=f"expected a JSON object, got {kind}"
        )
    problem = _problem(parsed)
    if problem is not None:
        raw = NOT_SHOWN if problem == TOO_DEEP else text
        return ToolCall(call_id, name, {}, raw_arguments=raw, parse_error=problem)
    return ToolCall(call_id, name, parsed)


def arguments_text(call: ToolCall) -> str:
    """The argument text to send back for a call (the original text if it did not parse)."""
    if call.raw_arguments is not None:
        return call.raw_arguments
    return json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))


class MessageCache(Generic[T]):
    """The wire form of each neutral message, built once, kept while the message lives.

    Messages are frozen values and a tool call's ``id``/``name``/``arguments``
    never change, so a message's wire JSON can be reused for every later
    request of the conversation. Entries are keyed by identity and hold their
    message weakly: a message's wire form goes with the message (a finished chat
    dropped), so a provider shared by thousands of chats (a batch) keeps only the
    wire forms of the messages something still holds. A message that cannot be
    weakly referenced is built each time. The cache empties itself past ``limit``
    entries.
    """

    def __init__(self, build: Callable[[Message], T], limit: int = 50_000):
        self._build = build
        self._limit = limit
        entries: dict[int, tuple[weakref.KeyedRef, T]] = {}
        self._entries = entries

        def forget(ref: weakref.KeyedRef, entries: dict[int, Any] = entries) -> None:
            # the message is gone (its id may already name a new one: only its own entry)
            entry = entries.get(ref.key)
            if entry is not None and entry[0] is ref:
                entries.pop(ref.key, None)

        self._forget = forget

    def get(self, message: Message) -> T:
        key = id(message)
        entry = self._entries.get(key)
        if entry is not None and entry[0]() is message:
            return entry[1]
        value = self._build(message)
        try:
            ref = weakref.KeyedRef(message, self._forget, key)
        except TypeError:  # not weakly referenceable: not kept
            return value
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[key] = (ref, value)
        return value

    def many(self, messages: Sequence[Message]) -> list[T]:
        get = self.get
        return [get(m) for m in messages]

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


class ToolsCache:
    """The wire form of the tool list, rebuilt only when the tools change.

    A tool's schema is a plain dict that may be changed in place between requests (a
    Tool class's ``parameters`` gaining an ``enum`` value): the cache compares each
    schema with a copy taken when it built the wire form, so a changed schema is sent
    as it now is (the identities make the usual miss cheap; the copy is compared only
    while they match). One entry, replaced whole: threads sharing a provider never
    read one tool list's key with another's wire form.
    """

    def __init__(self, build: Callable[[Sequence[ToolSpec]], bytes]):
        self._build = build
        # (key, the specs kept so their schemas' ids stay theirs, the schemas as built, wire)
        self._entry: tuple[tuple[Any, ...], tuple[ToolSpec, ...], tuple[Any, ...], bytes] = (
            (),
            (),
            (),
            b"[]",
        )

    def get(self, tools: tuple[ToolSpec, ...]) -> bytes:
        key = tuple((t.name, t.description, id(t.input_schema)) for t in tools)
        held_key, _, schemas, value = self._entry
        if key == held_key and all(
            t.input_schema == s for t, s in zip(tools, schemas, strict=True)
        ):
            return value
        value = self._build(tools)
        self._entry = (key, tools, _copied(t.input_schema for t in tools), value)
        return value

    @property
    def _value(self) -> bytes:
        """The wire form held now (what tests/providers/test_request.py checks is reused)."""
        return self._entry[3]


_UNCOMPARABLE = object()
"""Stands for a schema that could not be copied: never equal, so rebuilt every time."""


def _copied(schemas: Iterable[Any]) -> tuple[Any, ...]:
    copies = []
    for schema in schemas:
        try:
            copies.append(copy.deepcopy(schema))
        except Exception:  # an object deepcopy cannot take (its wire form still built)
            copies.append(_UNCOMPARABLE)
    return tuple(copies)


@dataclass
class Prepared:
    """One wire request: where it goes and its serialised JSON body."""

    path: str
    body: bytes
    stream: bool
    options: dict[str, Any] = field(default_factory=dict)

    def post_args(self, url: Any = None) -> dict[str, Any]:
        """The SDK client's ``post`` arguments; ``cast_to=httpx2.Response`` makes the SDK
        hand back the response itself (unread, when streaming). ``url``: the path already
        joined to the client's base URL (see :func:`joined_url`)."""
        import httpx2

        return {
            "path": self.path if url is None else url,
            "cast_to": httpx2.Response,
            "content": self.body,
            "options": self.options,
            "stream": self.stream,
        }


_URLS: weakref.WeakKeyDictionary[Any, tuple[Any, dict[str, Any]]] = weakref.WeakKeyDictionary()


def joined_url(client: Any, path: str) -> Any:
    """``path`` joined to ``client.base_url`` once per client and base URL (the SDK's own
    join, ``_prepare_url``), so no request parses and merges the URL again: the SDK and
    httpx take an absolute ``httpx.URL`` as it is. ``path`` itself if the client has no such
    join (a client of another shape). Only for clients that never read the path as text
    (openai's auth hook and Anthropic's Vertex and Bedrock clients do)."""
    base = getattr(client, "base_url", None)
    try:
        entry = _URLS.get(client)
    except TypeError:  # not weakly referable
        return path
    if entry is None or entry[0] is not base:
        entry = _URLS[client] = (base, {})
    joined = entry[1].get(path)
    if joined is None:
        prepare = getattr(client, "_prepare_url", None)
        if prepare is None:
            return path
        joined = entry[1][path] = prepare(path)
    return joined


class SSEParser:
    """Server-sent events -> their JSON ``data`` objects.

    The SDKs' own stream classes decode SSE into objects line by line; reading
    the body in chunks and splitting on blank lines here is about 10% cheaper
    per streamed request, and leaves each accumulator its own error handling.
    ``data: [DONE]`` (Chat Completions) ends the stream; comments, ``event:``
    lines and ``ping`` payloads without data are skipped.
    """

    def __init__(self, provider: str):
        self.provider = provider
        self.buffer = b""
        self.done = False

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        buffer = self.buffer + chunk
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n")
        *blocks, self.buffer = buffer.split(b"\n\n")
        return [e for e in map(self._event, blocks) if e is not None]

    def flush(self) -> list[dict[str, Any]]:
        rest, self.buffer = self.buffer, b""
        event = self._event(rest) if rest.strip() else None
        return [] if event is None else [event]

    def _event(self, block: bytes) -> dict[str, Any] | None:
        if self.done:
            return None
        start = block.find(b"data:")
        if start < 0:
            return None
        end = block.find(b"\n", start)
        if (start == 0 or block[start - 1] == 10) and block.find(b"data:", start + 5) < 0:
            # the usual event: one data line (anywhere after an event: line)
            raw = block[start + 5 :] if end < 0 else block[start + 5 : end]
            if raw[:1] == b" ":
                raw = raw[1:]
        else:
            lines = block.split(b"\n")
            data = [line[5:].removeprefix(b" ") for line in lines if line[:5] == b"data:"]
            if not data:
                return None
            raw = data[0] if len(data) == 1 else b"\n".join(data)
        if raw == b"[DONE]":
            self.done = True
            return None
        try:
            event = loads(raw)
        except ValueError as exc:
            # raised after the handler: raised in it, the error would keep the decoder's
            # exception as __context__, and its .doc is the whole event, a key in it too
            problem = f"{self.provider}: invalid JSON in a stream event ({exc}): {raw[:200]!r}"
        else:
            return event if isinstance(event, dict) else None
        raise ProviderError(problem, provider=self.provider)


class StreamAccumulator(Protocol):
    """Folds a stream's events (raw JSON dicts) into a response."""

    def feed(self, event: dict[str, Any]) -> None: ...

    def finish(self, ended: bool = True) -> LLMToolResponse:
        """The response; ``ended``: the stream's own end marker came (``[DONE]``)."""
        ...


def _identity(response: Any) -> bool:
    """Whether a streamed body arrives as it is sent (no ``content-encoding``): its chunks are
    then read from the transport's stream itself, without httpx's decoding and re-chunking
    layers around every chunk (the transport maps its errors either way)."""
    return response.headers.get("content-encoding", "identity") == "identity"


def _fold(acc: StreamAccumulator, events: list[dict[str, Any]]) -> None:
    for event in events:
        acc.feed(event)


def incomplete_stream(provider: str) -> ProviderConnectionError:
    return ProviderConnectionError(
        f"{provider}: the response stream ended before the response was complete",
        provider=provider,
    )


def _close_clients(
    clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, asyncio.Task[None]]],
) -> None:
    """A provider is gone: end the keepers of its own async clients (not shared ones), each
    on its own loop, which closes their clients there (a provider dropped while its loop
    runs: a batch's chat once its row is done)."""
    for loop, (_, keeper) in list(clients.items()):
        if not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(keeper.cancel)


def client_options(
    client_kwargs: dict[str, Any], max_retries: int | None, timeout: float | None
) -> dict[str, Any]:
    """An SDK client's keyword arguments: ``client_kwargs``, with the retries and timeout given."""
    given = {"max_retries": max_retries, "timeout": timeout}
    return {**client_kwargs, **{k: v for k, v in given.items() if v is not None}}


class SDKProvider(CompleteWithToolsMixin):
    """Base class of the SDK-backed adapters (see the module docstring)."""

    name: str = ""
    model: str
    extra_body: dict[str, Any]
    _env_key = ""

    def __init__(
        self,
        model: str,
        *,
        client: Any,
        async_client: Any,
        release: Release | None,
        client_key: str | None,
    ):
        self.model = model
        self._client = client
        self._release = release  # the lease on the client it made (None: one passed in)
        self._client_key = client_key  # its async clients are shared too (None: its own)
        self._owns_async = async_client is None
        self._aclient: Any = async_client
        # per event loop: (async client, the task that closes it when the loop shuts down)
        self._aclients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[Any, asyncio.Task[None]]
        ] = weakref.WeakKeyDictionary()
        weakref.finalize(self, _close_clients, self._aclients)
        self._last_body: bytes | None = None
        self._no_key: str | None = None  # set by an adapter made with no credentials

    # -- for subclasses -------------------------------------------------------
    def _prepare(self, request: ModelRequest) -> Prepared:
        raise NotImplementedError

    def _parse(self, data: Any) -> LLMToolResponse:
        raise NotImplementedError

    def _accumulator(self, on_delta: DeltaSink | None) -> StreamAccumulator:
        raise NotImplementedError

    def secrets(self) -> tuple[str | None, ...]:
        """What this provider never shows: its API key (and token). A chat scrubs them from
        what its tools return and from its errors, whatever their shape; a custom provider
        may define ``secrets()`` too."""
        return ()

    def _url(self, client: Any, path: str) -> Any:
        """What the client is asked to post to: ``path`` (the SDK joins it to its base URL),
        or, where an adapter knows it is safe, the URL joined once (:func:`joined_url`)."""
        return path

    def _post(self, client: Any, req: Prepared) -> Any:
        """Send ``req`` through ``client``; the ``httpx`` response (unread when streaming).
        An adapter may post without the SDK's per-request work where that is safe
        (:mod:`._direct`)."""
        return client.post(**req.post_args(self._url(client, req.path)))

    async def _post_async(self, client: Any, req: Prepared) -> Any:
        """Async twin of :meth:`_post`."""
        return await client.post(**req.post_args(self._url(client, req.path)))

    def _received(self, response: LLMToolResponse) -> LLMToolResponse:
        """What the adapter learns from each response (JSON or stream) before it is used."""
        return response

    def _new_async_client(self) -> Any:
        raise NotImplementedError

    # -- the neutral API ------------------------------------------------------
    def complete(self, request: ModelRequest) -> LLMToolResponse:
        """Send ``request``, return the neutral response (see ``Provider``)."""
        req = self._request(request)
        with sdk_errors(self.name, self._secrets_for(request), self._env_key):
            response = self._post(self._client, req)
            if not req.stream:
                return self._checked_parse(self._json(response.content))
            acc, parser = self._accumulator(request.on_delta), SSEParser(self.name)
            try:
                for chunk in response.stream if _identity(response) else response.iter_bytes():
                    _fold(acc, parser.feed(chunk))
            finally:
                response.close()
            _fold(acc, parser.flush())
            return self._received(acc.finish(parser.done))

    async def complete_async(self, request: ModelRequest) -> LLMToolResponse:
        """Async twin of :meth:`complete`."""
        req = self._request(request)
        with sdk_errors(self.name, self._secrets_for(request), self._env_key):
            response = await self._post_async(self._async(), req)
            if not req.stream:
                return self._checked_parse(self._json(response.content))
            acc, parser = self._accumulator(request.on_delta), SSEParser(self.name)
            try:
                chunks = response.stream if _identity(response) else response.aiter_bytes()
                async for chunk in chunks:
                    _fold(acc, parser.feed(chunk))
            finally:
                await response.aclose()
            _fold(acc, parser.flush())
            return self._received(acc.finish(parser.done))

    # -- plumbing -------------------------------------------------------------
    def _secrets_for(self, request: ModelRequest) -> tuple[str | None, ...]:
        """What no error text may show: the key, and the hosted tools' headers and tokens."""
        return self.secrets() + hosted_secrets(request.hosted)

    def _request(self, request: ModelRequest) -> Prepared:
        if self._no_key is not None:
            # made without credentials: fine until a request has to be sent (a chat
            # replaying recordings with replay="only" never sends one)
            raise AuthenticationError(self._no_key, provider=self.name)
        if request.tools:
            info = lookup_model(self.model)
            if info is not None and not info.supports_tools:
                raise ModelNotSupportedError(
                    f"{self.name}: model {self.model!r} does not support tools; pick a model "
                    "that does (e.g. gpt-4.1-mini, claude-sonnet-4-5) or remove the tools",
                    provider=self.name,
                )
        req = self._prepare(request)
        self._last_body = req.body
        return req

    def _body(self, fields: list[tuple[str, bytes]]) -> bytes:
        """The request body from its fields; ``extra_body`` adds fields or replaces them."""
        if self.extra_body:
            fields = [(k, v) for k, v in fields if k not in self.extra_body]
            fields += [(k, dumps(v)) for k, v in self.extra_body.items()]
        return assemble(fields)

    def _json(self, body: bytes) -> Any:
        try:
            return loads(body)
        except ValueError as exc:
            # raised after the handler, so the decoder's exception (its .doc: the whole
            # body, a key echoed in it too) is not kept as the error's __context__
            problem = f"{self.name}: the server's answer is not JSON ({exc}): {body[:200]!r}"
        raise ProviderError(problem, provider=self.name)

    def _checked_parse(self, data: Any) -> LLMToolResponse:
        if not isinstance(data, dict):
            raise ProviderError(
                f"{self.name}: expected a JSON object from the server, got {type(data).__name__}",
                provider=self.name,
            )
        error = data.get("error")
        if error and not any(k in data for k in ("choices", "output", "content")):
            # some OpenAI-compatible servers answer errors with a 200
            kind = (
                str(error.get("type") or error.get("code") or "") if isinstance(error, dict) else ""
            )
            text = error.get("message") if isinstance(error, dict) else error
            raise for_error_type(kind)(f"{self.name}: {text}", provider=self.name)
        try:
            return self._received(self._parse(data))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ProviderError(
                f"{self.name}: unexpected response from the server ({type(exc).__name__}: {exc})",
                provider=self.name,
            ) from exc

    def _async(self) -> Any:
        """The async client for the running event loop.

        An async client's connections belong to the loop that opened them, so
        each loop gets its own client, closed when that loop shuts down
        (``asyncio.run`` cancels the keeper task, whose ``finally`` closes the
        client while the loop still runs), by :meth:`aclose`, or when the
        provider is garbage-collected (its keepers are cancelled on their loops).
        """
        if not self._owns_async:
            return self._aclient
        if self._client_key is not None:  # one per loop for every provider that would make it
            return shared_async_client(self._client_key, self._new_async_client)
        loop = asyncio.get_running_loop()
        entry = self._aclients.get(loop)
        if entry is None:
            client = self._new_async_client()
            entry = self._aclients[loop] = (client, keep(loop, client))
        return entry[0]

    def preview_request(
        self, request: ModelRequest | None = None, /, **fields: Any
    ) -> dict[str, Any]:
        """The JSON body :meth:`complete` would send for ``request``, without sending anything.

        The request may be given as keywords instead
        (``preview_request(messages=..., tools=..., tool_choice=..., calls=...)``);
        keywords given with a request replace its fields. Hosted tools' headers
        and tokens are shown as ``***``.

        Raises:
            ToolOptionError: A ``tool_choice`` naming a tool not among ``tools`` (or
                ``"required"`` with none), as ``complete_with_tools`` refuses it: the
                provider would refuse that body.
        """
        if request is None:
            request = ModelRequest(**fields)
        elif fields:
            request = replace(request, **fields)
        check_choice(request.tool_choice, [t.name for t in request.tools], bool(request.hosted))
        return redact_body(dict(json.loads(self._prepare(request).body)))

    @property
    def last_request(self) -> dict[str, Any] | None:
        """The JSON body of the last request sent (no key; hosted tools' secrets ``***``)."""
        return None if self._last_body is None else redact_body(json.loads(self._last_body))

    @property
    def client(self) -> Any:
        """The SDK client requests go through."""
        return self._client

    @property
    def base_url(self) -> str:
        """The API endpoint requests go to."""
        return str(self._client.base_url)

    def close(self) -> None:
        """Let go of the sync HTTP client this provider made (not one passed in): closed
        unless another provider made with the same key and options still uses it
        (``providers/_clients.py``).

        An async client it made is closed when its event loop shuts down, or by
        :meth:`aclose` when it is the provider's own.
        """
        if self._release is not None:
            self._release(False)

    async def aclose(self) -> None:
        """:meth:`close`, and close the async client this provider made on the running loop
        when it is its own (a shared one closes with its loop)."""
        entry = self._aclients.pop(asyncio.get_running_loop(), None)
        if entry is not None and not entry[1].done():
            entry[1].cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await entry[1]
        self.close()

    def __enter__(self) -> SDKProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> SDKProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = [
    "MessageCache",
    "Prepared",
    "SDKProvider",
    "StreamAccumulator",
    "ToolsCache",
    "arguments_text",
    "array",
    "assemble",
    "client_options",
    "dumps",
    "incomplete_stream",
    "joined_url",
    "loads",
    "make_call",
    "new_call_id",
]
