"""An MCP server's secrets: kept out of every error text and out of its ``repr``.

A server is given secrets in its ``env`` (stdio), its ``headers`` and its URL
(HTTP), and sometimes its command line (``--token=...``). A server that
fails may say them back: an ``isError`` result ("auth failed with token
..."), a JSON-RPC error, a crash message. Everything the MCP client raises
leaves ``_server.py`` through :func:`scrubbed_call` / :func:`scrubbed_await`,
so such text reaches neither the model (a call's error result), ``chat.log``,
the store, the screen nor an exception: the server's secret values and
anything shaped like an API key (the providers' scrubber,
:func:`nbagent._errors.scrub`) become ``***``, and an SDK error chained
underneath that shows one is cut off the chain.

Which values are secrets (:func:`secret_values`): an ``env`` / header / URL query
value whose *name* says so (``API_KEY``, ``GITHUB_TOKEN``, ``Authorization``,
``DB_PASSWORD``, ``Cookie``...: :func:`secret_name`), any value shaped like a key
(:func:`key_shaped`) or an ``Authorization`` scheme (``Bearer ...``), a URL's user and
password (``DATABASE_URL=postgres://app:pw@db/x``), and whatever the user marks
(``MCPServer.stdio(..., secrets=[...])``). Ordinary configuration is not: ``TZ=Europe/Paris``,
``APP_ENV=production`` or ``DEFAULT_FORMAT=string`` replaced wherever it appears would
mangle the server's results and its tools' schemas (every ``"type": "string"`` read
``"type": "***"``, and each call was refused). Its value is still never shown by the
``repr`` (which shows no ``env`` nor header at all). A tool's input schema keeps its
structure words (``type``, ``format``, ``required``, ``pattern``, ``$ref``) as they are;
an ``enum`` member, a ``const``, ``default`` or example that shows a secret is left out
rather than rewritten (:func:`scrubbed_schema`).

Only values of :data:`MIN_SECRET_CHARS` characters or more are secrets to
replace in free text: ``env={"PIN": "1"}`` must not turn every ``1`` of a
message into ``***``.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from .._errors import MCPServerError, redact_keys, reveals, scrub, scrub_error

T = TypeVar("T")

MIN_SECRET_CHARS = 6
"""Shortest ``env`` / header / argument value replaced by ``***`` wherever it appears."""

REDACTED = "***"

_SECRET_NAME = re.compile(
    r"(token|secret|passw(or)?d|passphrase|passcode|pwd|api[-_]?key|apikey|auth|credential|"
    r"bearer|cookie|login|session|signature|private[-_]?key|access[-_]?key|^-k$|^--?key$)",
    re.IGNORECASE,
)
"""An option name whose value is a secret (``--token``, ``--api-key``, ``--password``...)."""

_SECRET_KEY_WORDS = re.compile(
    r"key|token|secret|passw|passphrase|passcode|pass(?![a-z])|pwd|auth(?!ors?(?![a-z]))|"
    r"credential|cookie|login|session|private|signature|bearer|dsn|salt|connection[-_]?string",
    re.IGNORECASE,
)
_SECRET_KEY_PARTS = frozenset({"pat", "sig", "sas", "jwt", "otp", "pin", "sid"})
_NAME_WORDS = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_AUTH_VALUE = re.compile(r"(bearer|basic|token|digest|apikey)\s+\S", re.IGNORECASE)


def secret_name(name: str) -> bool:
    """Whether an environment variable, header or query parameter of this name holds a
    secret: its name has ``KEY``, ``TOKEN``, ``SECRET``, ``PASSW`` / ``PWD``, ``AUTH``
    (not ``AUTHOR``), ``CREDENTIAL``, ``COOKIE``, ``SESSION``, ``PRIVATE``, ``SIGNATURE``,
    ``BEARER``, ``DSN`` or ``SALT`` in it, ends a word in ``PASS``, or has a word ``PAT``,
    ``SIG``, ``SAS``, ``JWT``, ``OTP``, ``PIN`` or ``SID`` (``GITHUB_TOKEN``,
    ``X-Api-Key``, ``Authorization``, ``PGPASS``... but not ``TZ``, ``APP_ENV``,
    ``HOME`` or ``LOG_LEVEL``)."""
    if _SECRET_KEY_WORDS.search(name):
        return True
    return any(w.lower() in _SECRET_KEY_PARTS for w in _NAME_WORDS.split(name) if w)


_KEY_PREFIXES = (
    "sk-",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "AKIA",
    "AIza",
    "hf_",
)
_TOKEN = re.compile(r"[A-Za-z0-9_~+=-]{24,}")
_HEX = re.compile(r"[0-9a-f]{32,}")


def key_shaped(value: str) -> bool:
    """Whether a bare value looks like a credential.

    A known key prefix (``sk-``, ``ghp_``, ``AKIA``...) followed by at least
    12 more characters, text the providers' scrubber would redact, 32+ hex
    digits, or a run of 24+ token characters (no dot, no slash) mixing
    capitals, small letters and digits, as random keys do. A file name, a
    path, a URL or a word is not.
    """
    if any(value.startswith(p) and len(value) >= len(p) + 12 for p in _KEY_PREFIXES):
        return True
    if redact_keys(value) != value or _HEX.fullmatch(value):
        return True
    return bool(
        _TOKEN.fullmatch(value)
        and any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and any(c.isdigit() for c in value)
    )


_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)=(.*)$", re.DOTALL)
"""``NAME=value``: an environment assignment in a command line (``env API_KEY=... cmd``)."""

_QUERY = re.compile(r"([?&;][^=&#\s]*=)([^&#\s]*)")


def masked_url(url: str) -> tuple[str, list[str]]:
    """``(shown, secrets)`` for a URL: its user and password, its query values and its
    key-shaped path segments (``/s/<key>/mcp``) shown as ``***``; and the secrets among
    them: the user and password (with the ``user:password`` pair in base64, as
    ``Authorization: Basic`` sends it), the key-shaped segments, and the query values
    named like a secret (``?api_key=``, ``?token=``) or key-shaped (``?region=eu`` is
    hidden from the ``repr`` but no secret to replace in the server's answers)."""
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:  # not a URL after all (a bad port): hide what could be one
        return REDACTED, [url]
    secrets: list[str] = [p for p in (user, password) if p]
    if user is not None or password is not None:
        pair = f"{unquote(user or '')}:{unquote(password or '')}"
        secrets.append(base64.b64encode(pair.encode()).decode())
        secrets.extend(p for p in (unquote(user or ""), unquote(password or "")) if p)
    netloc = parts.netloc.rpartition("@")[2]
    if "@" in parts.netloc:
        netloc = f"{REDACTED}@{netloc}"
    path = []
    for segment in parts.path.split("/"):
        if segment and key_shaped(unquote(segment)):
            secrets.extend({segment, unquote(segment)})
            path.append(REDACTED)
        else:
            path.append(segment)
    secrets.extend(v for k, v in parse_qsl(parts.query) if v and (secret_name(k) or key_shaped(v)))
    query = _QUERY.sub(lambda m: m[1] + (REDACTED if m[2] else ""), "?" + parts.query)[1:]
    shown = f"{parts.scheme}://{netloc}{'/'.join(path)}"
    if query:
        shown += f"?{query}"
    return shown, secrets


def _looks_like_url(arg: str) -> bool:
    scheme, sep, rest = arg.partition("://")
    return bool(sep and rest and scheme and scheme.replace("+", "").isalnum())


def _masked_word(arg: str) -> tuple[str, list[str]] | None:
    """``arg`` shown masked with its secrets when it is a URL or a ``NAME=value`` whose
    name or value is secret; ``None`` otherwise."""
    if _looks_like_url(arg) and not any(c.isspace() for c in arg):
        shown, found = masked_url(arg)
        return (shown, found) if shown != arg or found else None
    assigned = _ASSIGNMENT.match(arg)
    if assigned:
        name, value = assigned[1], assigned[2]
        bare = value.strip("'\"")
        if _SECRET_NAME.search(name) or key_shaped(bare):
            return f"{name}={REDACTED}", [value, bare]
        inner = _masked_word(bare)
        if inner is not None:
            return f"{name}={inner[0]}", inner[1]
    return None


def _option(arg: str) -> tuple[str, str | None]:
    """``("--token", "abc")`` for ``--token=abc``; ``("--token", None)`` for ``--token``."""
    name, eq, value = arg.partition("=")
    return (name, value) if eq else (arg, None)


def masked_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(shown, secrets)``: the arguments with secret values as ``***``, and those values.

    A value is secret when it follows a secret-named option (``--token abc``,
    ``--api-key=abc``, ``-k abc``), is the value of a secret-named assignment
    (``API_KEY=abc``), or is key-shaped itself (:func:`key_shaped`). A URL shows
    without its user, password, query values and key-shaped path segments
    (:func:`masked_url`); a shell command given as one argument (``sh -c "..."``)
    has its words masked the same way.
    """
    shown: list[str] = []
    secrets: list[str] = []
    after_secret_option = False
    for arg in argv:
        if after_secret_option and not arg.startswith("-"):
            shown.append(REDACTED)
            secrets.append(arg)
            after_secret_option = False
            continue
        after_secret_option = False
        if arg.startswith("-"):
            name, value = _option(arg)
            if _SECRET_NAME.search(name.lstrip("-")) or _SECRET_NAME.search(name):
                if value is None:
                    after_secret_option = True
                    shown.append(arg)
                else:
                    shown.append(f"{name}={REDACTED}")
                    secrets.append(value)
                continue
            if value is not None:
                masked = _masked_word(value)
                if masked is not None:
                    shown.append(f"{name}={masked[0]}")
                    secrets.extend(masked[1])
                    continue
                if key_shaped(value):
                    shown.append(f"{name}={REDACTED}")
                    secrets.append(value)
                    continue
        if any(c.isspace() for c in arg.strip()):  # a shell command (sh -c "..."): its words
            words, found = masked_argv(arg.split())
            secrets.extend(found)
            if key_shaped(arg):  # hidden whole, as before; its words' secrets scrubbed too
                shown.append(REDACTED)
                secrets.append(arg)
            else:
                shown.append(" ".join(words) if found else arg)
            continue
        masked = _masked_word(arg)
        if masked is not None:
            shown.append(masked[0])
            secrets.extend(masked[1])
            continue
        if key_shaped(arg):
            shown.append(REDACTED)
            secrets.append(arg)
            continue
        shown.append(arg)
    return shown, secrets


def _pieces(value: str) -> list[str]:
    """A value and its whitespace-separated parts ("Bearer abc": ``abc`` must go too), but
    for plain words ("Bearer", "Authorization:"), which are no secret."""
    words = [p for p in value.split() if p != value and not p.rstrip(":").isalpha()]
    return [p for p in (value, *words) if len(p) >= MIN_SECRET_CHARS]


def secret_values(entries: Mapping[str, str] | None) -> list[str]:
    """The secret values among ``env`` or ``headers`` entries: those whose name is a
    secret's (:func:`secret_name`), those key-shaped or an ``Authorization`` scheme
    (``Bearer ...``), and the user and password of a URL value (``DATABASE_URL=
    postgres://app:pw@db/app``)."""
    found: list[str] = []
    for name, value in (entries or {}).items():
        value = str(value)
        bare = value.strip()
        if _looks_like_url(bare):
            found.extend(masked_url(bare)[1])
        if secret_name(str(name)) or key_shaped(bare) or _AUTH_VALUE.match(bare):
            found.append(value)
        elif not _looks_like_url(
            bare
        ):  # a list of values (``a,b``) or a command line holding a key
            found.extend(w for w in re.split(r"[\s,;]+", bare) if w != bare and key_shaped(w))
    return found


def server_secrets(
    *,
    env: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    url: str | None = None,
    argv: Sequence[str] = (),
    values: Sequence[str] = (),
) -> tuple[str, ...]:
    """Every secret value a server was given, longest first, for :func:`scrub`.

    ``values`` (the secrets among its ``env`` or ``headers``, :func:`secret_values`, and
    those the user marked), every value of ``env`` and ``headers`` given here (not the
    names: pass only secret entries), the URL's user, password (also as the base64
    ``user:password`` of ``Authorization: Basic``), secret query values and key-shaped
    path segments, and the arguments :func:`masked_argv` hides; each only if at least
    :data:`MIN_SECRET_CHARS` long, and each also as a JSON string escapes it (``"`` and
    ``\\`` escaped, non-ASCII as ``\\uXXXX``).
    """
    found: set[str] = set()
    for value in (*(env or {}).values(), *(headers or {}).values(), *values):
        found.update(_pieces(str(value)))
    if url is not None:
        found.update(masked_url(url)[1])
    for value in masked_argv(argv)[1]:
        found.update(_pieces(value))
    found = {s for s in found if len(s) >= MIN_SECRET_CHARS}
    for secret in list(found):  # as a JSON string shows it (a result's structured text)
        found.update(json.dumps(secret, ensure_ascii=a)[1:-1] for a in (True, False))
    return tuple(sorted(found, key=len, reverse=True))


def _cleaned(exc: Exception, secrets: Sequence[str]) -> Exception:
    """``exc`` scrubbed, or an :class:`MCPServerError` with its scrubbed text in its place.

    The stand-in is for an error whose text does not come from its args (an
    SDK error escaping as it is): it cannot be scrubbed in place.
    """
    scrub_error(exc, secrets, " (the server's own error is not chained: it showed a secret)")
    if not reveals(exc, secrets):
        return exc
    return MCPServerError(scrub(f"{type(exc).__name__}: {exc}", secrets))


def scrubbed_call(fn: Callable[[], T], secrets: Sequence[str]) -> T:
    """``fn()``, any error it raises scrubbed (see the module docstring)."""
    try:
        return fn()
    except Exception as exc:
        failure = _cleaned(exc, secrets)
        if failure is exc:
            raise
    raise failure  # outside the handler: the stand-in chains nothing


async def scrubbed_await(awaitable: Awaitable[T], secrets: Sequence[str]) -> T:
    """Async twin of :func:`scrubbed_call`: ``await awaitable``, its error scrubbed.

    Cancellation and other ``BaseException`` s pass through untouched.
    """
    try:
        return await awaitable
    except Exception as exc:
        failure = _cleaned(exc, secrets)
        if failure is exc:
            raise
    raise failure


def _replaced(text: str, secrets: Sequence[str]) -> str:
    """``text`` with the server's own secrets as ``***`` (only those: a result may hold
    key-shaped text, a commit hash, that is no secret)."""
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


def _scrubbed_json(value: Any, secrets: Sequence[str]) -> Any:
    if isinstance(value, str):
        return _replaced(value, secrets)
    if isinstance(value, dict):
        return {k: _scrubbed_json(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed_json(v, secrets) for v in value]
    return value


_SCHEMA_KEPT = frozenset(
    {"type", "format", "required", "pattern", "$ref", "$schema", "$id", "$anchor"}
    | {"$dynamicRef", "$dynamicAnchor", "contentMediaType", "contentEncoding"}
    | {"dependentRequired"}
)
"""JSON Schema words kept as they are: rewritten, the schema says something else (an env
value ``string`` made every ``"type": "string"`` a ``"type": "***"``)."""
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
_SCHEMA_VALUES = frozenset({"const", "default"})


def _reveals(value: Any, secrets: Sequence[str]) -> bool:
    return _scrubbed_json(value, secrets) != value


def scrubbed_schema(schema: Any, secrets: Sequence[str]) -> Any:
    """A tool's input schema with the server's secrets out of it, its structure intact.

    Text (``description``, ``title``, unknown keywords) has them as ``***``; the words
    that make the schema (:data:`_SCHEMA_KEPT`) are never rewritten; an ``enum`` member
    or ``examples`` entry that shows one is left out, and so is a ``const`` or ``default``
    (a ``***`` there would be a value the model is told to send). Property names are
    kept. The same object when no secret shows.
    """
    if not secrets or not _reveals(schema, secrets):
        return schema
    return _schema(schema, secrets)


def _schema(node: Any, secrets: Sequence[str]) -> Any:
    if isinstance(node, list):  # items: [...] (draft 4), anyOf / allOf / oneOf...
        return [_schema(n, secrets) for n in node]
    if not isinstance(node, dict):
        return node if isinstance(node, bool) else _scrubbed_json(node, secrets)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SCHEMA_KEPT:
            out[key] = value
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _schema(sub, secrets) for name, sub in value.items()}
        elif key in ("enum", "examples") and isinstance(value, list):
            kept = [v for v in value if not _reveals(v, secrets)]
            if kept or not value:
                out[key] = kept
        elif key in _SCHEMA_VALUES:
            if not _reveals(value, secrets):
                out[key] = value
        elif isinstance(value, (dict, list)):
            out[key] = _schema(value, secrets)
        else:
            out[key] = _scrubbed_json(value, secrets)
    return out


def scrubbed_result(value: T, secrets: Sequence[str]) -> T:
    """A tool's answer (an ``MCPResult``) with the server's secrets replaced by ``***``
    in its text, structured content and text blocks (a tool that echoes its environment,
    like the reference ``everything`` server's ``get-env``); the same object when none shows.
    """
    text = str(value)
    structured = getattr(value, "structured_content", None)
    content = getattr(value, "content", [])
    if not secrets or not any(
        s in text or s in repr(structured) or s in repr(content) for s in secrets
    ):
        return value
    out = type(value)(  # type: ignore[call-arg]
        _replaced(text, secrets),
        _scrubbed_json(structured, secrets),
        [
            {k: (v if k in ("data", "blob") else _scrubbed_json(v, secrets)) for k, v in b.items()}
            for b in content
        ],
        getattr(value, "parts", ()),
    )
    out.uri = getattr(value, "uri", None)  # type: ignore[attr-defined]
    problem = getattr(value, "output_error", None)
    out.output_error = None if problem is None else _replaced(problem, secrets)  # type: ignore[attr-defined]
    return out


# ------------------------------------------------------------------ the SDK's own logs
_LOGGED: weakref.WeakKeyDictionary[Any, tuple[str, ...]] = weakref.WeakKeyDictionary()
_LOGGED_LOCK = threading.Lock()
_SDK_LOGGERS = ("mcp", "httpx", "httpx2", "httpcore", "httpcore2")
"""Loggers (and their children) whose records may quote a server's URL, headers or
messages: the SDK's (``mcp.client.streamable_http`` logs each request at DEBUG) and its
HTTP client's (``httpcore2.http11`` logs each response's headers at DEBUG, an
``Authorization`` a server says back in ``WWW-Authenticate`` among them)."""
_HTTP_CORE_LOGGERS = ("connection", "http11", "http2", "proxy", "socks")
"""The children the HTTP cores log from, made here when not yet: their modules are imported
only once a request is sent, after the filter was put on every logger that existed."""


class _SdkLogScrub(logging.Filter):
    """Every registered server's secrets, and anything key-shaped, out of a log record of
    the SDK (its message, arguments and traceback) before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        with _LOGGED_LOCK:
            secrets = sorted({s for v in _LOGGED.values() for s in v}, key=len, reverse=True)
        try:
            message = record.getMessage()
        except Exception:  # a record whose args do not fit its format: shown as it is
            message = f"{record.msg} {record.args!r}"
        cleaned = scrub(message, secrets)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text, secrets)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info, secrets)
        return True


_FILTER = _SdkLogScrub()


def guard_sdk_logs(owner: Any = None, secrets: Sequence[str] = ()) -> None:
    """Register ``owner``'s ``secrets`` (for as long as it lives) and put the scrubbing
    filter on every SDK logger that exists now (a logger's filter does not apply to its
    children's records, so each gets it; called again at every connection, after the SDK's
    modules were imported)."""
    if owner is not None:
        with _LOGGED_LOCK:
            _LOGGED[owner] = tuple(secrets)
    names = [
        n
        for n in list(logging.root.manager.loggerDict)
        if any(n == root or n.startswith(root + ".") for root in _SDK_LOGGERS)
    ]
    cores = [
        f"{core}.{child}" for core in ("httpcore", "httpcore2") for child in _HTTP_CORE_LOGGERS
    ]
    for name in dict.fromkeys([*_SDK_LOGGERS, *cores, *names]):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


__all__ = [
    "MIN_SECRET_CHARS",
    "guard_sdk_logs",
    "key_shaped",
    "masked_argv",
    "scrubbed_await",
    "scrubbed_call",
    "scrubbed_result",
    "scrubbed_schema",
    "secret_name",
    "secret_values",
    "server_secrets",
]
