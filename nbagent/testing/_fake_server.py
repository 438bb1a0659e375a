"""A loopback fake LLM server for testing agents offline with the real SDKs.

It speaks OpenAI Chat Completions (``/v1/chat/completions``), OpenAI Responses
(``/v1/responses``) and Anthropic Messages (``/v1/messages``), as JSON or as
SSE streams (chosen by the request's ``"stream": true``), and answers from a
script of neutral :class:`Turn` values. Point the official ``openai`` /
``anthropic`` clients at it; nothing leaves 127.0.0.1.

Example::

    import openai
    from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

    turns = [
        Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})]),
        Turn(text="It is sunny."),
    ]
    with FakeLLMServer(turns=turns) as server:
        client = openai.OpenAI(
            api_key="test-key", base_url=server.openai_base_url, max_retries=0
        )
        reply = client.chat.completions.create(
            model="gpt-4.1-mini",
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=[...],
        )
        reply.choices[0].message.tool_calls[0].id   # "call_1"
        server.requests[0].body["messages"]          # what the SDK sent

    # Anthropic: anthropic.Anthropic(api_key="test-key",
    #                                base_url=server.anthropic_base_url)

By default (``strict=True``) malformed requests get the same kind of 400 the
real APIs give: a body that is not strict JSON in UTF-8 (``NaN``, ``Infinity``,
a lone surrogate escape), a tool result answering no call of the previous
assistant message, a call id repeated in a message, an Anthropic id outside
``^[a-zA-Z0-9_-]+$``, a ``tool_use`` whose ``tool_result`` is not in the next
user message, a ``thinking`` block altered or missing from the front of the
assistant turn a ``tool_result`` answers (thinking on), a stateless Responses
``function_call`` sent without the ``reasoning`` item the server sent before
it, a structured-output schema strict mode does not accept (``_wire_schema``),
more than 4 Anthropic ``cache_control`` breakpoints or one on a block that
cannot carry it (a thinking block, an empty text), an image or file part the API
refuses (``_wire_media``)...
so adapter bugs fail in tests, not in production. For many
rounds (benchmarks) pass ``cycle=True`` or ``handler=lambda request: Turn(...)``
instead of a long list.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import TracebackType
from typing import Any

from . import _wire_anthropic, _wire_media, _wire_openai, _wire_schema
from ._script import (
    REDACTED,
    SECRET_HEADERS,
    Api,
    RawJSON,
    RecordedRequest,
    Turn,
    WireError,
    as_turn,
)

Handler = Callable[[RecordedRequest], "Turn | str"]
"""A script function: gets each request, returns the turn to answer with."""
Validator = Callable[[Api, str, dict[str, Any]], None]
"""Called as ``validator(api, kind, payload)`` for every payload the server
sends; ``kind`` is ``"response"`` (JSON body), ``"event"`` (one SSE chunk or
event) or ``"error"`` (error body). Raise to flag a payload as invalid."""

Payload = dict[str, Any]

_RENDERERS = {
    "chat": _wire_openai.render_chat,
    "responses": _wire_openai.render_responses,
    "anthropic": _wire_anthropic.render_messages,
}
_CHECKS = {
    "chat": _wire_openai.check_chat,
    "responses": _wire_openai.check_responses,
    "anthropic": _wire_anthropic.check_messages,
}
QUIRKS: dict[str, Api] = {
    "empty_final_output": "responses",
    "calls_without_index": "chat",
    "calls_at_index_0": "chat",
    "calls_without_ids": "chat",
    "thought_signatures": "chat",
    "no_message_delta": "anthropic",
}
"""What a real server (or gateway) sends that the API itself does not, by name, and the API
it applies to (see :class:`FakeLLMServer`'s ``quirks``)."""
_MID_STREAM_EVENTS = 3
"""Events sent before a ``fail_mid_stream`` turn drops the connection."""
_RETRY_AFTER_MS = "10"
"""Sent on scripted 429/5xx so clients that do retry, retry quickly."""


def render(
    api: Api,
    turn: Turn | str,
    request: Mapping[str, Any],
    *,
    stream: bool | None = None,
    seq: int = 1,
    first_call: int = 1,
) -> list[Payload]:
    """Render a turn into the payloads the server would send, without HTTP.

    Useful to validate the fake's output against an SDK's own types.

    Args:
        api: ``"chat"``, ``"responses"`` or ``"anthropic"``.
        turn: The turn to render (a str is shorthand for ``Turn(text=...)``).
        request: The request body the turn answers (model, tools and
            ``stream_options`` are echoed or honoured).
        stream: Render SSE payloads; defaults to the request's ``stream``.
        seq: Response number, used in ids (``chatcmpl-fake1``, ``msg_fake1``).
        first_call: Number of the first tool call id (``call_1``/``toolu_1``).

    Returns:
        One JSON body for a non-streaming reply or an error turn; otherwise
        the list of stream chunks/events in order (Anthropic's include ``ping``).
    """
    turn = as_turn(turn)
    if stream is None:
        stream = bool(request.get("stream"))
    if turn.is_error:
        return [_error_payload(api, _turn_error(api, turn), seq)]
    payloads = _RENDERERS[api](turn, request, stream=stream, seq=seq, first_call=first_call)
    if turn.inline_error is None:
        return payloads
    given = turn.inline_error
    message = str(given.get("message", "The server had an error while processing your request."))
    err = WireError(200, message, given.get("type"), given.get("code"))
    kept = payloads[:_MID_STREAM_EVENTS] if stream else []
    if api == "anthropic":
        error = _wire_anthropic.inline_error(err)
    else:
        error = _wire_openai.inline_error(
            api, err, stream=stream, final=payloads[-1], seq=len(kept)
        )
    return [*kept, error]


def _turn_error(api: Api, turn: Turn) -> WireError:
    wire = _wire_anthropic if api == "anthropic" else _wire_openai
    messages = wire.DEFAULT_MESSAGES
    default = messages.get(turn.status) or messages[500 if turn.status >= 500 else 400]
    return WireError.from_turn(turn, default)


def _error_payload(api: Api, err: WireError, seq: int) -> Payload:
    if api == "anthropic":
        return _wire_anthropic.error_body(err, f"req_fake{seq}")
    return _wire_openai.error_body(err)


def _dumps(payload: Payload) -> bytes:
    """Compact JSON; :class:`RawJSON` values spliced in as written, lone surrogates escaped."""
    raws: list[str] = []

    def raw(value: Any) -> str:
        if not isinstance(value, RawJSON):
            raise TypeError(f"{type(value).__name__} is not JSON serializable")
        raws.append(value.text)
        return f"\0raw{len(raws) - 1}\0"

    def text(ascii_only: bool) -> bytes:
        raws.clear()
        out = json.dumps(payload, separators=(",", ":"), ensure_ascii=ascii_only, default=raw)
        for n, value in enumerate(raws):
            out = out.replace(f'"\\u0000raw{n}\\u0000"', value, 1)
        return out.encode()

    try:
        return text(False)
    except UnicodeEncodeError:  # a lone surrogate: valid as a JSON escape, not as UTF-8
        return text(True)


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _not_strict_json(value: str) -> Any:
    raise ValueError(f"{value} is not valid JSON")


def parse_body(raw: bytes, *, strict: bool) -> dict[str, Any]:
    """A request's JSON body; raises ValueError when the API would refuse to parse it.

    Strict mode refuses what the real APIs refuse: bytes that are not UTF-8,
    ``NaN``/``Infinity`` (which Python's ``json`` accepts) and lone surrogate
    escapes (``"\\ud800"``, which no UTF-8 text can hold).
    """
    try:
        if not strict:
            body = json.loads(raw or b"null")
        else:
            body = json.loads(raw.decode("utf-8") or "null", parse_constant=_not_strict_json)
    except UnicodeDecodeError as exc:
        raise ValueError(f"the body is not valid UTF-8 ({exc.reason})") from None
    except RecursionError:
        raise ValueError("the body is nested too deeply") from None
    if strict and _SURROGATE_ESCAPE.search(raw):
        try:
            json.dumps(body, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("the body holds a lone surrogate escape") from None
    if not isinstance(body, dict):
        raise ValueError("the body is not a JSON object")
    return body


def _sse(api: Api, payloads: list[Payload]) -> list[bytes]:
    """Frame payloads as SSE events: ``event:`` lines except for Chat, which ends in [DONE]."""
    if api == "chat":
        return [b"data: " + _dumps(p) + b"\n\n" for p in payloads] + [b"data: [DONE]\n\n"]
    return [b"event: %s\ndata: %s\n\n" % (p["type"].encode(), _dumps(p)) for p in payloads]


def _route(path: str) -> Api | None:
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/messages"):
        return "anthropic"
    return None


def _payload_kind(api: Api, payload: Payload, stream: bool) -> str:
    """What a validator should check a payload against: an error body, an event, a response."""
    if ("error" in payload and api == "chat") or (
        api == "anthropic" and payload.get("type") == "error"
    ):
        return "error"
    return "event" if stream else "response"


def _request_id(api: Api, seq: int) -> tuple[str, str]:
    """The header naming a response's request (each API spells it its own way)."""
    return ("request-id" if api == "anthropic" else "x-request-id", f"req_fake{seq}")


def _answer(
    api: Api, seq: int, turn: Turn, body: bytes = b"", events: list[bytes] | None = None
) -> _Reply:
    """A 200 answer to ``turn``: one JSON ``body``, or SSE ``events`` (chunked encoding)."""
    kind = "application/json" if events is None else "text/event-stream; charset=utf-8"
    headers = [_request_id(api, seq), ("Content-Type", kind)]
    if events is not None:
        headers.append(("Cache-Control", "no-cache"))
    if events is not None and turn.end_stream_after is not None:
        events = events[: turn.end_stream_after]
    return _Reply(200, headers, body, events, turn.delay, turn.chunk_delay, turn.fail_mid_stream)


@dataclass
class _Reply:
    """An HTTP answer: a JSON body, or SSE events sent with chunked encoding."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""
    events: list[bytes] | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    fail: bool = False


class FakeLLMServer:
    """A scripted fake of the OpenAI and Anthropic APIs on 127.0.0.1.

    The server starts when constructed and stops on :meth:`close` or at the
    end of a ``with`` block (which also raises if the script handler or the
    validator failed while serving).

    Args:
        turns: Turns answered in order (a str is shorthand for
            ``Turn(text=...)``). When they run out, requests get a 500 that
            says "script exhausted".
        handler: Instead of ``turns``, a function called with each
            :class:`RecordedRequest` that returns the turn to answer. Calls are
            serialised, so it needs no locking of its own.
        cycle: Repeat ``turns`` forever instead of running out.
        strict: Answer malformed tool transcripts with the APIs' own 400s.
        validator: Called with ``(api, kind, payload)`` for every payload
            sent; if it raises, the request gets a 500 and the error is kept
            in :attr:`errors`. Tests pass one that checks SDK types.
        host: Interface to bind.
        port: Port to bind; 0 picks a free one.
        quirks: What some servers and gateways do that the real APIs do not, applied to
            every answer of their API (settable later as :attr:`quirks`):
            ``"empty_final_output"`` (Responses: the final ``response.completed``, or the
            JSON body, carries ``output: []``, the items only in the stream's
            ``response.output_item.done`` events, as the new-api and LiteLLM gateways and
            the Codex backend do); ``"calls_without_index"`` (a Chat stream sends each
            tool call whole in its own chunk with no ``index``, as Gemini's
            OpenAI-compatible endpoint does); ``"calls_at_index_0"`` (each call whole in
            its own chunk, all with ``index`` 0 and their own ids, as some proxies do);
            ``"calls_without_ids"`` (each call whole in its own chunk with neither an
            ``index`` nor an ``id``, as some OpenAI-compatible servers do);
            ``"thought_signatures"`` (each Chat tool call carries
            ``extra_content.google.thought_signature``, and a request sending a signed call
            back without it is refused with Gemini 3's 400, as its OpenAI-compatible
            endpoint does);
            ``"no_message_delta"`` (an Anthropic stream without its ``message_delta``
            event: no stop reason, no final usage).
    """

    def __init__(
        self,
        turns: Iterable[Turn | str] | None = None,
        *,
        handler: Handler | None = None,
        cycle: bool = False,
        strict: bool = True,
        validator: Validator | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        quirks: Iterable[str] = (),
    ) -> None:
        self.strict = strict
        self.quirks = quirks
        self.validator = validator
        self._lock = threading.Lock()
        self._script_lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._errors: list[BaseException] = []
        self._seq = 0
        self._calls = 0
        self._reasoned: dict[str, str] = {}  # Responses: call id -> its reasoning item id
        self._signed: dict[str, str] = {}  # Chat: call id -> its thought signature (quirk)
        self._prompt_cache: set[str] = set()  # Anthropic: the cached prefixes' keys
        self._turns: list[Turn] = []
        self._position = 0
        self._cycle = False
        self._handler: Handler | None = None
        self.script(turns, handler=handler, cycle=cycle)
        self._closing = False
        self._httpd = _HTTPServer((host, port), _RequestHandler, self)
        bound_host, bound_port = self._httpd.server_address[:2]
        self.host, self.port = str(bound_host), int(bound_port)
        self._thread = threading.Thread(
            target=self._serve, name=f"FakeLLMServer:{self.port}", daemon=True
        )
        self._thread.start()

    @property
    def quirks(self) -> frozenset[str]:
        """The server quirks applied to every answer (see the class docstring)."""
        return self._quirks

    @quirks.setter
    def quirks(self, names: Iterable[str]) -> None:
        if isinstance(names, str):
            names = (names,)
        chosen = frozenset(names)
        unknown = sorted(chosen - set(QUIRKS))
        if unknown:
            raise ValueError(f"unknown quirk(s) {unknown}; known: {sorted(QUIRKS)}")
        self._quirks = chosen

    # -- addresses --

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """``base_url`` for ``openai.OpenAI`` (ends in ``/v1``)."""
        return self.base_url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        """``base_url`` for ``anthropic.Anthropic`` (the SDK adds ``/v1``)."""
        return self.base_url

    # -- script --

    def script(
        self,
        turns: Iterable[Turn | str] | None = None,
        *,
        handler: Handler | None = None,
        cycle: bool = False,
    ) -> None:
        """Replace the script; takes the same arguments as the constructor."""
        if turns is not None and handler is not None:
            raise TypeError("pass either turns= or handler=, not both")
        resolved = [as_turn(t) for t in turns] if turns is not None else []
        if cycle and not resolved:
            raise ValueError("cycle=True needs at least one turn")
        with self._script_lock:
            self._turns, self._position = resolved, 0
            self._cycle, self._handler = cycle, handler

    @property
    def remaining(self) -> int | None:
        """Scripted turns not used yet; None with ``handler=`` or ``cycle=True``."""
        with self._script_lock:
            if self._handler is not None or self._cycle:
                return None
            return len(self._turns) - self._position

    # -- what happened --

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the requests received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def last_request(self) -> RecordedRequest:
        """The most recent request (raises ``IndexError`` if none)."""
        with self._lock:
            return self._requests[-1]

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised by the handler or validator while serving."""
        return self._errors

    @property
    def connections(self) -> int:
        """TCP connections accepted so far (keep-alive reuses them)."""
        return self._httpd.connections

    # -- lifecycle --

    def close(self) -> None:
        """Stop serving and drop open connections. Safe to call twice."""
        if self._closing:
            return
        self._closing = True
        with contextlib.suppress(OSError):  # wake the accept loop
            socket.create_connection((self.host, self.port), timeout=1).close()
        self._thread.join(timeout=5)
        self._httpd.server_close()
        self._httpd.drop_connections()

    def __enter__(self) -> FakeLLMServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
        if exc_type is None and self._errors:
            raise RuntimeError(
                f"FakeLLMServer: {len(self._errors)} error(s) while serving; first: "
                f"{self._errors[0]!r}"
            ) from self._errors[0]

    def __repr__(self) -> str:
        return f"FakeLLMServer({self.base_url}, requests={len(self._requests)})"

    def _serve(self) -> None:
        while not self._closing:
            self._httpd.handle_request()

    # -- one request --

    def _next_turn(self, request: RecordedRequest) -> Turn:
        with self._script_lock:
            if self._handler is not None:
                return as_turn(self._handler(request))
            if self._position >= len(self._turns):
                if not self._cycle:
                    raise _ScriptExhausted(len(self._turns))
                self._position = 0
            turn = self._turns[self._position]
            self._position += 1
            return turn

    def _validate(self, api: Api, kind: str, payloads: list[Payload]) -> None:
        if self.validator is not None:
            for payload in payloads:
                if payload.get("type") != "ping":
                    which = (
                        kind if kind == "error" else _payload_kind(api, payload, kind == "event")
                    )
                    self.validator(api, which, payload)

    def _handle(self, method: str, target: str, headers: Mapping[str, str], raw: bytes) -> _Reply:
        path = target.split("?", 1)[0]
        api = _route(path) if method == "POST" else None
        with self._lock:
            self._seq += 1
            seq = self._seq
        if api is None:
            shape: Api = "anthropic" if "anthropic-version" in headers else "chat"
            message = (
                f"FakeLLMServer has no route for {method} {path}. Use base_url="
                f"{self.openai_base_url} for openai and {self.anthropic_base_url} for anthropic."
            )
            return self._error(shape, WireError(404, message, retry=False), seq)
        try:
            body = parse_body(raw, strict=self.strict)
        except ValueError as exc:
            message = f"We could not parse the JSON body of your request: {exc}."
            return self._error(api, WireError(400, message, retry=False), seq)
        redacted = {k: (REDACTED if k in SECRET_HEADERS else v) for k, v in headers.items()}
        request = RecordedRequest(path=path, headers=redacted, body=body, api=api)
        with self._lock:
            self._requests.append(request)
        try:
            if self.strict and (error := self._check(api, body)) is not None:
                return self._error(api, error, seq)
            turn = self._next_turn(request)
            if turn.is_error:
                return self._error(api, _turn_error(api, turn), seq, turn.delay)
            if api == "anthropic":
                turn = self._cache_usage(turn, body)
            if turn.raw_body is not None:  # sent as it is: the body, or one event's data
                raw = turn.raw_body.encode("utf-8", "surrogatepass")
                if request.stream:
                    return _answer(api, seq, turn, events=[b"data: " + raw + b"\n\n"])
                return _answer(api, seq, turn, raw)
            with self._lock:
                first_call = self._calls + 1
                self._calls += len(turn.tool_calls)
            payloads = render(api, turn, body, seq=seq, first_call=first_call)
            if api == "responses" and not turn.inline_error:
                with self._lock:
                    final = payloads[-1].get("response", payloads[-1])
                    self._reasoned.update(_wire_openai.issued_reasoning(final))
            quirks = [q for q in sorted(self._quirks) if QUIRKS[q] == api]
            if quirks and not turn.inline_error:
                wire = _wire_anthropic if api == "anthropic" else _wire_openai
                payloads = wire.with_quirks(quirks, payloads, stream=request.stream)
                if "thought_signatures" in quirks:
                    with self._lock:
                        self._signed.update(_wire_openai.signed_calls(payloads))
            self._validate(api, "event" if request.stream else "response", payloads)
        except _ScriptExhausted as exhausted:
            message = (
                f"FakeLLMServer script exhausted: request #{len(self._requests)} to {path} "
                f"arrived but all {exhausted.count} scripted turn(s) were used. Add turns, "
                "pass cycle=True, or use handler=."
            )
            return self._error(api, WireError(500, message, retry=False), seq)
        except Exception as exc:
            self._errors.append(exc)
            message = f"FakeLLMServer failed while answering: {exc!r}"
            return self._error(api, WireError(500, message, retry=False), seq)
        if request.stream:
            return _answer(api, seq, turn, events=_sse(api, payloads))
        return _answer(api, seq, turn, _dumps(payloads[0]))

    def _cache_usage(self, turn: Turn, body: dict[str, Any]) -> Turn:
        """Anthropic prompt caching, simulated: a request with ``cache_control`` breakpoints
        reads the longest prefix an earlier request cached and writes the rest up to its last
        breakpoint; the turn's own ``cached_tokens`` / ``cache_write_tokens`` win."""
        prefixes = _wire_anthropic.cache_prefixes(body)
        given = turn.usage or {}
        if not prefixes or "cached_tokens" in given or "cache_write_tokens" in given:
            return turn
        with self._lock:
            read = max((n for key, n in prefixes if key in self._prompt_cache), default=0)
            self._prompt_cache.update(key for key, _ in prefixes)
        written = max(0, prefixes[-1][1] - read)
        usage = {**given, "cached_tokens": read, "cache_write_tokens": written}
        if "input_tokens" in given:  # keep the counts consistent: input includes both
            usage["input_tokens"] = max(given["input_tokens"], read + written)
        return dataclasses.replace(turn, usage=usage)

    def _check(self, api: Api, body: dict[str, Any]) -> WireError | None:
        error = _CHECKS[api](body)
        if error is None and api == "responses":
            with self._lock:
                issued = dict(self._reasoned)
            error = _wire_openai.check_reasoning(body, issued)
        if error is None and api == "chat" and "thought_signatures" in self._quirks:
            with self._lock:
                signed = dict(self._signed)
            if signed:
                error = _wire_openai.check_signatures(body, signed)
        return error or _wire_media.check_media(api, body) or _wire_schema.check_output(api, body)

    def _error(self, api: Api, error: WireError, seq: int, delay: float = 0.0) -> _Reply:
        payload = _error_payload(api, error, seq)
        try:
            self._validate(api, "error", [payload])
        except Exception as exc:
            self._errors.append(exc)
        headers = [_request_id(api, seq), ("Content-Type", "application/json")]
        if error.retry is not None:
            headers.append(("x-should-retry", "true" if error.retry else "false"))
        if error.retry_after is not None:
            headers.append(("retry-after", f"{error.retry_after:g}"))
        elif error.retry is None and (error.status == 429 or error.status >= 500):
            headers.append(("retry-after-ms", _RETRY_AFTER_MS))
        return _Reply(error.status, headers, _dumps(payload), delay=delay)


class _ScriptExhausted(Exception):
    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.count = count


class _HTTPServer(socketserver.ThreadingMixIn, HTTPServer):
    """Threaded HTTP server that tracks its connections so close() can drop them."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        fake: FakeLLMServer,
    ) -> None:
        self.fake = fake
        self.connections = 0
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(address, handler)
        self.timeout = 1.0  # handle_request() wakes up to notice close()

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a DNS lookup: skip it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self.connections += 1
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        with self._open_lock:
            sockets = list(self._open)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if exc is not None and not isinstance(exc, OSError):
            self.fake.errors.append(exc)


class _RequestHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive handler; each response goes out in as few writes as possible."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "nbagent-fake-llm"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: no access log on stderr."""

    def do_POST(self) -> None:
        raw = self._read_body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        reply = self.server.fake._handle(self.command, self.path, headers, raw)
        try:
            self._send(reply)
        except OSError:  # the client went away
            self.close_connection = True

    do_GET = do_POST
    do_PUT = do_POST
    do_DELETE = do_POST

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(parts)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _head(self, reply: _Reply, framing: tuple[str, str]) -> bytes:
        try:
            phrase = HTTPStatus(reply.status).phrase
        except ValueError:  # e.g. 529
            phrase = ""
        lines = [f"HTTP/1.1 {reply.status} {phrase}", f"Server: {self.server_version}"]
        lines += [f"{name}: {value}" for name, value in (*reply.headers, framing)]
        if self.close_connection:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _send(self, reply: _Reply) -> None:
        if reply.delay:
            time.sleep(reply.delay)
        write = self.wfile.write
        if reply.events is None:
            head = self._head(reply, ("Content-Length", str(len(reply.body))))
            if reply.fail:
                write(head + reply.body[: len(reply.body) // 2])
                return self._abort()
            write(head + reply.body)
            return None
        head = self._head(reply, ("Transfer-Encoding", "chunked"))
        chunks = [b"%x\r\n%s\r\n" % (len(event), event) for event in reply.events]
        if reply.fail:
            write(head + b"".join(chunks[: min(_MID_STREAM_EVENTS, len(chunks) - 1)]))
            return self._abort()
        if not reply.chunk_delay:
            write(head + b"".join(chunks) + b"0\r\n\r\n")
            return None
        write(head)
        for chunk in chunks:
            time.sleep(reply.chunk_delay)
            write(chunk)
        write(b"0\r\n\r\n")
        return None

    def _abort(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
