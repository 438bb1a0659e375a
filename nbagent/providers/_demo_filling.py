"""How the offline demo model fills a tool's parameters from one piece of a request.

Pure functions of the user's text and a tool's schema: no state, no network.
A :class:`Reader` reads a piece (:mod:`._demo_reading`) against one tool's
parameters (:mod:`._demo_params`):

- first phrases that name a parameter (``subject "Hi"``, ``body: ...``,
  ``amount=5``, ``order 42``, ``30 euros``); a free-text parameter (``body``,
  ``query``...) named without quotes runs to the next parameter named, or to
  the end of the request;
- then values by type (enum words, numbers, emails, paths, capitalised names,
  words after "in"/"for"...), each given out once;
- a required parameter with nothing in the text gets its default, else a
  made-up value; an optional one is left out.

Every value remembers how it was found (:class:`Value` ``how``). Which pieces
make which calls is :mod:`._demo_plan`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .._types import ToolSpec
from ._demo_params import Param, params_of
from ._demo_reading import ATOM, STOP, WORD, Atom, Piece, Text, words, wordset

# -- patterns of values ------------------------------------------------------------------

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
_DEDICATED = wordset("email url path date time sql")  # kinds free text stops before
_TRUE = wordset("true yes on enabled enable")
_FALSE = wordset("false no off disabled disable")
_LEAD = re.compile(r"(?:(?:with|and|the|a|an|its|set|plus|also)\s+)*", re.I)
_CURRENCY = re.compile(r"[$€£¥]\s?")
_LETTERS = re.compile(r"[A-Za-z]+")


# -- reading ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Value:
    value: Any
    how: str  # named (after the parameter's name) | found (by type) | default | made_up
    kind: str  # what it was in the text: an atom kind, name, word, text, number, enum, bool


class Reader:
    """Reads pieces of a request against one tool's parameters."""

    def __init__(self, spec: ToolSpec):
        self.spec = spec
        self.params = params_of(spec.input_schema)
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
            for q in params_of(p.schema):
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
            if ATOM.search(span) or _NUMBER.search(span):
                return None
            left = [w for w in WORD.findall(span) if w.lower() not in STOP]
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
