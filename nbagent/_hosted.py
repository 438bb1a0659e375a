"""Provider-hosted tools: :class:`HostedMCP`, an MCP server the provider calls itself.

A hosted tool is not run by nbagent: it goes into the request as a tool
definition of the provider's own (OpenAI Responses ``{"type": "mcp", ...}``,
Anthropic's ``mcp_servers``), the provider lists the server's tools and calls
them, and what it did comes back as :class:`~nbagent.ProviderItem` values. When
the provider asks for approval first (OpenAI ``mcp_approval_request``), the
request becomes a gated :class:`~nbagent.ToolCall` with ``hosted=True``; the
chat's decision is sent back instead of running anything.

Headers (and a connector's authorization token) may hold secrets: they are
kept out of ``repr``, ``preview_request``/``last_request``, errors, the log
and the store (:meth:`HostedMCP.secrets` feeds the adapters' scrubber).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from ._errors import ToolOptionError

RequireApproval = Literal["always", "never"] | Mapping[str, Any]
REDACTED = "***"
_USERINFO = re.compile(r"(\w+://)[^/@\s]+@")


class HostedMCP:
    """A remote MCP server that the provider connects to and calls (not this process).

    Args:
        server_label: The server's label; calls and approvals show it.
        server_url: The server's URL (or give ``connector_id``).
        connector_id: An OpenAI connector (``"connector_gmail"``, ...), instead of a URL.
        headers: HTTP headers the provider sends to the server (e.g.
            ``{"Authorization": "Bearer ..."}``). Never shown, logged or stored.
        authorization: An OAuth access token for the server or connector
            (OpenAI ``authorization``, Anthropic ``authorization_token``). Never shown.
        allowed_tools: Only these of the server's tools (a list of names, or
            OpenAI's filter object).
        require_approval: ``"always"`` (default: every call asks first),
            ``"never"``, or OpenAI's filter object, e.g.
            ``{"never": {"tool_names": ["search"]}}``.
        server_description: Optional description the model reads.

    Raises:
        ToolOptionError: Neither or both of ``server_url`` and ``connector_id``,
            an empty label, or an invalid ``require_approval``.
    """

    kind = "mcp"

    def __init__(
        self,
        server_label: str,
        *,
        server_url: str | None = None,
        connector_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        authorization: str | None = None,
        allowed_tools: Sequence[str] | Mapping[str, Any] | None = None,
        require_approval: RequireApproval = "always",
        server_description: str | None = None,
    ):
        if not isinstance(server_label, str) or not server_label.strip():
            raise ToolOptionError("HostedMCP needs a non-empty server_label")
        if (server_url is None) == (connector_id is None):
            raise ToolOptionError(
                f"HostedMCP({server_label!r}) needs exactly one of server_url= or connector_id="
            )
        if isinstance(require_approval, str):
            if require_approval not in ("always", "never"):
                raise ToolOptionError(
                    f"HostedMCP require_approval must be 'always', 'never' or a filter dict, "
                    f"got {require_approval!r}"
                )
        elif isinstance(require_approval, Mapping):
            unknown = set(require_approval) - {"always", "never"}
            if unknown:
                raise ToolOptionError(
                    f"HostedMCP require_approval filter keys are 'always' and 'never', "
                    f"got {sorted(unknown)}"
                )
        else:
            raise ToolOptionError(
                f"HostedMCP require_approval must be 'always', 'never' or a dict, "
                f"got {type(require_approval).__name__}"
            )
        if headers is not None and not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise ToolOptionError("HostedMCP headers must map str to str")
        if isinstance(allowed_tools, str):
            raise ToolOptionError("HostedMCP allowed_tools is a list of tool names, not a str")
        self.server_label = server_label
        self.server_url = server_url
        self.connector_id = connector_id
        self._headers: dict[str, str] = dict(headers or {})
        self._authorization = authorization
        self.allowed_tools: list[str] | dict[str, Any] | None = (
            None
            if allowed_tools is None
            else dict(allowed_tools)
            if isinstance(allowed_tools, Mapping)
            else list(allowed_tools)
        )
        self.require_approval: str | dict[str, Any] = (
            require_approval if isinstance(require_approval, str) else dict(require_approval)
        )
        self.server_description = server_description

    @property
    def name(self) -> str:
        """The label (what ``chat.tools`` and errors name it by)."""
        return self.server_label

    @property
    def header_names(self) -> tuple[str, ...]:
        """The names of the headers set (their values are never shown)."""
        return tuple(self._headers)

    def secrets(self) -> tuple[str, ...]:
        """Every secret value this definition holds (for the error scrubber)."""
        values = [v for v in self._headers.values() if v]
        for v in list(values):  # "Bearer abc": the token alone must go too
            _, _, token = v.partition(" ")
            if token:
                values.append(token)
        if self._authorization:
            values.append(self._authorization)
        if self.server_url is not None:  # https://user:token@host/...
            parts = urlsplit(self.server_url)
            values.extend(v for v in (parts.username, parts.password) if v)
        return tuple(values)

    def openai_tool(self) -> dict[str, Any]:
        """The OpenAI Responses tool definition (``{"type": "mcp", ...}``), secrets included."""
        out: dict[str, Any] = {"type": "mcp", "server_label": self.server_label}
        if self.server_url is not None:
            out["server_url"] = self.server_url
        else:
            out["connector_id"] = self.connector_id
        if self.server_description:
            out["server_description"] = self.server_description
        if self._headers:
            out["headers"] = dict(self._headers)
        if self._authorization:
            out["authorization"] = self._authorization
        if self.allowed_tools is not None:
            out["allowed_tools"] = self.allowed_tools
        out["require_approval"] = self.require_approval
        return out

    def anthropic_server(self) -> dict[str, Any]:
        """Anthropic's ``mcp_servers`` entry (MCP connector, beta), secrets included.

        Raises:
            ToolOptionError: What Anthropic's connector cannot express: a
                ``connector_id``, custom headers, an approval step (it has none:
                ``require_approval`` must be ``"never"``), a tool filter object.
        """
        label = self.server_label
        if self.server_url is None:
            raise ToolOptionError(f"HostedMCP({label!r}): Anthropic's MCP connector needs a URL")
        if self._headers:
            raise ToolOptionError(
                f"HostedMCP({label!r}): Anthropic's MCP connector sends no custom headers; "
                "pass the token as authorization="
            )
        if self.require_approval != "never":
            raise ToolOptionError(
                f"HostedMCP({label!r}): Anthropic's MCP connector has no approval step "
                "(its calls run without asking); pass require_approval='never' to accept that"
            )
        out: dict[str, Any] = {"type": "url", "url": self.server_url, "name": label}
        if self._authorization:
            out["authorization_token"] = self._authorization
        if isinstance(self.allowed_tools, dict):
            raise ToolOptionError(
                f"HostedMCP({label!r}): Anthropic's MCP connector takes a list of tool names"
            )
        if self.allowed_tools is not None:
            out["tool_configuration"] = {"enabled": True, "allowed_tools": self.allowed_tools}
        return out

    def __repr__(self) -> str:
        where = (
            f"server_url={_shown_url(self.server_url)!r}"
            if self.server_url is not None
            else f"connector_id={self.connector_id!r}"
        )
        extra = ""
        if self._headers:
            extra += f", headers={{{', '.join(f'{k!r}: {REDACTED!r}' for k in self._headers)}}}"
        if self._authorization:
            extra += f", authorization={REDACTED!r}"
        if self.allowed_tools is not None:
            extra += f", allowed_tools={self.allowed_tools!r}"
        return (
            f"HostedMCP({self.server_label!r}, {where}{extra}, "
            f"require_approval={self.require_approval!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HostedMCP):
            return NotImplemented
        return self.openai_tool() == other.openai_tool()

    def __hash__(self) -> int:
        return hash((self.server_label, self.server_url, self.connector_id))


def _shown_url(url: str) -> str:
    """``url`` with its credentials (``user:token@``) masked."""
    return _USERINFO.sub(r"\1***@", url)


HostedTool = HostedMCP
"""Every kind of provider-hosted tool nbagent knows (one, for now)."""


def hosted_secrets(tools: Iterable[HostedTool]) -> tuple[str, ...]:
    """The secrets of several hosted tools, for the scrubber."""
    return tuple(s for t in tools for s in t.secrets())


def redact_body(body: dict[str, Any]) -> dict[str, Any]:
    """A request body with hosted tools' headers and tokens masked (for previews and debugging)."""
    for tool in body.get("tools") or ():
        if isinstance(tool, dict) and tool.get("type") == "mcp":
            if isinstance(tool.get("headers"), dict):
                tool["headers"] = {k: REDACTED for k in tool["headers"]}
            if "authorization" in tool:
                tool["authorization"] = REDACTED
    for server in body.get("mcp_servers") or ():
        if isinstance(server, dict) and "authorization_token" in server:
            server["authorization_token"] = REDACTED
    return body


__all__ = ["REDACTED", "HostedMCP", "HostedTool", "hosted_secrets", "redact_body"]
