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

The provider may still run what it was told not to: an ``mcp_call`` answering
an approval request the chat denied, or one that should have been asked for
(``require_approval``) and was not. :func:`audit_items` reads each response's
``mcp_call`` items against the chat's decisions when the response arrives: such
an item keeps its place but gets its own status (:data:`RAN_DESPITE_DENIAL`,
:data:`RAN_UNAPPROVED`), which the log, the store and the view show, and the
chat warns (:class:`HostedCallWarning`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from ._errors import ToolOptionError
from ._secrets import redact_keys
from ._types import ProviderItem

RequireApproval = Literal["always", "never"] | Mapping[str, Any]
REDACTED = "***"
_USERINFO = re.compile(r"(\w+://)[^/@\s]+@")

RAN_DESPITE_DENIAL = "ran_despite_denial"
"""An ``mcp_call`` item's status: the provider ran a call whose approval the chat denied."""
RAN_UNAPPROVED = "ran_unapproved"
"""An ``mcp_call`` item's status: the provider ran, without the chat's approval, a call
that ``require_approval`` says must be approved first (or one whose approval request is
still undecided, or unknown to the chat)."""
BREACHES = (RAN_DESPITE_DENIAL, RAN_UNAPPROVED)

Verdict = Literal["approved", "denied", "undecided"]


class HostedCallWarning(UserWarning):
    """The provider ran a hosted MCP call that was denied, or not approved as required.

    Nothing here can undo it (the provider ran it); the call is recorded with
    status ``ran_despite_denial`` or ``ran_unapproved`` in ``message.items``,
    ``chat.log``, the store and the view. Turn it into an error to stop the
    chat at once: ``warnings.simplefilter("error", nbagent.HostedCallWarning)``
    (the response is recorded first; nothing is lost).
    """


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

    def asks_before(self, tool: str) -> bool | None:
        """Whether ``require_approval`` makes the provider ask before it calls ``tool``.

        ``"always"``: yes; ``"never"``: no. A filter object: no if its
        ``never`` entry names the tool, yes if its ``always`` entry does; a tool
        neither names is asked for when there is no ``always`` entry (only
        exceptions were listed), else not. ``None`` when it cannot be told
        here (a ``read_only`` filter depends on the server's annotations).
        """
        rule = self.require_approval
        if isinstance(rule, str):
            return rule == "always"

        def names(key: str) -> tuple[set[str], bool]:
            entry = rule.get(key)
            if not isinstance(entry, Mapping):
                return set(), False
            listed = entry.get("tool_names")
            tools = {str(t) for t in listed} if isinstance(listed, list) else set()
            return tools, entry.get("read_only") is not None

        never, never_ro = names("never")
        always, always_ro = names("always")
        if tool in never:
            return False
        if tool in always:
            return True
        if never_ro or always_ro:
            return None
        return "always" not in rule

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


def audit_items(
    items: Sequence[ProviderItem],
    hosted: Mapping[str, HostedTool],
    verdict: Callable[[str], Verdict | None],
) -> tuple[tuple[ProviderItem, ...], list[str]]:
    """``(items, warnings)``: a response's items, each ``mcp_call`` checked against the chat.

    An ``mcp_call`` that answers an approval request (``approval_request_id``)
    the chat denied becomes :data:`RAN_DESPITE_DENIAL`; one answering a request
    still undecided or unknown to the chat, or one without a request for a tool
    the chat's :class:`HostedMCP` must be asked about (:meth:`HostedMCP.asks_before`),
    becomes :data:`RAN_UNAPPROVED` (whatever its ``ok``/``error`` outcome: it
    ran). Other items come back as they are; ``warnings`` has one line per
    flagged item.

    Args:
        items: The response's provider items.
        hosted: The chat's hosted tools by server label.
        verdict: The chat's decision on an approval request id (``None``: unknown).
    """
    out: list[ProviderItem] = []
    warnings: list[str] = []
    for item in items:
        status = _breach(item, hosted, verdict)
        if status is None:
            out.append(item)
            continue
        out.append(dataclasses.replace(item, status=status))
        # the names are the provider's (the model's, for a tool): a key or a password in one
        # is hidden, as everywhere a name is shown
        who = redact_keys(f"{item.server}: {item.name}" if item.server else str(item.name))
        rid = item.raw.get("approval_request_id")
        why = (
            f"although its approval request {rid!r} was denied"
            if status == RAN_DESPITE_DENIAL
            else f"without an approval{f' (request {rid!r} was not approved)' if rid else ''}"
            + ", which require_approval asks for"
        )
        warnings.append(
            f"the provider ran the hosted MCP call {who} ({item.call_id}) {why}; "
            f"it is recorded with status {status!r}"
        )
    return tuple(out), warnings


def _breach(
    item: ProviderItem,
    hosted: Mapping[str, HostedTool],
    verdict: Callable[[str], Verdict | None],
) -> str | None:
    if item.type != "mcp_call" or item.api != "responses":
        return None
    rid = item.raw.get("approval_request_id")
    if isinstance(rid, str) and rid:
        said = verdict(rid)
        if said == "denied":
            return RAN_DESPITE_DENIAL
        return None if said == "approved" else RAN_UNAPPROVED
    tool = hosted.get(item.server or "")
    if tool is not None and item.name and tool.asks_before(item.name):
        return RAN_UNAPPROVED
    return None


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


__all__ = [
    "BREACHES",
    "RAN_DESPITE_DENIAL",
    "RAN_UNAPPROVED",
    "REDACTED",
    "HostedCallWarning",
    "HostedMCP",
    "HostedTool",
    "audit_items",
    "hosted_secrets",
    "redact_body",
]
