"""A recorded model response, the request it answered, and the request's stable key.

A :class:`Recording` is one model response (with the stream fragments it came
in, if it streamed) and the *fingerprint* of the request that produced it. The
fingerprint is what a request looks like once everything that changes between
two runs of the same notebook is taken out, hashed part by part:

- ``model``: the provider's name and the model;
- ``messages``: one digest per message (role, text, parts by their SHA-256,
  calls with their names and arguments, results, provider items);
- ``tools``: one digest per tool (name, description, input schema), in order,
  and per provider-hosted tool (its definition without headers or tokens);
- ``options``: one digest per option (system prompt, tool choice, calls per
  response, token limit, structured output schema, reasoning, caching), and
  what the provider adds to every request (:func:`provider_settings`): its own
  token limit when it is not the provider's default (``max_tokens`` then holds
  the limit the request is sent with) and a digest of its ``extra_body`` when it
  has one (a temperature, a seed). Left at their defaults they add nothing, so a
  recording made before they counted still answers a chat that leaves them so.

Left out: call ids and provider item ids (renumbered by order of appearance:
``#1``, ``#2``...), timestamps (a request holds none), the turn numbers,
``stream`` (a recording made without streaming replays its fragments, made up
from the response) and anything secret (API keys and headers never reach a
request; a hosted tool's headers and the credentials of its URL are left out).

The request's key is the SHA-256 of its fingerprint (the message digests
through their chain, :class:`Digests`): same key, same request. A chat's next
request digests only the messages it adds (:class:`Prefix`), so a key costs
O(new messages), not O(history). On a miss, :func:`nearest` finds the
recording with the longest common history and :func:`differences` says what
differs. The JSON forms (``*_out`` / ``*_in``) are what the recordings
directory keeps (every message digest listed); a store keeps a request's
messages as ``{"n", "chain"}`` (:func:`stored_fingerprint`) and each chain
link once (:func:`digest_links`), read back only to explain a miss
(:class:`StoredDigests`). :func:`slim_deltas` keeps stream fragments as
lengths cut from the response (the store's form).
"""

from __future__ import annotations

import inspect
import json
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ._events import utcnow
from ._json import compact_encoder
from ._secrets import redact_keys
from ._types import (
    AssistantToolCallMessage,
    AudioPart,
    FilePart,
    ImagePart,
    LLMToolResponse,
    Message,
    Part,
    ProviderItem,
    Reasoning,
    ToolCall,
    ToolResultMessage,
)
from .providers import ModelRequest, StreamDelta

VERSION = 1
"""The fingerprint's format: a change to what a request's key covers bumps it."""

Json = dict[str, Any]


# ------------------------------------------------------------------ the values
@dataclass(frozen=True)
class Recording:
    """One model response and the fingerprint of the request that produced it.

    Attributes:
        key: The request's key (:func:`request_key`).
        fingerprint: The request's digests (see the module docstring).
        response: What the model answered.
        deltas: The stream fragments it came in (``None``: it did not stream).
        chat_id / step: The chat and step that recorded it.
        created_at: When.
    """

    key: str
    fingerprint: Json
    response: LLMToolResponse
    deltas: tuple[StreamDelta, ...] | None = None
    chat_id: str = ""
    step: int = 0
    created_at: datetime = field(default_factory=utcnow)

    @property
    def model(self) -> str:
        return str(self.fingerprint.get("model", ""))


@dataclass(frozen=True)
class RecordedResult:
    """A tool call's recorded outcome, replayed by ``replay_tools`` instead of running the tool.

    Attributes:
        status: ``ok``, ``error`` or ``timed_out`` (a call that ran).
        content: The text the model read (without a human's edit note).
        parts: The images it returned.
        arguments: The arguments it ran with (a human's edit, else the model's):
            a call about to run with others is not answered from it.
    """

    status: str
    content: str
    parts: tuple[Part, ...] = ()
    arguments: dict[str, Any] | None = None


# ------------------------------------------------------------- the fingerprint
def _sha256(data: bytes) -> str:
    """SHA-256 of ``data`` in hex; ``hashlib`` (OpenSSL) loads with a chat's first request,
    not with ``import nbagent``."""
    import hashlib

    return hashlib.sha256(data).hexdigest()


_sorted_json = compact_encoder(sort_keys=True)


def _digest(value: Any) -> str:
    text = _sorted_json(value)
    return _sha256(text.encode("utf-8", "surrogatepass"))[:20]


class _Ids:
    """Call and item ids renumbered by order of appearance (``#1``, ``#2``...)."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def __call__(self, ident: str | None) -> str | None:
        if ident is None:
            return None
        n = self.seen.get(ident)
        if n is None:
            n = self.seen[ident] = f"#{len(self.seen) + 1}"
        return n


def _raw(value: Any, ids: _Ids) -> Any:
    """A provider item's JSON with every ``id`` (and ``*_id``) string renumbered."""
    if isinstance(value, Mapping):
        return {
            k: ids(v) if (k == "id" or k.endswith("_id")) and isinstance(v, str) else _raw(v, ids)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_raw(v, ids) for v in value]
    return value


def _parts(parts: Sequence[Part]) -> list[list[Any]]:
    return [
        [p.kind, p.media_type, p.sha256, getattr(p, "detail", None), getattr(p, "filename", None)]
        for p in parts
    ]


def _items(items: Sequence[ProviderItem], ids: _Ids) -> list[Json]:
    return [{"api": i.api, "type": i.type, "raw": _raw(i.raw, ids)} for i in items]


def _call(c: ToolCall, ids: _Ids) -> list[Any]:
    return [ids(c.id), c.name, c.arguments, c.raw_arguments, c.parse_error, c.server, c.hosted]


def message_form(m: Message, ids: _Ids) -> Json:
    """What of a message the model sees, ids renumbered (its digest is the message's)."""
    if isinstance(m, ToolResultMessage):
        return {
            "role": "tool",
            "call": ids(m.tool_call_id),
            "name": m.name,
            "content": m.content,
            "status": m.status,
            "is_error": m.is_error,
            "hosted": m.hosted,
            "parts": _parts(m.parts),
        }
    if isinstance(m, AssistantToolCallMessage):
        return {
            "role": "assistant",
            "content": m.content,
            "items": _items(m.items, ids),
            "calls": [_call(c, ids) for c in m.tool_calls],
        }
    return {
        "role": m.role,
        "content": m.content,
        "items": _items(m.items, ids),
        "parts": _parts(m.parts),
    }


def _hosted_form(tool: Any) -> Json:
    """A hosted tool's definition without its secrets (headers, URL credentials)."""
    form = {k: v for k, v in vars(tool).items() if not k.startswith("_")}
    url = form.get("server_url")
    if isinstance(url, str):
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        form["server_url"] = urlunsplit(parts._replace(netloc=host))
    form["header_names"] = sorted(getattr(tool, "header_names", ()))
    form["kind"] = type(tool).__name__
    form["name"] = getattr(tool, "name", type(tool).__name__)
    return form


class Digests:
    """One ``(role, digest)`` per message, sharing the digests of the request before it.

    A chat's requests repeat the transcript, so each one's digests extend the
    previous one's: a node holds only the new messages and points to its
    parent, and the memory recordings take grows with the conversation, not
    with its square. ``chain`` hashes every digest in order (one step per
    message, so it does not depend on how the nodes split them).
    """

    __slots__ = ("chain", "items", "n", "parent")
    chain: str
    items: tuple[tuple[str, str], ...]
    n: int
    parent: Digests | None

    def __init__(self, items: Iterable[Sequence[str]], parent: Digests | None = None):
        self.parent = parent
        self.items = tuple((str(r), str(d)) for r, d in items)
        self.chain = _chain(parent.chain if parent is not None else "", self.items)
        self.n = (parent.n if parent is not None else 0) + len(self.items)

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[tuple[str, str]]:
        nodes: list[Digests] = []
        node: Digests | None = self
        while node is not None:
            nodes.append(node)
            node = node.parent
        for n in reversed(nodes):
            yield from n.items

    def __getitem__(self, i: int) -> tuple[str, str]:
        return list(self)[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Digests):
            return (self.n, self.chain) == (other.n, other.chain)
        if isinstance(other, list | tuple):
            return list(self) == [tuple(x) for x in other]
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.n, self.chain))

    def __repr__(self) -> str:
        return f"Digests({self.n} messages, {self.chain[:8]})"


class StoredDigests(Digests):
    """A stored request's digests, known by their count and chain, read on first use.

    A store keeps each link of a chat's chain once (:func:`digest_links`);
    the key needs only ``n`` and ``chain``, so the list is read (``load``)
    only when a miss is explained. ``known`` is false when it cannot be read
    (a link missing): the request then compares by its chain alone.
    """

    __slots__ = ("_load", "_loaded")
    _load: Callable[[], Sequence[Sequence[str]] | None] | None
    _loaded: tuple[tuple[str, str], ...] | None

    def __init__(
        self, n: int, chain: str, load: Callable[[], Sequence[Sequence[str]] | None]
    ) -> None:
        self.parent, self.items, self.n, self.chain = None, (), int(n), str(chain)
        self._load, self._loaded = load, None

    def _read(self) -> tuple[tuple[str, str], ...] | None:
        if self._load is not None:
            load, self._load = self._load, None
            try:
                got = load()
            except Exception:  # a closed or unreadable store: unknown, not an error
                got = None
            items = None if got is None else tuple((str(r), str(d)) for r, d in got)
            if items is not None and len(items) == self.n and _chain("", items) == self.chain:
                self._loaded = items
        return self._loaded

    @property
    def known(self) -> bool:
        """Whether every message's digest could be read."""
        return self._read() is not None

    def __iter__(self) -> Iterator[tuple[str, str]]:
        yield from self._read() or ()

    def __repr__(self) -> str:
        return f"StoredDigests({self.n} messages, {self.chain[:8]})"


def _chain(start: str, items: Iterable[tuple[str, str]]) -> str:
    h = start
    for role, d in items:
        h = _sha256(f"{h}|{role}|{d}".encode())[:32]
    return h


def known(digests: Digests) -> bool:
    """Whether every digest of ``digests`` is at hand (a stored chain may miss a link)."""
    return not isinstance(digests, StoredDigests) or digests.known


def as_digests(value: Any) -> Digests:
    return value if isinstance(value, Digests) else Digests(value or ())


def digest_links(
    digests: Digests, written: Callable[[str], bool]
) -> list[tuple[str, str, int, list[list[str]]]]:
    """The links of ``digests``' chain a store lacks, oldest first: ``(chain, parent, n, items)``.

    A link is a request's new messages (``items``) after the request ``parent``
    (a chain, ``""`` for none); ``n`` counts the messages through it. The walk
    stops at the first link ``written`` says the store has, so a chat's next
    request costs its new messages only.
    """
    links: list[tuple[str, str, int, list[list[str]]]] = []
    node: Digests | None = digests
    while node is not None and node.n > 0 and not written(node.chain):
        if isinstance(node, StoredDigests):  # read from elsewhere: one link, whole
            if node.known:
                links.append((node.chain, "", node.n, [list(x) for x in node]))
            break
        if node.items:  # (a request adding nothing shares its parent's chain)
            parent = node.parent.chain if node.parent is not None else ""
            links.append((node.chain, parent, node.n, [list(x) for x in node.items]))
        node = node.parent
    links.reverse()
    return links


def linked_digests(
    links: Mapping[str, tuple[str, Sequence[Sequence[str]]]], chain: str
) -> list[list[str]] | None:
    """The digests through ``chain`` from stored links (``chain -> (parent, items)``), or
    ``None`` when one is missing."""
    parts: list[Sequence[Sequence[str]]] = []
    seen = 0
    while chain:
        link = links.get(chain)
        if link is None or seen > len(links):
            return None
        chain, items = link[0], link[1]
        parts.append(items)
        seen += 1
    return [list(x) for part in reversed(parts) for x in part]


@dataclass
class Prefix:
    """A chat's last request, so the next one digests only the messages it adds."""

    messages: tuple[Message, ...] = ()
    digests: Digests | None = None
    ids: dict[str, str] = field(default_factory=dict)
    tools: tuple[Any, ...] | None = None  # the last tools (and hosted tools) and their digests
    tool_digests: list[list[str]] = field(default_factory=list)
    options: dict[str, Any] | None = None  # the last options and their digests
    option_digests: dict[str, str] = field(default_factory=dict)


def _message_digests(request: ModelRequest, prefix: Prefix | None) -> Digests:
    messages = request.messages
    base = prefix if prefix is not None and prefix.digests is not None else None
    if base is not None and (
        len(base.messages) > len(messages)
        or any(map(operator.is_not, base.messages, messages))  # the same objects (C speed)
    ):
        base = None
    ids = _Ids()
    start = 0
    parent = base.digests if base is not None else None
    if base is not None:
        # the ids seen so far, extended in place (a copy would cost O(history) a request)
        ids.seen = base.ids
        start = len(base.messages)
        base.digests = None  # until this request's digests are in (an error starts afresh)
    new = [(m.role, _digest(message_form(m, ids))) for m in messages[start:]]
    digests = Digests(new, parent)
    if prefix is not None:
        prefix.messages, prefix.digests, prefix.ids = messages, digests, ids.seen
    return digests


_DEFAULT_LIMITS: dict[type, Any] = {}


def _default_limit(cls: type) -> Any:
    """The ``max_tokens`` a provider class is made with when none is given (``None``:
    it has no such argument, or no default)."""
    if cls in _DEFAULT_LIMITS:
        return _DEFAULT_LIMITS[cls]
    try:
        p = inspect.signature(cls).parameters.get("max_tokens")
    except (TypeError, ValueError):
        p = None
    default = None if p is None or p.default is inspect.Parameter.empty else p.default
    _DEFAULT_LIMITS[cls] = default
    return default


def provider_settings(provider: Any) -> Json:
    """What ``provider`` adds to every request it sends, for a request's key.

    ``max_tokens``: its token limit when it is not its class's default (a request's own
    limit wins over it); ``extra_body``: its extra request fields (a temperature, a seed)
    when it has any. Defaults add nothing: a key made before these counted is unchanged.
    A cut-off answer recorded at ``max_tokens=10`` replayed after raising the limit said
    it was cut off at the new one; a temperature changed in ``extra_body`` replayed the
    old sample.
    """
    given = getattr(provider, "replay_settings", None)  # an exported test's stand-in
    if isinstance(given, Mapping):  # (nbagent.testing.OfflineProvider) says what they were
        return dict(given)
    out: Json = {}
    limit = getattr(provider, "max_tokens", None)
    if (
        isinstance(limit, int)
        and not isinstance(limit, bool)
        and limit != _default_limit(type(provider))
    ):
        out["max_tokens"] = limit
    body = getattr(provider, "extra_body", None)
    if isinstance(body, Mapping) and body:
        try:
            out["extra_body"] = _digest(dict(body))
        except (TypeError, ValueError):  # not JSON: its text stands for it
            out["extra_body"] = _digest(repr(sorted(body.items(), key=lambda kv: str(kv[0]))))
    return out


def fingerprint(
    provider: str,
    model: str,
    request: ModelRequest,
    prefix: Prefix | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Json:
    """The request's digests: model, messages, tools, options (see the module docstring).

    ``prefix``: the chat's previous request (updated to this one), so only the
    messages added since are digested. ``settings``: what the provider adds to every
    request (:func:`provider_settings`).
    """
    settings = settings or {}
    messages = _message_digests(request, prefix)
    known = (request.tools, tuple(map(_hosted_form, request.hosted)))
    if prefix is not None and prefix.tools == known:
        tools = prefix.tool_digests  # the same tools as the last request (compared by value)
    else:
        tools = [[t.name, _digest([t.description, t.input_schema])] for t in request.tools]
        tools += [[f"hosted:{form['name']}", _digest(form)] for form in known[1]]
        if prefix is not None:
            prefix.tools, prefix.tool_digests = known, tools
    output = request.output
    options = {
        "system": request.system,
        "tool_choice": request.tool_choice,
        "calls": request.calls,
        "max_tokens": (
            request.max_tokens if request.max_tokens is not None else settings.get("max_tokens")
        ),
        "output": None if output is None else [output.name, output.schema],
        "reasoning": request.reasoning,
        "cache": request.cache,
    }
    if "extra_body" in settings:  # only when there is one: older keys are unchanged
        options["extra_body"] = settings["extra_body"]
    if prefix is not None and prefix.options == options:
        digests = prefix.option_digests
    else:
        digests = {k: _digest(v) for k, v in options.items()}
        if prefix is not None:
            prefix.options, prefix.option_digests = options, digests
    return {
        "v": VERSION,
        "model": f"{provider}/{model}",
        "messages": messages,
        "tools": tools,
        "options": digests,
    }


def request_key(fp: Mapping[str, Any]) -> str:
    """The request's key: the SHA-256 of its fingerprint (hex), messages by their chain."""
    messages = as_digests(fp.get("messages"))
    core = {k: v for k, v in fp.items() if k != "messages"}
    core["messages"] = [len(messages), messages.chain]
    text = json.dumps(core, sort_keys=True, separators=(",", ":"))
    return _sha256(text.encode())


def fingerprint_json(fp: Mapping[str, Any]) -> Json:
    """The fingerprint as JSON (its message digests as a list)."""
    return {**fp, "messages": [list(x) for x in as_digests(fp.get("messages"))]}


def stored_fingerprint(fp: Mapping[str, Any]) -> Json:
    """The fingerprint as a store keeps it: its messages by count and chain (O(1) in the
    history; the chain's links are kept apart, :func:`digest_links`)."""
    messages = as_digests(fp.get("messages"))
    return {**fp, "messages": {"n": len(messages), "chain": messages.chain}}


def fingerprint_in(
    d: Mapping[str, Any], load: Callable[[int, str], Sequence[Sequence[str]] | None]
) -> Json:
    """A stored fingerprint: its messages a list (:func:`fingerprint_json`, every store
    before schema version 13) or a count and chain read by ``load(n, chain)`` on first use."""
    messages = d.get("messages")
    if isinstance(messages, Mapping):
        n, chain = int(messages.get("n", 0)), str(messages.get("chain", ""))
        return {**d, "messages": StoredDigests(n, chain, lambda: load(n, chain))}
    return {**d, "messages": as_digests(messages)}


# ---------------------------------------------------------------- explaining a miss
def _closeness(fp: Mapping[str, Any], other: Mapping[str, Any]) -> tuple[int, bool, int, int]:
    """How near a recorded request is: the longest common history, then the very same
    messages (a request asked again with another option or tool, not a later step of a run
    that shares only its first messages), then the same model, tools and options."""
    ours, their_digests = as_digests(fp.get("messages")), as_digests(other.get("messages"))
    common = 0
    if ours == their_digests:  # the same chain: the same messages, read or not
        common = len(ours)
    elif known(their_digests):
        for a, b in zip(ours, their_digests, strict=False):
            if a != b:
                break
            common += 1
    exact = common == len(ours) == len(their_digests)
    same = sum(fp.get(k) == other.get(k) for k in ("model", "tools", "options"))
    return common, exact, same, -abs(len(ours) - len(their_digests))


def nearest(fp: Mapping[str, Any], candidates: Iterable[Recording]) -> Recording | None:
    """The recording whose request is closest to ``fp`` (longest common history first)."""
    best: Recording | None = None
    score: tuple[int, bool, int, int] | None = None
    for rec in candidates:
        s = _closeness(fp, rec.fingerprint)
        if score is None or s > score:
            best, score = rec, s
    return best


def _preview(m: Message) -> str:
    if isinstance(m, ToolResultMessage):
        text = f"result of {m.name or 'a call'}: {m.content}"
    elif isinstance(m, AssistantToolCallMessage):
        calls = ", ".join(f"{c.name}({json.dumps(c.arguments, default=str)})" for c in m.tool_calls)
        text = f"{m.content or ''} calls {calls}".strip()
    else:
        text = m.content
    # a miss's message is shown and raised (ReplayMissError): a key or a password in the
    # message is hidden before it is cut (a key cut short would not be recognised)
    text = redact_keys(" ".join(text.split()))
    return text if len(text) <= 80 else text[:77] + "..."


def differences(
    fp: Mapping[str, Any], other: Mapping[str, Any], request: ModelRequest
) -> list[str]:
    """What differs between a request (``fp``, ``request``) and a recorded one (``other``)."""
    out: list[str] = []
    if fp.get("model") != other.get("model"):
        out.append(f"the model: recorded {other.get('model')!r}, now {fp.get('model')!r}")
    ours, their_digests = as_digests(fp.get("messages")), as_digests(other.get("messages"))
    mine, theirs = list(ours), list(their_digests)
    if ours != their_digests and not known(their_digests):
        out.append(
            f"the messages ({len(ours)} now, {len(their_digests)} recorded; the recording's "
            "history is not stored message by message, so which one differs is unknown)"
        )
        mine = theirs = []
    for i, (a, b) in enumerate(zip(mine, theirs, strict=False)):
        if a != b:
            out.append(
                f"message {i + 1} ({a[0]}): now {_preview(request.messages[i])!r}, "
                f"the recording's {b[0]} message differs"
            )
            break
    else:
        if len(mine) != len(theirs) and known(their_digests):
            out.append(
                f"the number of messages: recorded {len(theirs)}, now {len(mine)}"
                + (
                    f" (message {len(theirs) + 1}: {_preview(request.messages[len(theirs)])!r})"
                    if len(mine) > len(theirs)
                    else ""
                )
            )
    tools_now = {n: d for n, d in fp.get("tools", [])}
    tools_then = {n: d for n, d in other.get("tools", [])}
    if fp.get("tools") != other.get("tools"):
        what = []
        if added := sorted(set(tools_now) - set(tools_then)):
            what.append("added " + ", ".join(added))
        if removed := sorted(set(tools_then) - set(tools_now)):
            what.append("removed " + ", ".join(removed))
        if changed := sorted(
            n for n in tools_now if n in tools_then and tools_now[n] != tools_then[n]
        ):
            what.append("changed (description or schema) " + ", ".join(changed))
        out.append("the tools: " + ("; ".join(what) or "their order"))
    opts_now, opts_then = fp.get("options", {}), other.get("options", {})
    if changed_opts := sorted(
        k for k in set(opts_now) | set(opts_then) if opts_now.get(k) != opts_then.get(k)
    ):
        out.append(
            "the options: "
            + ", ".join(_option_now(request, k, opts_then.get(k)) for k in changed_opts)
        )
    return out


# the options a miss shows the value of as the request has it (a system prompt and an
# output schema are long, and may quote what the screen should not show: named only)
_SHOWN_OPTIONS = ("tool_choice", "calls", "reasoning", "cache")


def _option_values(request: ModelRequest, name: str) -> list[Any]:
    """The values a shown option may have held when recorded (its recording keeps a digest
    only: the recorded value is the one of these whose digest it is)."""
    from ._reasoning import EFFORT_BUDGETS, EFFORTS

    if name == "tool_choice":
        hosted = [h.name for h in request.hosted if isinstance(getattr(h, "name", None), str)]
        return ["auto", "none", "required", *(t.name for t in request.tools), *hosted]
    if name == "calls":
        return ["one", "many"]
    if name == "reasoning":
        return [None, *EFFORTS, *EFFORT_BUDGETS.values()]
    return [False, True]  # cache


def _option_now(request: ModelRequest, name: str, recorded: Any = None) -> str:
    """An option that differs, with its value now when it is short and safe to show, and
    its recorded value (``recorded``: its digest) when that is one it could have held."""
    value = getattr(request, name, None) if name in _SHOWN_OPTIONS else None
    if not isinstance(value, (str, int, float, bool)) or len(str(value)) > 40:
        return name
    then = next(
        (v for v in _option_values(request, name) if recorded and _digest(v) == recorded),
        _UNKNOWN,
    )
    was = "" if then is _UNKNOWN else f"recorded {redact_keys(repr(then))}, "
    return f"{name} ({was}now {redact_keys(repr(value))})"


_UNKNOWN = object()


# ------------------------------------------------------------------- JSON forms
def _part_out(p: Part) -> Json:
    out: Json = {"kind": p.kind, "media_type": p.media_type, "data": p.base64}
    if isinstance(p, ImagePart) and p.detail is not None:
        out["detail"] = p.detail
    if isinstance(p, FilePart):
        out["filename"] = p.filename
    return out


def _part_in(d: Mapping[str, Any]) -> Part:
    import base64

    data = base64.b64decode(d["data"])
    if d.get("kind") == "audio":
        return AudioPart(data, d.get("media_type", "audio/wav"))
    if d.get("kind") == "file":
        return FilePart(
            data, d.get("media_type", "application/pdf"), d.get("filename", "document.pdf")
        )
    return ImagePart(data, d["media_type"], d.get("detail"))


def _item_out(i: ProviderItem) -> Json:
    out: Json = {
        "api": i.api,
        "type": i.type,
        "raw": i.raw,
        "server": i.server,
        "name": i.name,
        "status": i.status,
        "known": i.known,
    }
    if isinstance(i, Reasoning):
        out.update(reasoning=True, text=i.text, redacted=i.redacted, resend=i.resend)
    return out


def _item_in(d: Mapping[str, Any]) -> ProviderItem:
    common: dict[str, Any] = {
        k: d.get(k) for k in ("api", "type", "raw", "server", "name", "status")
    }
    common["known"] = d.get("known", True)
    if d.get("reasoning"):
        return Reasoning(
            **common,
            text=d.get("text", ""),
            redacted=d.get("redacted", False),
            resend=d.get("resend", True),
        )
    return ProviderItem(**common)


def response_out(r: LLMToolResponse) -> Json:
    return {
        "text": r.text,
        "tool_calls": [
            {
                "id": c.id,
                "name": c.name,
                "arguments": c.arguments,
                "raw_arguments": c.raw_arguments,
                "parse_error": c.parse_error,
                "server": c.server,
                "hosted": c.hosted,
            }
            for c in r.tool_calls
        ],
        "usage": [
            r.input_tokens,
            r.output_tokens,
            r.cached_tokens,
            r.reasoning_tokens,
            r.cache_write_tokens,
        ]
        if r.usage_reported
        else None,  # the server reported none: a replay of it knows no more
        "model": r.model,
        "provider": r.provider,
        "stop_reason": r.stop_reason,
        "raw_stop_reason": r.raw_stop_reason,
        "refusal": r.refusal,
        "items": [_item_out(i) for i in r.items],
    }


# A recording read back is checked field by field: a file edited by hand (a merge
# conflict fixed), cut short or from another tool. A wrong type raised a raw TypeError
# deep in the chat's step (the step lost), after the response had been copied into the
# process's recordings, where it outlived the deleted folder. A ValueError here is a
# damaged recording: the caller warns and counts it a miss.
_STOP_REASONS = frozenset(
    ("end", "tool_use", "max_tokens", "refusal", "pause_turn", "context_window", "other")
)
_DELTA_KINDS = frozenset(("text", "tool_call", "reasoning"))


def _damaged(where: str, want: str, value: Any) -> ValueError:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return ValueError(f"a damaged recording: {where} should be {want}, not {shown}")


def _text(
    d: Mapping[str, Any], key: str, where: str, default: Any = "", *, none: bool = False
) -> Any:
    value = d.get(key, default)
    if isinstance(value, str) or (none and value is None):
        return value
    raise _damaged(f"{where}.{key}", "a string" + (" or null" if none else ""), value)


def _count(value: Any, where: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise _damaged(where, "a whole number of tokens", value)


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    raise _damaged(where, "an object", value)


def _rows(value: Any, where: str) -> Sequence[Any]:
    if isinstance(value, (list, tuple)):
        return value
    raise _damaged(where, "a list", value)


def _call_in(c: Any, where: str) -> ToolCall:
    c = _mapping(c, where)
    arguments = c.get("arguments") or {}
    if not isinstance(arguments, Mapping):
        raise _damaged(f"{where}.arguments", "an object", arguments)
    return ToolCall(
        _text(c, "id", where, None),
        _text(c, "name", where, None),
        dict(arguments),
        _text(c, "raw_arguments", where, None, none=True),
        _text(c, "parse_error", where, None, none=True),
        server=_text(c, "server", where, None, none=True),
        hosted=bool(c.get("hosted")),
    )


def response_in(d: Mapping[str, Any]) -> LLMToolResponse:
    """A recorded response read back (checked: ``ValueError`` for a damaged one)."""
    d = _mapping(d, "the response")
    where = "response"
    raw_usage = d.get("usage", ())
    reported = raw_usage is not None  # null: the server reported none
    counts = () if raw_usage is None else _rows(raw_usage, f"{where}.usage")
    if len(counts) > 5:
        raise _damaged(f"{where}.usage", "at most five token counts", counts)
    usage = [_count(n, f"{where}.usage[{i}]") for i, n in enumerate(counts)] + [0] * 5
    stop = _text(d, "stop_reason", where, "end")
    if stop not in _STOP_REASONS:  # a string (checked): hashable
        raise _damaged(f"{where}.stop_reason", "one of " + ", ".join(sorted(_STOP_REASONS)), stop)
    calls = _rows(d.get("tool_calls", ()), f"{where}.tool_calls")
    items = _rows(d.get("items", ()), f"{where}.items")
    return LLMToolResponse(
        text=_text(d, "text", where),
        tool_calls=tuple(_call_in(c, f"{where}.tool_calls[{i}]") for i, c in enumerate(calls)),
        input_tokens=usage[0],
        output_tokens=usage[1],
        cached_tokens=usage[2],
        reasoning_tokens=usage[3],
        cache_write_tokens=usage[4],
        model=_text(d, "model", where),
        provider=_text(d, "provider", where),
        stop_reason=stop,
        raw_stop_reason=_text(d, "raw_stop_reason", where, None, none=True),
        refusal=_text(d, "refusal", where, None, none=True),
        items=tuple(_item_in(_mapping(i, f"{where}.items[{n}]")) for n, i in enumerate(items)),
        usage_reported=reported,
    )


def deltas_out(deltas: Sequence[StreamDelta] | None) -> list[list[Any]] | None:
    if deltas is None:
        return None
    return [[d.kind, d.text, d.index, d.call_id, d.name] for d in deltas]


def _delta_in(r: Any, where: str) -> StreamDelta:
    r = _rows(r, where)
    if len(r) != 5:
        raise _damaged(where, "[kind, text, index, call id, name]", r)
    kind, text, index, call_id, name = r
    if not isinstance(kind, str) or kind not in _DELTA_KINDS:
        raise _damaged(f"{where}[0]", "text, tool_call or reasoning", kind)
    if not isinstance(text, str):
        raise _damaged(f"{where}[1]", "a string", text)
    if not isinstance(index, int) or isinstance(index, bool):
        raise _damaged(f"{where}[2]", "a whole number", index)
    for i, v in ((3, call_id), (4, name)):
        if v is not None and not isinstance(v, str):
            raise _damaged(f"{where}[{i}]", "a string or null", v)
    return StreamDelta(kind, text, index, call_id, name)  # type: ignore[arg-type]  # kind checked above


def deltas_in(rows: Sequence[Sequence[Any]] | None) -> tuple[StreamDelta, ...] | None:
    """Recorded stream fragments read back (checked: ``ValueError`` for damaged ones)."""
    if rows is None:
        return None
    return tuple(_delta_in(r, f"deltas[{i}]") for i, r in enumerate(_rows(rows, "deltas")))


def recording_out(rec: Recording) -> Json:
    """A recording as JSON (what a recordings directory and the store keep)."""
    return {
        "key": rec.key,
        "fingerprint": fingerprint_json(rec.fingerprint),
        "response": response_out(rec.response),
        "deltas": deltas_out(rec.deltas),
        "chat_id": rec.chat_id,
        "step": rec.step,
        "created_at": rec.created_at.isoformat(),
    }


def recording_in(d: Mapping[str, Any]) -> Recording:
    """A recording read back (checked: ``ValueError`` for a damaged one)."""
    d = _mapping(d, "the recording")
    fp = _mapping(d.get("fingerprint"), "fingerprint")
    messages = _rows(fp.get("messages") or [], "fingerprint.messages")
    step = d.get("step", 0)
    if not isinstance(step, int) or isinstance(step, bool):
        raise _damaged("step", "a whole number", step)
    at = _text(d, "created_at", "recording", None, none=True)
    try:
        created = datetime.fromisoformat(at) if at else utcnow()
    except ValueError:
        raise _damaged("created_at", "a date and time", at) from None
    return Recording(
        key=_text(d, "key", "recording", None),
        fingerprint={**fp, "messages": as_digests(messages)},
        response=response_in(d.get("response")),  # type: ignore[arg-type]
        deltas=deltas_in(d.get("deltas")),
        chat_id=_text(d, "chat_id", "recording", ""),
        step=step,
        created_at=created,
    )


def result_out(r: RecordedResult) -> Json:
    return {
        "status": r.status,
        "content": r.content,
        "parts": [_part_out(p) for p in r.parts],
        "arguments": r.arguments,
    }


def result_in(d: Mapping[str, Any]) -> RecordedResult:
    """A recorded call result read back (checked: ``ValueError`` for a damaged one)."""
    d = _mapping(d, "the result")
    arguments = d.get("arguments")
    if arguments is not None and not isinstance(arguments, Mapping):
        raise _damaged("result.arguments", "an object or null", arguments)
    parts = _rows(d.get("parts", ()), "result.parts")
    return RecordedResult(
        _text(d, "status", "result", None),
        _text(d, "content", "result", None),
        tuple(_part_in(_mapping(p, f"result.parts[{i}]")) for i, p in enumerate(parts)),
        None if arguments is None else dict(arguments),
    )


_SLOT = " args="


def arguments_digest(arguments: Any) -> str:
    """A short digest of a call's arguments (key order and JSON's forms aside)."""
    return _digest(arguments)


def result_slot(call_id: str, arguments: Any) -> str:
    """Where a call's recorded result is kept: its call id and the arguments it ran with.

    A response is asked for again with the same call ids, and a call may run with other
    arguments then (a person's edit, a fork's, a sweep's edit branch): kept by call id
    alone, that run replaced the first one's result, and the next replay of the first ran
    its tool again. Kept by both, each set of arguments has its own result. A recording
    made before (one result per call id) is still read, when its arguments match.
    """
    return f"{call_id}{_SLOT}{arguments_digest(arguments)}"


def split_slot(slot: str) -> tuple[str, str | None]:
    """``(call id, arguments' digest)`` of a :func:`result_slot`; a plain call id: ``None``."""
    call_id, sep, digest = slot.rpartition(_SLOT)
    if not sep or len(digest) != 20 or not all(ch in "0123456789abcdef" for ch in digest):
        return slot, None
    return call_id, digest


# ---------------------------------------------- slim forms (what the response already says)
def _argument_forms(arguments: Any) -> list[str]:
    return [
        json.dumps(arguments, ensure_ascii=a, separators=s)
        for a in (True, False)
        for s in ((", ", ": "), (",", ":"))
    ]


def slim_deltas(
    deltas: Sequence[StreamDelta] | None, response: LLMToolResponse
) -> list[Any] | None:
    """Stream fragments as lengths, when they only cut the response's own text into pieces.

    A store keeps a response once (its message row); its fragments then need
    only where each one ends: ``[kind, length, index, call_id, name]``, and per
    call, which JSON spelling of the arguments they cut (``forms``). Fragments
    that do not add up to the response's text are kept whole (``None`` back:
    keep :func:`deltas_out`).
    """
    if deltas is None:
        return None
    joined: dict[tuple[str, int], str] = {}
    for d in deltas:
        joined[(d.kind, d.index)] = joined.get((d.kind, d.index), "") + d.text
    thinking = "".join(i.text for i in response.items if isinstance(i, Reasoning))
    forms: dict[int, int] = {}
    for (kind, index), text in joined.items():
        if kind == "text" and text != response.text:
            return None
        if kind == "reasoning" and text != thinking:
            return None
        if kind == "tool_call":
            if index >= len(response.tool_calls):
                return None
            call = response.tool_calls[index]
            spelled = (
                [call.raw_arguments]
                if call.raw_arguments is not None
                else _argument_forms(call.arguments)
            )
            if text not in spelled:
                return None
            forms[index] = spelled.index(text)
    rows = [[d.kind, len(d.text), d.index, d.call_id, d.name] for d in deltas]
    return [{"forms": {str(k): v for k, v in forms.items()}}, *rows]


def full_deltas(slim: Sequence[Any], response: LLMToolResponse) -> tuple[StreamDelta, ...]:
    """The fragments :func:`slim_deltas` described, cut again from ``response``."""
    head, rows = slim[0], slim[1:]
    forms = {int(k): v for k, v in head.get("forms", {}).items()}
    thinking = "".join(i.text for i in response.items if isinstance(i, Reasoning))
    sources: dict[tuple[str, int], str] = {}
    at: dict[tuple[str, int], int] = {}
    out: list[StreamDelta] = []
    for kind, length, index, call_id, name in rows:
        k = (kind, index)
        if k not in sources:
            if kind == "text":
                sources[k] = response.text
            elif kind == "reasoning":
                sources[k] = thinking
            else:
                call = response.tool_calls[index]
                sources[k] = (
                    call.raw_arguments
                    if call.raw_arguments is not None
                    else _argument_forms(call.arguments)[forms.get(index, 0)]
                )
        start = at.get(k, 0)
        out.append(StreamDelta(kind, sources[k][start : start + length], index, call_id, name))
        at[k] = start + length
    return tuple(out)


def synthetic_deltas(response: LLMToolResponse) -> tuple[StreamDelta, ...]:
    """The fragments a response that did not stream would have come in (one per piece)."""
    out: list[StreamDelta] = [
        StreamDelta("reasoning", i.text)
        for i in response.items
        if isinstance(i, Reasoning) and i.text
    ]
    if response.text:
        out.append(StreamDelta("text", response.text))
    for n, c in enumerate(response.tool_calls):
        args = c.raw_arguments if c.raw_arguments is not None else json.dumps(c.arguments)
        out.append(StreamDelta("tool_call", args, n, c.id, c.name))
    return tuple(out)


__all__ = [
    "Digests",
    "Prefix",
    "RecordedResult",
    "Recording",
    "StoredDigests",
    "arguments_digest",
    "differences",
    "digest_links",
    "fingerprint",
    "fingerprint_in",
    "fingerprint_json",
    "full_deltas",
    "known",
    "linked_digests",
    "message_form",
    "nearest",
    "recording_in",
    "recording_out",
    "request_key",
    "result_in",
    "result_out",
    "result_slot",
    "slim_deltas",
    "split_slot",
    "stored_fingerprint",
    "synthetic_deltas",
]
