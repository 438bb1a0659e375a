"""Structured answers: an output type, the strict schema a provider is sent, the answer parsed.

``chat.ask(text, output=Model)`` takes a pydantic model, a dataclass, a
TypedDict or a JSON Schema dict; :func:`as_output` makes an :class:`Output` of
it. Each adapter sends :meth:`Output.strict_schema` in its API's native
structured-output field (Chat Completions ``response_format``, Responses
``text.format``, Anthropic ``output_config.format``), and the chat reads the
answer back with :meth:`Output.parse`.

The strict transform (what the APIs' strict mode requires) is faithful or
fails before anything is sent (:class:`~nbagent.OutputSchemaError`):

- every object gets ``additionalProperties: false`` and lists every property
  as ``required``; a property that was optional becomes nullable, and a
  ``null`` the model sends for it is dropped again before validation (so a
  default applies);
- ``oneOf`` becomes ``anyOf``, a one-element ``allOf`` is inlined, titles go;
- a constraint the API does not enforce (``minLength``, ``default``... for
  OpenAI; numeric bounds and patterns too for Anthropic) moves into the
  description, the way the Anthropic SDK does; it is still enforced here,
  since the answer is validated against the original type;
- what cannot be expressed fails: a free-form mapping (``dict[str, X]``,
  ``additionalProperties`` not false), a value of any type, ``not``,
  ``if``/``then``, ``patternProperties``, tuples (``prefixItems``), a
  several-part ``allOf``, and a root that is not an object.

pydantic is imported on first use (``import nbagent`` stays light).
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal, is_typeddict

from ._errors import OutputSchemaError, OutputValidationError
from ._schema import _compat_type, format_validation_error, validate_json_schema

Dialect = Literal["openai", "anthropic"]
OutputKind = Literal["pydantic", "dataclass", "typeddict", "schema"]

_CANNOT = {
    "not": "'not'",
    "if": "'if'/'then'/'else'",
    "then": "'if'/'then'/'else'",
    "else": "'if'/'then'/'else'",
    "patternProperties": "'patternProperties' (keys matching a pattern)",
    "propertyNames": "'propertyNames'",
    "dependentSchemas": "'dependentSchemas'",
    "dependentRequired": "'dependentRequired'",
    "unevaluatedProperties": "'unevaluatedProperties'",
    "prefixItems": "a tuple ('prefixItems')",
    "contains": "'contains'",
}
_FORMATS = {
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
}
_KEPT: dict[Dialect, set[str]] = {
    # OpenAI strict mode: https://platform.openai.com/docs/guides/structured-outputs
    "openai": {
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    },
    # Anthropic structured outputs (what the anthropic SDK's transform_schema keeps)
    "anthropic": {"format", "minItems"},
}
_NAME = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, eq=False)
class Output:
    """What a structured answer must be: its name, its JSON Schema, how to build the value.

    Attributes:
        name: The type's name (sent as the schema's name; ``answer`` for a bare schema).
        schema: The JSON Schema of the type, as pydantic writes it (or the dict given).
        kind: ``pydantic``, ``dataclass``, ``typeddict`` or ``schema``.
        target: The class given (``None`` for a schema).
    """

    name: str
    schema: dict[str, Any]
    kind: OutputKind
    target: Any = None
    _adapter: Any = field(default=None, repr=False)
    _strict: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    def strict_schema(self, dialect: Dialect = "openai") -> dict[str, Any]:
        """The schema in the strict form ``dialect``'s structured output accepts.

        Raises:
            OutputSchemaError: The schema cannot be expressed there.
        """
        cached = self._strict.get(dialect)
        if cached is None:
            cached = _Strict(self, dialect).root()
            self._strict[dialect] = cached
        return cached

    def parse(self, text: str) -> Any:
        """The answer ``text`` as the output type's value.

        A pydantic model gives an instance, a dataclass an instance, a TypedDict
        or a schema a dict.

        Raises:
            OutputValidationError: Not JSON, or not a valid value of the type
                (``errors`` says what; ``raw`` is ``text``).
        """
        try:
            data = json.loads(_unfenced(text))
        except ValueError as exc:
            raise OutputValidationError(self.name, text, [f"not valid JSON: {exc}"]) from None
        data = _drop_filled_nulls(data, self.schema, self.schema)
        if self._adapter is None:
            problems = validate_json_schema(data, self.schema)
            if problems:
                raise OutputValidationError(self.name, text, problems)
            return data
        try:
            return self._adapter.validate_python(data)
        except Exception as exc:  # pydantic.ValidationError
            raise OutputValidationError(
                self.name, text, format_validation_error(exc).split("; ")
            ) from None


def as_output(output: Any) -> Output:
    """An :class:`Output` of a pydantic model, a dataclass, a TypedDict or a JSON Schema dict.

    Raises:
        OutputSchemaError: Anything else, or a type pydantic cannot describe.
    """
    if isinstance(output, Output):
        return output
    if isinstance(output, dict):
        if not output:
            raise OutputSchemaError("output= got an empty JSON Schema")
        name = output.get("title") if isinstance(output.get("title"), str) else "answer"
        return Output(_wire_name(str(name)), dict(output), "schema")
    kind: OutputKind | None = None
    if isinstance(output, type):
        if dataclasses.is_dataclass(output):
            kind = "dataclass"
        elif is_typeddict(output):
            kind = "typeddict"
        elif any(c.__module__.startswith("pydantic") for c in output.__mro__[1:]):
            kind = "pydantic"
    if kind is None:
        raise OutputSchemaError(
            "output= takes a pydantic model, a dataclass, a TypedDict or a JSON Schema dict; "
            f"got {output!r}"
        )
    import pydantic

    try:
        adapter = pydantic.TypeAdapter(_compat_type(output) if kind == "typeddict" else output)
        schema = adapter.json_schema()
    except pydantic.PydanticUserError as exc:
        raise OutputSchemaError(
            f"output={output.__name__}: pydantic cannot describe it ({exc})"
        ) from None
    return Output(_wire_name(output.__name__), schema, kind, output, adapter)


def _wire_name(name: str) -> str:
    return _NAME.sub("_", name)[:64] or "answer"


def _unfenced(text: str) -> str:
    """The text without one surrounding Markdown code fence (some servers add one)."""
    t = text.strip()
    if t.startswith("```") and t.endswith("```") and len(t) > 6:
        t = t[3:-3]
        if t.startswith("json"):
            t = t[4:]
    return t


def _resolve(node: Any, root: dict[str, Any]) -> Any:
    ref = node.get("$ref") if isinstance(node, dict) else None
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return node
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part, {}) if isinstance(target, dict) else {}
    return _resolve(target, root)


def _allows_null(node: Any, root: dict[str, Any]) -> bool:
    node = _resolve(node, root)
    if not isinstance(node, dict):
        return True
    types = node.get("type")
    if types == "null" or (isinstance(types, list) and "null" in types):
        return True
    if None in (node.get("enum") or ()) or ("const" in node and node["const"] is None):
        return True
    variants = node.get("anyOf") or node.get("oneOf") or []
    return any(_allows_null(s, root) for s in variants)


def _drop_filled_nulls(data: Any, node: Any, root: dict[str, Any]) -> Any:
    """``data`` without the ``null`` values strict mode made the model send for optional keys."""
    node = _resolve(node, root)
    if not isinstance(node, dict):
        return data
    if len(node.get("allOf", ())) == 1:
        return _drop_filled_nulls(data, node["allOf"][0], root)
    if isinstance(data, dict) and isinstance(node.get("properties"), dict):
        props, required = node["properties"], set(node.get("required", ()))
        out = {}
        for k, v in data.items():
            sub = props.get(k)
            if v is None and sub is not None and k not in required and not _allows_null(sub, root):
                continue
            out[k] = _drop_filled_nulls(v, sub, root) if sub is not None else v
        return out
    if isinstance(data, list) and isinstance(node.get("items"), dict):
        return [_drop_filled_nulls(v, node["items"], root) for v in data]
    variants = node.get("anyOf") or node.get("oneOf") or ()
    if isinstance(data, dict):
        for variant in variants:  # the variant the value matches, if any
            resolved = _resolve(variant, root)
            if isinstance(resolved, dict) and resolved.get("type") == "object":
                candidate = _drop_filled_nulls(data, resolved, root)
                if not validate_json_schema(candidate, resolved, root=root):
                    return candidate
    return data


class _Strict:
    """One strict transform of an output's schema for one dialect (see the module docstring)."""

    def __init__(self, output: Output, dialect: Dialect):
        self.output = output
        self.dialect = dialect
        self.kept = _KEPT[dialect]
        self.where = {"openai": "OpenAI's", "anthropic": "Anthropic's"}[dialect]

    def fail(self, path: str, what: str) -> OutputSchemaError:
        return OutputSchemaError(
            f"output={self.output.name}: {what} at {path or 'the top'} cannot be expressed in "
            f"{self.where} strict structured output; change the type (a model with named "
            "fields, a list of them) and ask again. Nothing was sent."
        )

    def root(self) -> dict[str, Any]:
        schema = dict(self.output.schema)
        defs = {}
        for key in ("$defs", "definitions"):
            for name, sub in (schema.pop(key, None) or {}).items():
                defs[name] = self.node(sub, f"{key}.{name}")
        node = self.node(schema, "")
        top = _resolve(node, {"$defs": defs})
        if not (isinstance(top, dict) and top.get("type") == "object"):
            raise self.fail("", "a top level that is not an object")
        if "$ref" in node:  # a root that is a reference: inline it (the API wants an object)
            node = dict(top)
        if defs:
            node["$defs"] = defs
        return node

    def node(self, schema: Any, path: str) -> dict[str, Any]:
        if schema is True or schema == {}:
            raise self.fail(path, "a value of any type")
        if not isinstance(schema, dict):
            raise self.fail(path, f"the schema {schema!r}")
        schema = dict(schema)
        for key, what in _CANNOT.items():
            if key in schema:
                raise self.fail(path, what)
        all_of = schema.pop("allOf", None)
        if all_of is not None:
            if len(all_of) != 1:
                raise self.fail(path, "an 'allOf' of several schemas")
            inner = dict(all_of[0])
            if "$ref" in inner and not (set(schema) - {"description", "title", "default"}):
                return self.ref(inner["$ref"])
            schema = {**inner, **schema}
        if "$ref" in schema:
            return self.ref(schema.pop("$ref"))
        for key in ("$defs", "definitions"):
            if key in schema:
                raise self.fail(path, f"'{key}' below the top level")
        out: dict[str, Any] = {}
        notes: dict[str, Any] = {}
        variants = schema.pop("anyOf", None) or schema.pop("oneOf", None)
        if variants is not None:
            out["anyOf"] = [self.node(v, f"{path}|{n}") for n, v in enumerate(variants)]
        for key in ("enum", "const"):
            if key in schema:
                out[key] = schema.pop(key)
        types = schema.pop("type", None)
        if types is None and not out:
            raise self.fail(path, "a value of any type")
        if isinstance(types, list):
            if len(types) == 1:
                types = types[0]
            else:  # ["string", "null"]: one variant per type (Anthropic takes no type lists)
                d = schema.pop("description", None)
                split = {"anyOf": [{**schema, "type": t} for t in types], **out}
                return self.node({**split, "description": d} if d else split, path)
        if types is not None:
            out["type"] = types
        if types == "object":
            self.object(schema, out, path)
        elif types == "array":
            items = schema.pop("items", None)
            if items is None:
                raise self.fail(path, "a list of values of any type")
            out["items"] = self.node(items, f"{path}[]")
        for key in ("properties", "required", "additionalProperties", "items"):
            schema.pop(key, None)
        schema.pop("title", None)
        description = schema.pop("description", None)
        for key, value in list(schema.items()):
            if self.keeps(key, value):
                out[key] = value
            elif not (key == "default" and value is None):  # nullable says that already
                notes[key] = value
        if notes:
            extra = "{" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in notes.items()) + "}"
            description = f"{description}\n\n{extra}" if description else extra
        if description:
            out["description"] = description
        return out

    def keeps(self, key: str, value: Any) -> bool:
        """Whether the API enforces this constraint itself (else: a note in the description)."""
        if key not in self.kept or (key == "format" and value not in _FORMATS):
            return False
        # Anthropic takes minItems of 0 or 1 only
        return not (self.dialect == "anthropic" and key == "minItems" and value not in (0, 1))

    def ref(self, ref: Any) -> dict[str, Any]:
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise self.fail("", f"the reference {ref!r} (only local '#/$defs/...' ones)")
        ref = ref.replace("#/definitions/", "#/$defs/")
        return {"$ref": ref}

    def object(self, schema: dict[str, Any], out: dict[str, Any], path: str) -> None:
        extra = schema.get("additionalProperties", True)
        props = schema.get("properties") or {}
        if isinstance(extra, dict) or not props:
            # extra keys allowed (absent, true) are simply not asked for: the answer stays valid
            raise self.fail(path, "a mapping with free keys (dict[str, ...], additionalProperties)")
        required = set(schema.get("required", ()))
        root = self.output.schema
        properties = {}
        for key, sub in props.items():
            node = self.node(sub, f"{path}.{key}" if path else key)
            if key not in required and not _allows_null(sub, root):
                node = {"anyOf": [node, {"type": "null"}]}
            properties[key] = node
        out["properties"] = properties
        out["required"] = list(props)
        out["additionalProperties"] = False


__all__ = ["Dialect", "Output", "as_output"]
