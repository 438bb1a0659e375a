"""Anthropic's Messages API over the official ``anthropic`` SDK.

Configuration follows the SDK: ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``
are honoured and arguments override them. Transcripts always obey the API's
rules (see :mod:`._anthropic_wire`); usage counts cache reads and writes as
input; ``pause_turn`` comes back as such so the chat continues the turn, and a
context-window stop as ``context_window``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._hosted import HostedTool
from .._media import check_parts
from .._optional import require
from .._output import Output
from .._types import LLMToolResponse, Part
from ._anthropic_wire import (
    MessageStream,
    Piece,
    cached_messages,
    cached_system,
    cached_tools,
    check_sendable,
    continues_without_thinking,
    mcp_servers_json,
    messages_json,
    output_config,
    parse_message,
    piece,
    thinking_json,
    tool_choice,
    tools_json,
)
from ._base import DeltaSink, ModelRequest, checked_max_tokens
from ._catalog import warn_if_unknown
from ._clients import client_key, sync_client
from ._direct import DirectPost, direct_post
from ._errors import scrub, sdk_errors
from ._sdk import (
    MessageCache,
    Prepared,
    SDKProvider,
    StreamAccumulator,
    ToolsCache,
    client_options,
    dumps,
    joined_url,
)


class AnthropicProvider(SDKProvider):
    """Claude models through the official ``anthropic`` SDK.

    Args:
        model: Model name (``"claude-sonnet-4-5"``, dated names work too).
        base_url: API endpoint (default: ``ANTHROPIC_BASE_URL``, else Anthropic's).
        api_key: API key (default: ``ANTHROPIC_API_KEY``). Never shown anywhere.
        max_tokens: Output token limit per request (the API requires one).
        client: An ``anthropic.Anthropic`` client to use instead of making one.
        async_client: An ``anthropic.AsyncAnthropic`` client for the async API (default:
            one per event loop, made with the sync client's key and base URL).
        max_retries: Retries on 429/5xx/529/connection errors (default: the SDK's, 2).
        timeout: Request timeout in seconds (default: the SDK's, 600).
        extra_body: Extra JSON fields for every request (``{"temperature": 0}``).
        **client_kwargs: Passed to ``anthropic.Anthropic(...)`` (``default_headers``...).

    Thinking is set per chat (``Chat(reasoning=...)``, sent as ``thinking``);
    its ``thinking``/``redacted_thinking`` blocks are kept and sent back as
    they came (see :mod:`._anthropic_wire`).

    A provider made with no API key or other credentials is made all the same,
    so a chat replaying recordings (``replay="only"``) needs none; its first
    request to send raises :class:`~nbagent.AuthenticationError`, before
    anything is sent.
    """

    name = "anthropic"
    _env_key = "ANTHROPIC_API_KEY"

    def __init__(
        self,
        model: str = "claude-sonnet-4-5",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 4096,
        client: Any = None,
        async_client: Any = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        extra_body: dict[str, Any] | None = None,
        **client_kwargs: Any,
    ):
        require("anthropic", "AnthropicProvider (Claude models)")
        import anthropic

        self.max_tokens = checked_max_tokens(max_tokens, optional=False)  # the API needs one
        self.extra_body = dict(extra_body or {})
        self._client_kwargs = client_options(client_kwargs, max_retries, timeout)
        release = shared = None
        keyless = False
        if client is None:
            shared = client_key(
                "anthropic",
                "ANTHROPIC_",
                api_key=api_key,
                base_url=base_url,
                options=self._client_kwargs,
            )
            with sdk_errors("anthropic", (api_key,), self._env_key):
                client, release = sync_client(
                    shared,
                    lambda: anthropic.Anthropic(
                        api_key=api_key, base_url=base_url, **self._client_kwargs
                    ),
                )
            keyless = (
                client.api_key is None
                and client.auth_token is None
                and getattr(client, "credentials", None) is None
            )
        super().__init__(
            model, client=client, async_client=async_client, release=release, client_key=shared
        )
        if keyless:  # made all the same, so replaying recordings needs no key; never sends
            self._no_key = (
                "anthropic: no API key: set the ANTHROPIC_API_KEY environment variable or pass "
                "api_key=, then make the chat (or its provider) again: the key is read when "
                "it is made (nothing was sent; replaying recordings needs no key)"
            )
        self._pieces: MessageCache[Piece] = MessageCache(piece)
        self._tools = ToolsCache(tools_json)
        self._streamed: tuple[Any, dict[tuple[str, int], bool]] = (None, {})  # _must_stream's
        warn_if_unknown(model, "Anthropic")

    def __repr__(self) -> str:
        url = scrub(str(self._client.base_url), self.secrets())
        return f"AnthropicProvider(model={self.model!r}, base_url={url!r})"

    def secrets(self) -> tuple[str | None, ...]:
        return (getattr(self._client, "api_key", None), getattr(self._client, "auth_token", None))

    def _new_async_client(self) -> Any:
        import anthropic

        kwargs = {k: v for k, v in self._client_kwargs.items() if k != "http_client"}
        client = self._client
        if client.api_key is not None:
            kwargs["api_key"] = client.api_key
        elif client.auth_token is not None:
            kwargs["auth_token"] = client.auth_token
        return anthropic.AsyncAnthropic(base_url=client.base_url, **kwargs)

    def _url(self, client: Any, path: str) -> Any:
        # the plain clients only: Vertex and Bedrock rewrite the path they are given
        import anthropic

        if type(client) is anthropic.Anthropic or type(client) is anthropic.AsyncAnthropic:
            return joined_url(client, path)
        return path

    def _direct(self, client: Any) -> DirectPost | None:
        # the plain clients only, as for _url; a request with its own headers (the MCP
        # connector's beta) goes through the SDK
        import anthropic

        plain = (anthropic.Anthropic, anthropic.AsyncAnthropic)
        errors = (anthropic.AnthropicError, anthropic.APITimeoutError, anthropic.APIConnectionError)
        return direct_post(client, plain, errors)

    def _post(self, client: Any, req: Prepared) -> Any:
        direct = None if req.options else self._direct(client)
        return super()._post(client, req) if direct is None else direct.send(req)

    async def _post_async(self, client: Any, req: Prepared) -> Any:
        direct = None if req.options else self._direct(client)
        if direct is None:
            return await super()._post_async(client, req)
        return await direct.send_async(req)

    def check_hosted(self, tool: HostedTool) -> None:
        """Raise :class:`~nbagent.ToolOptionError` if the MCP connector cannot host ``tool``.

        The connector has no approval step, so ``require_approval`` must be
        ``"never"`` (said explicitly): a call that asks first is never silently
        run without asking.
        """
        tool.anthropic_server()

    def check_parts(self, parts: Sequence[Part]) -> None:
        """Raise :class:`~nbagent.MediaError` for an image or file Anthropic would refuse."""
        check_parts(parts, "anthropic")

    def check_output(self, output: Output) -> None:
        """Raise :class:`~nbagent.OutputSchemaError` if structured outputs cannot express it."""
        output.strict_schema("anthropic")

    def _request(self, request: ModelRequest) -> Prepared:
        # before sending (not in a preview): a request with nothing to ask is refused
        check_sendable(request.messages, self._pieces.many(request.messages))
        return super()._request(request)

    def _prepare(self, request: ModelRequest) -> Prepared:
        body, systems = messages_json(self._pieces.many(request.messages))
        if request.system:
            systems.insert(0, request.system)
        limit = request.max_tokens if request.max_tokens is not None else self.max_tokens
        servers = None
        if request.hosted:  # the MCP connector (beta); first, as it may refuse the choice
            servers = mcp_servers_json(request.hosted, request.tool_choice, bool(request.tools))
        thinking = None
        if request.reasoning is not None and not continues_without_thinking(request.messages):
            thinking, limit = thinking_json(
                request.reasoning, limit, request.tool_choice, self.extra_body
            )
        cache = request.cache  # breakpoints: tools, system, the last two user messages (<= 4)
        fields: list[tuple[str, bytes]] = [
            ("model", dumps(self.model)),
            ("max_tokens", dumps(limit)),
            ("messages", cached_messages(body) if cache else body),
        ]
        if systems:
            system = "\n\n".join(systems)
            fields.append(("system", cached_system(system) if cache and system else dumps(system)))
        if request.tools:
            tools = cached_tools(request.tools) if cache else self._tools.get(request.tools)
            fields.append(("tools", tools))
            fields.append(("tool_choice", dumps(tool_choice(request.tool_choice, request.calls))))
        if request.output is not None:  # structured outputs: the answer's text is the JSON
            fields.append(("output_config", dumps(output_config(request.output))))
        if thinking is not None:
            fields.append(("thinking", dumps(thinking)))
        if servers is not None:
            fields.append(("mcp_servers", servers))
        stream = request.stream or self._must_stream(limit)
        if stream:
            fields.append(("stream", b"true"))
        options = {"headers": {"anthropic-beta": MCP_BETA}} if request.hosted else {}
        return Prepared("/v1/messages", self._body(fields), stream, options)

    def _must_stream(self, max_tokens: int) -> bool:
        """Whether a request of ``max_tokens`` goes out streamed even when not asked to.

        The SDK's ``messages.create`` refuses to send a request without streaming that may
        run past ten minutes (by ``max_tokens``, and a lower limit for some models) while
        the client has its default timeout: an idle connection that long is likely dropped,
        and a timed-out request is sent again and paid again. nbagent streams such a request
        instead (nobody hears its fragments unless someone listens), by the SDK's own rule;
        a client given its own timeout is the caller's choice, as it is for the SDK. Decided
        once per model and limit (while the client keeps its timeout).
        """
        client = self._client
        timeout = getattr(client, "timeout", None)
        seen, decided = self._streamed
        if seen is not timeout:
            decided = {}
            self._streamed = (timeout, decided)
        key = (self.model, max_tokens)
        must = decided.get(key)
        if must is None:
            must = decided[key] = _refused_unstreamed(client, self.model, max_tokens)
        return must

    def _parse(self, data: Any) -> LLMToolResponse:
        return parse_message(data, model=self.model, provider=self.name)

    def _accumulator(self, on_delta: DeltaSink | None) -> StreamAccumulator:
        return MessageStream(on_delta, model=self.model, provider=self.name)


def _refused_unstreamed(client: Any, model: str, max_tokens: int) -> bool:
    """Whether the SDK's ``messages.create`` would refuse to send this request unstreamed
    (its own rule, on the plain client with the SDK's default timeout)."""
    import anthropic
    from anthropic._constants import DEFAULT_TIMEOUT, MODEL_NONSTREAMING_TOKENS

    if not isinstance(client, anthropic.Anthropic) or client.timeout != DEFAULT_TIMEOUT:
        return False
    try:
        client._calculate_nonstreaming_timeout(max_tokens, MODEL_NONSTREAMING_TOKENS.get(model))
    except ValueError:
        return True
    return False


MCP_BETA = "mcp-client-2025-04-04"
"""The ``anthropic-beta`` header that turns the MCP connector (``mcp_servers``) on."""

__all__ = ["MCP_BETA", "AnthropicProvider"]
