"""How the offline demo model reads a tool's parameters from its JSON schema.

Pure functions of a schema: each property becomes a :class:`Param` with a
kind (enum, boolean, integer, number, array, object, ref, or a string flavour:
email, url, path, date, time, sql, text, short) and the phrases that name it in
a request: strong aliases from its name (``subject``, ``order id``) and weak
ones from the first words of its description. Nested models are not looked up.

The values for these parameters are found in a request by :mod:`._demo_filling`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ._demo_reading import words, wordset

_GENERIC = wordset("id ids name names number num no code value str")
_TEXTY = wordset(
    "body text message content contents subject title query sql note notes comment "
    "description reason prompt question summary statement command instructions caption "
    "search term terms keywords topic q msg input expression"
)
_FLAVOURS = (  # a string parameter whose name has one of these words wants that kind of value
    ("email", wordset("email emails mail recipient recipients sender")),
    ("url", wordset("url urls uri link links page site website endpoint href domain")),
    ("path", wordset("path paths file files filename filepath dir directory folder")),
    ("date", wordset("date day when deadline birthday since until")),
    ("time", wordset("time hour")),
)
_AMOUNTISH = wordset(
    "amount price cost total sum budget fee refund balance salary money euros dollars"
)
_BODY = wordset("body message text content msg")  # "saying ..." fills the first of these
_QUESTION = wordset("who whom whose where when which why")


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


def params_of(schema: Any) -> list[Param]:
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
