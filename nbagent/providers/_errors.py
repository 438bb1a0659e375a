"""The one boundary where SDK exceptions become nbagent's own.

Every request an adapter sends runs inside :func:`sdk_errors`; whatever the
``openai`` or ``anthropic`` SDK raises leaves it as one of::

    ProviderError
    ├── AuthenticationError      401/403, or no API key configured
    ├── RateLimitError           429 (after the SDK's own retries)
    ├── QuotaError               429 insufficient_quota: no credit left (never retried)
    ├── BadRequestError          400/404/409/413/422 and other 4xx
    ├── ProviderConnectionError  unreachable, timed out, or the stream broke off
    └── ServerError              5xx, 529 overloaded, an error event mid-stream

The provider's message is kept (``Error code: 429 - Rate limit reached...``),
the HTTP status is on ``status_code``; what else a person needs of the SDK's
exception is kept on the error too: ``sdk_error`` (its class,
``anthropic.InternalServerError``), ``request_id`` (the provider's, for its
support), ``body`` (the error body, scrubbed) and ``headers`` (the response's, its
``x-ratelimit-*``; a secret's as ``***``: :func:`response_headers`). The mapping goes by class
name and status code, so neither SDK is imported here.

Keys never leave: every error text that leaves the block, whatever raised it
(an HTTP status error, an error inside a 200 body or an SSE ``error`` event, a
broken connection, an answer that does not parse), goes through one scrubber,
:func:`scrub`: the configured key, anything shaped like an API key
(``sk-...``, ``sk-ant-...``, a bearer token) and URL credentials become
``***``. Nor does anything the error chains lead to one (:func:`holds_secret`):
the SDK's exception keeps the request it failed on, and that request's headers
hold the key (``authorization``, ``x-api-key``); its ``__context__`` keeps
httpx's error, with the same request. An error reporter (Sentry, rich's
``show_locals``) walks all of that, so such an exception is not chained: the
SDK's exception stays ``__cause__`` only where nothing reachable from it holds a
secret (a local server sent no key). The secrets the block was given show in
no traceback's locals either (:class:`Hidden`).
"""

from __future__ import annotations

import collections
import contextlib
import heapq
import itertools
import types
from collections.abc import Iterable, Iterator
from typing import Any

from .._errors import (
    AuthenticationError,
    BadRequestError,
    ProviderConnectionError,
    ProviderError,
    QuotaError,
    RateLimitError,
    ResponseHeaders,
    ServerError,
    reveals,
    scrub,
    scrub_error,
)
from .._secrets import redact_keys, redacted, secret_field

_BY_TYPE = {
    # the ``type`` of an error object (Anthropic, and OpenAI's stream error events)
    "authentication_error": AuthenticationError,
    "permission_error": AuthenticationError,
    "rate_limit_error": RateLimitError,
    "overloaded_error": ServerError,
    "api_error": ServerError,
    "server_error": ServerError,
    "timeout_error": ServerError,
    "invalid_request_error": BadRequestError,
    "not_found_error": BadRequestError,
    "request_too_large": BadRequestError,
}
_HINTS: dict[type[ProviderError], str] = {
    AuthenticationError: "check the API key (argument api_key= or the {env} environment variable)",
    QuotaError: "the account has no quota left: waiting or retrying does not help; check the "
    "plan, billing and spending limits of the key's account",
}
NO_QUOTA = "insufficient_quota"
"""OpenAI's error ``code`` and ``type`` for an account with no credit left (with a 429)."""


def classify(exc: BaseException) -> type[ProviderError] | None:
    """The nbagent class for an SDK exception, or None if it is not an SDK error."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    module = type(exc).__module__.split(".", 1)[0]
    if module not in ("openai", "anthropic", "httpx", "httpx2", "httpcore"):
        return None
    if "APIConnectionError" in names or "APITimeoutError" in names:
        return ProviderConnectionError
    if module in ("httpx", "httpx2", "httpcore"):
        return ProviderConnectionError
    status = getattr(exc, "status_code", None)
    if status == 429 and _no_quota(getattr(exc, "body", None)):
        return QuotaError
    if isinstance(status, int) and status >= 400:
        return _by_status(status)
    kind = _error_type(getattr(exc, "body", None))
    if kind in _BY_TYPE:
        return _BY_TYPE[kind]
    if "APIStatusError" in names or "APIError" in names:
        # an error reported inside a 200 stream
        return ServerError
    if any("Credential" in n for n in names):
        return AuthenticationError
    if "OpenAIError" in names or "AnthropicError" in names:
        msg = str(exc).lower()
        if "api_key" in msg or "credentials" in msg or "authentication" in msg:
            return AuthenticationError
        return ProviderError
    return None


_BY_CODE = {
    # the ``code`` of an OpenAI error object (a stream's error event, a failed response)
    NO_QUOTA: QuotaError,
    "invalid_api_key": AuthenticationError,
    "unsupported_country_region_territory": AuthenticationError,
    "context_length_exceeded": BadRequestError,
    "model_not_found": BadRequestError,
    "invalid_prompt": BadRequestError,
    "invalid_type": BadRequestError,
    "integer_below_min_value": BadRequestError,
    "integer_above_max_value": BadRequestError,
    "string_above_max_length": BadRequestError,
}


def for_error_type(kind: str, code: str = "") -> type[ProviderError]:
    """The nbagent class for an error object's ``type`` (e.g. ``overloaded_error``), else
    for its ``code`` (OpenAI's: ``rate_limit_exceeded``, ``invalid_api_key``,
    ``context_length_exceeded``...); an error neither names is a :class:`ServerError`."""
    if kind in _BY_TYPE:
        return _BY_TYPE[kind]
    for name in (code, kind):
        if name in _BY_CODE:
            return _BY_CODE[name]
        if "rate_limit" in name:
            return RateLimitError
        if name.startswith("invalid_") or "image" in name:  # invalid_image, image_too_large...
            return BadRequestError
    return ServerError


def _by_status(status: int) -> type[ProviderError]:
    if status in (401, 403):
        return AuthenticationError
    if status == 429:
        return RateLimitError
    if status >= 500:
        return ServerError
    if status == 408:
        return ProviderConnectionError
    return BadRequestError


def _no_quota(body: Any) -> bool:
    """Whether an error body (the SDK's ``exc.body``: the error object, or a dict holding
    it under ``error``) says the account has no quota left."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            return NO_QUOTA in (inner.get("code"), inner.get("type"))
    return False


def _quota_response(response: Any) -> bool:
    """Whether an ``httpx`` response (read) is a 429 saying the account has no quota left."""
    import json

    try:
        return _no_quota(json.loads(response.content))
    except (ValueError, TypeError, AttributeError):
        return False


def _not_retried(response: Any) -> None:
    # the SDK obeys a server's ``x-should-retry``; a 429 it would retry by its status
    response.headers["x-should-retry"] = "false"


def stop_quota_retries(client: Any, *, asynchronous: bool = False) -> Any:
    """``client`` (an ``openai`` SDK client nbagent made), with its HTTP client told not to
    retry a 429 ``insufficient_quota``.

    The SDK retries every 429 (``max_retries`` times, with backoff), but an account with
    no credit left answers the same each time. A response hook marks such an answer
    ``x-should-retry: false``, which the SDK obeys; every other 429 is retried as before.
    The hook never raises (the SDK would read that as a broken connection, and retry).
    A client without the usual HTTP client is left as it is.
    """
    http = getattr(client, "_client", None)
    hooks = getattr(http, "event_hooks", None)
    if not isinstance(hooks, dict) or not isinstance(hooks.get("response"), list):
        return client
    if asynchronous:

        async def hook_async(response: Any) -> None:
            if response.status_code != 429:
                return
            with contextlib.suppress(Exception):
                await response.aread()
                if _quota_response(response):
                    _not_retried(response)

        hooks["response"].append(hook_async)
    else:

        def hook(response: Any) -> None:
            if response.status_code != 429:
                return
            with contextlib.suppress(Exception):
                response.read()
                if _quota_response(response):
                    _not_retried(response)

        hooks["response"].append(hook)
    return client


def _error_type(body: Any) -> str | None:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            kind = inner.get("type")
            return kind if isinstance(kind, str) else None
    return None


def _message(exc: BaseException) -> str:
    """The SDK's message, with the error object's own message when there is one."""
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    if (
        isinstance(status, int)
        and isinstance(inner, dict)
        and isinstance(inner.get("message"), str)
    ):
        kind = inner.get("type") or inner.get("code")
        detail = f" ({kind})" if isinstance(kind, str) and kind else ""
        return f"Error code: {status} - {inner['message']}{detail}"
    return str(exc) or type(exc).__name__


def retry_after(exc: BaseException) -> float | None:
    """Seconds an HTTP error's ``retry-after-ms`` or ``retry-after`` header asks to wait.

    ``retry-after`` may be seconds or an HTTP date; anything unreadable is ``None``.
    """
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            import email.utils
            import time

            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, AttributeError):
        return None


def map_error(
    exc: BaseException, *, provider: str, secrets: Iterable[str | None] = (), env: str = ""
) -> ProviderError | None:
    """The nbagent exception for an SDK exception (None when ``exc`` is not one)."""
    cls = classify(exc)
    if cls is None:
        return None
    message = _message(exc)
    if cls is ProviderConnectionError:
        cause = exc.__cause__ or exc.__context__
        if cause is not None and str(cause) and str(cause) not in message:
            message = f"{message} ({type(cause).__name__}: {cause})"
    hint = _HINTS.get(cls)
    if hint and env:
        message = f"{message}; {hint.format(env=env)}"
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) and status >= 400 else None
    mapped = cls(
        f"{provider}: {scrub(message, secrets)}",
        provider=provider,
        status_code=status,
        retry_after=retry_after(exc)
        if status in (429, 503, 529) and cls is not QuotaError
        else None,
    )
    mapped.sdk_error = f"{type(exc).__module__.split('.', 1)[0]}.{type(exc).__qualname__}"
    mapped.request_id = _request_id(exc)
    mapped.headers = response_headers(getattr(exc, "response", None), tuple(secrets))
    body = getattr(exc, "body", None)
    if body is not None:
        mapped.body = scrubbed(body, tuple(secrets))
    return mapped


def _request_id(exc: BaseException) -> str | None:
    """The provider's id of the failed request (both SDKs' ``request_id``, else the
    response's ``x-request-id`` / ``request-id`` header)."""
    found = getattr(exc, "request_id", None)
    if isinstance(found, str) and found:
        return found
    headers = getattr(getattr(exc, "response", None), "headers", None)
    with contextlib.suppress(Exception):
        for name in ("x-request-id", "request-id"):
            value = headers.get(name) if headers is not None else None
            if isinstance(value, str) and value:
                return value
    return None


def secret_header(name: str, value: str, secrets: Iterable[str | None] = ()) -> bool:
    """Whether a header given a value is a secret's: named as one
    (:func:`~nbagent._secrets.secret_field`: ``authorization``, ``proxy-authorization``,
    ``cookie``, ``set-cookie``, ``x-api-key``...), or its line showing one (``secrets``, a
    key's shape, ``password=...``: :func:`scrub`). The one judgement of the headers an error
    keeps (:func:`response_headers`) and of those that keep it from being chained
    (:func:`holds_secret`)."""
    if not value.strip():
        return False
    line = f"{name}: {value}"
    return secret_field(name) or scrub(line, secrets) != line


def response_headers(response: Any, secrets: tuple[str | None, ...]) -> ResponseHeaders | None:
    """An HTTP response's headers (httpx's) as a :class:`ProviderError` keeps them
    (``err.headers``): each by name, but one named as a secret's (``set-cookie``,
    ``x-api-key``, ``authorization``: :func:`~nbagent._secrets.secret_field`) with a
    value, or whose value holds a secret or anything :func:`scrub` hides (the key, a key's
    shape, ``password=...``), as ``***``. None when there is no response or its headers
    cannot be read."""
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        items = headers.multi_items() if hasattr(headers, "multi_items") else headers.items()
        merged: dict[str, str] = {}  # a header sent twice as one, judged as one
        for name, value in items:
            name = (name.decode("latin-1") if isinstance(name, bytes) else str(name)).lower()
            value = value.decode("latin-1") if isinstance(value, bytes) else str(value)
            if name not in merged or not merged[name].strip():
                merged[name] = value
            elif value.strip():
                merged[name] = f"{merged[name]}, {value}"
        kept: list[tuple[str, str]] = []
        for name, value in merged.items():
            if secret_header(name, value, secrets):
                value = "***"
            kept.append((name, value))
    except Exception:  # headers of a shape nbagent does not know: none kept
        return None
    return ResponseHeaders(kept)


_BODY_DEPTH = 50
"""How deep an error body is copied by :func:`scrubbed` (deeper: ``…``)."""


def scrubbed(value: Any, secrets: tuple[str | None, ...], depth: int = 0) -> Any:
    """An SDK error's ``body`` (a dict from JSON, or text) as the error keeps it: each
    string through :func:`scrub`, and what stands under a secret's name as ``***``
    (:func:`~nbagent._secrets.redacted`)."""
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, bytes):
        return scrub(value.decode("utf-8", "replace"), secrets)
    if depth >= _BODY_DEPTH and isinstance(value, dict | list | tuple):
        return "…"
    if isinstance(value, dict):
        return redacted(
            {scrub(str(k), secrets): scrubbed(v, secrets, depth + 1) for k, v in value.items()}
        )
    if isinstance(value, list | tuple):
        return [scrubbed(v, secrets, depth + 1) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return scrub(repr(value), secrets)


_WALK_DEPTH = 8
"""How far :func:`holds_secret` follows an exception's attributes (an SDK error's
``response.request.headers`` is 3 steps; httpx's stream of a request body 3)."""


def holds_secret(exc: BaseException, secrets: Iterable[str | None]) -> bool:
    """Whether anything reachable from ``exc`` holds a secret: its text (:func:`reveals`),
    or the values it keeps, at any depth of ``__cause__`` / ``__context__`` / a group's
    members, and up to :data:`_WALK_DEPTH` attributes into each (an SDK error's ``request``
    and ``response``, their headers and bodies, its ``body``; a ``JSONDecodeError``'s
    ``doc``). A secret here is: one of ``secrets`` in a string or bytes, anything
    :func:`~nbagent._secrets.redact_keys` hides (a key's shape, ``password=...``), or a
    header named as a secret's (``authorization``, ``x-api-key``, ``cookie``) with a value.

    Each object is read at the fewest steps it is reached by (the walk goes level by
    level), so a long way to an object never cuts off a short one. Only what an object
    stores is read, statically: its own ``__dict__``, its slots, a built-in container's
    items (no property, no ``__getattr__``, no overridden ``items()``, which might read a
    stream or raise); types, modules and functions are not entered. It fails closed: what
    cannot be read (a text that raises, headers whose ``multi_items()`` fails) counts as
    a secret.
    """
    try:
        return _holds_secret(exc, tuple(s for s in secrets if s and len(s) >= 4))
    except Exception:
        return True


_DONE = frozenset({bool, int, float, complex, type(None), type(Ellipsis)})
_BUILTIN_CONTAINERS: tuple[Any, ...] = (list, tuple, set, frozenset, collections.deque)
_CAUSE = BaseException.__dict__["__cause__"]
_CONTEXT = BaseException.__dict__["__context__"]
_ARGS = BaseException.__dict__["args"]
_MEMBERS = BaseExceptionGroup.__dict__["exceptions"]


def _holds_secret(exc: BaseException, known: tuple[str, ...]) -> bool:
    if reveals(exc, known):
        return True
    # Level by level (a heap of (level, order, object)): each object is entered once, at
    # the lowest level it is reached at, so what it holds is read as far as that allows.
    # ``kept`` holds what was entered, so no id is reused by a new object meanwhile.
    best: dict[int, int] = {}
    kept: list[Any] = []
    order = itertools.count()
    todo: list[tuple[int, int, Any]] = []
    # read last: a key's header is found first, and a long history's body (megabytes) is
    # not read for it
    long: list[str | bytes | bytearray | memoryview] = []

    def reach(obj: Any, level: int) -> None:
        if obj is None or level > _WALK_DEPTH or type(obj) in _DONE:
            return
        if best.get(id(obj), _WALK_DEPTH + 1) <= level:
            return
        best[id(obj)] = level
        kept.append(obj)
        heapq.heappush(todo, (level, next(order), obj))

    reach(exc, 0)
    while todo:
        level, _, obj = heapq.heappop(todo)
        if best.get(id(obj)) != level:
            continue  # reached again at a lower level, and entered there
        best[id(obj)] = -1  # entered: never again
        tp = type(obj)
        if issubclass(tp, str | bytes | bytearray | memoryview):
            if len(obj) > _LONG:
                long.append(obj)
            elif _secret_text(obj, known):
                return True
            continue
        if issubclass(tp, type | types.ModuleType) or (
            callable(obj) and not issubclass(tp, BaseException)
        ):
            continue
        if issubclass(tp, BaseException):
            # the chain is followed to its end: each exception's attributes from level 0
            reach(_CAUSE.__get__(obj), 0)
            reach(_CONTEXT.__get__(obj), 0)
            reach(_ARGS.__get__(obj), 1)
            if issubclass(tp, BaseExceptionGroup):
                for member in _MEMBERS.__get__(obj):
                    reach(member, 0)
        elif _secret_headers(obj):
            return True
        if issubclass(tp, dict):
            for pair in list(dict.items(obj)):
                for x in pair:
                    reach(x, level + 1)
        else:
            for base in _BUILTIN_CONTAINERS:
                if issubclass(tp, base):
                    for x in list(base.__iter__(obj)):
                        reach(x, level + 1)
                    break
        for x in _stored(obj):
            reach(x, level + 1)
    return any(_secret_text(text, known) for text in long)


def _stored(obj: Any) -> list[Any]:
    """The values ``obj`` stores: its instance ``__dict__``'s and its slots', read through
    the C descriptors that hold them (never a property, ``__getattr__`` or an overridden
    ``__getattribute__``). An attribute named ``__dict__`` that is no such descriptor
    cannot be read so: a ``TypeError`` (``holds_secret`` then fails closed)."""
    values: list[Any] = []
    tp = type(obj)
    for cls in tp.__mro__:
        attr = cls.__dict__.get("__dict__")
        if attr is None:
            continue
        if not isinstance(attr, types.GetSetDescriptorType):
            raise TypeError(f"{tp.__qualname__}.__dict__ is computed")
        state = attr.__get__(obj, tp)
        if isinstance(state, dict):
            values += list(dict.values(state))
        break
    for cls in tp.__mro__:  # slots (and a C exception's members: errno, filename...)
        for attr in list(cls.__dict__.values()):
            if isinstance(attr, types.MemberDescriptorType):
                with contextlib.suppress(AttributeError):  # a slot never set
                    values.append(attr.__get__(obj, tp))
    return values


_LONG = 4096
"""A string :func:`holds_secret` reads after all the rest (a request's body)."""


def _secret_text(value: str | bytes | bytearray | memoryview, secrets: tuple[str, ...]) -> bool:
    text = value if isinstance(value, str) else bytes(value).decode("utf-8", "replace")
    return any(s in text for s in secrets) or redact_keys(text) != text


def _secret_headers(obj: Any) -> bool:
    """Whether ``obj``, if it is an HTTP client's headers (a class with ``multi_items()``
    and ``get``: httpx's), has a header named as a secret's with a value, or a value that
    shows one. The method is found on the class, never asked of the object; if it raises,
    that is an exception for :func:`holds_secret` (which then fails closed)."""
    items = _on_class(type(obj), "multi_items")
    if not isinstance(items, types.FunctionType) or _on_class(type(obj), "get") is None:
        return False
    for name, value in list(items(obj)):
        if isinstance(name, bytes):
            name = name.decode("latin-1")
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if isinstance(name, str) and isinstance(value, str) and secret_header(name, value):
            return True
    return False


def _on_class(tp: type, name: str) -> Any:
    """``name`` as ``tp`` or a class it derives from defines it (never an instance's)."""
    for cls in tp.__mro__:
        if name in cls.__dict__:
            return cls.__dict__[name]
    return None


class Hidden(tuple[str, ...]):
    """The secrets :func:`sdk_errors` was given, as a traceback's locals show them (rich's
    ``show_locals``, an error reporter's, ``traceback`` with ``capture_locals``): counted,
    never shown."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<{len(self)} secrets>"

    __str__ = __repr__


@contextlib.contextmanager
def sdk_errors(provider: str, secrets: Iterable[str | None] = (), env: str = "") -> Iterator[None]:
    """Re-raise SDK exceptions raised inside the block as nbagent exceptions.

    The error chains nothing that holds a secret (:func:`holds_secret`): the SDK's
    exception is its ``__cause__`` only when nothing reachable from it does; an error the
    adapter raised keeps its ``__cause__`` / ``__context__`` on the same terms.
    """
    secrets = Hidden(s for s in secrets if s)  # the frame's locals show in tracebacks
    try:
        yield
    except ProviderError as exc:  # raised by the adapter: 200 error bodies, stream events...
        try:
            scrub_error(exc, secrets)
            unchain = any(holds_secret(c, secrets) for c in (exc.__cause__, exc.__context__) if c)
        except Exception:  # what it chains could not be read: chained no more (fail closed)
            unchain = True
        if unchain:
            exc.__cause__ = exc.__context__ = None
            exc.__suppress_context__ = True
        raise
    except Exception as exc:
        # Nothing raised in here may leave: it would have the SDK's exception as its
        # ``__context__``. Each step that might raise is caught (an exception caught in
        # here is dropped with its context), and what cannot be read is kept from the error.
        try:
            mapped = map_error(exc, provider=provider, secrets=secrets, env=env)
        except Exception:
            mapped = _unreadable(exc, provider)
        if mapped is None:
            raise
        if not holds_secret(exc, secrets):  # (which fails closed: it never raises)
            raise mapped from exc
        with contextlib.suppress(Exception):
            if not reveals(exc, secrets):  # the key is in what it keeps, not what it says
                mapped._sdk_traceback = _written_out(exc, secrets)
        # The SDK's exception holds a secret (its text, or the request it keeps: the key in
        # its headers): chain nothing. ``from None`` alone would still keep it as
        # ``__context__``, set by any raise inside this handler; so the handled exception
        # becomes a placeholder first, with no context of its own.
        try:
            raise NotChained(
                f"the SDK's exception ({mapped.sdk_error}) is not chained: it holds a secret "
                "(the API key in its request's headers, or in its text or body); the error "
                "keeps its status_code, request_id, headers and body"
            )
        except NotChained as placeholder:
            placeholder.__context__ = None
            raise mapped from None


def _unreadable(exc: BaseException, provider: str) -> ProviderError:
    """The error for an SDK exception :func:`map_error` could not read (its text, its
    status raised): its class by name, and nothing of what it says or keeps."""
    name = f"{type(exc).__module__.split('.', 1)[0]}.{type(exc).__qualname__}"
    cls: type[ProviderError] = ProviderError
    with contextlib.suppress(Exception):
        cls = classify(exc) or ProviderError
    mapped = cls(
        f"{provider}: {name}, which nbagent could not read (what it says is left out: it "
        "might hold a secret)",
        provider=provider,
    )
    mapped.sdk_error = name
    return mapped


def _written_out(exc: BaseException, secrets: Iterable[str | None]) -> str:
    """``exc``'s traceback (and its chain's) as text, scrubbed: what ``details()`` shows
    of an SDK exception that is not chained."""
    import traceback

    return scrub("".join(traceback.format_exception(exc)), secrets)


class NotChained(Exception):
    """What an error whose cause held a secret has as its ``__context__`` instead."""


__all__ = [
    "classify",
    "for_error_type",
    "holds_secret",
    "map_error",
    "response_headers",
    "retry_after",
    "scrub",
    "sdk_errors",
    "stop_quota_retries",
]
