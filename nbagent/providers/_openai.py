"""OpenAI (Chat Completions or Responses) and OpenAI-compatible servers, over the ``openai`` SDK.

Chat Completions is the default API: every OpenAI-compatible server (Ollama,
vLLM, LM Studio, llama.cpp, most gateways) speaks it, it is stateless by
design (the whole transcript goes with every request, which is what a
resumable transcript needs), and each neutral message maps to exactly one wire
message, so wire JSON is cached per message. ``api="responses"`` selects the
Responses API (stateless too: ``store`` is false and the transcript is sent as
input items).

Configuration follows the SDK: ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` are
honoured, and arguments override them. A ``base_url`` (argument or
environment) whose host is not ``api.openai.com`` switches on the
OpenAI-compatible mode: ``max_tokens`` instead of ``max_completion_tokens``, no
``strict`` in tool definitions, an ``""`` instead of ``null`` assistant content
next to tool calls, and a placeholder key when none is set (local servers
need none).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from .._errors import AuthenticationError, ToolOptionError
from .._hosted import HostedTool
from .._media import check_parts
from .._optional import require
from .._output import Output
from .._reasoning import effort_of
from .._types import LLMToolResponse, Part
from ._base import DeltaSink, ModelRequest, checked_max_tokens
from ._catalog import BUILTIN_MODELS, lookup_model, warn_if_unknown
from ._clients import client_key, sync_client
from ._errors import scrub, sdk_errors, stop_quota_retries
from ._openai_wire import (
    ChatStream,
    ResponsesStream,
    chat_message,
    chat_messages,
    chat_system,
    chat_tools,
    parse_chat,
    parse_responses,
    response_format_chat,
    responses_items,
    responses_tools,
    text_format_responses,
    tool_choice_chat,
    tool_choice_responses,
)
from ._sdk import (
    MessageCache,
    Prepared,
    SDKProvider,
    StreamAccumulator,
    ToolsCache,
    array,
    client_options,
    dumps,
)

Api = Literal["chat", "responses"]
NO_KEY = "sk-no-key-required"
"""Sent to OpenAI-compatible servers when no key is configured (they ignore it)."""
_KEYLESS = "nbagent-no-api-key"
"""The key of a client made without credentials, which never sends (``SDKProvider._no_key``)."""
_OPENAI_HOSTS = ("api.openai.com",)
_REASONS = re.compile(r"(?:[\w-]+/)?(?:o\d|gpt-5(?!-chat)|codex-)", re.IGNORECASE)
"""OpenAI's reasoning models by name (o1, o3, o4-mini, gpt-5..., not gpt-5-chat): they think
whether or not ``reasoning=`` is set, and only they take ``reasoning.encrypted_content``
(other models refuse it: "Encrypted content is not supported with this model")."""


_NO_PARALLEL_SWITCH = re.compile(r"(?:[\w-]+/)?o\d", re.IGNORECASE)
"""The o-series (o1, o3, o3-mini, o4-mini): Chat Completions answers ``parallel_tool_calls``
(true or false) with a 400 ``unsupported_parameter`` for them, so ``calls="one"`` leaves it
out there (the chat keeps to one call itself); their Responses requests take it."""


def reasons(model: str) -> bool:
    """Whether an OpenAI model name is a reasoning model's (it reasons without being asked)."""
    return _REASONS.match(model) is not None


def is_openai_host(url: str | None) -> bool:
    """Whether ``url`` points at OpenAI's own API (None means the SDK default, which does)."""
    if not url:
        return True
    host = (urlsplit(str(url)).hostname or "").lower()
    return host in _OPENAI_HOSTS or host.endswith(".openai.azure.com")


class OpenAIProvider(SDKProvider):
    """OpenAI models, or any OpenAI-compatible server, through the official ``openai`` SDK.

    Args:
        model: Model name (``"gpt-4.1-mini"``, or whatever a local server serves).
        api: ``"chat"`` (Chat Completions, the default) or ``"responses"``.
        base_url: API endpoint (default: ``OPENAI_BASE_URL``, else OpenAI's).
            E.g. ``"http://localhost:11434/v1"`` for Ollama.
        api_key: API key (default: ``OPENAI_API_KEY``). Never shown anywhere.
        compatible: Talk to an OpenAI-compatible server rather than OpenAI.
            Default: true when the base URL's host is not ``api.openai.com``.
        client: An ``openai.OpenAI`` client to use instead of making one.
        async_client: An ``openai.AsyncOpenAI`` client for the async API (default:
            one per event loop, made with the sync client's key and base URL).
        max_retries: Retries on 429/5xx/connection errors (default: the SDK's, 2).
        timeout: Request timeout in seconds (default: the SDK's, 600).
        max_tokens: Default output token limit per request.
        extra_body: Extra JSON fields for every request (``{"temperature": 0}``).
        **client_kwargs: Passed to ``openai.OpenAI(...)`` (``default_headers``,
            ``organization``, ``http_client``...).

    A provider made with no key for OpenAI itself (no ``api_key=``, no
    ``OPENAI_API_KEY``) is made all the same, so a chat replaying recordings
    (``replay="only"``) needs none; its first request to send raises
    :class:`~nbagent.AuthenticationError`, before anything is sent.
    """

    name = "openai"
    _env_key = "OPENAI_API_KEY"

    def __init__(
        self,
        model: str = "gpt-4.1-mini",
        *,
        api: Api | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        compatible: bool | None = None,
        client: Any = None,
        async_client: Any = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        max_tokens: int | None = None,
        extra_body: dict[str, Any] | None = None,
        **client_kwargs: Any,
    ):
        api = api or "chat"
        if api not in ("chat", "responses"):
            raise ValueError(f"api must be 'chat' or 'responses', got {api!r}")
        require("openai", "OpenAIProvider (OpenAI and compatible models)")
        url: str | None = (
            str(client.base_url)
            if client is not None
            else base_url or os.environ.get("OPENAI_BASE_URL") or None
        )
        if compatible is None:
            compatible = not is_openai_host(url)
        self.api: Api = api
        self.compatible = compatible
        self.max_tokens = checked_max_tokens(max_tokens)
        self.extra_body = dict(extra_body or {})
        self._client_kwargs = client_options(client_kwargs, max_retries, timeout)
        release = shared = None
        keyless = False
        if client is None:
            key = api_key
            if key is None and compatible and not os.environ.get("OPENAI_API_KEY"):
                key = NO_KEY
            try:
                client, release, shared = self._shared_client(key, base_url)
            except AuthenticationError:
                if key is not None:
                    raise
                # no credentials: a client all the same (its URL, its options), which
                # never sends (SDKProvider._no_key)
                keyless = True
                client, release, shared = self._shared_client(_KEYLESS, base_url)
        super().__init__(
            model, client=client, async_client=async_client, release=release, client_key=shared
        )
        if keyless:
            self._no_key = (
                "openai: no API key: set the OPENAI_API_KEY environment variable or pass "
                "api_key=, then make the chat (or its provider) again: the key is read when "
                "it is made (nothing was sent; replaying recordings needs no key)"
            )
        if compatible:
            self.name = "openai-compatible"
        self._messages: MessageCache[bytes] = MessageCache(
            lambda m: (
                chat_message(m, compatible=compatible) if api == "chat" else responses_items(m)
            )
        )
        self._tools = ToolsCache(
            (lambda t: chat_tools(t, compatible=compatible)) if api == "chat" else responses_tools
        )
        self._options: dict[str, Any] = {"security": {"bearer_auth": True}}
        self._reasoned: set[str] = set()  # models seen reasoning (shared by with_model copies)
        if not compatible:
            warn_if_unknown(model, "OpenAI")

    def _shared_client(self, key: str | None, base_url: str | None) -> tuple[Any, Any, Any]:
        """The SDK client for ``key`` and ``base_url`` (shared), its release and its key."""
        import openai

        shared = client_key(
            "openai", "OPENAI_", api_key=key, base_url=base_url, options=self._client_kwargs
        )
        with sdk_errors("openai", (key,), self._env_key):
            client, release = sync_client(
                shared,
                lambda: self._made(
                    openai.OpenAI(api_key=key, base_url=base_url, **self._client_kwargs)
                ),
            )
        return client, release, shared

    def __repr__(self) -> str:
        url = scrub(str(self._client.base_url), self.secrets())
        extra = ", compatible=True" if self.compatible else ""
        return f"OpenAIProvider(model={self.model!r}, api={self.api!r}, base_url={url!r}{extra})"

    def secrets(self) -> tuple[str | None, ...]:
        key = getattr(self._client, "api_key", None)
        return (key if isinstance(key, str) and key != _KEYLESS else None,)

    def _new_async_client(self) -> Any:
        import openai

        kwargs = {k: v for k, v in self._client_kwargs.items() if k != "http_client"}
        client = self._client
        made = openai.AsyncOpenAI(api_key=client.api_key, base_url=client.base_url, **kwargs)
        return stop_quota_retries(made, asynchronous=True)

    def _made(self, client: Any) -> Any:
        """A sync client nbagent made, not retrying an account with no quota left (one made
        with an ``http_client`` of your own is left as you made it)."""
        if "http_client" in self._client_kwargs:
            return client
        return stop_quota_retries(client)

    def check_hosted(self, tool: HostedTool) -> None:
        """Raise :class:`~nbagent.ToolOptionError` if this API cannot host ``tool``."""
        if self.api != "responses":
            raise ToolOptionError(
                f"{tool!r} is a provider-hosted tool: OpenAI hosts MCP servers on the Responses "
                "API only, and this provider uses Chat Completions. Use "
                "OpenAIProvider(model, api='responses'), or nbagent.MCPServer to run the "
                "server's tools locally."
            )

    def check_output(self, output: Output) -> None:
        """Raise :class:`~nbagent.OutputSchemaError` if strict mode cannot express ``output``."""
        output.strict_schema("openai")

    def check_parts(self, parts: Sequence[Part]) -> None:
        """Raise :class:`~nbagent.MediaError` for an image or file OpenAI would refuse."""
        check_parts(parts, self.api)

    def check_reasoning(self, setting: str | int | None) -> None:
        """Raise ``ValueError`` for a ``reasoning=`` OpenAI cannot take: a token budget, or
        any setting for a model the catalog knows as OpenAI's and not a reasoning model
        (``gpt-4.1-mini``, ``gpt-4o``, ``gpt-5-chat-latest``: OpenAI answers
        ``reasoning_effort`` / ``reasoning.effort`` with a 400 ``unsupported_parameter``)."""
        if setting is None:
            return
        effort_of(setting, self.name)
        info = None if self.compatible else lookup_model(self.model)
        if (
            info is not None
            and info.provider == "openai"
            and info in BUILTIN_MODELS  # a model you registered may reason: not judged
            and not reasons(self.model)
        ):
            raise ValueError(
                f"{self.name}: {self.model!r} is not a reasoning model, and OpenAI refuses "
                "a reasoning effort for it (400 unsupported_parameter); leave reasoning= "
                "unset, or use a reasoning model (o4-mini, o3, gpt-5-mini...)"
            )

    # -- requests -------------------------------------------------------------
    def _prepare(self, request: ModelRequest) -> Prepared:
        limit = request.max_tokens if request.max_tokens is not None else self.max_tokens
        for hosted in request.hosted:
            self.check_hosted(hosted)
        out = request.output
        if self.api == "chat":
            items = chat_messages(
                request.messages, self._messages.many(request.messages), self.model
            )
            if request.system:
                items.insert(0, chat_system(request.system))
            fields: list[tuple[str, bytes]] = [
                ("model", dumps(self.model)),
                ("messages", array(items)),
            ]
            if request.tools:
                fields.append(("tools", self._tools.get(request.tools)))
                fields.append(("tool_choice", dumps(tool_choice_chat(request.tool_choice))))
                if request.calls == "one" and not _NO_PARALLEL_SWITCH.match(self.model):
                    fields.append(("parallel_tool_calls", b"false"))
            if out is not None:
                fields.append(("response_format", dumps(response_format_chat(out))))
            if limit is not None:
                key = "max_tokens" if self.compatible else "max_completion_tokens"
                fields.append((key, dumps(limit)))
            if request.reasoning is not None:
                self.check_reasoning(request.reasoning)
                effort = effort_of(request.reasoning, self.name)
                fields.append(("reasoning_effort", dumps(effort)))
            if request.stream:
                fields.append(("stream", b"true"))
                fields.append(("stream_options", b'{"include_usage":true}'))
            path = "/chat/completions"
        else:
            items = [b for b in self._messages.many(request.messages) if b]
            fields = [("model", dumps(self.model)), ("input", array(items))]
            if request.system:
                fields.append(("instructions", dumps(request.system)))
            if request.hosted:  # not cached: a hosted tool is not keyed like a ToolSpec
                fields.append(("tools", responses_tools(request.tools, request.hosted)))
            elif request.tools:
                fields.append(("tools", self._tools.get(request.tools)))
            if request.tools or request.hosted:  # the choice holds for hosted tools too
                fields.append(("tool_choice", dumps(tool_choice_responses(request.tool_choice))))
                if request.calls == "one":
                    fields.append(("parallel_tool_calls", b"false"))
            if out is not None:
                fields.append(("text", dumps(text_format_responses(out))))
            if limit is not None:
                fields.append(("max_output_tokens", dumps(limit)))
            if request.reasoning is not None:
                self.check_reasoning(request.reasoning)
                effort = effort_of(request.reasoning, self.name)
                fields.append(("reasoning", dumps({"effort": effort})))
            if request.reasoning is not None or "reasoning" in self.extra_body or self._reasons():
                # stateless: whenever the model reasons (asked to or not) its reasoning comes
                # back encrypted, to go back in its place with the next request
                fields.append(("include", b'["reasoning.encrypted_content"]'))
            fields.append(("store", b"false"))
            if request.stream:
                fields.append(("stream", b"true"))
            path = "/responses"
        return Prepared(path, self._body(fields), request.stream, self._options)

    def _reasons(self) -> bool:
        """Whether the model reasons unasked: an OpenAI reasoning model, or one seen doing it."""
        model = self.model
        return (not self.compatible and reasons(model)) or model in self._reasoned

    def _received(self, response: LLMToolResponse) -> LLMToolResponse:
        if self.api == "responses" and response.reasoning and self.model not in self._reasoned:
            # a model the name rule missed reasons: its next requests ask for the encrypted
            # reasoning (this response's items could not come back without it)
            self._reasoned.add(self.model)
        return response

    def _parse(self, data: Any) -> LLMToolResponse:
        if self.api == "chat":
            return parse_chat(data, model=self.model, provider=self.name)
        return parse_responses(data, model=self.model, provider=self.name)

    def _accumulator(self, on_delta: DeltaSink | None) -> StreamAccumulator:
        if self.api == "chat":
            return ChatStream(on_delta, model=self.model, provider=self.name)
        return ResponsesStream(on_delta, model=self.model, provider=self.name)


__all__ = ["OpenAIProvider"]
