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

Only values of :data:`MIN_SECRET_CHARS` characters or more are secrets to
replace in free text: ``env={"DEBUG": "1"}`` must not turn every ``1`` of a
message into ``***``. Shorter values are still never shown by the ``repr``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

from .._errors import MCPServerError, redact_keys, reveals, scrub, scrub_error

T = TypeVar("T")

MIN_SECRET_CHARS = 6
"""Shortest ``env`` / header / argument value replaced by ``***`` wherever it appears."""

REDACTED = "***"

_SECRET_NAME = re.compile(
    r"(token|secret|passw(or)?d|pwd|api[-_]?key|apikey|auth|credential|bearer|cookie|"
    r"session|signature|private[-_]?key|access[-_]?key|^-k$|^--?key$)",
    re.IGNORECASE,
)
"""An option name whose value is a secret (``--token``, ``--api-key``, ``--password``...)."""

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


def _option(arg: str) -> tuple[str, str | None]:
    """``("--token", "abc")`` for ``--token=abc``; ``("--token", None)`` for ``--token``."""
    name, eq, value = arg.partition("=")
    return (name, value) if eq else (arg, None)


def masked_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(shown, secrets)``: the arguments with secret values as ``***``, and those values.

    A value is secret when it follows a secret-named option (``--token abc``,
    ``--api-key=abc``, ``-k abc``) or is key-shaped itself (:func:`key_shaped`).
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
            if value is not None and key_shaped(value):
                shown.append(f"{name}={REDACTED}")
                secrets.append(value)
                continue
        if key_shaped(arg):
            shown.append(REDACTED)
            secrets.append(arg)
            continue
        shown.append(arg)
    return shown, secrets


def _pieces(value: str) -> list[str]:
    """A value and its whitespace-separated parts ("Bearer abc": ``abc`` must go too)."""
    parts = [value, *value.split()]
    return [p for p in parts if len(p) >= MIN_SECRET_CHARS]


def server_secrets(
    *,
    env: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    url: str | None = None,
    argv: Sequence[str] = (),
) -> tuple[str, ...]:
    """Every secret value a server was given, longest first, for :func:`scrub`.

    The values of ``env`` and ``headers`` (not the names), the URL's user,
    password and query values, and the arguments :func:`masked_argv` hides;
    each only if at least :data:`MIN_SECRET_CHARS` long.
    """
    found: set[str] = set()
    for value in (*(env or {}).values(), *(headers or {}).values()):
        found.update(_pieces(str(value)))
    if url is not None:
        parts = urlsplit(url)
        found.update(p for p in (parts.username, parts.password) if p)
        found.update(v for _, v in parse_qsl(parts.query))
    found.update(masked_argv(argv)[1])
    return tuple(sorted((s for s in found if len(s) >= MIN_SECRET_CHARS), key=len, reverse=True))


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
    return out


__all__ = [
    "MIN_SECRET_CHARS",
    "key_shaped",
    "masked_argv",
    "scrubbed_await",
    "scrubbed_call",
    "scrubbed_result",
    "server_secrets",
]
