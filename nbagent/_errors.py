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

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import pandas as pd

    from ._types import ToolCall

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
        how = (
            "Decide them with chat.approve(call_or_id) or chat.deny(call_or_id, reason=...), "
            "then call chat.complete()."
            if gated
            else "Answer them with chat.answer(call_or_id, result) or "
            "chat.decline(call_or_id, reason=...), then call chat.complete()."
            if inputs
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


_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]{0,31}://)[^/@\s]+@")
"""URL credentials: ``scheme://user:password@``. The scheme is bounded (32 characters, as
schemes are short): an unbounded one tried every start of a long word, quadratic (4 s for 40,000
characters and an ``@``)."""
_PASSWORD = re.compile(
    r"""(?i)\b(\w*?(?:password|passwd|pwd)["']?\s*[=:]\s*)"""
    r"""("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|[^\s"';&]+)"""
)
"""A password given as a key and a value: a libpq DSN's ``password=...``, an environment's
``DB_PASSWORD=`` / ``PGPASSWORD=``, ODBC's ``Pwd=...;``, a query string's, a JSON or YAML
``"password": "..."`` (the value is hidden, quotes kept, an escaped quote inside it too;
after a colon an unquoted word of letters followed by more words is prose, left alone)."""
_KEY_PREFIXES = ("sk-", "earer", "gsk_", "xai-", "AIza", "hf_", "pplx-", "nvapi-", "r8_")
"""What a key-shaped token starts with (any of them in a text: it is searched)."""
_KEY_LIKE = re.compile(
    r"\b(?:(sk-(?:ant-)?|[Bb]earer\s+)([\w.~+/=-]+)"
    r"|(gsk_|xai-|hf_|pplx-|r8_)([A-Za-z0-9]+)|(AIza|nvapi-)([A-Za-z0-9_-]+))"
)
"""An API key's shape: a known provider key prefix (OpenAI's and Anthropic's ``sk-``,
Groq's ``gsk_``, xAI's ``xai-``, Google's ``AIza``, Hugging Face's ``hf_``, Perplexity's
``pplx-``, NVIDIA's ``nvapi-``, Replicate's ``r8_``) or a bearer token, then 12+ token
characters (a digit among them, so prose like "Bearer authentication" is left alone; not a
final dot). A key of another shape is scrubbed where it is known: the chat's provider's
(:func:`scrub`). Each match takes its whole token (judged by :func:`_keys_hidden`), so a long run of
prefixes (``sk-sk-sk-...``) is read once, not once a prefix (that was quadratic)."""


_SHAPED = {"gsk_": "", "xai-": "", "hf_": "", "pplx-": "", "r8_": "", "AIza": "-_", "nvapi-": "-_"}
"""The other providers' prefixes, and what a key of theirs holds after them besides ASCII
letters and digits (16 or more, a digit among them): an identifier such as
``hf_dataset_split_2023`` is no key."""


def _is_key(token: str, prefix: str = "sk-") -> bool:
    also = _SHAPED.get(prefix)
    if also is not None:
        token = token.rstrip(".")  # a final dot is the sentence's
        body = token.translate({ord(c): None for c in also})
        return (
            len(token) >= 16
            and body.isascii()
            and body.isalnum()
            and any(c.isdecimal() for c in body)
        )
    return len(token.rstrip(".")) >= 12 and any(c.isdecimal() for c in token)


def _keys_hidden(text: str, hidden: str) -> str:
    """``text`` with each key-shaped token (:data:`_KEY_LIKE`) as ``hidden``, read once."""
    out: list[str] = []
    pos = 0
    while (match := _KEY_LIKE.search(text, pos)) is not None:
        at = 1 if match.group(1) else 3 if match.group(3) else 5  # which kind of key
        prefix, token = match.group(at), match.group(at + 1)
        if prefix == "sk-ant-" and not _is_key(token):  # "sk-" and a token "ant-..."
            prefix, token = "sk-", "ant-" + token
        if _is_key(token, prefix):
            dots = len(token) - len(token.rstrip("."))  # a final dot is the sentence's
            out += (text[pos : match.start()], prefix, hidden)
            pos = match.end() - dots
            continue
        # not a key; a prefix inside its token has a shorter token with no more digits,
        # but for a "Bearer" it ends with: that one's token is past the space
        bearer = match.end() - 6
        if at == 1 and bearer >= match.start(2) and text[bearer:].startswith(("Bearer", "bearer")):
            out.append(text[pos:bearer])
            pos = bearer
            continue
        out.append(text[pos : match.end()])
        pos = match.end()
    out.append(text[pos:])
    return "".join(out)


def redact_keys(text: str, hidden: str = "***") -> str:
    """``text`` with anything shaped like an API key, URL credentials and a password given
    as ``password=``/``"password": ...`` replaced by ``***`` (``hidden``: another marker,
    e.g. one Markdown does not read as emphasis, put back after rendering)."""
    if any(prefix in text for prefix in _KEY_PREFIXES):
        text = _keys_hidden(text, hidden)
    if "@" in text:
        text = _USERINFO.sub(lambda m: f"{m[1]}{hidden}@", text)
    lowered = text.lower()
    if "pass" in lowered or "pwd" in lowered:
        text = _PASSWORD.sub(lambda m: _hidden_value(m, hidden), text)
    return text


def _hidden_value(match: re.Match[str], hidden: str) -> str:
    value = match.group(2)
    quote = value[0] if value[:1] in ("'", '"') else ""
    if not quote and ":" in match.group(1) and value.isalpha():
        after = match.string[match.end() : match.end() + 2]
        if len(after) == 2 and after[0] == " " and after[1].isalpha():
            return match.group(0)  # prose ("your password: click here"), not a YAML secret
    return f"{match.group(1)}{quote}{hidden}{quote}"


_REDACT_DEPTH = 200
"""A container deeper than this shows as ``…`` in :func:`redacted` (arguments are at most
200 levels deep: deeper ones are refused where they enter the chat)."""


def redacted(value: Any, depth: int = 0) -> Any:
    """``value`` as it may be shown: every string in it (dict keys too, in dicts, lists and
    tuples) through :func:`redact_keys`; ``value`` itself when nothing changed."""
    if isinstance(value, str):
        shown = redact_keys(value)
        return value if shown == value else shown
    if not isinstance(value, dict | list | tuple):
        return value
    if depth >= _REDACT_DEPTH:
        return "…"
    if isinstance(value, dict):
        items = [(redacted(k, depth), redacted(x, depth + 1)) for k, x in value.items()]
        if all(k is k0 and x is x0 for (k, x), (k0, x0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    out = [redacted(x, depth + 1) for x in value]
    return value if all(x is x0 for x, x0 in zip(out, value, strict=True)) else out


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


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret (4+ characters), key-like token and URL userinfo as ``***``.

    The one scrubber of error text: the providers' (the configured key) and the
    MCP client's (a server's ``env`` and ``headers`` values) both use it.
    """
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return redact_keys(text)


KEY_MIN = 16
"""The shortest provider secret scrubbed from text wherever it appears: a real key is
longer; a placeholder (``"test"``, ``"ollama"``, ``"EMPTY"``) replaced as a substring cut
words out of every tool result ("latest test run" read "la*** *** run")."""


def provider_secrets(provider: Any) -> tuple[str, ...]:
    """A provider's own secrets to scrub from what reaches the model, the record and the
    screen (its ``secrets()``: a key of any shape), those of :data:`KEY_MIN` characters or
    more; ``()`` if it names none."""
    named = getattr(provider, "secrets", None)
    if not callable(named):
        return ()
    try:
        return tuple(s for s in named() if isinstance(s, str) and len(s) >= KEY_MIN)
    except Exception:  # a custom provider's own method: never a reason to lose a result
        return ()


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
    """

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

        A chained error whose text showed the configured key was dropped when the
        error was raised, so the key is not in here either.
        """
        import traceback  # (with linecache, tokenize...) only when asked

        return redact_keys("".join(traceback.format_exception(self)))

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


ONE_LINE = 400
"""The most characters of an error's message a notebook cell shows (``details()`` has it all)."""


class AuthenticationError(ProviderError):
    """The API key was missing or rejected (401/403)."""


class RateLimitError(ProviderError):
    """The provider is rate limiting (429)."""


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
