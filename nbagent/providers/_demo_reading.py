"""How the offline demo model reads a request's text: words, protected spans, pieces.

Pure functions of the user's text: no state, no network. Two steps come before
any tool is looked at:

1. Values that must never be split are set aside first (:class:`Text`): quoted
   text, SQL statements, URLs, emails, dates, times and paths, each masked as
   one private-use character (:class:`Atom`).
2. The rest is cut into pieces (:func:`pieces`) at ``,`` ``;`` ``and``
   ``then`` ``also`` and sentence ends ("between X and Y" stays whole).

What a tool's parameters are is :mod:`._demo_params`; filling them from a
piece is :mod:`._demo_filling`; which pieces make which calls is
:mod:`._demo_plan`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


def wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOP = wordset(
    "a an the of to in on at for and or is are be me my i you your please what whats what's "
    "how can could would should do does with from by it this that get give tell show find "
    "current now today some any all"
)
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]*")


def words(text: str) -> list[str]:
    """The content words of ``text``: lowercase, no stop words, a plural ``s`` dropped."""
    out = []
    for w in WORD.findall(text.lower().replace("_", " ")):
        w = w.strip("'")
        if w and w not in STOP:
            out.append(w[:-1] if len(w) > 4 and w.endswith("s") else w)
    return out


# -- values that are never split ------------------------------------------------------

_PRIVATE = re.compile("[\ue000-\uf8ff]")
_FIRST = 0xE000  # atom n is masked as the private-use character chr(_FIRST + n)
ATOM = re.compile("[\ue000-\uf8ff]")

# Double, curly and back quotes may span lines (a letter's body is quoted whole); a
# straight single quote may not (it is also an apostrophe).
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|‘([^’]+)’|`([^`]+)`|(?<![\w'])'([^'\n]+)'(?!\w)")
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
        return ATOM.sub(lambda m: self.restore(self._raw(m.group(0))), masked)

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
