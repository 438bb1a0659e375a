"""A request posted through an SDK client's own HTTP client, its per-request work done once.

The Stainless SDKs (``anthropic``, ``openai``) rebuild the same things for
every ``client.post(...)``: request options (a pydantic model, copied twice),
the header layers (platform, auth, version, retry count), the URL join. For a
body nbagent has already serialised, none of that changes between requests of
a client, so :class:`DirectPost` resolves it once per client (the
SDK's own ``_build_headers``; a retry's headers, with its count, when it happens) and each request
is only the SDK's ``httpx`` client building and sending it: about a third of
the client's CPU per request on the loopback.

The SDK's behaviour is kept: its httpx client (connection pool, cookies,
timeouts, proxies), its headers, its retry policy (``max_retries``,
``_should_retry``, ``retry-after`` and the backoff of
``_calculate_retry_timeout``), its errors (``APITimeoutError``,
``APIConnectionError``, the status errors of
``_make_status_error_from_response``). Clients whose ``post`` does more
(Bedrock and Vertex sign or rewrite requests, a token cache's auth, middleware,
default query parameters) are not served here:
:func:`direct_post` answers ``None`` for them and the adapter posts through
the SDK as before. (The SDK's OpenTelemetry spans are only for its own methods:
a ``post`` without a span name, like nbagent's, never has one.)

The retry loop is written once, as a generator of steps (a request to send, or
seconds to wait) that a sync and an async driver run.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Generator
from typing import Any

from ._sdk import Prepared, joined_url

Errors = tuple[type[Exception], Any, Any]
"""An SDK's ``(base error, timeout error, connection error)`` classes."""

Step = Any
"""An ``httpx`` request to send, or ``(seconds, response)``: close the failed response (if
any) and wait that long before the next attempt."""


class DirectPost:
    """Posts prepared bodies through one SDK client's ``httpx`` client (see the module).

    Args:
        client: The SDK client (sync or async); its settings are read once.
        errors: The SDK's ``(base error, timeout error, connection error)`` classes.
    """

    def __init__(self, client: Any, errors: Errors):
        import importlib

        sdk = importlib.import_module(type(client).__module__.split(".")[0] + "._models")
        self._client = client
        self._http = client._client
        self._base, self._timeout_error, self._connection_error = errors
        self._key = _settings(client)
        # what post() makes of a body and no other option (preparing it changes nothing)
        self._options = sdk.FinalRequestOptions.construct(method="post", url="/", content=b"")
        self._timeout = client.timeout
        self._first = client._build_headers(self._options, retries_taken=0)
        self._templates: dict[Any, _Template] = {}

    def _request(self, url: Any, headers: Any, body: bytes, first: bool) -> Any:
        """The ``httpx`` request :meth:`httpx.Client.build_request` would make, built from a
        template of it taken once per URL: the client's and the SDK's headers merged, ``Host``
        and the timeout resolved; only ``Content-Length`` and the body change per request. A
        retry (its own headers), an empty body (headers in another order) and a client holding
        cookies take ``build_request`` itself."""
        http = self._http
        if not first or not body or http.cookies:
            return http.build_request(
                "POST", url, headers=headers, content=body, timeout=self._timeout
            )
        template = self._templates.get(url)
        if template is None:
            sample = http.build_request(
                "POST", url, headers=headers, content=b"{}", timeout=self._timeout
            )
            template = self._templates[url] = _Template.of(sample)
        return template.request(url, body)

    def current(self, client: Any) -> bool:
        """Whether what was resolved once still holds for ``client`` (its key, URL, retries)."""
        return _settings(client) == self._key

    def _headers_for(self, retries_taken: int) -> Any:
        if retries_taken == 0:
            return self._first
        return self._client._build_headers(self._options, retries_taken=retries_taken)

    def steps(self, prepared: Prepared) -> Generator[Step, Any, Any]:
        """The attempts for ``prepared``: yields requests (sent back: the response or the
        exception sending raised) and waits; returns the last response (maybe an error status)."""
        client = self._client
        url = joined_url(client, prepared.path)
        retries = self._key[-1]
        for taken in range(retries + 1):
            request = self._request(url, self._headers_for(taken), prepared.body, taken == 0)
            outcome = yield request
            left = retries - taken
            if isinstance(outcome, BaseException):
                kind = self._timeout_error if _is_timeout(outcome) else self._connection_error
                error = kind(request=request)
                if left <= 0:
                    raise error from outcome
                yield client._calculate_retry_timeout(left, self._options, None), None
                continue
            if outcome.is_success or left <= 0 or not client._should_retry(outcome):
                return outcome
            yield client._calculate_retry_timeout(left, self._options, outcome.headers), outcome
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    def send(self, prepared: Prepared) -> Any:
        """Post ``prepared`` (sync client); the response, unread when streaming.

        Raises:
            The SDK's errors, as ``client.post`` would.
        """
        steps = self.steps(prepared)
        step = next(steps)
        while True:
            outcome: Any = None
            if isinstance(step, tuple):
                if step[1] is not None:
                    step[1].close()
                time.sleep(step[0])
            else:
                try:
                    outcome = self._http.send(step, stream=prepared.stream)
                except self._base:
                    raise
                except Exception as exc:
                    outcome = exc
            try:
                step = steps.send(outcome)
            except StopIteration as done:
                response = done.value
                break
        if not response.is_success:
            response.read()
            raise self._client._make_status_error_from_response(response)
        return response

    async def send_async(self, prepared: Prepared) -> Any:
        """Async twin of :meth:`send` (async client)."""
        steps = self.steps(prepared)
        step = next(steps)
        while True:
            outcome: Any = None
            if isinstance(step, tuple):
                if step[1] is not None:
                    await step[1].aclose()
                await asyncio.sleep(step[0])
            else:
                try:
                    outcome = await self._http.send(step, stream=prepared.stream)
                except self._base:
                    raise
                except Exception as exc:
                    outcome = exc
            try:
                step = steps.send(outcome)
            except StopIteration as done:
                response = done.value
                break
        if not response.is_success:
            await response.aread()
            raise self._client._make_status_error_from_response(response)
        return response


class _Template:
    """A request as ``build_request`` made it for a non-empty body: its header list (where
    ``Content-Length`` sits in it) and extensions."""

    def __init__(self, raw: list[tuple[bytes, bytes]], length_at: int, extensions: Any):
        self.raw = raw
        self.length_at = length_at
        self.extensions = extensions

    @classmethod
    def of(cls, request: Any) -> _Template:
        raw = list(request.headers.raw)
        at = [k.lower() for k, _ in raw].index(b"content-length")
        return cls(raw, at, request.extensions)

    def request(self, url: Any, body: bytes) -> Any:
        import httpx2

        raw = self.raw.copy()
        raw[self.length_at] = (raw[self.length_at][0], b"%d" % len(body))
        request = httpx2.Request(
            "POST", url, headers=raw, stream=httpx2.ByteStream(body), extensions=self.extensions
        )
        request.read()  # the body is there to read, as build_request leaves it
        return request


def _is_timeout(exc: BaseException) -> bool:
    import httpx2

    return isinstance(exc, httpx2.TimeoutException)


def _settings(client: Any) -> tuple[Any, ...]:
    """What the resolved headers and retries depend on (a changed key is seen at once)."""
    return (
        client.api_key,
        getattr(client, "auth_token", None),
        str(client.base_url),
        client.timeout,
        client.max_retries,
    )


_CACHE: weakref.WeakKeyDictionary[Any, DirectPost | None] = weakref.WeakKeyDictionary()


def direct_post(
    client: Any,
    plain: tuple[type, ...],
    errors: Errors,
) -> DirectPost | None:
    """The :class:`DirectPost` of ``client``, or ``None`` when its ``post`` must be used.

    Args:
        client: An SDK client.
        plain: The client classes whose ``post`` adds nothing per request but what
            :class:`DirectPost` resolves once (subclasses are not served).
        errors: The SDK's ``(base error, timeout error, connection error)`` classes.
    """
    try:
        cached = _CACHE.get(client)
    except TypeError:  # not weakly referable
        return None
    if cached is not None and cached.current(client):
        return cached
    if cached is None and client in _CACHE:
        return None
    direct = DirectPost(client, errors) if _servable(client, plain) else None
    _CACHE[client] = direct
    return direct


def _servable(client: Any, plain: tuple[type, ...]) -> bool:
    if type(client) not in plain:
        return False
    try:
        return (
            not client._middleware
            and client.custom_auth is None
            and client._idempotency_header is None
            and not client.default_query
            and "_" not in client.base_url.host
            and all(
                callable(getattr(client, name, None))
                for name in (
                    "_build_headers",
                    "_should_retry",
                    "_calculate_retry_timeout",
                    "_make_status_error_from_response",
                )
            )
        )
    except Exception:  # an SDK of another shape: post through it
        return False


__all__ = ["DirectPost", "direct_post"]
