"""A raised ProviderError leads to no secret, whatever a program walks from it.

Error reporters (Sentry, rich's ``show_locals``, a traceback printed with its
locals) read more than ``str(err)``: the chained exceptions (``__cause__``,
``__context__``) and their attributes. The Anthropic SDK's status and connection
errors keep the request they failed on, its ``authorization`` header holding
the key; a ``json.JSONDecodeError`` keeps the body it could not parse as ``doc``.
Each failure is sent through the real SDKs to the loopback fake server, on every
wire, sync and async, streamed and not, and everything reachable from the error
is searched for the key.
"""

from __future__ import annotations

import asyncio
import dataclasses
import traceback
from typing import Any

import pytest
from _provider_harness import make_provider

from nbagent import ChatMessage, ModelRequest, ProviderError
from nbagent.testing import FakeLLMServer, Turn

KEY = "PLAINKEY-abcdefghijklmnop-9876"
"""Shaped like no known key: only the configured secret itself can be matched."""
USER = ChatMessage("user", "hi")

FAILURES = {
    "400": Turn(status=400),
    "429": Turn(status=429, retry_after=0),
    "500": Turn(status=500),
    "dropped": Turn(text="This answer will not arrive in full.", fail_mid_stream=True),
    "not-json": Turn(raw_body=f"<html>proxy error for {KEY}</html>"),
}


def reachable(root: Any, needle: str, depth: int = 10) -> list[str]:
    """The paths from ``root`` (an exception) to a string or bytes holding ``needle``:
    through ``__cause__``, ``__context__``, ``args``, an exception group's members and
    every object's attributes (an exception's ``request.headers``, ``response``,
    ``body``, ``doc``...), containers item by item."""
    hits: list[str] = []
    seen: set[int] = set()
    todo: list[tuple[Any, str, int]] = [(root, "err", 0)]
    while todo:
        obj, path, level = todo.pop()
        if obj is None or level > depth or id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, str | bytes | bytearray | memoryview):
            text = obj if isinstance(obj, str) else bytes(obj).decode("latin-1")
            if needle in text:
                hits.append(path)
            continue
        if isinstance(obj, type) or (callable(obj) and not isinstance(obj, BaseException)):
            continue
        if isinstance(obj, dict):
            todo += [(v, f"{path}[{k!r}]", level + 1) for k, v in list(obj.items())]
            todo += [(k, f"{path}.keys()", level + 1) for k in list(obj)]
            continue
        if isinstance(obj, list | tuple | set | frozenset):
            todo += [(v, f"{path}[{i}]", level + 1) for i, v in enumerate(list(obj))]
            continue
        if isinstance(obj, BaseException):
            todo += [
                (obj.__cause__, f"{path}.__cause__", level + 1),
                (obj.__context__, f"{path}.__context__", level + 1),
                (obj.args, f"{path}.args", level + 1),
            ]
            if isinstance(obj, BaseExceptionGroup):
                todo.append((obj.exceptions, f"{path}.exceptions", level + 1))
            text = str(obj) + repr(obj)
            if needle in text:
                hits.append(f"str({path})")
        for name in ("request", "response", "headers", "body", "doc", "content", "text"):
            try:
                value = getattr(obj, name, None)
            except Exception:  # an unread response's .content / .text
                continue
            if value is not None and not callable(value):
                todo.append((value, f"{path}.{name}", level + 1))
        if hasattr(obj, "__dict__"):
            todo += [(v, f"{path}.{k}", level + 1) for k, v in list(vars(obj).items())]
        for slot in getattr(type(obj), "__slots__", ()):
            if isinstance(slot, str) and hasattr(obj, slot):
                todo.append((getattr(obj, slot), f"{path}.{slot}", level + 1))
    return hits


def nbagent_locals(err: BaseException) -> str:
    """The locals of nbagent's frames as a traceback with its locals shows them (rich's
    ``show_locals``, Sentry's), along the error's chain (the test's own frames left out)."""
    shown: list[str] = []
    todo = [traceback.TracebackException.from_exception(err, capture_locals=True)]
    while todo:
        exc = todo.pop()
        for frame in exc.stack:
            if "/nbagent/" in frame.filename.replace("\\", "/"):
                shown.append(repr(frame.locals))
        todo += [e for e in (exc.__cause__, exc.__context__) if e is not None]
    return "\n".join(shown)


def failed(kind: str, stream: bool, sync: bool, turn: Turn) -> ProviderError:
    with FakeLLMServer() as server:
        provider = make_provider(kind, server, api_key=KEY)
        server.script([turn])
        request = ModelRequest((USER,), stream=stream)
        try:
            if sync:
                provider.complete(request)
            else:

                async def go() -> Any:
                    return await provider.complete_async(request)

                asyncio.run(go())
        except ProviderError as err:
            return err
        finally:
            provider.close()
    raise AssertionError(f"{kind} answered {turn} without an error")


@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("kind", ["openai-chat", "openai-responses", "anthropic"])
def test_nothing_reachable_from_the_error_holds_the_key(
    kind: str, stream: bool, sync: bool, failure: str
) -> None:
    err = failed(kind, stream, sync, FAILURES[failure])
    assert reachable(err, KEY) == []
    if failure != "not-json":
        # nor do the locals of nbagent's frames show the key it was given (the block's
        # ``secrets``); a body the server echoed it in is the parser's data in its frames
        assert KEY not in nbagent_locals(err)


@pytest.mark.parametrize("kind", ["openai-chat", "openai-responses", "anthropic"])
def test_the_error_keeps_what_a_person_needs_of_the_sdk_exception(kind: str) -> None:
    """With or without the SDK's exception chained, the error says which one it was, the
    provider's request id and the error body (scrubbed)."""
    turn = Turn(status=500, error={"message": f"upstream failed for {KEY}"})
    err = failed(kind, False, True, turn)
    sdk = "anthropic" if kind == "anthropic" else "openai"
    assert err.status_code == 500
    assert err.sdk_error == f"{sdk}.InternalServerError"
    assert isinstance(err.request_id, str) and err.request_id.startswith("req_")
    assert isinstance(err.body, dict)
    assert "upstream failed for ***" in repr(err.body)
    assert KEY not in repr(err.body)


def test_an_sdk_exception_holding_no_secret_stays_chained() -> None:
    """An exception that keeps nothing secret (a connection refused before any request
    was built) is still ``__cause__``; the same one keeping a request whose headers name a
    secret (a gateway's ``x-api-key`` the provider was never told of) is not."""
    import httpx2

    from nbagent.providers._errors import NotChained, sdk_errors

    refused = httpx2.ConnectError("connection refused")
    with pytest.raises(ProviderError) as info, sdk_errors("openai", (KEY,)):
        raise refused
    assert info.value.__cause__ is refused

    request = httpx2.Request("POST", "http://127.0.0.1:9/v1", headers={"x-api-key": "gw-1234"})
    with pytest.raises(ProviderError) as info, sdk_errors("openai", (KEY,)):
        raise httpx2.ConnectError("connection refused", request=request)
    assert info.value.__cause__ is None
    assert isinstance(info.value.__context__, NotChained)
    assert reachable(info.value, "gw-1234") == []


def test_a_hosted_tools_header_in_the_request_body_unchains_the_sdk_exception() -> None:
    """The request's body may carry secrets too (a hosted MCP server's token): the SDK's
    exception keeps that request, so it is not chained either."""
    token = "MCPTOKEN-zyxwvutsrqponm-5432"
    turn = dataclasses.replace(FAILURES["500"])
    with FakeLLMServer() as server:
        provider = make_provider("openai-responses", server, api_key=KEY)
        server.script([turn])
        from nbagent.providers._errors import sdk_errors

        try:
            with pytest.raises(ProviderError) as info, sdk_errors("openai", (KEY, token)):
                provider._client.post(
                    "/responses",
                    body={"model": "gpt-4.1-mini", "input": "hi", "tools": [{"auth": token}]},
                    cast_to=object,
                )
        finally:
            provider.close()
    assert reachable(info.value, token) == []
    assert info.value.sdk_error == "openai.InternalServerError"


@pytest.mark.parametrize("kind", ["openai-chat", "anthropic"])
def test_details_still_show_the_sdk_traceback_scrubbed(kind: str) -> None:
    """``details()`` shows the SDK's frames as before, as the error's cause, though the SDK's
    exception itself is not chained."""
    err = failed(kind, False, True, Turn(status=500))
    assert err.__cause__ is None
    details = err.details()
    assert "The above exception was the direct cause of the following exception" in details
    assert "_base_client" in details or "_direct" in details  # the SDK's, or its post
    assert "InternalServerError" in details
    assert KEY not in details
