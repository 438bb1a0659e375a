"""An elicitation's JSON Schema as a form on its card, and the form's values as its answer.

:func:`form_fields` reads the schema an MCP server sends (an object of flat
properties: strings with ``format`` / ``minLength`` / ``maxLength``, numbers and
integers with ``minimum`` / ``maximum``, booleans, single-select enums, plain or
titled with ``oneOf`` / ``enumNames``, and multi-select arrays of them) into
plain field descriptions that ``approval.js`` draws (it builds nothing from the
schema itself). :func:`form_answer` turns what the browser sends back (text as
typed, a checkbox's state, the chosen options) into the answer: typed values,
defaults for what was left alone, and a message per field that is wrong, so the
card shows the error and the input keeps waiting.
"""

from __future__ import annotations

import json
import math
import re
from datetime import date, datetime
from typing import Any

Field = dict[str, Any]
"""One field: ``name``, ``label``, ``widget`` (``text``, ``number``, ``checkbox``,
``select``, ``multi``, ``json``), ``required``, ``default`` (as the widget holds
it), ``description``, ``options`` (``[{"value", "label"}]``: select and multi),
``integer``, ``minimum``, ``maximum``, ``min_length``, ``max_length``,
``min_items``, ``max_items``, ``format``."""

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")
_INPUT_TYPES = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime-local"}


class FormError(ValueError):
    """Values that do not fit the form; the message names each field and what is wrong."""


def form_fields(schema: dict[str, Any] | None) -> list[Field]:
    """The form's fields, in the schema's order (see :data:`Field`)."""
    props = (schema or {}).get("properties")
    if not isinstance(props, dict):
        return []
    required = set((schema or {}).get("required") or ())
    return [_field(str(name), _spec(spec), name in required) for name, spec in props.items()]


def _spec(spec: Any) -> dict[str, Any]:
    """A property's schema; an optional one (``anyOf: [X, null]``) read as ``X``."""
    spec = dict(spec) if isinstance(spec, dict) else {}
    options = spec.get("anyOf")
    if "type" not in spec and isinstance(options, list):
        real = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
        if len(real) == 1 and not any("const" in o for o in real):
            spec = {**real[0], **{k: v for k, v in spec.items() if k != "anyOf"}}
    return spec


def _choices(spec: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Single-select options: ``enum`` (titled by ``enumNames``), or ``oneOf`` / ``anyOf``
    of ``{"const", "title"}``."""
    if isinstance(spec.get("enum"), list):
        names = spec.get("enumNames")
        titles = names if isinstance(names, list) and len(names) == len(spec["enum"]) else None
        return [
            {"value": v, "label": str(titles[i] if titles else v)}
            for i, v in enumerate(spec["enum"])
        ]
    for key in ("oneOf", "anyOf"):
        options = spec.get(key)
        if (
            isinstance(options, list)
            and options
            and all(isinstance(o, dict) and "const" in o for o in options)
        ):
            return [
                {"value": o["const"], "label": str(o.get("title", o["const"]))} for o in options
            ]
    return None


def _field(name: str, spec: dict[str, Any], required: bool) -> Field:
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    field: Field = {
        "name": name,
        "label": str(spec.get("title") or name),
        "required": required,
        "description": str(spec.get("description") or ""),
    }
    default = spec.get("default")
    options = _choices(spec)
    items = _spec(spec.get("items"))
    if kind == "array" and (multi := _choices(items)) is not None:
        field.update(widget="multi", options=multi)
        field["default"] = [_key(v) for v in default] if isinstance(default, list) else []
        field["min_items"] = spec.get("minItems")
        field["max_items"] = spec.get("maxItems")
    elif options is not None:
        field.update(widget="select", options=options)
        field["default"] = _key(default) if default is not None else ""
    elif kind == "boolean":
        field.update(widget="checkbox", default=bool(default))
    elif kind in ("number", "integer"):
        field.update(widget="number", integer=kind == "integer")
        field["default"] = "" if default is None else _number_text(default)
        field["minimum"] = spec.get("minimum")
        field["maximum"] = spec.get("maximum")
    elif kind == "string":
        fmt = str(spec.get("format") or "")
        field.update(widget="text", format=fmt, input_type=_INPUT_TYPES.get(fmt, "text"))
        field["default"] = "" if default is None else str(default)
        field["min_length"] = spec.get("minLength")
        field["max_length"] = spec.get("maxLength")
    else:  # anything else (an object, an untyped value): JSON text
        field.update(widget="json")
        field["default"] = "" if default is None else json.dumps(default, ensure_ascii=False)
    field["spec"] = spec
    return field


def _key(value: Any) -> str:
    """An option's value as the browser holds it (JSON text: ``"a"`` and ``1`` differ)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _number_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def for_browser(fields: list[Field]) -> list[Field]:
    """The fields as ``approval.js`` reads them: each option's value as JSON text, no schema."""
    out = []
    for f in fields:
        f = {k: v for k, v in f.items() if k != "spec"}
        if "options" in f:
            f["options"] = [{"value": _key(o["value"]), "label": o["label"]} for o in f["options"]]
        out.append(f)
    return out


def form_answer(fields: list[Field], raw: Any) -> dict[str, Any]:
    """The answer to a form from what the browser sent (``name -> value as entered``).

    A field left empty is left out (its default is the server's to apply), unless it is
    required. Numbers are read from their text, options mapped back to their values.

    Raises:
        FormError: A field is missing or wrong; the message says which and why.
    """
    raw = raw if isinstance(raw, dict) else {}
    answer: dict[str, Any] = {}
    problems: list[str] = []
    for f in fields:
        name = f["name"]
        try:
            value = _read(f, raw.get(name))
        except FormError as exc:
            problems.append(f"{f['label']}: {exc}")
            continue
        if value is _EMPTY:
            if f["required"]:
                problems.append(f"{f['label']}: required")
            continue
        answer[name] = value
    if problems:
        raise FormError("; ".join(problems))
    return answer


_EMPTY = object()


def _read(f: Field, value: Any) -> Any:
    widget = f["widget"]
    if widget == "checkbox":
        return value if isinstance(value, bool) else bool(f.get("default"))
    if widget == "multi":
        chosen = [value] if isinstance(value, str) else list(value or ())
        picked = [_option(f, c) for c in chosen]
        lo, hi = f.get("min_items"), f.get("max_items")
        if not picked and not f["required"] and not lo:
            return _EMPTY
        if lo is not None and len(picked) < lo:
            raise FormError(f"choose at least {lo}")
        if hi is not None and len(picked) > hi:
            raise FormError(f"choose at most {hi}")
        return picked
    if value is None or (isinstance(value, str) and not value.strip()):
        return _EMPTY
    if widget == "select":
        return _option(f, value)
    if widget == "number":
        return _number(f, value)
    if widget == "json":
        try:
            return json.loads(value) if isinstance(value, str) else value
        except ValueError as exc:
            raise FormError(f"not valid JSON ({exc})") from None
    return _text(f, str(value))


def _option(f: Field, chosen: Any) -> Any:
    """An option's value from the browser's JSON text of it (or the value itself, from code)."""
    for o in f["options"]:
        if chosen == _key(o["value"]) or (
            chosen == o["value"] and type(chosen) is type(o["value"])
        ):
            return o["value"]
    raise FormError(f"{chosen!r} is not one of the options")


def _number(f: Field, value: Any) -> int | float:
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        raise FormError(f"{text!r} is not a number") from None
    if not math.isfinite(number):
        raise FormError(f"{text!r} is not a finite number")
    out: int | float = number
    if f.get("integer"):
        if not number.is_integer():
            raise FormError(f"{text!r} is not a whole number")
        out = int(number)
    lo, hi = f.get("minimum"), f.get("maximum")
    if lo is not None and out < lo:
        raise FormError(f"must be at least {_number_text(lo)}")
    if hi is not None and out > hi:
        raise FormError(f"must be at most {_number_text(hi)}")
    return out


def _text(f: Field, text: str) -> str:
    lo, hi = f.get("min_length"), f.get("max_length")
    if lo is not None and len(text) < lo:
        raise FormError(f"at least {lo} characters")
    if hi is not None and len(text) > hi:
        raise FormError(f"at most {hi} characters")
    fmt = f.get("format")
    if fmt == "email" and not _EMAIL.match(text):
        raise FormError(f"{text!r} is not an email address")
    if fmt == "uri" and not _URI.match(text):
        raise FormError(f"{text!r} is not a URI")
    if fmt == "date":
        try:
            date.fromisoformat(text)
        except ValueError:
            raise FormError(f"{text!r} is not a date (YYYY-MM-DD)") from None
    if fmt == "date-time":
        try:
            datetime.fromisoformat(text)
        except ValueError:
            raise FormError(f"{text!r} is not a date and time (YYYY-MM-DDTHH:MM)") from None
    return text
