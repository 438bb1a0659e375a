"""nbagent's exceptions.

::

    NBAgentError
    ├── ToolDefinitionError      a tool cannot be declared (bad name, unsupported type)
    ├── ToolOptionError          unknown or invalid tool option (also a TypeError/ValueError)
    ├── PendingToolCallsError    ask() while calls of the last response are unanswered
    ├── DecisionError            approve/deny on an unknown call, or contradicting a decision
    │   └── InputError           answer/decline of no pending input, or data not matching its schema
    ├── ToolExecutionError       a tool raised and Chat(on_tool_error="raise")
    ├── ToolLoopError            an async tool's event loop (loop=) cannot run it now
    ├── MCPServerError           an MCP server cannot be started or reached, or died mid-call
    │   └── MCPToolError         an MCP tool answered with isError (its text is the message)
    ├── ChatCancelled            chat.cancel() or KeyboardInterrupt stopped the loop
    ├── DriverError              a drive call would wait for itself (see _drive.py)
    ├── OutputSchemaError        ask(output=...) with a type or schema the provider cannot express
    ├── OutputValidationError    a structured answer was not valid, even after one retry
    ├── StoreError               the store cannot be opened or read (see nbagent.store)
    └── ProviderError            a model request failed (message kept, key never shown)
        ├── AuthenticationError
        ├── RateLimitError
        ├── QuotaError           no quota or credit left (OpenAI's 429 insufficient_quota)
        ├── BadRequestError
        ├── ProviderConnectionError
        ├── ServerError
        ├── ModelNotSupportedError  the model is known not to support tools (also a
        │                           NotImplementedError, as Ragrails raises)
        └── ReplayMissError      replay="only" and no recording answers the request (_replay.py)

A provider failure reads as one line in a notebook cell: IPython shows what
``ProviderError._render_traceback_`` returns (the error and how to see more)
instead of the chained traceback through the SDK, httpx and httpcore. The whole
traceback is one call away: ``chat.last_error.details()`` (or ``details()`` on
the caught exception), with anything shaped like an API key redacted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

# the secrets helpers, used here and long imported from here by the rest of nbagent
from ._secrets import KEY_MIN as KEY_MIN
from ._secrets import provider_secrets as provider_secrets
from ._secrets import redact_keys, redacted, scrub

if TYPE_CHECKING:
    import pandas as pd

    from ._types import LLMToolResponse, ToolCall

E = TypeVar("E", bound=BaseException)


class NBAgentError(Exception):
    """Base class of every nbagent error.

    Every one pickles whole (message and attributes), whatever its constructor takes: a
    batch's worker process, Ray or ``multiprocessing`` sends it back as it was raised.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (type(self), self.args, self.__dict__))


def _rebuilt(cls: type[NBAgentError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    """An unpickled :class:`NBAgentError`: made without its constructor (whose arguments are
    not its ``args``), then given its message and attributes back."""
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class ToolDefinitionError(NBAgentError, ValueError):
    """A tool cannot be declared as written."""


class ToolOptionError(NBAgentError, ValueError):
    """An invalid value for a tool option."""


class ToolLoopError(NBAgentError, RuntimeError):
    """An async tool bound to an event loop (``@tool(loop=...)``) cannot run on it now.

    Its loop is blocked by the caller (``chat.ask()`` inside that loop, as in a
    notebook cell), closed, or not running. Raised inside the call, so the
    call ends with an error result instead of hanging.
    """


class MCPServerError(NBAgentError):
    """An MCP server cannot be started or reached, or its connection broke during a call."""


class MCPToolError(MCPServerError):
    """An MCP tool answered with ``isError``; the message is the text it returned."""


class PendingToolCallsError(NBAgentError):
    """The last assistant message has tool calls that are not answered yet."""

    def __init__(self, calls: Sequence[ToolCall]):
        self.calls = list(calls)
        lines = []
        for c in self.calls:
            what = c.status.replace("_", " ") if c.status.startswith("awaiting") else c.status
            lines.append(f"  - {c.name}({c.id}): {what}")
        gated = any(c.status == "awaiting_approval" for c in self.calls)
        inputs = any(c.status == "awaiting_input" for c in self.calls)
        running = any(c.status == "running" for c in self.calls)
        how = (
            "Decide them with chat.approve(call_or_id) or chat.deny(call_or_id, reason=...), "
            "then call chat.complete()."
            if gated
            else "Answer them with chat.answer(call_or_id, result) or "
            "chat.decline(call_or_id, reason=...), then call chat.complete()."
            if inputs
            # running: in another thread of this process (complete() waits for it), or in
            # another process driving the stored chat (Chat.load again once it is done)
            else "A call is still running (in another thread, or in another process driving "
            "this stored chat): chat.complete() waits for this process's own; for another "
            "process's, Chat.load the chat again once it is done."
            if running
            else "Run them with chat.complete() (or chat.step())."
        )
        super().__init__(
            f"{len(self.calls)} tool call(s) of the last response are unanswered:\n"
            + "\n".join(lines)
            + f"\n{how}"
        )


class DecisionError(NBAgentError, ValueError):
    """A decision cannot be recorded (unknown call, not gated, contradiction)."""


class InputError(DecisionError):
    """An answer to a pending input was refused: no such input waits (unknown, or
    answered already), or the data does not match what was asked (its JSON Schema).

    Nothing changed: the input still waits for a valid answer.
    """


class ToolExecutionError(NBAgentError):
    """A tool raised and the chat was configured with ``on_tool_error="raise"``.

    The failed call is answered with an error result first, so the transcript
    stays valid: ``chat.complete()`` continues from there.

    The message shows the error as the call's result does: anything shaped like a key,
    URL credentials, a password, and (raised by a chat) the chat's provider's own key,
    replaced by ``***``. ``error`` is the tool's exception itself, as raised (not
    chained: a traceback does not print it).
    """

    def __init__(self, call: ToolCall, error: BaseException, *, shown: str | None = None):
        self.call = call
        self.error = error
        if shown is None:
            shown = redact_keys(f"{type(error).__name__}: {error}")
        super().__init__(f"tool {call.name!r} ({call.id}) raised {shown}")


class ToolUnavailableError(NBAgentError, RuntimeError):
    """Calls ready to run name tools this chat does not have: a chat loaded without its
    tools (``Chat.load(id, store=...)`` with no ``tools=``), a tool removed meanwhile, or
    an MCP server's call in a chat without that server (its name now another tool's).

    Raised by ``complete()`` / ``step()`` before anything runs: nothing ran and nothing
    changed, each call keeps its decision (an approval is not used up). Give the chat its
    tools (``Chat.load(..., tools=[...])`` or ``chat.with_tools(...)``) and call
    ``complete()`` again, or leave the chat to a process that has them. ``calls`` are
    the calls that wait.
    """

    def __init__(self, calls: Sequence[ToolCall]):
        self.calls = list(calls)
        names = sorted({_tool_named(c) for c in self.calls})
        lines = [f"  - {c.name}({c.id}): {_readiness(c)}" for c in self.calls]
        super().__init__(
            f"{len(self.calls)} tool call(s) cannot run: this chat does not have "
            + ", ".join(names)
            + ":\n"
            + "\n".join(lines)
            + "\nNothing ran and every decision is kept. Give the chat its tools "
            "(Chat.load(..., tools=[...]) or chat.with_tools(...)) and call complete() again."
        )


def _tool_named(call: ToolCall) -> str:
    if call.server is None:
        return f"tool {call.name!r}"
    return f"tool {call.name!r} of MCP server {call.server!r}"


def _readiness(call: ToolCall) -> str:
    if call.decision is not None and call.decision.verdict == "approved":
        return "approved, not run"
    return "ready to run, not run"


class ChatCancelled(NBAgentError):
    """The loop was cancelled; the transcript is valid and ``complete()`` resumes it."""


class DriverError(NBAgentError, RuntimeError):
    """A call that drives a chat cannot wait for the chat's current driver.

    The caller is that driver (a tool or callback of the running loop calling
    ``complete()`` on its own chat), or it would block the event loop the
    driver runs on (``chat.complete()`` where ``await chat.complete_async()``
    belongs). Raised at once, instead of waiting forever.
    """


class OutputSchemaError(NBAgentError, ValueError):
    """``ask(output=...)`` was given something that cannot become a structured answer.

    Not a pydantic model, dataclass, TypedDict or JSON Schema dict, or a schema
    the provider's structured output cannot express (a free-form mapping, a
    ``not``...). Raised before anything is added to the chat or sent.
    """


class MediaError(NBAgentError, ValueError):
    """An image or file the API would refuse: unknown format, or over its size limit.

    Raised before any request is sent.
    """


class OutputValidationError(NBAgentError, ValueError):
    """The model's structured answer was not valid JSON or did not match the output type.

    Raised after one retry (the model is told what was wrong once). Nothing is
    lost: both answers stay in the transcript as the model wrote them.

    Attributes:
        raw: The text of the last answer, as the model wrote it.
        errors: What was wrong with it, one line per problem.
        output: The name of the output type.
    """

    def __init__(self, output: str, raw: str, errors: Sequence[str], *, retried: bool = True):
        self.output = output
        self.raw = raw
        self.errors = list(errors)
        shown = raw if len(raw) <= 300 else raw[:297] + "..."
        after, kept = (
            (" (after one retry)", "both answers are") if retried else ("", "the answer is")
        )
        super().__init__(
            f"the model's answer does not match {output}{after}: "
            + "; ".join(self.errors)
            + f"\nraw answer: {shown!r}\n({kept} kept in chat.transcript)"
        )


class StoreError(NBAgentError):
    """The store cannot be opened, read or written."""


SHOWN_CHARS = 1000
"""Past pandas' ``display.max_colwidth``, how much of a string :func:`display_safe` reads:
pandas shows no more of it, and a megabyte argument is not scanned at every display."""


def display_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as it may be displayed: every string in its cells (in dicts and lists too)
    with anything shaped like an API key, URL credentials or a password as ``***``.

    A copy; ``frame``'s own values stay as recorded (a call ran with its real arguments).
    Only the rows pandas can show are read (the first and last ``display.max_rows``).
    """
    import pandas as pd

    n = len(frame)
    limit = pd.get_option("display.max_rows")
    rows = range(n) if not limit or n <= 2 * limit else [*range(limit), *range(n - limit, n)]
    width = pd.get_option("display.max_colwidth")
    cut = width + SHOWN_CHARS if isinstance(width, int) else None

    def safe(value: Any) -> Any:
        if cut is not None and isinstance(value, str) and len(value) > cut:
            value = value[:cut] + "…"
        return redacted(value)

    out = frame.copy(deep=False)
    for i, dtype in enumerate(frame.dtypes):
        if not (pd.api.types.is_object_dtype(dtype) or isinstance(dtype, pd.StringDtype)):
            continue  # numbers, times, categories (nbagent's own words)
        values = frame.iloc[:, i].to_numpy(dtype=object, copy=True)
        changed = False
        for j in rows:
            value = values[j]
            if isinstance(value, str | dict | list | tuple):
                shown = safe(value)
                if shown is not value:
                    values[j], changed = shown, True
        if changed:
            out.isetitem(i, pd.Series(values, index=frame.index, dtype=dtype))
    return out


def safe_display(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` itself, displayed as :func:`display_safe` makes it (its values unchanged;
    a frame derived from it displays as pandas does)."""

    def bundle(include: Any = None, exclude: Any = None) -> dict[str, str]:
        shown = display_safe(full)
        out = {"text/plain": repr(shown)}
        html = shown._repr_html_()  # type: ignore[operator]  # (pandas-stubs lack it)
        if html is not None:
            out["text/html"] = html
        return out

    def html() -> str | None:
        return display_safe(full)._repr_html_()  # type: ignore[operator]

    full = df
    object.__setattr__(df, "_repr_mimebundle_", bundle)
    object.__setattr__(df, "_repr_html_", html)
    return df


def reveals(exc: BaseException, secrets: Iterable[str | None]) -> bool:
    """Whether ``exc``, or anything it chains or groups, shows a secret in its text or args.

    Looks at ``str()`` and the ``repr()`` of the args of ``exc``, of its
    ``__cause__`` and ``__context__`` (at any depth) and of the members of an
    exception group (what a printed traceback would show, and more).
    """
    secrets = tuple(secrets)
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        for text in (str(e), repr(e.args)):
            if scrub(text, secrets) != text:
                return True
        todo += [e.__cause__, e.__context__]
        if isinstance(e, BaseExceptionGroup):
            todo += list(e.exceptions)
    return False


def scrub_error(exc: E, secrets: Iterable[str | None], note: str = "") -> E:
    """``exc`` itself, its args scrubbed, no longer chaining anything that shows a secret.

    A cause or context whose text shows a secret is dropped from the chain
    (``__cause__`` and ``__context__`` both: a program inspecting them must not
    find it either); ``note`` is then added to the message, to say so.
    """
    secrets = tuple(secrets)
    exc.args = tuple(scrub(a, secrets) if isinstance(a, str) else a for a in exc.args)
    if any(reveals(c, secrets) for c in (exc.__cause__, exc.__context__) if c is not None):
        exc.__cause__ = exc.__context__ = None
        exc.__suppress_context__ = True
        if note and exc.args and isinstance(exc.args[0], str):
            exc.args = (exc.args[0] + note, *exc.args[1:])
    return exc


class ProviderError(NBAgentError):
    """A model request failed.

    In a notebook cell it shows as one line (``ServerError: openai: Error code:
    500 - ...``) and a hint, not the chained traceback through the SDK;
    :meth:`details` gives the whole traceback.

    Attributes:
        provider: Provider name.
        status_code: HTTP status when there was one.
        retry_after: Seconds the provider asked to wait before trying again
            (its ``retry-after-ms`` / ``retry-after`` header), when it said.
        sdk_error: The SDK exception it was mapped from, by name
            (``"anthropic.RateLimitError"``), when there was one. That exception is
            ``__cause__`` only when nothing it keeps holds a secret (its request's
            headers hold the API key: then it is not chained).
        request_id: The provider's id of the failed request (for its support), when
            it sent one.
        body: The provider's error body (JSON as a dict), scrubbed, when there was one.
        headers: The response's headers (:class:`ResponseHeaders`, a read-only mapping,
            names in any case: ``err.headers["x-ratelimit-reset-tokens"]``), when there
            was a response; a header named as a secret's (``set-cookie``, ``x-api-key``)
            or whose value holds one (the key, a key's shape) reads ``***``.
    """

    sdk_error: str | None = None
    request_id: str | None = None
    body: Any = None
    headers: ResponseHeaders | None = None
    _sdk_traceback: str | None = None  # the unchained SDK error's, scrubbed: see details()

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status_code: int | None = None,
        retry_after: float | None = None,
    ):
        self.provider = provider
        self.status_code = status_code
        self.retry_after = retry_after
        self.via_chat = False  # set by the chat's loop: the hint names chat.last_error
        super().__init__(message)

    def details(self) -> str:
        """The full traceback as text: this error, where it was raised, and the SDK errors
        it chains (httpx, httpcore...), with anything shaped like an API key redacted.

        An SDK error that held the configured key in the request it kept (its headers) is
        not chained; its traceback, written out and scrubbed as it was dropped, is shown
        here as its cause. One whose own text showed the key is left out.
        """
        import traceback  # (with linecache, tokenize...) only when asked

        text = "".join(traceback.format_exception(self))
        if self._sdk_traceback:
            text = f"{self._sdk_traceback}{_DIRECT_CAUSE}{text}"
        return redact_keys(text)

    def _render_traceback_(self) -> list[str]:
        """What IPython shows for this error in a cell: the error in one line, and a hint."""
        where = "chat.last_error" if self.via_chat else "sys.last_value"
        red, dim, reset = "\x1b[0;31m", "\x1b[2m", "\x1b[0m"
        text = str(self)
        line = text.split("\n", 1)[0].rstrip()
        if len(line) > ONE_LINE:
            line = line[:ONE_LINE].rstrip()
        more = "the whole message and traceback" if line != text else "the full traceback"
        if line != text:
            line += " …"  # a server's traceback in its message, a long body: in details()
        return [
            f"{red}{type(self).__name__}{reset}: {line}",
            f"{dim}({more}: print({where}.details())){reset}",
        ]


class ResponseHeaders(Mapping[str, str]):
    """An HTTP response's headers as a :class:`ProviderError` keeps them: read-only, names
    lower-case and looked up in any case, a header sent twice as one (its values joined by
    ``", "``, as HTTP reads them). Made with the secrets already masked (see
    ``nbagent.providers._errors.response_headers``); it pickles."""

    __slots__ = ("_items",)
    _items: dict[str, str]

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        kept: dict[str, str] = {}
        for name, value in items:
            name = name.lower()
            kept[name] = f"{kept[name]}, {value}" if name in kept else value
        object.__setattr__(self, "_items", kept)

    def __getitem__(self, name: str) -> str:
        if isinstance(name, str):
            return self._items[name.lower()]
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (tuple(self._items.items()),))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._items!r})"


_DIRECT_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
"""What Python's traceback prints between a cause and the error raised from it."""

ONE_LINE = 400
"""The most characters of an error's message a notebook cell shows (``details()`` has it all)."""


class ToolArgumentsError(ProviderError):
    """``complete_with_tools()`` got tool calls whose arguments must not be used.

    The model's argument text for a call was not a JSON object (cut off, ``not json``, a
    list, ``NaN``, nested too deep), or the response was cut off by the token limit
    (stop reason ``max_tokens`` or ``context_window``), so its calls' arguments may be
    incomplete, or the provider stopped it (a refusal, a content filter, an incomplete
    Responses response: stop reason ``refusal`` or ``other``). Such a call must never run
    as if the model had sent ``{}``; the chat answers it with an error result, your own loop
    gets this error instead of the response.

    Nothing is lost: the response is on the error, as it would have been returned.

    Attributes:
        response: The whole :class:`~nbagent.LLMToolResponse` (text, every call, usage);
            its broken calls keep the text the model sent in ``raw_arguments`` and the
            reason in ``parse_error``.
        problems: Each call that must not run, by id: why (a sentence the model can read).
    """

    def __init__(
        self, message: str, *, provider: str, response: LLMToolResponse, problems: Mapping[str, str]
    ):
        super().__init__(message, provider=provider)
        self.response = response
        self.problems = dict(problems)

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        """The calls that must not run, in the response's order."""
        return tuple(c for c in self.response.tool_calls if c.id in self.problems)


class AuthenticationError(ProviderError):
    """The API key was missing or rejected (401/403)."""


class RateLimitError(ProviderError):
    """The provider is rate limiting (429)."""


class QuotaError(ProviderError):
    """The account has no quota or credit left (OpenAI's 429 ``insufficient_quota``).

    Not a :class:`RateLimitError`: waiting does not help (the account's billing or
    spending limit does), so it is not retried, by the SDK or by a batch.
    """


class BadRequestError(ProviderError):
    """The provider rejected the request (400/404/422)."""


class ProviderConnectionError(ProviderError):
    """The provider could not be reached, or the stream broke off."""


class ServerError(ProviderError):
    """The provider failed (5xx, overloaded)."""


class ModelNotSupportedError(ProviderError, NotImplementedError):
    """The model is known not to support what was asked (e.g. tools).

    Raised before any request is sent. It is also a ``NotImplementedError``:
    Ragrails' ``complete_with_tools()`` raises that for a provider that cannot
    call tools, so code written for it catches this too.
    """
