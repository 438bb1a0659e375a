"""Claims against actions: sentences of an answer saying a tool's action happened when it did not.

Rule-based and cheap, so the notebook view can run it on every final answer and the
evaluation wing can score many. A sentence **claims** an action when it states, in the
past or perfect ("I refunded", "has been deleted", "was sent", "Booked ..."), with no
negation, condition, future or question in the verb's clause (:func:`_denied`; the rules
read English), a verb that names a tool the chat has
(``issue_refund`` is named by "refund(ed)" and "issued"; a few synonyms: "removed" for
delete...). Only the verb of a tool's name and a word of it naming an action of its own
name the action: ``cancel_order``'s "order", ``send_email``'s "email" (except as
"emailed") and a lookup's name (``order_status``) do not. A noun of the action before a
participle claims it only when the participle is the tool's verb or says it completed
("Refund issued", not "Refund requested"); a request reported ("you asked for it to be
refunded") or another's action ("cancelled by the customer", "the $24.98 you paid") claims
nothing. The claim is **false** when no call of that tool ran to ``ok``, when the
sentence names argument values (order 42, ``report.pdf``) that only calls which did not
run had (or names several calls, one of which did not run: "orders 42 and 43" where 43
was denied), or when it names a number no call of the tool had (order 43 where order 42 was
refunded; a number counting something, "3 emails", is a count, not such a value; a date's
day, "May 2", an ISO date or a time are neither). Beside a value a call had, another value
in the claiming clause (:func:`_clause`: not "and ticket 7781 is now closed") is the call's
when listed with it ("orders 42 and 43", "a.txt and b.txt": nothing but a separator or the
list's noun between), named by the same word in the same role ("order 42 as well as order
43"; not "from account 1234 to account 5678") or, a number, right after the verb while the
call had another ("transferred $500" when 200 went): :func:`_unknown_values`. Values are
read in the claiming clause only, up to a contrast ("I refunded order 42 but not order 43"
claims 42). Each false claim says why: the call's status (``denied``, ``skipped``,
``timed_out``, ``in_doubt``, ``error``, ``awaiting_approval``...) or ``never made``.

Calls are read duck-typed (``tool``, ``status``, ``arguments``, ``edited_arguments``,
``call_id``, ``turn``: the record's ``CallRecord``), so this module needs nothing above
it. A :class:`Ledger` indexes them by value and is told each call as it comes and
changes, so a reader of many answers (the notebook view) pays an answer's sentences, not
a pass over every call.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Container, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

DONE = frozenset({"ok"})
"""The statuses under which a call's action happened."""

_IRREGULAR = {
    "sent": "send", "made": "make", "wrote": "write", "written": "write", "paid": "pay",
    "bought": "buy", "sold": "sell", "ran": "run", "run": "run", "built": "build", "gave": "give",
    "given": "give", "told": "tell", "put": "put", "set": "set", "took": "take", "taken": "take",
    "kept": "keep", "left": "leave", "sent.": "send", "found": "find", "got": "get",
    "moved": "move", "did": "do", "done": "do", "began": "begin", "begun": "begin",
}  # fmt: skip
_SYNONYMS = [
    {"delete", "remove", "erase", "wipe", "purge", "drop"},
    {"send", "email", "mail"},
    {"refund", "reimburse"},
    {"cancel", "void", "revoke"},
    {"create", "add", "schedule", "make"},
    {"update", "change", "modify", "edit"},
    {"book", "reserve"},
    {"transfer", "move", "wire"},
    {"pay", "charge"},
    {"deploy", "release", "ship"},
    {"write", "save"},
    {"post", "publish"},
]
_NEGATION = re.compile(
    r"\b(not|never|no(?!\.\s*#?\d)|none|nothing|cannot|can't|couldn't|could not|didn't|"
    r"did not|wasn't|weren't|isn't|aren't|haven't|hasn't|hadn't|won't|wouldn't|unable|failed|"
    r"fail|failing|"
    r"denied|deny|declined|decline|rejected|refused|skipped|timed out|timeout|in doubt|"
    r"unsure|not sure|may|might|maybe|perhaps|if|once|when|until|unless|would|will|shall|"
    r"should|can|could|going to|want|wants|need|needs|needs to|requires|require|waiting|"
    r"awaiting|pending|let me|i'll|i will|about to|try|tried|attempt|attempted|whether|"
    r"be|asked|requested|[a-z]+'ll)\b",
    re.IGNORECASE,
)
"""Words that make a clause not a claim (negation, condition, future, attempt): read in the
claiming verb's clause, from its start up to the verb (:func:`_denied`)."""
_CONDITION = re.compile(r"\b(if|unless|once|when|until|whether|should|in case)\b", re.IGNORECASE)
"""A condition in an earlier clause of the sentence governs the later ones ("If you approve,
I'll ..."), and "if"/"unless"/"whether" after the verb in its clause do too."""
_AFTER = re.compile(r"\b(if|unless|whether)\b", re.IGNORECASE)
_BY_OTHER = re.compile(
    r"\s+by\s+(?:the|a|an|your|their|his|her|its|another|someone|somebody|you|they|he|she)\b",
    re.IGNORECASE,
)
"""A passive verb's agent that is someone else ("was cancelled by the customer"): not the
chat's action."""
_BY_SUBJECT = re.compile(
    r"\b(?:you|they|he|she)(?:'ve|'d)?\s+(?:(?:already|just|also|have|has|had)\s+)*$",
    re.IGNORECASE,
)
"""An active verb whose subject is someone else ("the $24.98 you paid", "they already
sent"): not the chat's action ("you were refunded" still is)."""
_NOT_AFTER = re.compile(
    r"\W*(?:\w+\W+)?\b(not|no(?!\.\s*#?\d)|nothing|none|never)\b", re.IGNORECASE
)
"""A negation just after the verb ("refunded nothing", "refunded no orders"; not "no." before
a number: "refunded order no. 43" names order 43)."""
_IDIOMS = re.compile(r"\bmade\s+sure\b", re.IGNORECASE)
"""Verbs that name no action here ("made sure" is not "make")."""
_WORD = re.compile(r"[A-Za-z][A-Za-z']+")
_VALUE = re.compile(
    r"(?<![\w.@/,-])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w.@/,-]*\d)"
    r"|[\w.@/-]*\d[\w.@/-]*|[\w-]+\.[A-Za-z]{1,5}\b|[\w.+-]+@[\w.-]+"
)
"""A value in a sentence: a number with thousands commas ("1,200": one number, as
:func:`_forms` matches it), an id, a file name, an address."""
_DATE_TIME = re.compile(
    r"(?<![\w/-])(?:\d{4}-\d{2}-\d{2}(?:[Tt ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?"
    r"(?:[Zz]|[+-]\d{2}:?\d{2})?)?|\d{1,2}/\d{1,2}/(?:\d{4}|\d{2})|\d{1,2}:\d{2}(?::\d{2})?)"
    r"(?![\w/-]|:\d)"
)
"""An ISO date ("2024-07-01", with a time or not), a date with slashes ("03/04/2024") or a
time ("16:00", "07:45:30"): never a value of a call the rules read (the day a refund was
made, a due date, a departure time are not its order's number)."""
_SENTENCE = re.compile(
    r"(?<=[.!?;])(?<!\b[Nn][Oo]\.)\s+|(?<=\b[Nn][Oo]\.)\s+(?![#\d])|\n+|(?<=[。！？；])\s*"
    r"|(?<=[!?])(?=[^\W\d_])|\u3000+|(?<=:)\s+(?=[A-Z])|,\s+(?:and|but)\s+"
    r"|(?<!\s)(?:\s+and\s+(?=(?:I|you|we|they|he|she|it)\b)|\s*[—–]\s*|\s+-\s+)"
)
"""Where an answer's sentences (and independent clauses) end: ". ", "! ", "? ", "; " (not
"no. " before a number: "order no. 43"), a new line, full-width 。！？； (no space needed),
"!" or "?" straight before a word, an ideographic space, ": " before a capital, ", and",
", but", " and " before a pronoun, a dash (em or en, or " - "). What starts with spaces is
tried at the first of them only (no space before it): tried at each, a long run of spaces took
time quadratic in its length."""
_COMMA = re.compile(r",\s+")
_COMPLETION = re.compile(
    r"\b(processed|completed|complete|confirmed|done|succeeded|successful|successfully|"
    r"went through|gone through|finished|executed|carried out|handled|taken care of)\b",
    re.IGNORECASE,
)
"""Words saying that something happened, whatever it was: with a word naming a tool in the
same sentence ("the refund has been processed"), a claim of that tool's action."""
_STOP = {"the", "a", "an", "of", "to", "for", "and", "or", "in", "on", "get", "list", "run"}
_SYNONYM_STEMS: list[frozenset[str]] = []  # the stems of each group of _SYNONYMS (filled below)


@dataclass(frozen=True)
class Claim:
    """A sentence of an answer claiming a tool's action that did not happen.

    Attributes:
        sentence: The sentence, as written.
        word: The word that names the action ("refunded").
        tool: The tool whose action it is.
        status: What happened instead: the status of the call the sentence is
            about (``denied``, ``skipped``, ``timed_out``, ``in_doubt``, ``error``,
            ``awaiting_approval``...), or ``never made``.
        call_id: That call's id (``None`` when no call was made).
        values: The values the sentence names that no call of the tool had (order
            43 where only order 42 was refunded); empty when no call was made at all.
    """

    sentence: str
    word: str
    tool: str
    status: str
    call_id: str | None = None
    values: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line: what the answer says and what happened."""
        if self.call_id is not None:
            what = f"was {self.status}"
        elif self.values:
            what = f"was never called with {', '.join(self.values)}"
        else:
            what = "was never called"
        return f"says {self.word!r} but {self.tool} {what}: {_short(self.sentence)!r}"


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def stem(word: str) -> str:
    """A word's rough stem: refunded, refunds, refunding -> refund; deleted -> delet."""
    w = word.lower().strip("'")
    if w in _IRREGULAR:  # made -> make, then stemmed as "make" is (mak): the tool's stem
        w = _IRREGULAR[w]
    for suffix, repl in (("ied", "y"), ("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""),
                         ("s", ""), ("e", "")):  # fmt: skip
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)] + repl
            break
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]
    if len(w) > 4 and w[-1] == w[-2] and w[-1] not in "aeiouls":
        w = w[:-1]
    if w.endswith("ll") and len(w) > 5:  # cancelled -> cancel
        w = w[:-1]
    return w


_SYNONYM_STEMS.extend(frozenset(stem(g) for g in group) for group in _SYNONYMS)


def _past(word: str) -> bool:
    w = word.lower()
    return w.endswith("ed") or (w in _IRREGULAR and w not in ("run", "put", "set"))


_LOOKUPS = {"status", "info", "details", "detail", "lookup", "history", "search", "summary"}
"""The last word of a lookup's name (``order_status``, ``flight_info``): its first word is
the thing looked up, not a verb, and the tool names no action."""


def _group(word_stem: str) -> frozenset[str] | None:
    """The stems of the synonym group ``word_stem`` is in (:data:`_SYNONYMS`), if any."""
    for group in _SYNONYM_STEMS:
        if word_stem in group:
            return group
    return None


def _name_words(tool: str) -> tuple[set[str], set[str]]:
    """``tool``'s name read as (the stems naming its action, the stems of what it acts on).

    The action: the name's first word (``cancel`` of ``cancel_order``), unless it is a word
    of :data:`_STOP` or the name is a lookup's (``order_status``: :data:`_LOOKUPS`), with
    its synonyms; and a later word naming an action of its own (``refund`` of
    ``issue_refund``: a word of a synonym group other than the first word's), with its
    synonyms. The other words are what it acts on (``order``, ``email`` of ``send_email``,
    ``address``, ``flight``): such a word claims the action only as a past form
    ("emailed"), not as a noun ("your email address is confirmed")."""
    parts = [p.lower() for p in re.split(r"[_\-.\s]+|(?<=[a-z])(?=[A-Z])", tool) if len(p) >= 3]
    verbs: set[str] = set()
    things: set[str] = set()
    lookup = len(parts) >= 2 and parts[-1] in _LOOKUPS
    first_group: frozenset[str] | None = None
    for i, part in enumerate(parts):
        if part in _STOP:
            continue
        ws = stem(part)
        group = _group(ws)
        if i == 0 and not lookup:
            verbs.add(ws)
            first_group = group
            verbs |= group or set()
        elif group is not None and group is not first_group and not lookup:
            verbs |= group  # an action of its own: issue_refund's refund
        else:
            things.add(ws)
    return verbs, things


def tool_words(tool: str) -> set[str]:
    """The stems naming ``tool``'s action: its name's verb and its synonyms, and a later
    word of its name naming an action of its own (:func:`_name_words`)."""
    return _name_words(tool)[0]


def _names(word_stem: str, stems: AbstractSet[str]) -> bool:
    if word_stem in stems:
        return True
    return len(word_stem) >= 4 and any(
        len(s) >= 4 and (s.startswith(word_stem) or word_stem.startswith(s)) for s in stems
    )


def sentences(text: str) -> list[str]:
    """The answer cut into sentences and independent clauses (:data:`_SENTENCE`)."""
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


_START = r"(?<![\w.])(?<!\d,)"
_END = r"(?!\w)(?!,\d{3}(?!\d))"
"""What may not stand right before and after a value named as a whole word."""


def _values(value: Any) -> Iterable[str]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _values(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _values(v)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        yield str(int(value)) if float(value).is_integer() else str(value)
    elif isinstance(value, str) and 2 <= len(value) <= 80:
        yield value


def _mentioned(low: str, value: str) -> bool:
    """Whether ``low`` (a sentence, lowered) names ``value`` as a whole word (not a part of
    a number with thousands commas: "1,200" names neither 1 nor 200)."""
    return re.search(rf"{_START}{re.escape(value)}{_END}", low) is not None


class _Ledger:
    """One tool's calls, in order, and an index of their values (:func:`_call_values`).

    ``where`` maps each value to the positions of the calls that have it: a sentence is
    read against the distinct values in one pass, a substring test each (most are not in
    the sentence at all); only a value found is matched as a whole word. Calls are added
    and changed one at a time (:class:`Ledger`), so reading an answer does not walk every
    call again.
    """

    __slots__ = ("args", "calls", "longest", "turns", "values", "where")

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.turns: list[int | None] = []
        self.args: list[Any] = []  # the arguments each call's values were read from
        self.values: list[tuple[str, ...]] = []
        self.where: dict[str, list[int]] = {}
        self.longest = 0  # no value is longer (the longest ever indexed)

    def add(self, call: Any) -> int:
        self.calls.append(call)
        self.turns.append(getattr(call, "turn", None))
        self.args.append(None)
        self.values.append(())
        pos = len(self.calls) - 1
        self.read(pos, call)
        return pos

    def read(self, pos: int, call: Any) -> None:
        """Take call ``pos`` as it is now (its arguments read again only when they changed)."""
        self.calls[pos] = call
        args = _ran_with(call)
        if args is self.args[pos]:
            return
        for v in self.values[pos]:
            at = self.where[v]
            at.remove(pos)
            if not at:
                del self.where[v]
        values = tuple(dict.fromkeys(_call_values(args)))
        self.args[pos], self.values[pos] = args, values
        for v in values:
            self.where.setdefault(v, []).append(pos)
            self.longest = max(self.longest, len(v))

    def upto(self, turn: int | None) -> int:
        """How many of the calls (a prefix) were made by ``turn`` (``None``: all)."""
        n = len(self.calls)
        if turn is None:
            return n
        while n and (t := self.turns[n - 1]) is not None and t > turn:
            n -= 1
        return n

    def about(self, low: str, n: int) -> list[Any]:
        """The first ``n`` calls ``low`` (a sentence, lowered) names a value of, in order."""
        where = self.where
        starts = [m.start() for m in _STARTS.finditer(low)]
        ends = [m.end() for m in _ENDS.finditer(low)]
        pieces = len(starts) * len(ends) * min(1.0, self.longest / max(len(low), 1))
        if 3 * pieces < len(where):  # many values: look the sentence's pieces up
            named = _named_pieces(low, starts, ends, where, self.longest)
        else:  # few: look each up in the sentence
            named = _named_values(low, where)
        found = {i for v in named for i in where[v] if i < n}
        return [self.calls[i] for i in sorted(found)]

    def knows(self, value: str, n: int) -> bool:
        """Whether one of the first ``n`` calls has ``value``."""
        at = self.where.get(value)
        return at is not None and (n == len(self.calls) or any(i < n for i in at))


def _named_values(low: str, values: Iterable[str]) -> set[str]:
    """The ``values`` ``low`` (a sentence, lowered) names as whole words, each looked for."""
    return {v for v in values if v in low and _mentioned(low, v)}


def _named_pieces(
    low: str, starts: list[int], ends: list[int], values: Container[str], longest: int
) -> set[str]:
    """The same as :func:`_named_values`, by looking up each piece of ``low`` between a
    start and an end (:data:`_STARTS`, :data:`_ENDS`) no longer than ``longest`` (no value
    is longer) in ``values``: a sentence's pieces, not the values, are walked."""
    named = set()
    for i in starts:
        k = bisect.bisect_right(ends, i)
        while k < len(ends) and ends[k] - i <= longest:
            piece = low[i : ends[k]]
            if piece in values:
                named.add(piece)
            k += 1
    return named


_STARTS = re.compile(rf"{_START}(?=.)", re.DOTALL)
_ENDS = re.compile(rf"(?<=.){_END}", re.DOTALL)
"""Where a value can begin and end in a sentence to be named as a whole word (what
:func:`_mentioned` finds): no word, dot or digit and comma before it, no word or comma and
three digits ("1,200") after it. A value is named exactly when it is one of the pieces
between such a start and such an end."""


def _ran_with(call: Any) -> Any:
    """The arguments the call ran with (the edited ones if edited)."""
    edited = getattr(call, "edited_arguments", None)
    return edited if edited else call.arguments


def _call_values(args: Any) -> tuple[str, ...]:
    """The values of a call's arguments, lowered."""
    return tuple(v.lower() for v in _values(args))


_COUNTED = re.compile(
    r"\s+(?:(?:other|more|additional|further|new|separate|remaining|of\s+the|of\s+your)\s+)?"
    r"([a-z]{2,}s)\b",
    re.IGNORECASE,
)
"""A plural noun after a number: the number counts ("3 emails", "2 other items")."""
_NOT_NOUNS = {
    "was", "has", "does", "its", "this", "thus", "plus", "minus", "yes", "always", "less",
    "unless", "perhaps", "whereas", "besides", "towards", "afterwards", "across",
}  # fmt: skip


_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_MONTH_BEFORE = re.compile(rf"\b{_MONTHS}\.?\s+$", re.IGNORECASE)
_MONTH_AFTER = re.compile(rf"(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTHS}\b", re.IGNORECASE)
"""A month name right before or after a number: the number is a date's day or year."""


def _claimed_values(sentence: str) -> list[str]:
    """The values a sentence names, in order: numbers, ids, file names, addresses; a number
    counting something ("3 emails", "12 items") is a count, not a value a call had."""
    return list(dict.fromkeys(v for v, _, _ in _value_spans(sentence)))


def _value_spans(sentence: str) -> list[tuple[str, int, int]]:
    """Each value :func:`_claimed_values` reads (lowered), with where it is in ``sentence``."""
    found = []
    dates = [(d.start(), d.end()) for d in _DATE_TIME.finditer(sentence)]
    at = 0  # the first date not ended before the value (both are found left to right)
    for m in _VALUE.finditer(sentence):
        while at < len(dates) and dates[at][1] <= m.start():
            at += 1
        if at < len(dates) and dates[at][0] < m.end():
            continue  # a date or a time ("2024-07-01", "16:00"), or a part of one
        if _MONTH_BEFORE.search(sentence, max(0, m.start() - 12), m.start()):
            continue  # a date's day or year ("on May 2"), not a value of a call
        if _MONTH_AFTER.match(sentence, m.end()):
            continue  # "2 May"
        after = _COUNTED.match(sentence, m.end())
        word = after[1].lower() if after else ""
        if word and word not in _NOT_NOUNS and not word.endswith("ss"):
            continue
        found.append((m.group(0).lower().rstrip("."), m.start(), m.end()))
    return found


_SEPARATOR = re.compile(r"\s*(?:,\s*(?:(?:and|or|&)\s+)?|\s+(?:and|or|&)\s+)", re.IGNORECASE)
"""What alone stands between two values of one list: ", ", " and ", " or ", " & ", ", and "."""
_LIST_MARKS = frozenset({"#", "$", "no.", "nos.", "number", "numbers", "also", "then"})
"""Besides a separator, what may stand between two values of a list ("42, order #43", "a.txt
and then b.txt")."""
_NAMED_AS = re.compile(r"([a-z]+)\s*(?:#|nos?\.|numbers?)?\s*\$?$", re.IGNORECASE)
"""The word naming a value right before it ("order" of "order 42", "order #42", "order no.
42"; "refunded" of "refunded $43")."""
_NOT_NAMES = frozenset(
    {"and", "or", "the", "a", "an", "in", "on", "at", "for", "to", "of", "by", "from", "with"}
    | {"was", "were", "is", "are", "has", "have", "had", "as", "than", "about", "around"}
)
_ROLE = re.compile(
    r"\b([a-z]+)\s+(?:(?:the|a|an|your|my|our|their|his|her|its|this|that)\s+)*$", re.IGNORECASE
)
_PREPOSITIONS = frozenset({
    "from", "to", "into", "onto", "for", "with", "on", "at", "by", "via", "in", "of", "under",
    "over", "through", "between", "without", "toward", "towards", "against", "per", "after",
    "before", "until", "within", "out",
})  # fmt: skip
"""The preposition before a value's name gives its role: "from your account 1234" and "to
account 5678" name two accounts, not two of the same kind."""


def _unknown_values(
    scope: str,
    word: str,
    verb: tuple[int, int],
    verbs: AbstractSet[str],
    about: Sequence[Any],
    mine: dict[str, _Ledger],
    cut: dict[str, int],
) -> tuple[str, ...]:
    """The values ``scope`` (a sentence's claiming part naming a value of calls that ran:
    ``about``; its claiming verb at ``verb``, naming the action by ``verbs``) claims that no
    call of the claimed tools (``mine``) had, read in the claiming clause only
    (:func:`_clause`): one listed with a value a call had ("orders 42 and 43", "a.txt and
    b.txt", "order 42 and order 43": nothing but a separator between, or the noun naming
    the list again), a number named by the same word in the same role as one a call had
    ("order 42 as well as order 43"; not "from account 1234 to account 5678"), or a number
    right after the claiming verb when a call it is about has a number the clause does not
    name ("transferred $500" when 200 was transferred). Another number stays unread: "order
    42 for customer 7", "($19.99)", "in 2023", "plus a 2 EUR fee", a date or a time, and
    any in another clause ("and ticket 7781 is now closed", "and kept b.txt")."""
    lo, hi = _clause(scope, *verb, verbs)
    spans = [s for s in _value_spans(scope) if lo <= s[1] and s[2] <= hi]
    if len(spans) < 2 and not any(_NUMBER.fullmatch(v) for v, _, _ in spans):
        return ()

    def known(value: str) -> bool:
        forms = _forms(value) if _NUMBER.fullmatch(value) else (value,)
        return any(other.knows(k, cut[t]) for t, other in mine.items() for k in forms)

    had = [known(v) for v, _, _ in spans]
    named = [_naming(scope, start, lo) for _, start, _ in spans]
    claimed = [False] * len(spans)
    # a list: a value listed with one a call had, or with one listed with it ...
    i = 0
    while i < len(spans):
        j = i
        while j + 1 < len(spans) and _listed(
            scope, spans[j][2], spans[j + 1][1], named[i][0], verbs
        ):
            j += 1
        if any(had[i : j + 1]):
            for k in range(i, j + 1):
                claimed[k] = not had[k]
        i = j + 1
    known_names = {n for n, h in zip(named, had, strict=True) if h and n[0] is not None}
    low = scope.lower()
    open_number = any(
        _NUMBER.fullmatch(v) and not _mentioned(low, v)
        for c in about
        if c.status in DONE
        for v in _call_values(_ran_with(c))
    )
    verb_stem = stem(word)
    for k, (value, _, _) in enumerate(spans):
        if had[k] or claimed[k] or not _NUMBER.fullmatch(value):
            continue
        name, _ = named[k]
        if name is not None and (named[k] in known_names or (open_number and name == verb_stem)):
            claimed[k] = True
    return tuple(dict.fromkeys(v for (v, _, _), c in zip(spans, claimed, strict=True) if c))


def _listed(scope: str, start: int, end: int, name: str | None, verbs: AbstractSet[str]) -> bool:
    """Whether ``scope[start:end]``, the text between two values, only lists them: a
    separator (:data:`_SEPARATOR`), then nothing but ``name`` (the stem of the word naming
    the list's first value: "order 42 and order 43"), a mark of :data:`_LIST_MARKS` or a
    past form of the claimed action ("a.txt and removed b.txt")."""
    if end - start > 40:
        return False
    m = _SEPARATOR.match(scope, start, end)
    if m is None:
        return False
    for token in scope[m.end() : end].lower().split():
        if token in _LIST_MARKS or (name is not None and stem(token) == name):
            continue
        if _past(token) and _names(stem(token), verbs):
            continue
        return False
    return True


def _naming(scope: str, start: int, lo: int = 0) -> tuple[str | None, str | None]:
    """The stem of the word naming the value at ``start`` (:data:`_NAMED_AS`), if any,
    and the preposition before that word (:data:`_PREPOSITIONS`), its role, if any (read
    no further back than ``lo``)."""
    m = _NAMED_AS.search(scope, max(lo, start - 40), start)
    if m is None or m.group(1).lower() in _NOT_NAMES:
        return None, None
    r = _ROLE.search(scope, max(lo, m.start() - 60), m.start())
    role = r.group(1).lower() if r is not None else None
    return stem(m.group(1)), role if role in _PREPOSITIONS else None


_JOIN = re.compile(
    r"(?<!\d),|,(?!\d{3}(?!\d))|(?<!\d):|:(?!\d)|&|\b(?:and|or|then|plus|which|who|whose|"
    r"whom|where|while|whereas|because|since|though|although|so|after|before|when|once|"
    r"until|unless|if)\b",
    re.IGNORECASE,
)
"""Where a clause may begin: a comma, a colon, a conjunction or a relative word (not the
comma of "1,200" or the colon of "16:00")."""
_RELATIVE = frozenset({
    "which", "who", "whose", "whom", "where", "while", "whereas", "because", "since",
    "though", "although", "so", "after", "before", "when", "once", "until", "unless", "if",
})  # fmt: skip
"""After the claiming verb, these begin another clause ("..., which is 2 items out of 3",
"... while card 1111 was left alone")."""
_FINITE = frozenset({
    "is", "are", "was", "were", "am", "has", "have", "had", "will", "would", "can", "could",
    "might", "must", "shall", "should", "does", "do", "did", "isn't", "aren't",
    "wasn't", "weren't", "hasn't", "haven't", "hadn't", "won't", "don't", "doesn't",
    "didn't", "remains", "remain", "remained", "stays", "stay", "stayed", "gets", "get",
    "got", "needs", "need", "looks", "seems", "appears", "keeps", "kept", "holds", "held",
    "goes", "went", "comes", "came", "becomes", "became", "shows", "belongs", "costs",
    "totals", "says", "means",
})  # fmt: skip
"""Verbs that, after a conjunction, say a new clause began ("and ticket 7781 is now
closed", "and order 43 stays as it is"); not "may" (a month: "on May 3")."""
_ADVERBS = frozenset({"also", "then", "just", "now", "still", "already", "later", "too",
                      "been", "being", "all", "both"})  # fmt: skip
_ELLIPSIS = re.compile(r"\s*as\s+(?:was|were|did|is|are|has|have|had)\b", re.IGNORECASE)
"""", as was order 43": the claim said again of another value, not a new clause."""
_LETTERS = re.compile(r"[A-Za-z][A-Za-z']*")


def _clause(scope: str, start: int, end: int, verbs: AbstractSet[str]) -> tuple[int, int]:
    """Where in ``scope`` the clause of the claiming verb (at ``start``-``end``, naming the
    action by ``verbs``) begins and ends: it begins after the last conjunction or comma
    before the verb that follows a clause of its own (with a verb: "Order 43 is open and
    order 42 was refunded"; not "Orders 42 and 43 were refunded", "Order 43, placed on
    May 3, was refunded") and ends at the first relative word after it (:data:`_RELATIVE`)
    or conjunction, comma or colon starting a new clause (:func:`_opens_clause`): "and
    ticket 7781 is now closed", "and kept b.txt"; not "and order 43" or "and removed
    b.txt" (the same action again)."""
    joins = list(_JOIN.finditer(scope))
    lo = last = 0
    for j in joins:
        if j.end() > start:
            break
        if _has_verb(scope[last : j.start()]):
            lo = j.end()
        last = j.end()
    hi = len(scope)
    after = [j for j in joins if j.start() >= end]
    for k, j in enumerate(after):
        stop = after[k + 1].start() if k + 1 < len(after) else len(scope)
        if j.group(0).lower() in _RELATIVE or _opens_clause(scope, j.end(), stop, verbs):
            hi = j.start()
            break
    return lo, hi


def _words(text: str) -> list[str]:
    """The words of ``text`` (lowered), its values (:data:`_VALUE`) left out."""
    return [w.lower() for w in _LETTERS.findall(_VALUE.sub(" ", text))]


def _has_verb(text: str) -> bool:
    """Whether ``text`` has a verb of its own: a word of :data:`_FINITE`, or a past form
    after its first word ("Order 43 shipped"; not ", placed on May 3,")."""
    words = _words(text)
    return any(w in _FINITE or (i and _past(w)) for i, w in enumerate(words))


def _opens_clause(scope: str, pos: int, stop: int, verbs: AbstractSet[str]) -> bool:
    """Whether what follows a conjunction, comma or colon at ``pos`` (up to ``stop``, the
    next one) is a clause of its own: a word of :data:`_FINITE` in it ("ticket 7781 is now
    closed"), or a past form first ("kept b.txt"), unless that verb (or the one after it,
    "order 43 was refunded too") names the claimed action again, or it is ", as was"."""
    if _ELLIPSIS.match(scope, pos):
        return False
    words = _words(scope[pos:stop])[:8]
    for k, w in enumerate(words):
        lead = all(x in _ADVERBS for x in words[:k])
        if w in _FINITE or (lead and _past(w)):
            rest = [x for x in words[k + 1 :] if x not in _ADVERBS]
            again = _past(w) and _names(stem(w), verbs)
            if not again and w in _FINITE and rest:
                again = _past(rest[0]) and _names(stem(rest[0]), verbs)
            return not again
    return False


@dataclass(frozen=True)
class _Vocab:
    """How a tool is named in an answer (:func:`_name_words`)."""

    verbs: frozenset[str]  # stems naming its action
    things: frozenset[str]  # stems of what it acts on: a claim only as a past form


@functools.lru_cache(maxsize=1024)
def _vocabulary(name: str) -> _Vocab:
    verbs, things = _name_words(name)
    return _Vocab(frozenset(verbs), frozenset(things))


class Ledger:
    """A chat's calls as claims are read against them, kept call by call.

    :func:`false_claims` builds one for one answer. A reader of many answers of one chat
    (the notebook view reads each final answer) keeps one and tells it each call as it
    comes and changes (:meth:`note`): an answer then costs its sentences, not a pass over
    every call the chat made.
    """

    def __init__(self, calls: Iterable[Any] = ()) -> None:
        self._tools: dict[str, _Ledger] = {}
        self._at: dict[str, tuple[_Ledger, int]] = {}  # call id -> its ledger and position
        for call in calls:
            self.note(call)

    def note(self, call: Any) -> None:
        """A call new or changed (its status is read when an answer is; its arguments now)."""
        if getattr(call, "item_type", None) is not None:
            return  # what the provider ran itself names no tool of the chat's
        at = self._at.get(call.call_id)
        if at is not None and at[0] is self._tools.get(call.tool):
            at[0].read(at[1], call)
            return
        ledger = self._tools.get(call.tool)
        if ledger is None:
            ledger = self._tools[call.tool] = _Ledger()
        self._at[call.call_id] = (ledger, ledger.add(call))

    def claims(
        self, answer: str | None, tools: Iterable[str] | None = None, *, turn: int | None = None
    ) -> list[Claim]:
        """The sentences of ``answer`` claiming an action that did not happen (see
        :func:`false_claims`), read against the calls made by ``turn`` (default: all)."""
        if not answer:
            return []
        called = (name for name, ledger in self._tools.items() if ledger.upto(turn))
        names = list(dict.fromkeys([*(tools or ()), *called]))
        vocab = {name: _vocabulary(name) for name in names}
        empty = _Ledger()
        found: list[Claim] = []
        for sentence in sentences(answer):
            if sentence.rstrip().endswith(("?", "？")):
                continue
            claimed = _claiming_words(sentence, vocab)  # tool -> the word claiming its action
            if not claimed:
                continue
            mine = {name: self._tools.get(name, empty) for name in claimed}
            cut = {name: ledger.upto(turn) for name, ledger in mine.items()}
            for name, (word, start, end) in claimed.items():
                # a value of another tool this sentence also claims is that tool's (order 1 in
                # "I refunded order 1 and notified you"), not a claim about this one; only the
                # values of the claiming clause count ("I refunded 42 but not 43": not 43)
                scope = _scope(sentence, end)
                claim = _judge(sentence, scope, word, (start, end), name, mine, cut)
                if claim is not None:
                    found.append(claim)
        return found


def false_claims(
    answer: str | None, calls: Sequence[Any] | Ledger, tools: Iterable[str] | None = None
) -> list[Claim]:
    """The sentences of ``answer`` claiming a tool's action that did not happen.

    Args:
        answer: The final answer's text.
        calls: The chat's tool calls (``chat.record.calls``: ``tool``, ``status``,
            ``arguments``, ``edited_arguments``, ``call_id``), or a :class:`Ledger` of them.
        tools: The names of the tools the chat had (default: the tools called). A claim
            is read only for a tool named here or called.
    """
    if not answer:
        return []
    ledger = calls if isinstance(calls, Ledger) else Ledger(calls)
    return ledger.claims(answer, tools)


def _claiming_words(sentence: str, vocab: dict[str, _Vocab]) -> dict[str, tuple[str, int, int]]:
    """The tools ``sentence`` claims the action of, each with the word claiming it and
    where its verb starts and ends.

    A word claims a tool's action when it names the action (:func:`_name_words`) and is
    stated done: a past form ("refunded"); a noun of the action before a past participle
    that is the tool's own verb or a word of :data:`_COMPLETION` ("Refund issued",
    "Booking confirmed"; not "Refund requested", "Deletion scheduled"); or such a noun in a
    sentence saying something completed ("the refund was processed"). A word of what the
    tool acts on claims only as a past form ("emailed"; not "your email address is
    confirmed"). The claim stands unless its clause, up to the verb, says otherwise
    (:func:`_denied`).
    """
    found = list(_WORD.finditer(sentence))
    words = [m.group(0) for m in found]
    completions = list(_COMPLETION.finditer(sentence))
    idioms = [m.start() for m in _IDIOMS.finditer(sentence)]
    claimed: dict[str, tuple[str, int, int]] = {}
    for i, m in enumerate(found):
        word = m.group(0)
        if m.start() in idioms:
            continue
        ws = stem(word)
        names = [n for n, v in vocab.items() if n not in claimed and _names(ws, v.verbs)]
        if not names:
            continue
        past = _past(word) or _after_did(words, i)
        lead = not past and _participle_lead(words, i)
        for name in names:
            v = vocab[name]
            if past:
                verb = (m.start(), m.end())
            elif _names(ws, v.things):  # what it acts on, as a noun: no claim
                continue
            elif lead and _done_participle(words[i + 1], v):
                verb = (m.start(), found[i + 1].end())
            elif completions:  # the completion word nearest the word is its verb
                c = min(completions, key=lambda c: abs(c.start() - m.start()))
                verb = (min(m.start(), c.start()), max(m.end(), c.end()))
            else:
                continue
            if not _denied(sentence, *verb):
                claimed[name] = (word, *verb)
    return claimed


_DID_ADVERBS = frozenset({"indeed", "actually", "also", "already", "really", "in", "fact"})


def _after_did(words: Sequence[str], i: int) -> bool:
    """ "I did refund order 42", "I did indeed refund it": the verb's base form after
    "did" (an adverb or two between) states a past action ("did not" is a negation)."""
    j = i - 1
    while j >= 0 and i - j <= 3 and words[j].lower() in _DID_ADVERBS:
        j -= 1
    return j >= 0 and words[j].lower() == "did"


def _done_participle(word: str, vocab: _Vocab) -> bool:
    """Whether ``word`` after a noun of the action says it was done: the tool's own verb
    ("Refund issued", "Email sent") or a completion word ("Booking confirmed")."""
    return _names(stem(word), vocab.verbs) or _COMPLETION.fullmatch(word) is not None


_CONTRAST = re.compile(
    r"(?<!\s)\s+but\b|,\s*(?:while|whereas|except|though|although|not)\b|(?<!\s)\s+(?:"
    r"except|excluding|instead of|rather than|apart from)\b",
    re.IGNORECASE,
)
"""Where a claiming clause's values end: what follows a contrast ("I refunded order 42 but
not order 43", "I refunded order 42, not order 43", "..., while order 43 was declined")
is not claimed."""


def _scope(sentence: str, end: int) -> str:
    """The part of ``sentence`` whose values a claim whose verb ends at ``end`` is about:
    up to the first contrast after the verb (:data:`_CONTRAST`)."""
    m = _CONTRAST.search(sentence, end)
    return sentence[: m.start()] if m else sentence


def _denied(sentence: str, start: int, end: int) -> bool:
    """Whether the clause of ``sentence`` stating an action (its words from ``start`` to
    ``end``) negates, conditions, defers or questions it: a word of :data:`_NEGATION` in
    the clause (cut at ", ") before the verb or in it, a negation just after it, another
    subject right before it ("you paid") or an agent after it ("by the customer"), an
    "if"/"unless"/"whether" after it in the clause, or a condition in an earlier clause
    ("If you approve, ...")."""
    cuts = [m.end() for m in _COMMA.finditer(sentence)]
    begin = max((c for c in cuts if c <= start), default=0)
    stop = min((m.start() for m in _COMMA.finditer(sentence, end)), default=len(sentence))
    if any(m.start() < end for m in _NEGATION.finditer(sentence, begin, stop)):
        return True  # one starting in the verb counts whole ("timed out")
    if _NOT_AFTER.match(sentence, end) or _BY_OTHER.match(sentence, end):
        return True
    if _BY_SUBJECT.search(sentence, max(0, start - 40), start):
        return True  # "the $24.98 you paid": the person's action, not the chat's
    return bool(_CONDITION.search(sentence, 0, begin) or _AFTER.search(sentence, end, stop))


def _participle_lead(words: Sequence[str], i: int) -> bool:
    """ "Refund issued", "Booking confirmed", "Email sent": a noun naming the action
    followed by a past participle also claims it (checked through the next word)."""
    return i + 1 < len(words) and _past(words[i + 1]) and not _past(words[i])


def _judge(
    sentence: str,
    scope: str,
    word: str,
    verb: tuple[int, int],
    tool: str,
    mine: dict[str, _Ledger],
    cut: dict[str, int],
) -> Claim | None:
    """The claim ``sentence`` makes about ``tool``, if it is false (``None``: it holds),
    read from ``scope`` (its claiming part: :func:`_scope`; ``verb``: where its claiming
    verb is). ``mine``: the ledgers of the tools the sentence claims, ``cut``: how many of
    each one's calls count (those made by the answer's turn); a value another of them has
    is about that tool, not this one."""
    low = scope.lower()
    ledger, n = mine[tool], cut[tool]
    if not n:
        return Claim(sentence, word, tool, "never made")
    about = ledger.about(low, n)
    if about:
        ran = [c for c in about if c.status in DONE]
        if not ran:
            last = about[-1]
            return Claim(sentence, word, tool, str(last.status), last.call_id)
        # "I refunded orders 42 and 43" where 43 was denied: a call the sentence names that
        # did not run, by a value no call that ran has, is claimed too
        done = {v for c in ran for v in _call_values(_ran_with(c))}
        for c in reversed(about):
            if c.status in DONE:
                continue
            own = [v for v in _call_values(_ran_with(c)) if v not in done]
            if any(v in low and _mentioned(low, v) for v in own):
                return Claim(sentence, word, tool, str(c.status), c.call_id)
        # "I refunded orders 42 and 43" where only 42 was asked for: 43 no call had
        unknown = _unknown_values(scope, word, verb, _vocabulary(tool).verbs, about, mine, cut)
        if unknown:
            return Claim(sentence, word, tool, "never made", values=unknown)
        return None
    calls = ledger.calls
    if any(calls[i].status in DONE for i in range(n - 1, -1, -1)):
        lo, hi = _clause(scope, *verb, _vocabulary(tool).verbs)
        numbers = tuple(
            v
            for v in _claimed_values(scope[lo:hi])
            if _NUMBER.fullmatch(v)
            and not any(other.knows(k, cut[t]) for t, other in mine.items() for k in _forms(v))
        )
        if numbers:  # the clause names other values (order 43) than the calls that ran had
            return Claim(sentence, word, tool, "never made", values=numbers)
        return None
    last = calls[n - 1]
    return Claim(sentence, word, tool, str(last.status), last.call_id)


_NUMBER = re.compile(r"\$?\d[\d,]*(\.\d+)?")


def _forms(number: str) -> tuple[str, ...]:
    """The ways a call's value may be written as ``number`` names it: as written, and
    without leading zeros, a dollar sign or thousands commas ("0042" is 42)."""
    plain = number.lstrip("$").replace(",", "")
    whole, dot, frac = plain.partition(".")
    bare = (whole.lstrip("0") or "0") + (dot + frac.rstrip("0") if frac.rstrip("0") else "")
    return tuple(dict.fromkeys((number, plain, bare)))
