"""How the offline demo model reads a request: tools, phrases, values and lists.

Pure functions of the user's text and the tools' schemas: no state, no network.
:func:`plan` turns a request into the calls the demo model makes:

1. Values that must never be split are set aside first: quoted text, SQL
   statements, URLs, emails, dates, times and paths.
2. The rest is cut into pieces at ``,`` ``;`` ``and`` ``then`` ``also`` and
   sentence ends ("between X and Y" stays whole).
3. A piece that names a tool (its name or description words) starts a call of
   that tool; any other piece continues the call before it.
4. Each piece is read against the tool's parameters: first phrases that name a
   parameter (``subject "Hi"``, ``body: ...``, ``amount=5``, ``order 42``,
   ``30 euros``), then values by type (enum words, numbers, emails, paths,
   capitalised names, words after "in"/"for"...). A free-text parameter
   (``body``, ``query``...) named without quotes runs to the next parameter
   named, or to the end of the request.
5. The pieces of one call become several calls only when they list values of
   one parameter ("weather in Paris, Tokyo and Oslo") or repeat the same
   parameters ("order 1 for 5 euros and order 2 for 7 euros"); otherwise they
   are one call ("... with subject X and body Y").
6. A required parameter with nothing in the text gets its default, else a
   made-up value; an optional one is left out.

Every argument remembers how it was found (:class:`Planned` ``guessed`` and
``made_up``), so the demo model can say so.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._types import ToolSpec


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOP = _wordset(
    "a an the of to in on at for and or is are be me my i you your please what whats what's "
    "how can could would should do does with from by it this that get give tell show find "
    "current now today some any all"
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]*")


def words(text: str) -> list[str]:
    """The content words of ``text``: lowercase, no stop words, a plural ``s`` dropped."""
    out = []
    for w in _WORD.findall(text.lower().replace("_", " ")):
        w = w.strip("'")
        if w and w not in STOP:
            out.append(w[:-1] if len(w) > 4 and w.endswith("s") else w)
    return out


# -- values that are never split ------------------------------------------------------

_PRIVATE = re.compile("[\ue000-\uf8ff]")
_FIRST = 0xE000  # atom n is masked as the private-use character chr(_FIRST + n)
_ATOM = re.compile("[\ue000-\uf8ff]")

_QUOTED = re.compile(
    r"\"([^\"\n]+)\"|“([^”\n]+)”|‘([^’\n]+)’|`([^`\n]+)`|(?<![\w'])'([^'\n]+)'(?!\w)"
)
_SQL = re.compile(
    r"\b(?:select\s+(?:distinct\s+)?(?:\*|[\w.()*]+(?:\s+as\s+\w+)?"
    r"(?:\s*,\s*[\w.()*]+(?:\s+as\s+\w+)?)*)\s+from\s+[\w.]+"
    r"|insert\s+into\s+[\w.]+|update\s+[\w.]+\s+set\s|delete\s+from\s+[\w.]+"
    r"|create\s+(?:table|view|index)\s|drop\s+(?:table|view)\s|with\s+\w+\s+as\s*\()",
    re.I,
)
_SQL_UPPER = re.compile(r"\b(?:SELECT|INSERT|UPDATE|DELETE|WITH)\b(?=.*\b(?:FROM|INTO|SET|AS)\b)")
_URL = re.compile(r"\b[a-zA-Z][\w+.-]*://[^\s,;\"'<>]+")
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
    rf"|\b{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?\b"
    rf"|\b(?:today|tomorrow|yesterday|tonight|(?:next|last|this)\s+(?:week|month|year|{_WEEKDAY})"
    rf"|{_WEEKDAY})\b",
    re.I,
)
_TIME = re.compile(
    r"\b(?:[01]?\d|2[0-3]):[0-5]\d(?:\s?[ap]\.?m\b\.?)?|\b(?:1[0-2]|0?[1-9])\s?[ap]m\b"
    r"|\b(?:noon|midnight)\b",
    re.I,
)
_PATH = re.compile(
    r"(?<![\w@/\\])(?:[a-zA-Z]:\\[^\s,;\"']+"
    r"|(?=[\w~./-]*[A-Za-z])[\w~-]*(?:[./][\w~-]+)+/?)"
)
_NOT_PATHS = frozenset(["e.g", "i.e", "etc", "vs", "a.m", "p.m"])

# The order atoms are set aside in: quotes first (they may hold anything), then SQL
# (which may hold quotes), then the rest.
_ATOM_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("url", _URL),
    ("email", _EMAIL),
    ("date", _DATE),
    ("time", _TIME),
    ("path", _PATH),
)


@dataclass(frozen=True)
class Atom:
    """A value that is never split: ``value`` is what a parameter gets (a quote's inside)."""

    kind: str  # quoted | sql | url | email | date | time | path
    value: str
    raw: str


class Text:
    """A request with its atoms masked, one private-use character each."""

    def __init__(self, text: str):
        self.atoms: list[Atom] = []
        s = _PRIVATE.sub(" ", text)
        s = _QUOTED.sub(self._quoted, s)
        s = self._mask_sql(s)
        for kind, pattern in _ATOM_KINDS:
            s = self._mask_all(kind, pattern, s)
        self.masked = s
        self.sentence_starts = {0} | {m.end() for m in re.finditer(r"[.!?]\s+", s)}

    def _mask_all(self, kind: str, pattern: re.Pattern[str], s: str) -> str:
        return pattern.sub(lambda m: self._mask(kind, m.group(0)), s)

    def _add(self, atom: Atom) -> str:
        if len(self.atoms) >= 0x1800:  # private-use characters run out: leave it as text
            return atom.raw
        self.atoms.append(atom)
        return chr(_FIRST + len(self.atoms) - 1)

    def _quoted(self, m: re.Match[str]) -> str:
        inner = next(g for g in m.groups() if g is not None)
        return self._add(Atom("quoted", inner, m.group(0)))

    def _mask(self, kind: str, raw: str) -> str:
        if kind == "url":
            stripped = raw.rstrip(".,;:!?)")
            return self._add(Atom(kind, stripped, stripped)) + raw[len(stripped) :]
        if kind == "path" and (raw.lower().rstrip(".") in _NOT_PATHS):
            return raw
        return self._add(Atom(kind, raw, raw))

    def _mask_sql(self, s: str) -> str:
        m = _SQL.search(s) or _SQL_UPPER.search(s)
        if m is None:
            return s
        end = s.find(";", m.start())
        end = len(s) if end < 0 else end
        raw = s[m.start() : end].rstrip(" \t\n.?!")
        if not raw:
            return s
        stop = m.start() + len(raw)
        atom = Atom("sql", self.restore(raw), raw)
        return s[: m.start()] + self._add(atom) + self._mask_sql(s[stop:])

    def atom(self, ch: str) -> Atom | None:
        n = ord(ch) - _FIRST if ch else -1
        return self.atoms[n] if 0 <= n < len(self.atoms) else None

    def restore(self, masked: str) -> str:
        """``masked`` with every atom back as it was written."""
        return _ATOM.sub(lambda m: self.restore(self._raw(m.group(0))), masked)

    def _raw(self, ch: str) -> str:
        a = self.atom(ch)
        return a.raw if a is not None else ""


# -- pieces ------------------------------------------------------------------------------

_SEP = re.compile(
    r"\s*(?:;|[.!?](?=\s)|,(?=\s|$))\s*(?:(?:and\s+)?(?:then|also)\b|and\b|plus\b)?\s*"
    r"|\s+(?:and\s+then|and\s+also|as\s+well\s+as|then|also|and|plus)\s+",
    re.I,
)
_STRONG_SEP = re.compile(r"[;.!?]|\bthen\b|\balso\b", re.I)
_BETWEEN = re.compile(r"\bbetween\s+\S+(?:\s+\S+)?\s*$", re.I)
_EDGE = " \t\n.,;:!?"


@dataclass
class Piece:
    start: int
    end: int
    strong: bool  # after ; . then also: a free-text value does not run on into it


def pieces(t: Text) -> list[Piece]:
    s = t.masked
    out: list[Piece] = []
    start, strong = 0, True
    for m in _SEP.finditer(s):
        sep = m.group(0)
        if re.fullmatch(r"\s+and\s+", sep, re.I) and _BETWEEN.search(s, start, m.start()):
            continue
        out.append(Piece(start, m.start(), strong))
        start, strong = m.end(), bool(_STRONG_SEP.search(sep))
    out.append(Piece(start, len(s), strong))
    trimmed = []
    for p in out:
        while p.start < p.end and s[p.start] in _EDGE:
            p.start += 1
        while p.end > p.start and s[p.end - 1] in _EDGE:
            p.end -= 1
        if p.end > p.start:
            trimmed.append(p)
    return trimmed


# -- parameters ------------------------------------------------------------------------

_GENERIC = _wordset("id ids name names number num no code value str")
_TEXTY = _wordset(
    "body text message content contents subject title query sql note notes comment "
    "description reason prompt question summary statement command instructions caption "
    "search term terms keywords topic q msg input expression"
)
_FLAVOURS = (  # a string parameter whose name has one of these words wants that kind of value
    ("email", _wordset("email emails mail recipient recipients sender")),
    ("url", _wordset("url urls uri link links page site website endpoint href domain")),
    ("path", _wordset("path paths file files filename filepath dir directory folder")),
    ("date", _wordset("date day when deadline birthday since until")),
    ("time", _wordset("time hour")),
)
_AMOUNTISH = _wordset(
    "amount price cost total sum budget fee refund balance salary money euros dollars"
)
_MONEY_BEFORE = re.compile(r"[$€£¥]\s?$")
_MONEY_AFTER = re.compile(
    r"^\s?(?:usd|eur|gbp|jpy|chf|euros?|dollars?|pounds?|yen|bucks|[$€£¥])\b", re.I
)
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w.]|\.\d)")
_CONNECT = re.compile(r"(?:\s*(?:[:=]|\bis\b|\bof\b|\bnumber\b|\bno\b\.?|#|\bto\s+be\b))*\s*", re.I)
_ARTICLE = re.compile(r"(?:(?:the|a|an|my|our|his|her|their|its)\s+)*", re.I)
_NAME = re.compile(r"\b[A-Z][a-zà-ÿ'’]+(?:[ -][A-Z][a-zà-ÿ]+)*\b|\b[A-Z]{2,6}\b")
_SHORT = re.compile(r"[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*|[^\W_][\w.'-]*")
_AFTER = re.compile(
    r"\b(?:for|in|about|named|called|to|from|of|on|at|near|into)\s+"
    r"(?:(?:the|a|an|my|our|your)\s+)?(?=[^\W\d_])",
    re.I,
)
_TRAIL = re.compile(
    r"(?:[\s,;:]|\b(?:and|with|then|also|plus|the|a|an|its|to|on|at|in|for|by|of|from)\b)*$",
    re.I,
)
# the order parameters are filled in from values found by type: the pickiest first
_FOUND_ORDER = (
    *("enum", "boolean", "date", "time", "integer", "number", "email", "url", "path", "sql"),
    *("short", "array", "text", "object", "ref"),
)
_BODY = _wordset("body message text content msg")  # "saying ..." fills the first of these
_QUESTION = _wordset("who whom whose where when which why")
_DEDICATED = _wordset("email url path date time sql")  # kinds free text stops before
_TRUE = _wordset("true yes on enabled enable")
_FALSE = _wordset("false no off disabled disable")
_LEAD = re.compile(r"(?:(?:with|and|the|a|an|its|set|plus|also)\s+)*", re.I)
_CURRENCY = re.compile(r"[$€£¥]\s?")
_LETTERS = re.compile(r"[A-Za-z]+")


def _name_words(name: str) -> list[str]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return [w for w in re.split(r"[\s_\-.]+", spaced.lower()) if w]


def _concrete(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict):
        return {}
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            real = [s for s in options if isinstance(s, dict) and s.get("type") != "null"]
            if real:
                merged = dict(real[0])
                for k in ("default", "description"):
                    if k in schema:
                        merged[k] = schema[k]
                return merged
    return schema


@dataclass
class Param:
    name: str
    schema: dict[str, Any]
    required: bool
    kind: str  # enum boolean integer number array object ref, or a string flavour:
    # email url path date time sql text short
    strong: list[str] = field(default_factory=list)
    weak: list[str] = field(default_factory=list)
    item: Param | None = None
    amountish: bool = False
    idish: bool = False

    @property
    def enum(self) -> list[Any]:
        e = self.schema.get("enum")
        return e if isinstance(e, list) else []

    def alias_re(self, weak: bool) -> re.Pattern[str] | None:
        aliases = self.weak if weak else self.strong
        if not aliases:
            return None
        alts = "|".join(
            r"[\s_-]+".join(re.escape(w) for w in a.split())
            for a in sorted(aliases, key=len, reverse=True)
        )
        return re.compile(rf"(?<![\w-])(?:{alts})(?:e?s|e?d)?(?![\w-])", re.I)


def _kind(name: str, schema: dict[str, Any], desc_words: list[str]) -> str:
    if "$ref" in schema:
        return "ref"
    typ = schema.get("type")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), None)
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return "enum"
    if typ in ("boolean", "integer", "number", "array", "object"):
        return str(typ)
    if typ not in (None, "string"):
        return "short"
    fmt = schema.get("format")
    if fmt in ("date", "date-time"):
        return "date"
    if fmt == "time":
        return "time"
    if fmt == "email":
        return "email"
    if fmt in ("uri", "url"):
        return "url"
    nw = set(_name_words(name))
    if len(nw) == 1 and nw <= {"to", "cc", "bcc", "from"}:
        return "email"
    if "sql" in nw or (nw & {"query", "statement"} and "sql" in desc_words):
        return "sql"
    for flavour, vocab in _FLAVOURS:
        if nw & vocab:
            return flavour
    if nw & _TEXTY:
        return "text"
    for flavour, vocab in _FLAVOURS[:3]:
        if set(desc_words[:3]) & vocab:
            return flavour
    return "short"


def _params(schema: Any) -> list[Param]:
    if not isinstance(schema, dict):
        return []
    props = schema.get("properties")
    if not isinstance(props, dict):
        return []
    required = schema.get("required")
    required = set(required) if isinstance(required, list) else set()
    out: list[Param] = []
    for name, raw in props.items():
        if not isinstance(name, str) or not isinstance(raw, dict):
            continue
        out.append(_param(name, _concrete(raw), name in required))
    _set_aliases(out)
    return out


def _param(name: str, schema: dict[str, Any], required: bool) -> Param:
    desc = schema.get("description")
    desc_words = words(desc.split(".")[0]) if isinstance(desc, str) else []
    p = Param(name, schema, required, _kind(name, schema, desc_words))
    nw = set(_name_words(name))
    p.amountish = bool(nw & _AMOUNTISH or set(desc_words[:3]) & _AMOUNTISH)
    p.idish = bool(nw & {"id", "number", "no", "num"}) or p.kind == "integer"
    if p.kind == "array":
        items = _concrete(schema.get("items", {"type": "string"}))
        p.item = _param(name, items, True)
    return p


def _set_aliases(params: list[Param]) -> None:
    """Strong aliases from each name; weak ones from the first words of its description."""
    counts: dict[str, int] = {}
    per_param: list[list[str]] = []
    for p in params:
        nw = _name_words(p.name)
        per_param.append(nw)
        for w in set(nw):
            counts[w] = counts.get(w, 0) + 1
    taken: set[str] = set()
    for p, nw in zip(params, per_param, strict=True):
        strong = {" ".join(nw), p.name.lower()}
        content = [w for w in nw if w not in _GENERIC]
        if content and len(content) < len(nw):
            strong.add(" ".join(content))
        if len(nw) > 1:
            strong |= {w for w in content if counts[w] == 1 and len(w) > 1}
        p.strong = sorted(strong)
        taken |= strong
    body = next((p for p in params if p.kind == "text" and set(_name_words(p.name)) & _BODY), None)
    if body is not None:
        body.strong.append("saying")  # "email Bob saying the report is ready"
        taken.add("saying")
    candidates: list[list[str]] = []
    for p in params:
        desc = p.schema.get("description")
        first = (
            [w for w in words(desc.split(".")[0].split(",")[0]) if w.isalpha()]
            if (isinstance(desc, str))
            else []
        )
        candidates.append(
            [
                w
                for w in first[:2]
                if len(w) > 2 and w not in _GENERIC and w not in taken and w not in _QUESTION
            ]
        )
    seen: dict[str, int] = {}
    for weak in candidates:
        for w in set(weak):
            seen[w] = seen.get(w, 0) + 1
    for p, weak in zip(params, candidates, strict=True):
        p.weak = [w for w in weak if seen[w] == 1]
    for p in params:
        if p.item is not None:
            p.item.strong, p.item.weak = p.strong, p.weak


# -- reading ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Value:
    value: Any
    how: str  # named (after the parameter's name) | found (by type) | default | made_up
    kind: str  # what it was in the text: an atom kind, name, word, text, number, enum, bool


_LIST_KINDS = {"url": "path"}  # "a.com, b.com and https://c.org": one list


def _compatible(a: Value, b: Value) -> bool:
    return _LIST_KINDS.get(a.kind, a.kind) == _LIST_KINDS.get(b.kind, b.kind)


class Reader:
    """Reads pieces of a request against one tool's parameters."""

    def __init__(self, spec: ToolSpec):
        self.spec = spec
        self.params = _params(spec.input_schema)
        self.name_words = set(words(spec.name.replace("-", " ")))
        self.vocab = self.name_words | set(words(spec.description.split("\n")[0]))
        for p in self.params:
            self.vocab |= set(words(p.name.replace("_", " ")))
        self._alias: list[tuple[re.Pattern[str], Param, bool]] = []
        for p in self.params:
            for weak in (False, True):
                rx = p.alias_re(weak)
                if rx is not None:
                    self._alias.append((rx, p, weak))

    # how well a piece names this tool
    def score(self, text: str) -> float:
        w = set(words(text))
        return 2.0 * len(w & self.name_words) + len(w & self.vocab)

    def names_me(self, text: str) -> bool:
        """Whether ``text`` has a word of the tool's name."""
        return bool(set(words(text)) & self.name_words)

    # phrases that name a parameter
    def starts_with_phrase(self, t: Text, piece: Piece) -> bool:
        s = t.masked
        at = _LEAD.match(s, piece.start, piece.end)
        pos = at.end() if at else piece.start
        for rx, p, weak in self._alias:
            m = rx.match(s, pos, piece.end)
            if m and self._after(t, p, m.end(), piece.end, weak) is not None:
                return True
        return False

    def named(self, t: Text, piece: Piece) -> tuple[dict[str, Value], list[tuple[int, int]], bool]:
        """Values given after a parameter's name; their spans; whether free text ran to the end."""
        s = t.masked
        hits: list[tuple[int, int, Param, bool]] = []
        for rx, p, weak in self._alias:
            for m in rx.finditer(s, piece.start, piece.end):
                hits.append((m.start(), m.end(), p, weak))
        hits.sort(key=lambda h: (h[0], -(h[1] - h[0])))
        got: dict[str, Value] = {}
        spans: list[tuple[int, int]] = []
        floor, open_text = piece.start, False
        for i, (start, end, p, weak) in enumerate(hits):
            if start < floor or p.name in got:
                continue
            parsed = self._after(t, p, end, piece.end, weak)
            if parsed is None:
                continue
            value, stop = parsed
            if value is None:  # free text: up to the next parameter named, or the end
                text_start = stop
                stop, ran = piece.end, True
                for nstart, nend, q, qweak in hits[i + 1 :]:
                    if nstart <= end or q is p or q.name in got:
                        continue
                    if self._after(t, q, nend, piece.end, qweak) is not None:
                        stop, ran = nstart, False
                        break
                # ... or to a value another parameter is made for ("on 2025-03-14")
                wanted = {q.kind for q in self.params if q is not p and q.name not in got}
                for k in range(text_start + 1, stop):
                    a = t.atom(s[k])
                    if a is not None and a.kind in wanted & _DEDICATED:
                        stop, ran = k, False
                        break
                value = self._free_text(t, s[text_start:stop])
                if value is None:
                    continue
                open_text = ran and value.kind == "text"
            got[p.name] = value
            spans.append((start, stop))
            floor = stop
        for p in self.params:  # "30 euros", "4 people": a number before the name
            if p.name in got or p.kind not in ("integer", "number"):
                continue
            for weak in (False, True):
                name_rx = p.alias_re(weak)
                if name_rx is None:
                    continue
                for m in _NUMBER.finditer(s, piece.start, piece.end):
                    if any(a <= m.start() < b for a, b in spans):
                        continue
                    gap = 1 if s[m.end() : m.end() + 1] == " " else 0
                    after = name_rx.match(s, m.end() + gap)
                    v = _to_number(m.group(0), p) if after else None
                    if after and v is not None and after.end() <= piece.end:
                        got[p.name] = Value(v, "named", "number")
                        spans.append((m.start(), after.end()))
                        break
                if p.name in got:
                    break
        return got, spans, open_text

    def _after(
        self, t: Text, p: Param, pos: int, end: int, weak: bool
    ) -> tuple[Value | None, int] | None:
        """The value right after a parameter's name: (value, its end); value None: free text
        starts there; None: no value of the parameter's type there."""
        s = t.masked
        c = _CONNECT.match(s, pos, end)
        start = c.end() if c else pos
        explicit = bool(c and re.search(r"[:=]", c.group(0)))
        if start >= end or (start == pos and pos < len(s) and s[pos].isalnum()):
            return None
        atom = t.atom(s[start]) if start < end else None
        kind = p.item.kind if p.kind == "array" and p.item else p.kind
        if weak and not explicit and atom is None and kind not in ("integer", "number", "enum"):
            return None
        if kind in ("integer", "number"):
            money = _CURRENCY.match(s, start, end)
            at = money.end() if money else start
            m = _NUMBER.match(s, at, end)
            value = _to_number(m.group(0), p.item or p if p.kind == "array" else p) if m else None
            if m is None or value is None:
                return None
            return self._wrap(p, Value(value, "named", "number")), m.end()
        if kind == "boolean":
            m = _LETTERS.match(s, start, end)
            if m and m.group(0).lower() in _TRUE | _FALSE:
                return Value(m.group(0).lower() in _TRUE, "named", "bool"), m.end()
            return None
        if kind == "enum":
            hit = _enum_at(p.item or p if p.kind == "array" else p, s, start, end)
            if hit is None:
                return None
            return self._wrap(p, Value(hit[0], "named", "enum")), hit[2]
        if kind in ("object", "ref"):
            return None
        if kind in ("text", "sql"):
            return (None, start) if start < end else None
        art = _ARTICLE.match(s, start, end)
        at = art.end() if art else start
        if at < end and (a := t.atom(s[at])) is not None:
            return self._wrap(p, Value(a.value, "named", a.kind)), at + 1
        m = _SHORT.match(s, at, end)
        if m is None or m.group(0).lower() in STOP:
            return None
        word = m.group(0).rstrip(".'-")
        kind_of = "name" if word[:1].isupper() else "word"
        return self._wrap(p, Value(word, "named", kind_of)), at + len(word)

    def _wrap(self, p: Param, v: Value) -> Value:
        return Value([v.value], v.how, v.kind) if p.kind == "array" else v

    def _free_text(self, t: Text, masked: str) -> Value | None:
        core = _TRAIL.sub("", masked).strip(" \t\n\"'")
        if core.endswith((".", "!")) or (core.endswith("?") and len(core) > 1):
            core = core.rstrip(".!?").rstrip()
        if not core:
            return None
        if len(core) == 1 and (a := t.atom(core)) is not None:
            return Value(a.value, "named", a.kind)
        return Value(t.restore(core), "named", "text")

    # values by type
    def runs_on(self, t: Text, piece: Piece) -> str | None:
        """Whether free text reaches the piece's end, so the next piece may belong to it:
        ``named`` (after a parameter's name), ``found`` (a guess), None."""
        got, spans, open_text = self.named(t, piece)
        if open_text:
            return "named"
        return "found" if self.found(t, piece, spans, set(got))[1] else None

    def found(
        self, t: Text, piece: Piece, spans: Sequence[tuple[int, int]], skip: Iterable[str]
    ) -> tuple[dict[str, Value], bool]:
        """Values for the parameters not in ``skip``, by type, from the piece's unnamed text;
        whether a free-text value runs to the piece's end."""
        chars = list(t.masked[piece.start : piece.end])
        for a, b in spans:
            for i in range(max(a, piece.start), min(b, piece.end)):
                chars[i - piece.start] = "\x1f"
        text = t.masked[: piece.start] + "".join(chars)  # positions stay those of t.masked
        pool = _Pool(t, text, piece.start, self.vocab)
        got: dict[str, Value] = {}
        skip = set(skip)
        for p in self.params:  # quoted text is free text first ("meeting "Budget" with Ana")
            if p.kind == "text" and p.name not in skip and (v := pool.quoted()) is not None:
                got[p.name] = v
        for kind in _FOUND_ORDER:
            for p in self.params:
                if p.kind != kind or p.name in skip or p.name in got:
                    continue
                v = pool.take(p)
                if v is not None:
                    got[p.name] = v
        return got, pool.ran_to_end

    def made_up(self, p: Param, request: str) -> Value | None:
        """The value of a parameter the text does not give (None: leave it out)."""
        if "default" in p.schema:
            return Value(p.schema["default"], "default", "default") if p.required else None
        if not p.required:
            return None
        if p.kind == "enum":
            return Value(p.enum[0], "made_up", "enum")
        if p.kind in ("integer", "number"):
            return Value(1, "made_up", "number")
        if p.kind == "boolean":
            return Value(False, "made_up", "bool")
        if p.kind == "array":
            item = self.made_up(p.item, request) if p.item else None
            return Value([item.value] if item else [], "made_up", "array")
        if p.kind == "ref":  # a nested model the demo does not look up: left out
            return None
        if p.kind == "object":
            inner: dict[str, Any] = {}
            for q in _params(p.schema):
                v = self.made_up(q, request)
                if v is not None:
                    inner[q.name] = v.value
            return Value(inner, "made_up", "object")
        if p.kind in ("text", "sql") and request.strip():
            return Value(request.strip(), "made_up", "text")
        left = [w for w in words(request) if w not in self.vocab]
        return Value(left[-1] if left else p.name, "made_up", "word")


def _to_number(text: str, p: Param) -> int | float | None:
    n = float(text.replace(",", ""))
    if p.kind == "integer" or (p.kind == "enum" and all(isinstance(e, int) for e in p.enum)):
        return int(n) if n.is_integer() else None
    return n


@functools.lru_cache(maxsize=256)
def _enum_regex(values: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern for an enum's values, longest first; group n+1 is value n."""
    order = sorted(range(len(values)), key=lambda i: -len(values[i]))
    alts = []
    for i in order:
        parts = [re.escape(w) for w in re.split(r"[\s_-]+", values[i]) if w]
        alts.append((i, r"[\s_-]+".join(parts) if parts else "(?!)"))
    body = "|".join(f"(?P<v{i}>{rx})" for i, rx in alts)
    return re.compile(rf"(?<![\w-])(?:{body})(?![\w])", re.I)


def _enum_at(
    p: Param, s: str, start: int, end: int, search: bool = False
) -> tuple[Any, int, int] | None:
    """An enum value at ``start`` (or, searching, anywhere after it): (value, start, end)."""
    values = p.enum
    if not values:
        return None
    rx = _enum_regex(tuple(str(v) for v in values))
    m = rx.search(s, start, end) if search else rx.match(s, start, end)
    if m is None or m.lastgroup is None:
        return None
    return values[int(m.lastgroup[1:])], m.start(), m.end()


class _Pool:
    """The values left in one piece of text, each given out once."""

    def __init__(self, t: Text, s: str, start: int, vocab: set[str]):
        self.t, self.s, self.start, self.end = t, s, start, len(s)
        self.vocab = vocab
        self.used: list[tuple[int, int]] = []
        self.ran_to_end = False

    def _free(self, a: int, b: int) -> bool:
        return all(b <= x or a >= y for x, y in self.used)

    def _use(self, a: int, b: int, v: Value) -> Value:
        self.used.append((a, b))
        return v

    def quoted(self) -> Value | None:
        return self._from("quoted")

    def atoms(self, kind: str) -> Iterable[tuple[int, Atom]]:
        for i in range(self.start, self.end):
            a = self.t.atom(self.s[i])
            if a is not None and a.kind == kind and self._free(i, i + 1):
                yield i, a

    def take(self, p: Param) -> Value | None:
        if p.kind == "array" and p.item is not None:
            v = self.take(p.item)
            return Value([v.value], v.how, v.kind) if v else None
        if p.kind == "enum":
            return self._enum(p)
        if p.kind == "boolean":
            return self._bool(p)
        if p.kind in ("integer", "number"):
            return self._number(p)
        if p.kind in ("object", "ref"):
            return None
        order = {
            "email": ("email", "name", "after", "bare", "quoted"),
            "url": ("url", "path", "quoted", "after", "bare"),
            "path": ("path", "quoted", "url", "after", "bare"),
            "date": ("date", "quoted"),
            "time": ("time", "quoted"),
            "sql": ("sql", "quoted", "rest"),
            "text": ("quoted", "sql", "rest"),
        }.get(p.kind, ("quoted", "url", "path", "email", "name", "after", "bare", "date", "time"))
        for source in order:
            v = self._from(source)
            if v is not None:
                return v
        return None

    def _from(self, source: str) -> Value | None:
        s = self.s
        if source in ("quoted", "sql", "url", "path", "email", "date", "time"):
            for i, a in self.atoms(source):
                return self._use(i, i + 1, Value(a.value, "found", a.kind))
            return None
        if source == "name":
            for m in _NAME.finditer(s, self.start, self.end):
                name = m.group(0)
                if (
                    m.start() in self.t.sentence_starts
                    or set(words(name)) & self.vocab
                    or name.lower() in STOP
                    or not self._free(m.start(), m.end())
                ):
                    continue
                return self._use(m.start(), m.end(), Value(name, "found", "name"))
            return None
        if source in ("after", "rest"):
            for m in _AFTER.finditer(s, self.start, self.end):
                if source == "rest":
                    stop = s.find("\x1f", m.end(), self.end)
                    stop = self.end if stop < 0 else stop
                    stop = min([stop] + [a for a, _ in self.used if a >= m.end()])
                    raw = _TRAIL.sub("", s[m.end() : stop]).strip()
                    if raw and self._free(m.end(), stop) and not set(words(raw)) <= self.vocab:
                        v = Value(self.t.restore(raw), "found", "text")
                        self.ran_to_end = stop >= self.end
                        return self._use(m.end(), m.end() + len(raw), v)
                    continue
                w = _SHORT.match(s, m.end(), self.end)
                if w is None:
                    continue
                text = w.group(0).rstrip(".'-")
                if text.lower() in STOP or set(words(text)) & self.vocab:
                    continue
                if self._free(w.start(), w.start() + len(text)):
                    kind = "name" if text[:1].isupper() else "word"
                    return self._use(w.start(), w.start() + len(text), Value(text, "found", kind))
            return None
        if source == "bare":  # a piece of one to three words and nothing else: "and tokyo"
            chars = list(s[self.start : self.end])
            for lo, hi in self.used:
                for i in range(max(lo, self.start), min(hi, self.end)):
                    chars[i - self.start] = "\x1f"
            span = "".join(chars)
            if _ATOM.search(span) or _NUMBER.search(span):
                return None
            left = [w for w in _WORD.findall(span) if w.lower() not in STOP]
            left = [w for w in left if not set(words(w)) & self.vocab]
            if 0 < len(left) <= 3:
                kind = "name" if all(w[:1].isupper() for w in left) else "word"
                return self._use(self.start, self.end, Value(" ".join(left), "found", kind))
            return None
        return None

    def _enum(self, p: Param) -> Value | None:
        at = self.start
        while (hit := _enum_at(p, self.s, at, self.end, search=True)) is not None:
            value, a, b = hit
            if self._free(a, b) and str(value).lower() not in STOP:
                return self._use(a, b, Value(value, "found", "enum"))
            at = a + 1
        return None

    def _bool(self, p: Param) -> Value | None:
        rx = p.alias_re(False)
        m = rx.search(self.s, self.start, self.end) if rx else None
        if m is None or not self._free(m.start(), m.end()):
            return None
        before = self.s[max(self.start, m.start() - 12) : m.start()].lower()
        no = re.search(r"\b(?:no|not|without|don'?t|do not)\s+$", before) is not None
        return self._use(m.start(), m.end(), Value(not no, "found", "bool"))

    def _number(self, p: Param) -> Value | None:
        found: list[tuple[int, int, float | int, bool, bool]] = []
        for m in _NUMBER.finditer(self.s, self.start, self.end):
            v = _to_number(m.group(0), p)
            if v is None or not self._free(m.start(), m.end()):
                continue
            money = bool(
                _MONEY_BEFORE.search(self.s[max(0, m.start() - 2) : m.start()])
                or _MONEY_AFTER.match(self.s[m.end() : m.end() + 9])
            )
            hashed = self.s[max(0, m.start() - 1) : m.start()] == "#"
            found.append((m.start(), m.end(), v, money, hashed))
        if not found:
            return None
        pick = found[0]
        if p.amountish:
            pick = next((f for f in found if f[3]), pick)
        elif p.idish:
            pick = next((f for f in found if f[4]), next((f for f in found if not f[3]), pick))
        else:
            pick = next((f for f in found if not f[3]), pick)
        return self._use(pick[0], pick[1], Value(pick[2], "found", "number"))


# -- the plan -------------------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    """One call the demo model makes, and how it got its arguments."""

    name: str
    arguments: dict[str, Any]
    guessed: tuple[str, ...] = ()  # read from the user's words
    made_up: tuple[str, ...] = ()  # required, not in the words
    item_param: str | None = None  # the parameter a list ran over, for one of a list


@dataclass
class _Group:
    reader: Reader
    pieces: list[Piece]


def plan(text: str, specs: Sequence[ToolSpec], choice: str) -> list[Planned]:
    """The calls for ``text`` (see the module docstring); ``choice`` as in a request."""
    if not specs or not text.strip() or choice == "none":
        return []
    forced = next((s for s in specs if s.name == choice), None)
    if choice not in ("auto", "required") and forced is None:
        return []
    readers = [Reader(s) for s in ([forced] if forced else specs)]
    t = Text(text)
    groups = _groups(t, readers)
    if not groups and choice != "auto":
        whole = Piece(0, len(t.masked), True)
        groups = [_Group(readers[0], [whole])]
    out: list[Planned] = []
    seen: set[str] = set()
    for g in groups:
        for call in _calls(t, g):
            key = json.dumps([call.name, call.arguments], sort_keys=True, default=str)
            if key not in seen:
                seen.add(key)
                out.append(call)
    return out


def _groups(t: Text, readers: list[Reader]) -> list[_Group]:
    groups: list[_Group] = []
    runs_on: str | None = None
    s = t.masked
    for piece in pieces(t):
        text = s[piece.start : piece.end]
        current = groups[-1] if groups else None
        if current is not None and current.reader.starts_with_phrase(t, piece):
            current.pieces.append(piece)
            runs_on = current.reader.runs_on(t, piece)
            continue
        if (
            current is not None
            and runs_on is not None
            and not piece.strong
            and (runs_on == "named" or not any(r.names_me(text) for r in readers))
        ):
            current.pieces[-1].end = piece.end  # the free text goes on: "body Thanks, and..."
            continue
        scored = sorted(
            ((r.score(text), n, r) for n, r in enumerate(readers)), key=lambda x: (-x[0], x[1])
        )
        best_score, _, best = scored[0]
        by_name = best.names_me(text)
        if current is None:
            if best_score <= 0:
                continue
            groups.append(_Group(best, [piece]))
        elif best_score > 0 and by_name:
            groups.append(_Group(best, [piece]))
        else:
            current.pieces.append(piece)
        runs_on = groups[-1].reader.runs_on(t, piece)
    return groups


def _calls(t: Text, g: _Group) -> list[Planned]:
    r = g.reader
    named = [r.named(t, p) for p in g.pieces]
    readings: list[dict[str, Value]] = []
    named_later: list[set[str]] = [set()]
    for got, _, _ in reversed(named[1:]):
        named_later.append(named_later[-1] | set(got))
    named_later.reverse()
    for piece, (got, spans, _), later in zip(g.pieces, named, named_later, strict=True):
        found, _ = r.found(t, piece, spans, later | set(got))
        readings.append({**got, **found})
    request = t.restore(t.masked[g.pieces[0].start : g.pieces[-1].end])
    by_name = {p.name: p for p in r.params}
    loose = {p.name for p in r.params if p.kind in ("enum", "boolean")}

    def core(reading: dict[str, Value]) -> set[str]:
        return set(reading) - loose

    first = readings[0]
    rest = [x for x in readings[1:] if core(x) & core(first)]  # items of a list, maybe
    shared: dict[str, Value] = {}  # the other pieces' values, for every call
    for x in readings[1:]:
        for k, value in x.items():
            if k not in first:
                shared.setdefault(k, value)
    rows: list[dict[str, Value]] | None = None
    item: str | None = None
    if rest:
        candidates = [
            k
            for k in core(first)
            if all(k in x and _compatible(first[k], x[k]) for x in rest)
            and all(not ((core(x) - {k}) & core(first)) for x in rest)
            and (by_name[k].kind not in ("text", "sql") or first[k].kind == "quoted")
        ]
        if len(candidates) == 1:
            item = candidates[0]
            rows = [first] + [
                {**first, **{k: v for k, v in x.items() if k in loose}, item: x[item]} for x in rest
            ]
        elif len(core(first)) > 1 and all(core(x) == core(first) for x in rest):
            rows = [first, *rest]
    if rows is None:  # one call: each parameter named, else found, in the first piece with it
        merged: dict[str, Value] = {}
        for x in readings:
            for k, v in x.items():
                if k not in merged or (v.how == "named" and merged[k].how != "named"):
                    merged[k] = v
        rows, shared = [merged], {}
    if item is not None and by_name[item].kind == "array":
        values = [v for row in rows for v in row[item].value]
        rows = [{**rows[0], item: Value(values, rows[0][item].how, rows[0][item].kind)}]
        item = None
    out = []
    for row in rows:
        row = {**shared, **row}
        args: dict[str, Any] = {}
        guessed, made_up = [], []
        for p in r.params:
            given: Value | None = row.get(p.name) or r.made_up(p, request)
            if given is None:
                continue
            args[p.name] = given.value
            if given.how in ("named", "found"):
                guessed.append(p.name)
            elif given.how == "made_up":
                made_up.append(p.name)
        out.append(Planned(r.spec.name, args, tuple(guessed), tuple(made_up), item))
    return out
