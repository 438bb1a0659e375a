"""How the offline demo model turns a request into tool calls: its plan.

Pure functions of the user's text and the tools' schemas: no state, no network.
:func:`plan` turns a request into the calls the demo model makes:

1. Values that must never be split are set aside and the rest is cut into
   pieces at ``,`` ``;`` ``and`` ``then`` ``also`` and sentence ends
   (:mod:`._demo_reading`).
2. A piece that names a tool (its name or description words) starts a call of
   that tool; any other piece continues the call before it.
3. Each piece is read against the tool's parameters (:mod:`._demo_filling`):
   phrases that name a parameter first, then values by type.
4. The pieces of one call become several calls only when they list values of
   one parameter ("weather in Paris, Tokyo and Oslo") or repeat the same
   parameters ("order 1 for 5 euros and order 2 for 7 euros"); otherwise they
   are one call ("... with subject X and body Y").
5. A required parameter with nothing in the text gets its default, else a
   made-up value; an optional one is left out.

Every argument remembers how it was found (:class:`Planned` ``guessed`` and
``made_up``), so the demo model can say so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._types import ToolSpec
from ._demo_filling import Reader, Value
from ._demo_reading import STOP, WORD, Piece, Text, pieces, words

_LIST_KINDS = {"url": "path"}  # "a.com, b.com and https://c.org": one list
_LISTING = re.compile(r"\s*(?:[,;:/]|\bor\b|\band\b)\s*", re.I)
_ITEM_WORDS = 3  # the most words of one item of a listed choice ("light blue")


def listed(text: str, vocab: set[str]) -> list[str] | None:
    """The items a request ends by listing, as said: ``"..., red or green"`` ->
    ``["red", "green"]``, ``"...: red, green or blue"``, ``"prefer red or green"``; None
    when it lists nothing (fewer than two items).

    An item is a run of one to three words, none of them the tool's own words; the run
    before the first separator gives its last word when an ``or``/``and`` joins it to the
    list (``"prefer red or green"``), not when a comma or colon ends it (``"prefer, ..."``).
    """
    body = text.rstrip(" \t\n.!?")
    parts = _LISTING.split(body)
    seps = _LISTING.findall(body)
    items: list[str] = []
    for i in range(len(parts) - 1, -1, -1):
        part = parts[i].strip()
        said = WORD.findall(part)
        plain = bool(said) and not (set(words(part)) & vocab) and part.lower() not in STOP
        if i > 0 and plain and len(said) <= _ITEM_WORDS and len(said) == len(part.split()):
            items.append(part)
            continue
        joined = i + 1 < len(parts) and seps[i].strip().lower() in ("or", "and")
        last = said[-1] if said else ""
        if joined and last and last.lower() not in STOP and not set(words(last)) & vocab:
            items.append(last)
        break
    items.reverse()
    return items if len(items) > 1 else None


def _compatible(a: Value, b: Value) -> bool:
    return _LIST_KINDS.get(a.kind, a.kind) == _LIST_KINDS.get(b.kind, b.kind)


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
    if len(rows) == 1:  # a list of words read as one value ("red or green" -> ["red green"])
        for p in r.params:
            read = rows[0].get(p.name)
            if (
                p.kind == "array"
                and p.item is not None
                and p.item.kind == "short"
                and (read is None or (read.how == "found" and read.kind in ("word", "name")))
                and (items := listed(request, r.vocab)) is not None
            ):
                rows = [{**rows[0], p.name: Value(items, "found", "word")}]
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
