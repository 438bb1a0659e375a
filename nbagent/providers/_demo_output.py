"""The demo model's structured answer: an output schema filled with plausible values.

``chat.ask(text, output=Model)`` on the offline demo model answers with JSON
that validates against the type: each field gets a value that fits its type,
its constraints (enums, bounds, lengths, item counts, formats) and, when it
can tell, its name (``city`` a city, ``email`` an address, ``summary`` the
demo's own answer). A top-level field the request gives ("region \"North\",
total 1200") gets that value instead, read the way the demo reads a tool's
arguments (:mod:`._demo_plan`). Deterministic; never raises on an unusual
schema (a part it cannot fill gets ``null``, and validation says so, as with a
real model).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

_BY_NAME = (
    (("email", "mail"), "ada@example.com"),
    (("url", "link", "website", "homepage"), "https://example.com"),
    (("city", "town"), "Paris"),
    (("country",), "France"),
    (("first_name", "firstname", "given"), "Ada"),
    (("last_name", "lastname", "surname", "family"), "Lovelace"),
    (("name", "author", "person", "owner", "user"), "Ada Lovelace"),
    (("title", "headline"), "A demo answer"),
    (("language", "lang"), "English"),
    (("currency",), "EUR"),
    (("color", "colour"), "blue"),
    (("unit",), "c"),
    (("id", "code", "sku"), "demo-1"),
    (("phone",), "+33 1 23 45 67 89"),
)
_TEXT_NAMES = ("summary", "answer", "text", "description", "reason", "explanation", "comment")
_FORMATS = {
    "date": "2026-01-15",
    "date-time": "2026-01-15T09:30:00Z",
    "time": "09:30:00",
    "email": "ada@example.com",
    "uri": "https://example.com",
    "url": "https://example.com",
    "uuid": "00000000-0000-4000-8000-000000000001",
    "hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "duration": "P1D",
}


def fill(schema: dict[str, Any], answer: str = "", *, request: str = "") -> Any:
    """A value for ``schema`` (JSON Schema); ``answer`` fills free-text fields (a summary...).

    ``request`` (the user's words): the top-level fields it names or implies get the values
    it gives, when they have the type the filled value has.
    """
    value = _Filler(schema, answer).value(schema, "", 0)
    if isinstance(value, dict) and request.strip():
        value.update(_from_request(schema, request, value))
    return value


def _as_kind_of(plain: Any, given: Any) -> tuple[bool, Any]:
    """``given`` as a value of ``plain``'s kind: (True, value), or (False, None) when it is not
    one (text for a number, a fraction for an integer...)."""
    if isinstance(plain, bool) or isinstance(given, bool):
        return (
            (True, given) if isinstance(plain, bool) and isinstance(given, bool) else (False, None)
        )
    if isinstance(plain, (int, float)) and isinstance(given, (int, float)):
        if isinstance(plain, int):
            return (True, int(given)) if float(given).is_integer() else (False, None)
        return True, float(given)
    return (True, given) if isinstance(plain, str) and isinstance(given, str) else (False, None)


def _named(key: str, value: str, request: str) -> bool:
    """Whether a text value is one the request gives: the field is named, or the value is
    a name (capitalised, not just as a sentence's first word), has digits, or is quoted."""
    at = request.find(value)
    sentence_start = (at >= 0 and not request[:at].strip(" \t\n\"'")) or bool(
        re.search(r"[.!?:;]\s*$", request[: max(at, 0)])
    )
    return (
        key.replace("_", " ").lower() in request.lower()
        or (value[:1].isupper() and not sentence_start)  # capitalised mid-sentence: a name
        or any(c.isdigit() for c in value)
        or f'"{value}"' in request
    )


def _from_request(schema: dict[str, Any], request: str, filled: dict[str, Any]) -> dict[str, Any]:
    """The fields ``request`` gives a value for, read like a tool call's arguments."""
    from .._types import ToolSpec
    from ._demo_plan import plan

    calls = plan(request, [ToolSpec("answer", "", schema)], "answer")
    if not calls:
        return {}
    call = calls[0]
    out: dict[str, Any] = {}
    for key in call.guessed:
        given = call.arguments.get(key)
        if isinstance(given, str) and not _named(key, given, request):
            continue  # a stray word ("hi" as a customer) is worse than a plausible value
        fits, value = _as_kind_of(filled.get(key), given)
        if key in filled and fits:
            out[key] = value
    return out


class _Filler:
    def __init__(self, root: dict[str, Any], answer: str):
        self.root = root
        self.answer = " ".join(answer.split()) or "A demo answer from the offline model."

    def resolve(self, node: Any) -> Any:
        for _ in range(32):  # a chain of references, never a loop
            ref = node.get("$ref") if isinstance(node, dict) else None
            if not isinstance(ref, str) or not ref.startswith("#/"):
                return node
            target: Any = self.root
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            node = target
        return {}

    def value(self, node: Any, key: str, depth: int) -> Any:
        node = self.resolve(node)
        if not isinstance(node, dict) or depth > 8:
            return None
        if "const" in node:
            return node["const"]
        if node.get("enum"):
            return node["enum"][0]
        if "default" in node:
            return node["default"]
        for key_of in ("allOf", "anyOf", "oneOf"):
            variants = [v for v in node.get(key_of, ()) if self.resolve(v).get("type") != "null"]
            if variants:
                merged = {k: v for k, v in node.items() if k not in (key_of, "description")}
                return self.value({**self.resolve(variants[0]), **merged}, key, depth)
        kind = node.get("type")
        if isinstance(kind, list):
            kind = next((t for t in kind if t != "null"), "null")
        if kind == "object" or "properties" in node:
            props = node.get("properties") or {}
            return {k: self.value(v, k, depth + 1) for k, v in props.items()}
        if kind == "array":
            n = max(int(node.get("minItems", 2)), 1)
            n = min(n, int(node.get("maxItems", n)))
            item = node.get("items", {"type": "string"})
            return [self.bump(self.value(item, _singular(key), depth + 1), i) for i in range(n)]
        if kind in ("integer", "number"):
            return self.number(node, key, kind == "integer")
        if kind == "boolean":
            return True
        if kind == "null":
            return None
        if kind == "string" or kind is None:
            return self.string(node, key)
        return None

    def number(self, node: dict[str, Any], key: str, integer: bool) -> int | float:
        low = node.get("minimum", node.get("exclusiveMinimum"))
        high = node.get("maximum", node.get("exclusiveMaximum"))
        guess: float = 42 if "year" not in key else dt.date.today().year
        if any(w in key for w in ("age",)):
            guess = 36
        if any(w in key for w in ("temp", "celsius")):
            guess = 18.5
        if any(w in key for w in ("score", "rating", "confidence", "probability")):
            guess = 0.8 if (high is not None and high <= 1) else 4
        if low is not None and guess <= low:
            guess = low + 1 if "exclusiveMinimum" in node else low
        if high is not None and guess >= high:
            guess = high - 1 if "exclusiveMaximum" in node else high
        return int(guess) if integer else float(guess)

    def string(self, node: dict[str, Any], key: str) -> str:
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt in _FORMATS:
            return _FORMATS[fmt]
        low = key.lower()
        text = None
        if any(w in low for w in _TEXT_NAMES):
            text = self.answer
        else:
            for names, value in _BY_NAME:
                if any(n in low for n in names):
                    text = value
                    break
        if text is None:
            text = f"example {key.replace('_', ' ')}".strip() if key else "example"
        lo, hi = int(node.get("minLength", 0)), node.get("maxLength")
        if len(text) < lo:
            text = (text + " " + "x" * lo)[:lo]
        if hi is not None:
            text = text[: int(hi)]
        return text

    def bump(self, value: Any, i: int) -> Any:
        """The ``i``-th item of a list: numbers and strings differ from the first one's."""
        if i == 0 or isinstance(value, bool):
            return value
        if isinstance(value, str) and value.startswith("example"):
            return f"{value} {i + 1}"
        return value


def _singular(key: str) -> str:
    return key[:-1] if key.endswith("s") and len(key) > 3 else key


__all__ = ["fill"]
