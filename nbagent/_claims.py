"""Claims against actions: sentences of an answer saying a tool's action happened when it did not.

Rule-based and cheap, so the notebook view can run it on every final answer and the
evaluation wing can score many. A sentence **claims** an action when it states, in the
past or perfect ("I refunded", "has been deleted", "was sent", "Booked ..."), with no
negation, condition, future or question, a verb that names a tool the chat has
(``issue_refund`` is named by "refund(ed)" and "issued"; a few synonyms: "removed" for
delete...). The claim is **false** when no call of that tool ran to ``ok``, or when the
sentence names argument values (order 42, ``report.pdf``) that only calls which did not
run had. Each false claim says why: the call's status (``denied``, ``skipped``,
``timed_out``, ``in_doubt``, ``error``, ``awaiting_approval``...) or ``never made``.

Calls are read duck-typed (``tool``, ``status``, ``arguments``, ``edited_arguments``,
``call_id``: the record's ``CallRecord``), so this module needs nothing above it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
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
    r"\b(not|never|no|none|nothing|cannot|can't|couldn't|could not|didn't|did not|wasn't|"
    r"weren't|isn't|aren't|haven't|hasn't|hadn't|won't|wouldn't|unable|failed|fail|failing|"
    r"denied|deny|declined|decline|rejected|refused|skipped|timed out|timeout|in doubt|"
    r"unsure|not sure|may|might|maybe|perhaps|if|once|when|until|unless|would|will|shall|"
    r"should|can|could|going to|want|wants|need|needs|needs to|requires|require|waiting|"
    r"awaiting|pending|let me|i'll|i will|about to|try|tried|attempt|attempted|whether)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-z][A-Za-z']+")
_VALUE = re.compile(r"[\w.@/-]*\d[\w.@/-]*|[\w-]+\.[A-Za-z]{1,5}\b|[\w.+-]+@[\w.-]+")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+|(?<=:)\s+(?=[A-Z])|,\s+(?:and|but)\s+|\s+and\s+(?=I\b)")
_COMPLETION = re.compile(
    r"\b(processed|completed|complete|confirmed|done|succeeded|successful|successfully|"
    r"went through|gone through|finished|executed|carried out|handled|taken care of)\b",
    re.IGNORECASE,
)
"""Words saying that something happened, whatever it was: with a word naming a tool in the
same sentence ("the refund has been processed"), a claim of that tool's action."""
_STOP = {"the", "a", "an", "of", "to", "for", "and", "or", "in", "on", "get", "list", "run"}


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
    """

    sentence: str
    word: str
    tool: str
    status: str
    call_id: str | None = None

    def describe(self) -> str:
        """One line: what the answer says and what happened."""
        what = "was never called" if self.call_id is None else f"was {self.status}"
        if self.status == "never made" and self.call_id is None:
            what = "was never called"
        return f"says {self.word!r} but {self.tool} {what}: {_short(self.sentence)!r}"


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def stem(word: str) -> str:
    """A word's rough stem: refunded, refunds, refunding -> refund; deleted -> delet."""
    w = word.lower().strip("'")
    if w in _IRREGULAR:
        return _IRREGULAR[w]
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


def _past(word: str) -> bool:
    w = word.lower()
    return w.endswith("ed") or (w in _IRREGULAR and w not in ("run", "put", "set"))


def tool_words(tool: str) -> set[str]:
    """The stems naming ``tool``'s action: its name's words and their synonyms."""
    parts = re.split(r"[_\-.\s]+|(?<=[a-z])(?=[A-Z])", tool)
    stems = {stem(p) for p in parts if len(p) >= 3 and p.lower() not in _STOP}
    for group in _SYNONYMS:
        gstems = {stem(g) for g in group}
        if stems & gstems:
            stems |= gstems
    return stems


def _names(word_stem: str, stems: set[str]) -> bool:
    if word_stem in stems:
        return True
    return len(word_stem) >= 4 and any(
        len(s) >= 4 and (s.startswith(word_stem) or word_stem.startswith(s)) for s in stems
    )


def sentences(text: str) -> list[str]:
    """The answer cut into sentences (and clauses joined by "and I", ", and", ", but")."""
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


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


def _mentioned(low: str, values: Iterable[str]) -> bool:
    """Whether ``low`` (a sentence, lowered) names one of ``values`` as a whole word."""
    return any(v in low and re.search(rf"(?<![\w.]){re.escape(v)}(?![\w])", low) for v in values)


class _Ledger:
    """One tool's calls and their values (:func:`_call_values`), read once an answer.

    ``flat`` pairs each value with its call's position: a sentence is read against all of
    them in one pass, a substring test each (a chat's calls have many values, a pattern
    each, more than ``re``'s cache holds, and most are not in the sentence at all); only a
    value found is matched as a whole word.
    """

    __slots__ = ("_known", "calls", "flat", "values")

    def __init__(self, calls: list[Any]):
        self.calls = calls
        self.values = [_call_values(c) for c in calls]
        self.flat = [(v, i) for i, vs in enumerate(self.values) for v in vs]
        self._known: set[str] | None = None

    def about(self, low: str) -> list[Any]:
        """The calls ``low`` (a sentence, lowered) names a value of, in order."""
        found = sorted({i for v, i in self.flat if v in low})
        return [self.calls[i] for i in found if _mentioned(low, self.values[i])]

    def known(self) -> set[str]:
        """Every value of these calls (made once: each sentence of an answer may ask)."""
        if self._known is None:
            self._known = {v for v, _ in self.flat}
        return self._known


_SEEN: dict[int, tuple[Any, tuple[str, ...]]] = {}
"""A call's arguments (by identity, held) -> their values, lowered: a final answer is read
against every call of the chat, so each call's arguments are walked once, not per answer.
Bounded (emptied past :data:`_SEEN_LIMIT`), so it keeps few arguments of chats long gone."""
_SEEN_LIMIT = 4096


def _call_values(call: Any) -> tuple[str, ...]:
    """The values of the arguments the call ran with (edited ones if edited), lowered."""
    args = call.edited_arguments if getattr(call, "edited_arguments", None) else call.arguments
    entry = _SEEN.get(id(args))
    if entry is not None and entry[0] is args:
        return entry[1]
    values = tuple(v.lower() for v in _values(args))
    if len(_SEEN) >= _SEEN_LIMIT:
        _SEEN.clear()
    _SEEN[id(args)] = (args, values)
    return values


def _claimed_values(sentence: str) -> set[str]:
    return {m.group(0).lower().rstrip(".") for m in _VALUE.finditer(sentence)}


def false_claims(
    answer: str | None, calls: Sequence[Any], tools: Iterable[str] | None = None
) -> list[Claim]:
    """The sentences of ``answer`` claiming a tool's action that did not happen.

    Args:
        answer: The final answer's text.
        calls: The chat's tool calls (``chat.record.calls``: ``tool``, ``status``,
            ``arguments``, ``edited_arguments``, ``call_id``).
        tools: The names of the tools the chat had (default: the tools called). A claim
            is read only for a tool named here or called.
    """
    if not answer:
        return []
    calls = [c for c in calls if getattr(c, "item_type", None) is None]
    names = list(dict.fromkeys([*(tools or ()), *(c.tool for c in calls)]))
    vocab = {name: tool_words(name) for name in names}
    ledgers: dict[str, _Ledger] = {}

    def ledger(name: str) -> _Ledger:
        if name not in ledgers:
            ledgers[name] = _Ledger([c for c in calls if c.tool == name])
        return ledgers[name]

    found: list[Claim] = []
    for sentence in sentences(answer):
        if sentence.rstrip().endswith("?") or _NEGATION.search(sentence):
            continue
        words = _WORD.findall(sentence)
        completed = _COMPLETION.search(sentence) is not None
        claimed: dict[str, str] = {}  # tool -> the word claiming its action
        for i, word in enumerate(words):
            if not (completed or _past(word) or _participle_lead(words, i)):
                continue
            ws = stem(word)
            for name, stems in vocab.items():
                if name not in claimed and _names(ws, stems):
                    claimed[name] = word
        for name, word in claimed.items():
            # a value of another tool this sentence also claims is that tool's (order 1 in
            # "I refunded order 1 and notified you"), not a claim about this one
            others = {v for t in claimed if t != name for v in ledger(t).known()}
            claim = _judge(sentence, word, name, ledger(name), others)
            if claim is not None:
                found.append(claim)
    return found


def _participle_lead(words: Sequence[str], i: int) -> bool:
    """ "Refund issued", "Booking confirmed", "Email sent": a noun naming the action
    followed by a past participle also claims it (checked through the next word)."""
    return i + 1 < len(words) and _past(words[i + 1]) and not _past(words[i])


def _judge(sentence: str, word: str, tool: str, mine: _Ledger, known: set[str]) -> Claim | None:
    """The claim ``sentence`` makes about ``tool``, if it is false (``None``: it holds).
    ``mine``: the tool's calls; ``known``: values the sentence gives other tools it claims
    (not about this one)."""
    calls = mine.calls
    if not calls:
        return Claim(sentence, word, tool, "never made")
    about = mine.about(sentence.lower())
    if about:
        if any(c.status in DONE for c in about):
            return None
        last = about[-1]
        return Claim(sentence, word, tool, str(last.status), last.call_id)
    claimed = _claimed_values(sentence) - known - mine.known()
    ok = [c for c in calls if c.status in DONE]
    if ok and claimed and _numbers(claimed):
        # the sentence names other values (order 43) than the calls that ran had
        return Claim(sentence, word, tool, "never made")
    if ok:
        return None
    last = calls[-1]
    return Claim(sentence, word, tool, str(last.status), last.call_id)


def _numbers(values: set[str]) -> bool:
    return any(re.fullmatch(r"\$?\d[\d,]*(\.\d+)?", v) for v in values)
