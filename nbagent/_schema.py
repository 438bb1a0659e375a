"""JSON Schema for tool parameters, from type hints and docstrings, and validation.

A function's parameters become a pydantic model (built once, at declaration);
the model gives both the JSON Schema sent to providers and the validator that
checks a model's arguments before the tool runs. Docstrings in Google, NumPy or
Sphinx style supply the summary and the per-parameter descriptions.

Tools that declare a raw JSON Schema instead are validated by
:func:`validate_json_schema`, a small validator for the keywords tool schemas use.
"""

from __future__ import annotations

import functools
import inspect
import operator
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._errors import ToolDefinitionError

INJECTED_PARAMS = frozenset({"tool_call"})
NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

_SECTION_RE = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns?|Yields?|Raises|"
    r"Examples?|Notes?|Attributes|See Also|Warnings?|Todo)\s*:?\s*$"
)


def check_name(name: str) -> str:
    """Raise :class:`ToolDefinitionError` unless ``name`` is valid for every provider."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ToolDefinitionError(
            f"invalid tool name {name!r}: providers accept 1 to 64 characters "
            "from [a-zA-Z0-9_-] (no spaces or dots)"
        )
    return name


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into its description and per-parameter descriptions.

    Understands Google style (``Args:`` sections), NumPy style (``Parameters``
    underlined with dashes) and Sphinx style (``:param name: text``).

    Returns:
        ``(description, {param: description})``; the description stops at the
        first section header.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    params: dict[str, str] = {}
    desc: list[str] = []
    i = 0
    in_desc = True
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        sphinx = re.match(r"^:param\s+(?:[^:]*\s)?(\w+):\s*(.*)$", stripped)
        if sphinx:
            in_desc = False
            name, text = sphinx.groups()
            i += 1
            while i < len(lines) and lines[i].startswith((" ", "\t")) and lines[i].strip():
                text += " " + lines[i].strip()
                i += 1
            params[name] = text.strip()
            continue
        if stripped.startswith(":"):
            in_desc = False
            i += 1
            continue
        numpy_header = (
            i + 1 < len(lines)
            and set(lines[i + 1].strip()) == {"-"}
            and stripped in ("Parameters", "Other Parameters")
        )
        if numpy_header:
            in_desc = False
            i += 2
            while i < len(lines) and lines[i].strip():
                m = re.match(r"^(\w+)\s*(?::.*)?$", lines[i].strip())
                i += 1
                text = []
                while i < len(lines) and lines[i].startswith((" ", "\t")) and lines[i].strip():
                    text.append(lines[i].strip())
                    i += 1
                if m:
                    params[m.group(1)] = " ".join(text)
            continue
        header = _SECTION_RE.match(stripped)
        if header and not line.startswith((" ", "\t")):
            in_desc = False
            section = header.group(1)
            i += 1
            if section.startswith(("Arg", "Param", "Keyword")):
                indent: int | None = None
                current: str | None = None
                while i < len(lines):
                    raw = lines[i]
                    if raw.strip() and not raw.startswith((" ", "\t")):
                        break
                    if not raw.strip():
                        i += 1
                        continue
                    ind = len(raw) - len(raw.lstrip())
                    if indent is None:
                        indent = ind
                    m = re.match(r"^\*{0,2}(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$", raw.strip())
                    if ind == indent and m:
                        current = m.group(1)
                        params[current] = m.group(3).strip()
                    elif current is not None:
                        params[current] = (params[current] + " " + raw.strip()).strip()
                    i += 1
            continue
        if in_desc:
            desc.append(line)
        i += 1
    description = "\n".join(desc).strip()
    return description, params


@dataclass(frozen=True)
class ParameterModel:
    """The schema and validator built from one function signature."""

    schema: dict[str, Any]
    validate: Callable[[dict[str, Any]], dict[str, Any]]


def _clean(node: Any) -> Any:
    """Drop pydantic's auto-generated titles; keep everything else."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "title" and isinstance(v, str):
                continue
            if k == "properties" and isinstance(v, dict):
                out[k] = {pk: _clean(pv) for pk, pv in v.items()}
            else:
                out[k] = _clean(v)
        return out
    if isinstance(node, list):
        return [_clean(v) for v in node]
    return node


def format_validation_error(exc: Exception) -> str:
    """One line per problem: ``"city: Field required; unit: Input should be 'c' or 'f'"``."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        parts = []
        for err in errors():
            loc = ".".join(str(p) for p in err.get("loc", ())) or "(arguments)"
            msg = err.get("msg", "invalid")
            if err.get("type") == "extra_forbidden":
                msg = "unexpected argument"
            parts.append(f"{loc}: {msg}")
        if parts:
            return "; ".join(parts)
    return str(exc)


_TD_CACHE: dict[Any, Any] = {}


def _compat_type(tp: Any) -> Any:
    """Make ``typing.TypedDict`` classes acceptable to pydantic on Python < 3.12.

    pydantic needs ``typing_extensions.TypedDict`` there; users write the stdlib
    one. TypedDicts are rebuilt (recursively, inside generics too) with the same
    fields, totality and docstring.
    """
    import sys

    if sys.version_info >= (3, 12):
        return tp
    import typing_extensions

    if typing_extensions.is_typeddict(tp) and type(tp).__module__ == "typing":
        if tp in _TD_CACHE:
            return _TD_CACHE[tp]
        hints = typing.get_type_hints(tp, include_extras=True)
        required = getattr(tp, "__required_keys__", frozenset(hints))
        fields_ = {
            k: (
                _compat_type(v) if k in required else typing_extensions.NotRequired[_compat_type(v)]
            )
            for k, v in hints.items()
        }
        new = typing_extensions.TypedDict(tp.__name__, fields_)  # type: ignore[misc]
        new.__doc__ = tp.__doc__
        _TD_CACHE[tp] = new
        return new
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is None or not args:
        return tp
    new_args = tuple(_compat_type(a) for a in args)
    if new_args == args:
        return tp
    if origin is typing.Annotated:
        return typing.Annotated[(new_args[0], *args[1:])]
    try:
        return tp.copy_with(new_args)
    except AttributeError:
        import types

        if isinstance(tp, types.UnionType):
            return functools.reduce(operator.or_, new_args)
        return origin[new_args]


def function_parameters(fn: Callable[..., Any], *, skip_first: bool = False) -> ParameterModel:
    """Build the parameter schema and validator of ``fn``.

    Args:
        fn: The function (or ``execute`` method) to describe.
        skip_first: Skip the first parameter (``self``).

    Raises:
        ToolDefinitionError: ``*args``/``**kwargs``, or a type pydantic cannot
            describe as JSON Schema.
    """
    import pydantic

    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # unresolvable forward reference
        raise ToolDefinitionError(f"cannot resolve type hints of {fn.__qualname__}: {exc}") from exc
    _, param_docs = parse_docstring(fn.__doc__)
    fields: dict[str, Any] = {}
    names: list[str] = []
    params = list(sig.parameters.values())
    if skip_first and params:
        params = params[1:]
    for p in params:
        if p.name in INJECTED_PARAMS:
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"{fn.__qualname__}: *args/**kwargs cannot be described to a model; "
                "name every parameter"
            )
        if p.kind is p.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"{fn.__qualname__}: positional-only parameter {p.name!r} is not supported "
                "(models pass arguments by name)"
            )
        annotation = _compat_type(hints.get(p.name, Any))
        default = ... if p.default is inspect.Parameter.empty else p.default
        description = param_docs.get(p.name)
        fields[p.name] = (annotation, pydantic.Field(default, description=description))
        names.append(p.name)
    try:
        model = pydantic.create_model(
            f"{fn.__name__}_arguments",
            __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
        schema = _clean(model.model_json_schema())
    except Exception as exc:
        raise ToolDefinitionError(
            f"{fn.__qualname__}: cannot describe its parameters as JSON Schema: {exc}"
        ) from exc
    schema.setdefault("properties", {})
    schema["type"] = "object"
    schema.setdefault("required", [])
    schema["additionalProperties"] = False

    def validate(arguments: dict[str, Any]) -> dict[str, Any]:
        instance = model.model_validate(arguments)
        return {name: getattr(instance, name) for name in names}

    return ParameterModel(schema=schema, validate=validate)


class SchemaValidationError(ValueError):
    """Arguments do not match a raw JSON Schema."""


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list, tuple),
    "null": (type(None),),
}


def _type_ok(value: Any, t: str) -> bool:
    if t in ("integer", "number") and isinstance(value, bool):
        return False
    if t == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES.get(t, (object,)))


def validate_json_schema(
    value: Any, schema: dict[str, Any], path: str = "", root: dict[str, Any] | None = None
) -> list[str]:
    """Check ``value`` against the subset of JSON Schema tool definitions use.

    Supports ``type`` (single or list), ``enum``, ``const``, ``properties``,
    ``required``, ``additionalProperties``, ``items``, ``anyOf``/``oneOf``/``allOf``,
    ``minimum``/``maximum``, ``minLength``/``maxLength``, ``minItems``/``maxItems``
    and local ``$ref`` into ``$defs``/``definitions``.

    Returns:
        A list of problems, empty when the value is valid.
    """
    root = root if root is not None else schema
    where = path or "(arguments)"
    if "$ref" in schema:
        ref = schema["$ref"]
        target: Any = root
        for part in ref.lstrip("#/").split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return validate_json_schema(value, target, path, root)
    problems: list[str] = []
    types = schema.get("type")
    if types is not None:
        tlist = [types] if isinstance(types, str) else list(types)
        if not any(_type_ok(value, t) for t in tlist):
            return [f"{where}: expected {' or '.join(tlist)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        options = [repr(v) for v in schema["enum"]]
        allowed = " or ".join(options) if len(options) < 3 else ", ".join(options[:-1])
        if len(options) >= 3:
            allowed += f" or {options[-1]}"
        problems.append(f"{where}: Input should be {allowed}")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{where}: must be {schema['const']!r}")
    for key in ("anyOf", "oneOf"):
        if key in schema and all(validate_json_schema(value, s, path, root) for s in schema[key]):
            problems.append(f"{where}: matches none of the allowed shapes")
    for s in schema.get("allOf", []):
        problems.extend(validate_json_schema(value, s, path, root))
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for req in schema.get("required", []):
            if req not in value:
                problems.append(f"{path + '.' if path else ''}{req}: Field required")
        extra = schema.get("additionalProperties", True)
        for k, v in value.items():
            sub = f"{path}.{k}" if path else str(k)
            if k in props:
                problems.extend(validate_json_schema(v, props[k], sub, root))
            elif extra is False:
                problems.append(f"{sub}: unexpected argument")
            elif isinstance(extra, dict):
                problems.extend(validate_json_schema(v, extra, sub, root))
    if isinstance(value, (list, tuple)):
        if isinstance(schema.get("items"), dict):
            for n, item in enumerate(value):
                problems.extend(validate_json_schema(item, schema["items"], f"{path}[{n}]", root))
        if "minItems" in schema and len(value) < schema["minItems"]:
            problems.append(f"{where}: needs at least {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(f"{where}: allows at most {schema['maxItems']} items")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            problems.append(f"{where}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{where}: longer than {schema['maxLength']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where}: must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where}: must be <= {schema['maximum']}")
    return problems
