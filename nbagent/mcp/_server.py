"""MCPServer: an MCP server's tools as nbagent tools, with approval gates.

::

    notes = nbagent.MCPServer.stdio("python", ["notes_server.py"], prefix="notes")
    chat = Chat("gpt-4.1-mini").with_tools(notes, my_local_tool)
    chat.ask("What does my todo note say?")

Each of the server's tools becomes an :class:`MCPTool`: its schema is the
tool's ``inputSchema`` (nbagent validates a model's arguments against it
before anything is sent), its calls go to the server, and whether a call
needs a human decision follows the server's ``approval`` rule (by default its
annotations: ``readOnlyHint`` tools run freely unless also ``destructiveHint``,
the others ask first). Approvals, resolvers, ``chat.always_allow`` and the
store treat them as any other tool.

Tool names: ``<prefix>_<name>``, made valid for every provider (letters,
digits, ``_``, ``-``; at most 64 characters). Tools whose names become the
same that way (``a.b`` and ``a_b``, two long names alike in their first 64
characters) are all offered, each as ``<name>_<8 hex digits>`` derived from
its name on the server (:func:`local_names`): deterministic, so the same remote
tool keeps its name across reconnections, list changes and ``Chat.load``, and
a name never moves to another remote tool. A notice names them. A tool listed
twice is offered once (a notice says so).

Secrets (``env``, ``headers``, the URL's credentials, secret-looking
arguments) never show in a ``repr`` or the fallback label and are scrubbed
from every error the server causes and every text it sends (tool descriptions
and schemas, prompts, its requests: ``_secrets.py``, ``_requests.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import urlsplit

from .._aio import _background_loop, run_on_loop
from .._config import seconds
from .._errors import ChatCancelled, MCPServerError, ToolDefinitionError, scrub
from .._notice import notice
from .._optional import require
from .._schema import SchemaValidationError
from .._schema import _search as ecma_search
from .._tools import (
    CallReporter,
    Tool,
    ToolSource,
    call_reporter,
    current_input_asker,
    on_chat_cancel,
)
from .._types import ToolCall
from ..providers import resolve_provider
from . import _connection as conn
from . import _stdio
from ._requests import Requests, as_roots
from ._resources import (
    READ_TOOL,
    MCPPrompt,
    MCPPromptMessages,
    MCPResource,
    contents_value,
    prompt_messages,
    prompt_of,
    read_tool_definition,
    resource_of,
)
from ._results import MCPResult, result_value
from ._secrets import (
    MIN_SECRET_CHARS,
    REDACTED,
    _scrubbed_json,
    guard_sdk_logs,
    masked_argv,
    masked_url,
    scrubbed_await,
    scrubbed_call,
    scrubbed_result,
    scrubbed_schema,
    secret_values,
    server_secrets,
)

ApprovalRule = (
    Literal["always", "never", "annotations"] | bool | Callable[[ToolCall], "bool | None"]
)
Approval = ApprovalRule | Mapping[str, ApprovalRule]

_INVALID = re.compile(r"[^a-zA-Z0-9_-]")
_FEATURE = "nbagent.MCPServer (MCP servers as tool sources)"


MAX_NAME = 64  # the longest tool name every provider takes
_DIGEST = 8  # hex digits that tell apart tools whose names collide


def _tool_name(prefix: str | None, remote: str) -> str:
    """The name the model sees: ``<prefix>_<name>``, made valid for every provider."""
    name = f"{prefix}_{remote}" if prefix else remote
    return _INVALID.sub("_", name)[:MAX_NAME] or "_"


def _distinct(base: str, remote: str) -> str:
    """``base`` made unique to ``remote``: ``<base>_<first 8 hex digits of its SHA-256>``."""
    digest = hashlib.sha256(remote.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST]
    return f"{base[: MAX_NAME - _DIGEST - 1]}_{digest}"


def local_names(prefix: str | None, remotes: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """``({remote name: tool name}, notes)`` for a server's listed tools.

    A name that only one remote tool becomes keeps the plain
    ``<prefix>_<name>``; when several become the same name (sanitising,
    truncation), each gets a suffix derived from its own remote name
    (:func:`_distinct`), so none hides another and a name depends only on
    the tool it names and whether it collides: it never passes from one remote
    tool to another. A suffixed name that is still taken (a remote tool named
    exactly like it) is left out. ``notes`` says what was renamed or left out.
    """
    groups: dict[str, list[str]] = {}
    for remote in dict.fromkeys(remotes):
        groups.setdefault(_tool_name(prefix, remote), []).append(remote)
    names = {members[0]: base for base, members in groups.items() if len(members) == 1}
    notes: list[str] = []
    for base, members in groups.items():
        if len(members) == 1:
            continue
        renamed = []
        for remote in members:
            name = _distinct(base, remote)
            if name in groups or name in names.values():
                notes.append(f"tool {remote!r} is left out: its name {name!r} is taken")
                continue
            names[remote] = name
            renamed.append(f"{remote!r} -> {name!r}")
        notes.append(
            f"tools {', '.join(repr(r) for r in members)} would all be named {base!r}; "
            f"each gets its own name: {', '.join(renamed) or 'none'}"
        )
    return names, notes


def _annotations(tool: Any, secrets: Sequence[str]) -> dict[str, Any]:
    """The server's hints for a tool, its secrets out of their text (a ``title``)."""
    ann = getattr(tool, "annotations", None)
    if ann is None:
        return {}
    dump = ann.model_dump(by_alias=True, exclude_none=True)
    return dict(_scrubbed_json(dump, secrets)) if isinstance(dump, dict) else {}


def _told(server: MCPServer, definition: Any) -> tuple[str, dict[str, Any]]:
    """A listed tool's description and input schema as the model is given them: the
    server's own secrets (a description quoting its environment) replaced by ``***``."""
    description = server._scrub_text((definition.description or definition.name).strip())
    schema = definition.input_schema
    schema = dict(schema) if isinstance(schema, Mapping) else {"type": "object"}
    return description, scrubbed_schema(schema, server._secrets)


def _check_rule(rule: Any, where: str) -> None:
    if rule in ("always", "never", "annotations") or isinstance(rule, bool) or callable(rule):
        return
    raise ToolDefinitionError(
        f"{where} must be 'always', 'never', 'annotations', True/False or a function "
        f"(call) -> True | False | None, got {rule!r}"
    )


class MCPTool(Tool, abstract=True):
    """One tool of an MCP server, as nbagent runs it.

    Attributes (besides :class:`~nbagent.Tool`'s):
        server: The server's label when the tool was listed (for
            ``ToolCall.server``, the cards, the log and the store).
        remote_name: The tool's name on the server (``name`` may carry a prefix).
        annotations: The server's hints (``readOnlyHint``, ``destructiveHint``...).
        output_schema: The tool's ``outputSchema``, if it declares one.
    """

    def __init__(self, server: MCPServer, definition: Any, rule: ApprovalRule, name: str):
        self._server = server
        self.remote_name: str = definition.name
        self.name = name  # type: ignore[misc]
        self.description, self.parameters = _told(server, definition)  # type: ignore[misc]
        self.annotations: dict[str, Any] = _annotations(definition, server._secrets)
        self.output_schema: dict[str, Any] | None = getattr(definition, "output_schema", None)
        self.timeout = server.timeout  # type: ignore[misc]
        # the user's word only: a server's idempotentHint would have an approved call that a
        # crash left in doubt run again (servers mark write_file, delete_*, git_reset so)
        self.idempotent = server._idempotent(self.remote_name, name)  # type: ignore[misc]
        self.server = server.label  # type: ignore[misc]
        self.requires_approval, self._resolver = self._gate(rule)  # type: ignore[misc]
        self.approval_note = self._why(rule) if self.requires_approval else None  # type: ignore[misc]

    @property
    def approval(self) -> Any:
        """The server's approval function for this tool (``None``: a fixed rule)."""
        return self._resolver

    def _gate(self, rule: ApprovalRule) -> tuple[bool, Any]:
        """``(requires_approval, resolver)`` from the server's rule for this tool."""
        if callable(rule) and not isinstance(rule, bool):
            return True, rule
        if rule == "annotations":
            ann = self.annotations
            # destructive wins over read-only: a tool claiming both asks first
            gated = ann.get("readOnlyHint") is not True or ann.get("destructiveHint") is True
            return gated, None
        return rule is True or rule == "always", None

    def _why(self, rule: ApprovalRule) -> str | None:
        """Why a gated call of this tool waits for a decision (the card's reason line)."""
        where = f"the {self.server} server" if self.server else "the server"
        if callable(rule) and not isinstance(rule, bool):
            return None  # a resolver says per call
        if rule != "annotations":
            return f"approval={rule!r} for {where}"
        if self.annotations.get("destructiveHint") is True:
            return f"{where} marks it destructive"
        return f"{where} does not mark it read-only"

    async def execute(self, **arguments: Any) -> Any:
        """Send the call to the server (on nbagent's background loop) and map its answer.

        ``chat.cancel()`` abandons it (the server is told to cancel): an error
        result, since whether the tool did anything is unknown.
        """
        return await self._server._call_async(
            self.remote_name, arguments, f"MCP tool {self.name!r}", call_reporter(), self
        )

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The strict schema check (:meth:`Tool.validate_arguments`), and an argument the
        schema does not declare refused, unless the schema says what else it takes
        (``additionalProperties``): a server ignores such an argument (the official SDK's
        do), so a ``dry_run`` its ``pay`` no longer declares would pay for real. The model
        is told when its call is checked; an approved call is checked again against the
        tool as listed when it runs (a chat loaded after the server was upgraded).

        Raises:
            SchemaValidationError: Naming each problem.
        """
        extra = _undeclared(self.parameters, arguments) if isinstance(arguments, dict) else []
        try:
            checked = super().validate_arguments(arguments)
        except SchemaValidationError as exc:
            if extra:
                raise SchemaValidationError("; ".join([str(exc), *extra])) from None
            raise
        if extra:
            raise SchemaValidationError("; ".join(extra))
        return checked

    def _same(self, definition: Any, rule: ApprovalRule, name: str) -> bool:
        return (
            definition.name == self.remote_name
            and name == self.name
            and _told(self._server, definition) == (self.description, self.parameters)
            and _annotations(definition, self._server._secrets) == self.annotations
            and self._gate(rule) == (self.requires_approval, self.approval)
        )

    def __repr__(self) -> str:
        gate = ", requires_approval" if self.requires_approval or self.approval else ""
        return f"<MCPTool {self.name} from {self.server!r}{gate}>"


class ResourceReader(MCPTool, abstract=True):
    """The tool the model reads a server's resources with (``<prefix>_read_resource``).

    Offered when the server lists a resource or a template; read-only, so under the default
    ``approval="annotations"`` it runs freely, and any other rule (``"always"``, a
    dict entry ``"read_resource"``, a resolver) gates it like the server's tools.
    """

    async def execute(self, **arguments: Any) -> Any:
        """Read the resource the model named (its images reach the model as images)."""
        uri = str(arguments.get("uri", ""))
        return await self._server._read_async(uri, f"MCP resource {uri!r}")


_SCRIPTS = frozenset(
    {".py", ".pyz", ".js", ".mjs", ".cjs", ".ts", ".mts", ".jar", ".rb", ".sh", ".bash"}
    | {".pl", ".php", ".lua", ".exe", ".bat", ".cmd", ".ps1"}
)
"""The suffixes of programs a stdio server is run as (``python server.py``, ``node
build/index.js``, ``java -jar server.jar``): such an argument names the server."""


def _fallback_label(command: str, argv: Sequence[str]) -> str:
    """A stdio server's label when none is given (before it names itself): the stem of its
    last program argument (``server.py``) as the masked command line shows it, else the
    command's name. Never a secret: masked arguments, option values (``--password x.y``,
    ``--token=a.b.c``), URLs and assignments are not candidates."""
    shown, secrets = masked_argv(argv)
    for arg in reversed(shown):
        if (
            arg.startswith("-")
            or REDACTED in arg
            or "=" in arg
            or "://" in arg
            or any(c.isspace() for c in arg)
        ):
            continue
        path = Path(arg)
        if path.suffix.lower() in _SCRIPTS and path.stem and not any(s in arg for s in secrets):
            return path.stem
    name = Path(command).stem
    masked, _ = masked_argv([name])
    return name if name and masked == [name] and REDACTED not in name else "mcp"


def _command_line(command: Any, args: Sequence[str]) -> tuple[str, Sequence[str]]:
    """Command and args of ``stdio("npx", ["-y", "pkg"])`` or ``stdio(["npx", "-y", "pkg"])``."""
    if isinstance(command, (str, PathLike)):
        if isinstance(args, (str, bytes)):
            raise TypeError(f"MCPServer.stdio args must be a list of strings, got {args!r}")
        return str(command), args
    if isinstance(command, Sequence) and not isinstance(command, bytes):
        line = [str(a) for a in command]
        if not line:
            raise TypeError("MCPServer.stdio needs a command; got an empty list")
        if args:
            raise TypeError(
                "MCPServer.stdio takes the command line as one list, or a command and its args, "
                "not both"
            )
        return line[0], line[1:]
    raise TypeError(
        f"MCPServer.stdio needs a command (a string or a list), got {type(command).__name__}"
    )


class MCPServer(ToolSource):
    """An MCP server whose tools a chat can use: ``chat.with_tools(server)``.

    Make one with :meth:`stdio` (a command nbagent starts) or :meth:`http` (a
    streamable HTTP endpoint). Nothing connects until a chat (or
    :meth:`connect`, :meth:`list_tools`, :meth:`call`) needs the server.

    Args of both constructors:
        prefix: Put ``<prefix>_`` before every tool name (two servers with a
            ``search`` tool, or a server tool named like a local one).
        label: The server's name in cards, the log and the store (default:
            ``prefix``, else the name the server gives itself once connected,
            else the command's or host's name).
        approval: Which calls need a human decision: ``"annotations"``
            (default: tools marked ``readOnlyHint`` run freely; destructive,
            other writing or unannotated tools ask first), ``"always"``,
            ``"never"``, a resolver ``(call) -> True | False | None`` applied
            to every tool (as ``@tool(approval=...)``), or a dict from tool
            name (as the server names it) to one of those (``True``/``False``
            mean always/never); tools it does not name follow its ``"*"``
            entry, else the annotations. A key that is one tool's name on the
            server and another's as offered is refused (``ToolDefinitionError``
            when the tools are listed), as it is in ``idempotent=`` and ``tools()``.
        timeout: Seconds before a call is abandoned (``timed_out``; the
            server is told to cancel it).
        connect_timeout: Seconds for starting or reaching the server and
            for listing its tools (default 30; ``None``: no limit). Past it,
            ``MCPServerError``; a server that connected but does not list
            is restarted at the next use.
        roots: The directories (paths) or URIs the server may work in; its
            ``roots/list`` request is answered with them without asking
            (default: none).
        sampling: The provider (or a model name) the server's approved sampling
            requests run on (default: the chat's); its tokens and cost still
            count in the chat's totals and budgets.
        idempotent: Which tools are safe to run again after a crash left an
            approved call in doubt (as ``@tool(idempotent=True)``): ``True``
            (all of them), or a list of tool names (as the server names them,
            or with the prefix). Default ``False``: such a call is reported in
            doubt, never rerun. The server's own ``idempotentHint`` is not
            taken as this: servers mark ``write_file``, ``delete_*`` or
            ``git_reset`` so, and a hint is not your word that running one twice is safe.
        secrets: More values to keep out of every text (errors, results,
            schemas, logs, the store), beyond those nbagent recognises: an
            ``env`` / header value named like a secret (``*_KEY``, ``*_TOKEN``,
            ``*PASSWORD*``, ``Authorization``, ``Cookie``...), a key-shaped value,
            a URL's credentials and secret-looking arguments. Other configuration
            (``TZ=Europe/Paris``, ``APP_ENV=production``) is left as it is.

    Requests from the server: an elicitation (a form, or a URL to visit) or a
    sampling request sent in the middle of a chat's call becomes a pending input
    on that chat (``chat.pending_inputs``; ``chat.answer`` / ``chat.decline``)
    while the call waits, bounded by its ``timeout``; an approved sampling
    request runs on the chat's provider and counts in its totals and budgets. On
    the older protocol, which does not say which call a request is for, a request
    arriving while calls of several chats are in flight is refused (it cannot be
    attributed; see ``_requests.py``).

    Lifecycle: the connection opens on first use; a server that exits while
    idle is restarted by the next call; one that exits during a call fails
    that call (an error result: whether it did anything is unknown, so it is
    never re-sent) and is restarted by the next. A change of the server's
    tool list (``notifications/tools/list_changed``) shows up at the chat's
    next request (listing again at most 3 times at once, then once a second).
    A chat's call whose server restarted or changed its tools after the call's
    arguments were checked (an approval waited meanwhile) is checked again
    against the tools listed anew: a tool no longer listed, arguments its new
    schema refuses or an argument it no longer takes fail the call, unsent.
    An argument a tool's schema does not declare is refused (unless the schema
    says ``additionalProperties``): when the model's call is checked, and when
    an approved call runs (one loaded after the server was upgraded too).
    A JSON-RPC error from the server refuses that request only.
    ``chat.cancel()`` abandons a connection, listing or call in flight.
    ``chat.close()``, :meth:`close`, ``with`` and interpreter exit
    stop it (calls in flight are never cut off: it stops once they end);
    a stdio server dies with the process that started it.
    """

    def __init__(
        self,
        kind: Literal["stdio", "http"],
        target: str,
        *,
        open_client: Callable[[Any], Any],
        prefix: str | None = None,
        label: str | None = None,
        approval: Approval = "annotations",
        timeout: float | None = None,
        connect_timeout: float | None = conn.CONNECT_TIMEOUT,
        secrets: Sequence[str] = (),
        roots: Iterable[str | PathLike[str]] | None = None,
        sampling: Any = None,
        idempotent: bool | Iterable[str] = False,
    ):
        require("mcp", _FEATURE)
        self._users: weakref.WeakSet[object] = weakref.WeakSet()  # the open chats using it
        if prefix is not None and (not prefix or _INVALID.search(prefix)):
            raise ToolDefinitionError(
                f"prefix must be letters, digits, '_' or '-' (it starts tool names), got {prefix!r}"
            )
        if isinstance(approval, Mapping):
            for key, rule in approval.items():
                _check_rule(rule, f"approval[{key!r}]")
        else:
            _check_rule(approval, "approval")
        for name, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if value is not None:
                try:
                    seconds(value, name)
                except ValueError as exc:
                    raise ToolDefinitionError(f"{exc} (or None: no limit)") from None
        self.kind = kind
        self.prefix = prefix
        self._approval = approval
        self._idempotent_names = _idempotent_names(idempotent)
        self.timeout = timeout
        self._label = label
        self._fallback_label = target
        self.connect_timeout = connect_timeout
        self._connection = conn.Connection(
            open_client, label or prefix or target, connect_timeout=connect_timeout
        )
        if sampling is not None:
            sampling = resolve_provider(sampling) if isinstance(sampling, str) else sampling
            if not callable(getattr(sampling, "complete", None)):
                raise ToolDefinitionError(
                    f"sampling= takes a provider or a model name, got {type(sampling).__name__}"
                )
        self._requests = Requests(label or prefix or target, as_roots(roots), sampling)
        self._connection.requests = self._requests
        self._tools: tuple[MCPTool, ...] = ()
        self._task_only: frozenset[str] = frozenset()  # listed tools it cannot run (tasks)
        self._generation = -1
        self._secrets = tuple(secrets)
        secrets_ = self._secrets  # not a method: the connection must not keep the server alive
        self._connection.scrub = lambda text: scrub(text, secrets_)
        self._requests.scrub = self._connection.scrub
        guard_sdk_logs(self, secrets_)  # the SDK's own log records too (its DEBUG lines)
        self._noted: set[str] = set()  # naming notices already shown
        weakref.finalize(self, self._connection.close)

    def _scrub_text(self, text: str) -> str:
        """Text the server sent (a description, a prompt) with its secrets as ``***``."""
        return self._connection.scrub(text)

    # ----------------------------------------------------------- constructors
    @classmethod
    def stdio(
        cls,
        command: str | PathLike[str] | Sequence[str],
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | PathLike[str] | None = None,
        prefix: str | None = None,
        label: str | None = None,
        approval: Approval = "annotations",
        timeout: float | None = None,
        connect_timeout: float | None = conn.CONNECT_TIMEOUT,
        max_result_bytes: int = _stdio.MAX_MESSAGE_BYTES,
        roots: Iterable[str | PathLike[str]] | None = None,
        sampling: Any = None,
        idempotent: bool | Iterable[str] = False,
        secrets: Iterable[str] = (),
    ) -> MCPServer:
        """A server nbagent starts as a process and talks to over its stdin/stdout.

        Args:
            command: The executable (``"python"``, ``"npx"``, ``"uvx"``...), or
                the whole command line as a list (``["npx", "-y", "pkg"]``,
                the form of MCP client configurations), then with no ``args``.
            args: Its arguments. The ``repr`` shows ``***`` for secret-looking
                ones (``--token=...``, the value after ``--api-key``, a
                key-shaped argument), and errors never show them.
            env: Environment variables for it, added to a minimal safe set
                (``PATH``, ``HOME``...; the SDK does not pass the rest of yours).
                Never shown in reprs; the secret ones (named like a secret,
                ``GITHUB_TOKEN``, ``DB_PASSWORD``..., or key-shaped; 6 characters
                or more) are replaced by ``***`` in everything the server sends
                and every error it causes. Mark others with ``secrets=``.
            cwd: Its working directory.
            max_result_bytes: The largest message read from the server
                (default 16 MiB; the model sees at most ``result_max_chars``
                of a result anyway). A longer answer is not kept: its call
                fails with ``MCPServerError`` saying so, and the server stays up.
            prefix: See :class:`MCPServer`.
            label: See :class:`MCPServer`.
            approval: See :class:`MCPServer`.
            timeout: See :class:`MCPServer`.
            connect_timeout: See :class:`MCPServer`.
            roots: See :class:`MCPServer`.
            sampling: See :class:`MCPServer`.
            idempotent: See :class:`MCPServer`.
            secrets: See :class:`MCPServer`.

        The server's stderr (its logs) goes to this process's real stderr:
        in a notebook, the terminal running Jupyter, not the notebook. It
        runs in its own process group, which is ended with it; on Linux the
        whole group dies with this process, even behind a wrapper (``npx``,
        ``uvx``, ``sh -c``) and even if it ignores the end of its input.
        """
        require("mcp", _FEATURE)
        command, args = _command_line(command, args)
        if (
            isinstance(max_result_bytes, bool)
            or not isinstance(max_result_bytes, int)
            or max_result_bytes < 1024
        ):
            raise ToolDefinitionError(
                f"max_result_bytes must be a whole number of bytes, at least 1024, "
                f"got {max_result_bytes!r}"
            )
        argv = [str(a) for a in args]
        environment = {str(k): str(v) for k, v in (env or {}).items()}
        workdir = str(cwd) if cwd is not None else None
        fallback = _fallback_label(command, argv)

        def open_client(link: conn.Connection) -> Any:
            from mcp import Client

            path = environment.get("PATH", os.environ.get("PATH"))
            transport = _stdio.stdio_transport(
                _stdio.guarded(command, argv, path),
                environment,
                workdir,
                max_message_bytes=max_result_bytes,
                on_list_changed=link.list_changed,
                on_lost=link.lost,
            )
            return Client(
                transport,
                message_handler=link.on_message,
                logging_callback=link.on_log,
                log_level=conn.LOG_LEVEL,
                cache=None,
                **link.requests.callbacks(),
            )

        server = cls(
            "stdio",
            fallback,
            open_client=open_client,
            prefix=prefix,
            label=label,
            approval=approval,
            timeout=timeout,
            connect_timeout=connect_timeout,
            secrets=server_secrets(
                argv=argv, values=[*secret_values(environment), *_marked(secrets)]
            ),
            roots=roots,
            sampling=sampling,
            idempotent=idempotent,
        )
        server.max_result_bytes = max_result_bytes
        server._describe = f"{command} {' '.join(masked_argv(argv)[0])}".strip()
        return server

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        prefix: str | None = None,
        label: str | None = None,
        approval: Approval = "annotations",
        timeout: float | None = None,
        connect_timeout: float | None = conn.CONNECT_TIMEOUT,
        roots: Iterable[str | PathLike[str]] | None = None,
        sampling: Any = None,
        idempotent: bool | Iterable[str] = False,
        secrets: Iterable[str] = (),
    ) -> MCPServer:
        """A server reached over streamable HTTP at ``url`` (``http://127.0.0.1:8000/mcp``).

        Args:
            url: The MCP endpoint.
            headers: Sent with every request (``{"Authorization": "Bearer ..."}``);
                never shown in reprs; the secret ones (named like a secret,
                ``Authorization``, ``X-Api-Key``..., or key-shaped), the URL's
                credentials and its secret query values (``?api_key=``) are
                replaced by ``***`` in everything the server sends and every error.
            prefix: See :class:`MCPServer`.
            label: See :class:`MCPServer`.
            approval: See :class:`MCPServer`.
            timeout: See :class:`MCPServer`.
            connect_timeout: See :class:`MCPServer`.
            roots: See :class:`MCPServer`.
            sampling: See :class:`MCPServer`.
            idempotent: See :class:`MCPServer`.
            secrets: See :class:`MCPServer`.
        """
        require("mcp", _FEATURE)
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"MCPServer.http needs an http(s) URL, got {url!r}")
        sent = {str(k): str(v) for k, v in (headers or {}).items()}

        def open_client(link: conn.Connection) -> Any:
            from mcp import Client

            transport = conn.http_transport(url, sent, link.http_answered)
            return Client(
                transport,
                message_handler=link.on_message,
                logging_callback=link.on_log,
                log_level=conn.LOG_LEVEL,
                cache=None,
                **link.requests.callbacks(),
            )

        server = cls(
            "http",
            parts.hostname,
            open_client=open_client,
            prefix=prefix,
            label=label,
            approval=approval,
            timeout=timeout,
            connect_timeout=connect_timeout,
            secrets=server_secrets(url=url, values=[*secret_values(sent), *_marked(secrets)]),
            roots=roots,
            sampling=sampling,
            idempotent=idempotent,
        )
        shown = masked_url(url)[0]
        server._describe = shown.partition("?")[0].replace(f"{REDACTED}@", "", 1)
        return server

    _describe = ""
    max_result_bytes: int | None = None  # stdio: the largest message read (see stdio())

    # ----------------------------------------------------------- the face
    @property
    def approval(self) -> Approval:
        """The approval rule given when the server was made."""
        return self._approval

    @property
    def label(self) -> str:
        """The server's name in cards, the log and the store (see :class:`MCPServer`)."""
        return self._label or self.prefix or self._connection.server_name or self._fallback_label

    @property
    def connected(self) -> bool:
        return self._connection.usable()

    def connect(self) -> Self:
        """Connect now (else the first use does); returns the server.

        Raises:
            MCPServerError: The server cannot be started or reached.
        """
        self.source_tools()
        return self

    def list_tools(self) -> tuple[MCPTool, ...]:
        """The server's tools as nbagent tools (connects if needed)."""
        return self.source_tools()

    def tools(
        self, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None
    ) -> MCPToolSelection:
        """Some of the server's tools, for ``chat.with_tools(...)``.

        Args:
            include: Only these tools (names as the server gives them, or with
                the prefix); ``None``: all.
            exclude: Not these.
        """
        return MCPToolSelection(self, include, exclude)

    def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> Any:
        """Call one of the server's tools directly, outside any chat (no approval asked).

        Returns:
            An :class:`~nbagent.mcp.MCPResult` (a ``str`` with the structured content).

        Raises:
            MCPToolError: The tool answered with ``isError``.
            MCPServerError: The server cannot be reached or broke during the call.
            ToolDefinitionError: ``name`` is one tool's name on the server and another's
                as offered (with the prefix); nothing is sent.
        """
        remote = self._remote(name, self.source_tools())
        self._refuse_task_only(remote)
        args = dict(arguments or {})
        what = f"MCP tool {remote!r}"
        return scrubbed_call(
            lambda: scrubbed_result(
                result_value(conn.wait(self._uncalled(remote, args), what=what)),
                self._secrets,
            ),
            self._secrets,
        )

    async def _uncalled(self, remote: str, arguments: dict[str, Any]) -> Any:
        """A call made in code (no chat's call to ask a person), known to be in flight: a
        server's request during it is never given to a chat's call running meanwhile."""
        async with self._requests.calling(None):
            return await self._connection.call(remote, arguments)

    async def call_async(self, name: str, arguments: Mapping[str, Any] | None = None) -> Any:
        """Async twin of :meth:`call` (from any event loop)."""
        remote = self._remote(name, await self._source_tools_async())
        self._refuse_task_only(remote)
        return await self._call_async(remote, dict(arguments or {}), f"MCP server {self.label!r}")

    # ----------------------------------------------------------- resources and prompts
    def resources(self) -> list[MCPResource]:
        """The resources the server lists (every page; connects if needed).

        Raises:
            MCPServerError: The server cannot be reached, or refused.
        """
        return [resource_of(d, self) for d in self._every("resources")]

    async def resources_async(self) -> list[MCPResource]:
        """Async twin of :meth:`resources` (from any event loop)."""
        return [resource_of(d, self) for d in await self._every_async("resources")]

    def _every(self, noun: str) -> list[Any]:
        """Every page of what the server lists (``resources``, ``prompts``), errors scrubbed."""
        what = f"MCP server {self.label!r} listing its {noun}"
        listing = f"listing its {noun}"
        return scrubbed_call(
            lambda: conn.wait(self._connection.paged(listing, f"list_{noun}", noun), what=what),
            self._secrets,
        )

    async def _every_async(self, noun: str) -> list[Any]:
        """Async twin of :meth:`_every` (from any event loop)."""
        what = f"MCP server {self.label!r} listing its {noun}"
        coro = self._connection.paged(f"listing its {noun}", f"list_{noun}", noun)
        return await scrubbed_await(run_on_loop(coro, _background_loop(), what), self._secrets)

    def read_resource(self, uri: str) -> MCPResult:
        """A resource's contents: its text (a binary one as a line naming it), its images
        and PDFs as ``parts``, and ``uri``; ``chat.ask(text, resources=[...])`` takes it.

        Raises:
            MCPServerError: The server cannot be reached, or refused (an unknown URI).
        """
        uri = _checked_uri(uri)
        what = f"MCP resource {uri!r}"
        return scrubbed_call(
            lambda: scrubbed_result(
                contents_value(
                    conn.wait(self._connection.request(what, "read_resource", uri), what=what),
                    uri,
                ),
                self._secrets,
            ),
            self._secrets,
        )

    async def read_resource_async(self, uri: str) -> MCPResult:
        """Async twin of :meth:`read_resource` (from any event loop)."""
        uri = _checked_uri(uri)
        return await self._read_async(uri, f"MCP resource {uri!r}")

    async def _read_async(self, uri: str, what: str) -> MCPResult:
        async def read() -> MCPResult:
            coro = self._connection.request(what, "read_resource", uri)
            raw = await _abandonable(run_on_loop(coro, _background_loop(), what), what)
            return scrubbed_result(contents_value(raw, uri), self._secrets)

        return await scrubbed_await(read(), self._secrets)

    def prompts(self) -> list[MCPPrompt]:
        """The prompts the server offers (every page; connects if needed)."""
        return [prompt_of(d, self) for d in self._every("prompts")]

    async def prompts_async(self) -> list[MCPPrompt]:
        """Async twin of :meth:`prompts` (from any event loop)."""
        return [prompt_of(d, self) for d in await self._every_async("prompts")]

    def prompt(self, name: str, /, **arguments: Any) -> MCPPromptMessages:
        """A prompt's messages with these arguments, to ask with: ``chat.ask(server.prompt(...))``.

        Arguments are sent as strings (the protocol's prompt arguments are); ``name`` is
        positional-only, so a prompt may have an argument called ``name`` too.

        Raises:
            MCPServerError: The server cannot be reached, or refused (an unknown
                prompt, a missing required argument).
        """
        args = {str(k): str(v) for k, v in arguments.items()}
        what = f"MCP prompt {name!r}"
        return scrubbed_call(
            lambda: prompt_messages(
                name,
                conn.wait(self._connection.request(what, "get_prompt", name, args), what=what),
                self._scrub_text,
            ),
            self._secrets,
        )

    async def prompt_async(self, name: str, /, **arguments: Any) -> MCPPromptMessages:
        """Async twin of :meth:`prompt` (from any event loop)."""
        args = {str(k): str(v) for k, v in arguments.items()}
        what = f"MCP prompt {name!r}"
        coro = self._connection.request(what, "get_prompt", name, args)
        raw = await scrubbed_await(run_on_loop(coro, _background_loop(), what), self._secrets)
        return prompt_messages(name, raw, self._scrub_text)

    async def _call_async(
        self,
        remote: str,
        arguments: dict[str, Any],
        what: str,
        reporter: CallReporter | None = None,
        listed: MCPTool | None = None,
    ) -> MCPResult:
        """One call on the background loop, from any loop: its answer, or its error scrubbed.

        ``reporter``: the chat's running call, told the server's progress and log messages.
        ``listed``: the tool as the chat listed it, whose schema the arguments were checked
        against: if the server has restarted (or changed its tools) since, they are checked
        against its tools now before anything is sent (:meth:`_still_takes`).
        """

        asker = current_input_asker()  # the chat's call this runs for, if any

        # A chat with a store parks the call on a 2026-07-28 server's input requests (durable:
        # answerable from anywhere, after a restart) instead of answering them in memory.
        parking = None
        if asker is not None and getattr(asker, "parks", False):
            parking = (self._requests, asker)

        async def in_flight() -> Any:  # on the background loop: requests find the call
            generation = None
            if listed is not None:
                generation = await self._still_takes(listed, arguments)
            async with self._requests.calling(asker):
                return await self._connection.call(
                    remote, arguments, reporter, parking, generation=generation
                )

        async def call() -> MCPResult:
            coro = in_flight()
            return scrubbed_result(
                result_value(await _abandonable(run_on_loop(coro, _background_loop(), what), what)),
                self._secrets,
            )

        return await scrubbed_await(call(), self._secrets)

    async def _still_takes(self, listed: MCPTool, arguments: dict[str, Any]) -> int:
        """On the background loop, before a chat's call is sent: the connection's
        generation, once the call is known to fit the server's tools as they are now.

        The arguments were checked against ``listed``, the tool as the chat listed it. A
        server that restarted since (it exited while idle and is started again here), or
        announced a changed list, is listed again (one ``tools/list``, as the chat's next
        request would); else the tools as this process last listed them count (another
        chat's listing of a shared server may be newer than ``listed``). A tool it no longer
        lists, arguments its schema now refuses (an argument it does not declare among them,
        :meth:`MCPTool.validate_arguments`), or an argument the old schema declared and the
        new one does not (an open schema takes it, and may ignore it: a ``dry_run``
        dropped) raise ``MCPServerError`` saying the call was not sent. The call is
        answered with that error, so it is never sent later either. What this process never
        saw (a chat loaded after the server was upgraded) is caught by the schema as listed
        now alone: its arguments were checked against it when the call was claimed to run.
        """
        c = self._connection
        await c.ensure()
        remote = listed.remote_name
        # the tools as listed now: this process's listing when current (a chat loaded after
        # an upgrade, or another chat's listing of a shared server), else listed anew
        tools = self._tools if self._listed() else self._took(await c.list_tools())
        self._refuse_task_only(remote)
        now = next((t for t in tools if t.remote_name == remote), None)
        why = "it restarted or changed its tools since the call was made"
        if now is None or isinstance(now, ResourceReader) is not isinstance(listed, ResourceReader):
            raise MCPServerError(
                f"MCP server {self.label!r} no longer lists tool {remote!r} ({why}); "
                "the call was not sent"
            )
        if now is not listed:
            problems = []
            try:
                now.validate_arguments(dict(arguments))
            except ValueError as exc:  # SchemaValidationError: names each problem
                problems.append(f"its arguments no longer fit: {exc}")
            before, after = (_properties(t.parameters) for t in (listed, now))
            if before is not None and after is not None:
                problems += [  # an open schema (additionalProperties) takes it, and may ignore it
                    f"it no longer takes argument {k!r}"
                    for k in arguments
                    if k in before and k not in after
                ]
            if problems:
                raise MCPServerError(
                    f"MCP server {self.label!r} changed tool {remote!r} ({why}): "
                    f"{'; '.join(problems)}; the call was not sent"
                )
        return c.generation

    def attach(self, user: object) -> None:
        """A chat uses this server (``with_tools``, a fork): its ``close()`` leaves the server
        running while another open chat uses it."""
        self._users.add(user)

    def release(self, user: object) -> None:
        """A chat using this server was closed: the server closes once no open chat uses it
        (closed from under another chat, that chat's next step started a fresh server, its
        session state lost)."""
        self._users.discard(user)
        if not self._users:
            self.close()

    def close(self) -> None:
        """Close the connection (a stdio server's process stops); using it again reconnects.

        Calls in flight (another chat's, sharing this server) are not cut off: the server
        then stops once the last of them ends, unless it is used again meanwhile.
        """
        self._connection.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    def __repr__(self) -> str:
        state = "connected" if self.connected else "not connected"
        return f"<MCPServer {self.label!r} {self.kind} {self._describe!r} ({state})>"

    # ----------------------------------------------------------- ToolSource
    def source_tools(self) -> tuple[MCPTool, ...]:
        """The current tools, listing them again after a change or a reconnection."""
        c = self._connection
        if self._listed():
            return self._tools
        what = f"MCP server {self.label!r} listing its tools"
        return self._took(
            scrubbed_call(lambda: conn.wait(c.list_tools(), what=what), self._secrets)
        )

    async def _source_tools_async(self) -> tuple[MCPTool, ...]:
        """:meth:`source_tools` awaited from any loop, nbagent's background loop included."""
        if self._listed():
            return self._tools
        what = f"MCP server {self.label!r} listing its tools"
        listing = run_on_loop(self._connection.list_tools(), _background_loop(), what)
        return self._took(
            await scrubbed_await(_abandonable(listing, what, ran=False), self._secrets)
        )

    def _listed(self) -> bool:
        """Whether the tools are current: unchanged, or changed again too soon (listed later)."""
        c = self._connection
        return c.usable() and self._generation == c.generation and not (c.stale and c.may_relist())

    def _took(self, definitions: list[Any]) -> tuple[MCPTool, ...]:
        generation = self._connection.generation
        # a listing refused (a name of two tools) is not taken: the next use lists again
        self._tools = self._rebuild(definitions)
        self._generation = generation
        return self._tools

    def _rebuild(self, definitions: list[Any]) -> tuple[MCPTool, ...]:
        """New tool objects only for what changed, so a chat re-merges only on a real change."""
        old = {t.remote_name: t for t in self._tools}
        names, notes = local_names(self.prefix, (d.name for d in definitions))
        out: list[MCPTool] = []
        seen: set[str] = set()
        task_only: set[str] = set()
        for d in definitions:
            if d.name in seen:
                notes.append(f"it lists tool {d.name!r} twice; only the first is offered")
                continue
            seen.add(d.name)
            if _task_only(d):
                task_only.add(d.name)
                notes.append(TASK_ONLY.format(name=d.name))
                continue
            name = names.get(d.name)
            if name is None:
                continue  # left out (said in notes)
            rule = self._rule(d.name, name)
            kept = old.get(d.name)
            same = kept is not None and kept._same(d, rule, name)
            out.append(kept if same and kept is not None else MCPTool(self, d, rule, name))
        self._task_only = frozenset(task_only)
        reader = self._reader(old, {d.name for d in definitions}, {t.name for t in out})
        if reader is not None:
            out.append(reader)
        self._refuse_names_of_two(out)
        notes.extend(self._unmatched_rules(seen, out))
        for note in notes:
            if note not in self._noted:
                self._noted.add(note)
                notice(f"MCP server {self.label!r}: {note}")
        if len(out) == len(self._tools) and all(
            a is b for a, b in zip(out, self._tools, strict=True)
        ):
            return self._tools
        return tuple(out)

    def _reader(
        self, old: Mapping[str, MCPTool], remotes: set[str], names: set[str]
    ) -> MCPTool | None:
        """The read tool, when the server has resources and no tool of that name."""
        if not self._connection.has_resources or READ_TOOL in remotes:
            return None
        name = _tool_name(self.prefix, READ_TOOL)
        if name in names:
            return None
        d = read_tool_definition()
        rule = self._rule(READ_TOOL, name)
        kept = old.get(READ_TOOL)
        if kept is not None and isinstance(kept, ResourceReader) and kept._same(d, rule, name):
            return kept
        return ResourceReader(self, d, rule, name)

    def _unmatched_rules(self, listed: set[str], tools: list[MCPTool]) -> list[str]:
        """A note for each ``approval={name: ...}`` entry and ``idempotent=`` name that
        names no tool the server lists (a typo would leave the real tool on its
        annotations, or in doubt after a crash, unnoticed)."""
        known = listed | {t.name for t in tools} | {t.remote_name for t in tools}
        offered = _listing(t.remote_name for t in tools)
        idempotent = self._idempotent_names
        rules = self._approval if isinstance(self._approval, Mapping) else {}
        return [
            f"approval={{{key!r}: ...}} names no tool it lists (its tools: {offered}); the "
            "rule applies to a tool of that name listed later"
            for key in rules
            if key != "*" and key not in known
        ] + [
            f"idempotent=[{key!r}] names no tool it lists (its tools: {offered}); it applies "
            "to a tool of that name listed later"
            for key in sorted(idempotent if isinstance(idempotent, frozenset) else ())
            if key not in known
        ]

    def _refuse_names_of_two(self, tools: Sequence[MCPTool]) -> None:
        """A name in ``approval=`` or ``idempotent=`` that names two of these tools (one's
        name on the server, the other's as offered) is refused: its rule would go to
        whichever came first."""
        rules = self._approval if isinstance(self._approval, Mapping) else {}
        idempotent = self._idempotent_names
        for where, keys in (
            ("approval=", [k for k in rules if k != "*"]),
            ("idempotent=", sorted(idempotent) if isinstance(idempotent, frozenset) else []),
        ):
            for key in keys:
                _one_tool(self.label, key, tools, where)
        for t in tools:  # one tool named twice (as offered and on the server), two rules
            if t.name != t.remote_name and t.name in rules and t.remote_name in rules:
                a, b = rules[t.remote_name], rules[t.name]
                if _rule_word(a) != _rule_word(b):
                    raise ToolDefinitionError(
                        f"MCP server {self.label!r}: approval= gives tool {t.name!r} two "
                        f"rules, {a!r} under the server's name {t.remote_name!r} and {b!r} "
                        f"under {t.name!r}; keep one of them"
                    )

    def _idempotent(self, remote: str, name: str) -> bool:
        """Whether the user declared this tool safe to rerun (``idempotent=``)."""
        names = self._idempotent_names
        return names is True or (isinstance(names, frozenset) and bool({remote, name} & names))

    def _rule(self, remote: str, name: str) -> ApprovalRule:
        rules = self._approval
        if not isinstance(rules, Mapping):
            return rules
        for key in (remote, name, "*"):
            if key in rules:
                return rules[key]
        return "annotations"

    def _refuse_task_only(self, remote: str) -> None:
        if remote in self._task_only:
            raise MCPServerError(f"MCP server {self.label!r}: " + TASK_ONLY.format(name=remote))

    def _remote(self, name: str, tools: tuple[MCPTool, ...]) -> str:
        """The server's name for the tool ``name`` names (as offered, or as the server names
        it); a name of no listed tool is sent as it is (the server says it is unknown).

        Raises:
            ToolDefinitionError: ``name`` names two tools (see :func:`_one_tool`).
        """
        tool = _one_tool(self.label, name, tools, "call()")
        return tool.remote_name if tool is not None else name


TASK_ONLY = (
    "tool {name!r} runs only as a task (execution.taskSupport: required), which this MCP "
    "client cannot run (the mcp SDK's client sends no task-augmented calls and has no "
    "tasks/get or tasks/result); it is not offered"
)


_COMBINED = ("allOf", "anyOf", "oneOf")
# keywords after which the names a schema takes cannot be told: it says what else it takes
# (the schema check applies it), or bounds names some other way, or refers on dynamically
_UNTOLD = (
    "additionalProperties",
    "unevaluatedProperties",
    "dependentSchemas",
    "dependencies",
    "propertyNames",
    "$dynamicRef",
    "$recursiveRef",
)


def _undeclared(schema: Any, arguments: Mapping[str, Any]) -> list[str]:
    """The arguments an MCP tool's input schema does not declare, each as a problem.

    Declared: the names of ``properties``, ``required`` and ``dependentRequired`` (a name
    required is taken, whether or not ``properties`` lists it) and those a
    ``patternProperties`` pattern matches, through ``allOf``/``anyOf``/``oneOf``/``if``/
    ``then``/``else`` and ``$ref`` into the schema's own ``$defs``. Nothing is refused when
    the schema declares no names (``{"type": "object"}`` takes anything; the official SDKs
    list ``"properties": {}`` for a tool without arguments, which does refuse them) or when
    its names cannot be told (:data:`_UNTOLD`, a ``$ref`` elsewhere)."""
    declared: set[str] = set()
    patterns: list[str] = []
    names_given = False  # whether any ``properties``/``patternProperties`` says what it takes

    def walk(node: Any, depth: int) -> bool:  # whether its declared names are all known
        nonlocal names_given
        if node is True:
            return True  # the boolean schema ``true``: declares nothing, bounds nothing
        if not isinstance(node, Mapping) or depth > 8:
            return False
        if any(k in node for k in _UNTOLD):
            return False
        if "$ref" in node:
            target = _local_ref(schema, node["$ref"])
            if target is None or not walk(target, depth + 1):
                return False
        props = node.get("properties")
        if isinstance(props, Mapping):
            names_given = True
            declared.update(k for k in props if isinstance(k, str))
        pattern = node.get("patternProperties")
        if isinstance(pattern, Mapping):
            names_given = True
            patterns.extend(k for k in pattern if isinstance(k, str))
        required = node.get("required")
        if isinstance(required, list):
            declared.update(k for k in required if isinstance(k, str))
        dependent = node.get("dependentRequired")
        if isinstance(dependent, Mapping):
            for key, names in dependent.items():
                declared.update([key] if isinstance(key, str) else [])
                if isinstance(names, list):
                    declared.update(k for k in names if isinstance(k, str))
        subs = [s for key in _COMBINED if isinstance(node.get(key), list) for s in node[key]]
        subs += [node[key] for key in ("if", "then", "else") if key in node]
        return all(walk(s, depth + 1) for s in subs)

    if not isinstance(schema, Mapping) or not walk(schema, 0) or not names_given:
        return []
    extra = [k for k in arguments if k not in declared and not _matched(patterns, str(k))]
    takes = [repr(k) for k in sorted(declared)]
    if patterns:
        takes.append("names matching " + " or ".join(repr(p) for p in patterns))
    said = ", ".join(takes) or "no arguments"
    return [f"{k}: unexpected argument (the tool takes {said})" for k in extra]


def _local_ref(schema: Mapping[str, Any], ref: Any) -> Any:
    """What a ``$ref`` into the schema's own ``$defs``/``definitions`` names (else ``None``)."""
    for base in ("#/$defs/", "#/definitions/"):
        if isinstance(ref, str) and ref.startswith(base):
            defs = schema.get(base[2:-1])
            return defs.get(ref[len(base) :]) if isinstance(defs, Mapping) else None
    return None


def _matched(patterns: list[str], key: str) -> bool:
    """Whether a ``patternProperties`` pattern takes ``key`` (one not compilable: taken)."""
    for p in patterns:
        found = ecma_search(p, key)
        if found is False or isinstance(found, re.Match):
            return True
    return False


def _properties(schema: Any) -> Mapping[str, Any] | None:
    """The properties an input schema declares (``None``: it declares none)."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    return props if isinstance(props, Mapping) else None


def _rule_word(rule: Any) -> Any:
    """An approval rule as a word where it has one (``True`` is ``"always"``, ``False``
    ``"never"``); a resolver as itself."""
    if rule is True:
        return "always"
    if rule is False:
        return "never"
    return rule


def _one_tool(label: str, key: str, tools: Iterable[MCPTool], where: str) -> MCPTool | None:
    """The tool ``key`` names, by its name as offered or on the server (``None``: none).

    Raises:
        ToolDefinitionError: ``key`` names two tools: one's name on the server is the
            other's as offered (``prefix="files"``: the server's ``files_delete`` and its
            ``delete``, offered as ``files_delete``). Picking either would be a guess.
    """
    owners = [t for t in tools if key in (t.name, t.remote_name)]
    if len(owners) < 2:
        return owners[0] if owners else None
    described = " and ".join(f"{t.name!r} (the server's {t.remote_name!r})" for t in owners)
    others = " or ".join(repr(t.name if t.name != key else t.remote_name) for t in owners)
    raise ToolDefinitionError(
        f"MCP server {label!r}: {where} names {key!r}, the name of two tools: {described}; "
        f"name the one you mean by its other name: {others}"
    )


def _idempotent_names(idempotent: Any) -> bool | frozenset[str]:
    """``idempotent=`` checked: ``True``, ``False`` or the tool names it lists."""
    if isinstance(idempotent, bool):
        return idempotent
    if isinstance(idempotent, (str, bytes)) or not isinstance(idempotent, Iterable):
        raise ToolDefinitionError(
            f"idempotent= takes True, False or a list of tool names, got {idempotent!r}"
        )
    names = list(idempotent)
    if not all(isinstance(n, str) and n for n in names):
        raise ToolDefinitionError(f"idempotent= takes tool names (strings), got {names!r}")
    return frozenset(names)


def _marked(secrets: Any) -> list[str]:
    """``secrets=`` checked: the values the user marks as secrets."""
    if isinstance(secrets, (str, bytes)) or not isinstance(secrets, Iterable):
        raise ToolDefinitionError(
            f"secrets= takes a list of secret values, got {type(secrets).__name__}"
        )
    values = list(secrets)
    for value in values:
        if not isinstance(value, str):
            raise ToolDefinitionError(
                f"secrets= takes strings (the secret values), got a {type(value).__name__}"
            )
        if len(value) < MIN_SECRET_CHARS:
            raise ToolDefinitionError(
                f"a value in secrets= has {len(value)} characters; one of fewer than "
                f"{MIN_SECRET_CHARS} is not replaced in text (it would cut every such word "
                "out of the server's answers)"
            )
    return values


def _listing(names: Iterable[str], most: int = 20) -> str:
    """Tool names for a notice: sorted, at most ``most`` of them."""
    ordered = sorted(set(names))
    more = f", ... ({len(ordered) - most} more)" if len(ordered) > most else ""
    return ", ".join(ordered[:most]) + more if ordered else "none"


def _task_only(definition: Any) -> bool:
    """Whether a listed tool can only be called as a task (2025-11-25 ``execution``)."""
    execution = getattr(definition, "execution", None)
    return getattr(execution, "task_support", None) == "required"


def _checked_uri(uri: Any) -> str:
    if not isinstance(uri, str) or not uri.strip():
        raise ValueError(f"a resource URI must be a non-empty string, got {uri!r}")
    return uri


async def _abandonable(awaitable: Any, what: str, *, ran: bool = True) -> Any:
    """``await awaitable``, given up if the chat it runs for is cancelled (``chat.cancel()``).

    The request on the background loop is cancelled (the SDK tells the server); a tool's
    call (``ran``) fails with ``MCPServerError``, since whether the tool did anything is
    unknown; a wait that runs nothing on the server (connecting, listing its tools) raises
    ``ChatCancelled``, as the blocking twin does (``_connection.wait``).
    """
    task, loop = asyncio.current_task(), asyncio.get_running_loop()
    state = {"done": False, "abandoned": False}

    def abandon() -> None:  # on this loop's thread: cancels only a call still waiting
        if not state["done"] and task is not None:
            state["abandoned"] = True
            task.cancel()

    def on_cancel() -> None:  # from the thread calling chat.cancel()
        with contextlib.suppress(RuntimeError):  # this loop already ended
            loop.call_soon_threadsafe(abandon)

    withdraw = on_chat_cancel(on_cancel)
    try:
        value = await awaitable
        if state["abandoned"] and task is not None:  # it answered first: the answer stands,
            task.uncancel()  # and chat.cancel()'s own cancellation of this wait is spent
        return value
    except asyncio.CancelledError:
        if not state["abandoned"] or task is None or task.uncancel() > 0:
            raise
        if not ran:
            raise ChatCancelled(
                f"the chat was cancelled while {what} was waiting; call complete() to resume"
            ) from None
        raise MCPServerError(
            f"{what} was abandoned by chat.cancel() while it ran (the server was told to "
            "cancel it); whether it did anything is unknown, so it was not retried"
        ) from None
    finally:
        state["done"] = True
        withdraw()


class MCPToolSelection(ToolSource):
    """Some tools of one :class:`MCPServer` (``server.tools(include=..., exclude=...)``)."""

    def __init__(
        self, server: MCPServer, include: Iterable[str] | None, exclude: Iterable[str] | None
    ):
        if isinstance(include, str) or isinstance(exclude, str):
            raise TypeError("include= and exclude= take lists of tool names, not one string")
        self.server = server
        self.include = frozenset(include) if include is not None else None
        self.exclude = frozenset(exclude or ())
        self._from: tuple[MCPTool, ...] | None = None
        self._tools: tuple[MCPTool, ...] = ()
        self._noted: set[tuple[str, str]] = set()  # names already said to match no tool

    def _wanted(self, t: MCPTool) -> bool:
        names = {t.name, t.remote_name}
        if self.include is not None and not names & self.include:
            return False
        return not names & self.exclude

    def source_tools(self) -> tuple[MCPTool, ...]:
        tools = self.server.source_tools()
        if tools is not self._from:
            for what, names in (("include=", self.include or ()), ("exclude=", self.exclude)):
                for name in sorted(names):
                    _one_tool(self.server.label, name, tools, f"tools({what})")
            self._from = tools
            self._tools = tuple(t for t in tools if self._wanted(t))
            self._note_unmatched(tools)
        return self._tools

    def all_tools(self) -> tuple[MCPTool, ...]:
        """Every tool the server lists, those this view leaves out included."""
        return self.server.source_tools()

    def _note_unmatched(self, tools: tuple[MCPTool, ...]) -> None:
        """A notice for an ``include=`` / ``exclude=`` name that matches no listed tool (a
        typo in ``exclude=`` would leave the tool offered, unnoticed)."""
        known = {t.name for t in tools} | {t.remote_name for t in tools}
        offered = _listing(t.remote_name for t in tools)
        for what, names in (("include", self.include or frozenset()), ("exclude", self.exclude)):
            for name in sorted(names - known):
                if (what, name) in self._noted:
                    continue
                self._noted.add((what, name))
                notice(
                    f"MCP server {self.server.label!r}: tools({what}=[{name!r}]) matches no "
                    f"tool it lists (its tools: {offered}); it applies to a tool of that "
                    "name listed later"
                )

    def attach(self, user: object) -> None:
        self.server.attach(user)

    def release(self, user: object) -> None:
        self.server.release(user)

    def close(self) -> None:
        self.server.close()

    def __repr__(self) -> str:
        parts = []
        if self.include is not None:
            parts.append(f"include={sorted(self.include)}")
        if self.exclude:
            parts.append(f"exclude={sorted(self.exclude)}")
        return f"<MCPToolSelection of {self.server.label!r} {' '.join(parts)}>".replace(" >", ">")
