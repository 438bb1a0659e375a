"""JSON Schema for tool parameters, from type hints and docstrings, and validation.

A function's parameters become a pydantic model (built once, at declaration);
the model gives both the JSON Schema sent to providers and the validator that
checks a model's arguments before the tool runs. Docstrings in Google, NumPy or
Sphinx style supply the summary and the per-parameter descriptions.

Tools that declare a raw JSON Schema instead are validated by
:func:`validate_json_schema`, a small validator for the keywords tool schemas use.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import operator
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._errors import NBAgentError, ToolDefinitionError

INJECTED_PARAMS = frozenset({"tool_call"})
NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}\Z")
"""A tool name every provider accepts (``\\Z``, not ``$``: ``"lookup\\n"`` is refused)."""
PROPERTY_KEY_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,64}\Z")
"""A top-level parameter name Anthropic accepts in a tool's ``input_schema``."""

_SECTION_RE = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|"
    r"Other Args|Returns?|Yields?|Raises|Examples?|Notes?|Attributes|See Also|Warnings?|Todo|"
    r"References|Methods)\s*:?\s*$"
)


def check_name(name: str) -> str:
    """Raise :class:`ToolDefinitionError` unless ``name`` is valid for every provider."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ToolDefinitionError(
            f"invalid tool name {name!r}: providers accept 1 to 64 characters "
            "from [a-zA-Z0-9_-] (no spaces, dots or line breaks)"
        )
    return name


def property_key_ok(key: Any) -> bool:
    """Whether ``key`` may name a top-level property of a tool's parameters on every provider.

    Anthropic refuses a whole request whose tool schema has a top-level property
    outside ``^[a-zA-Z0-9_.-]{1,64}$`` (``größe``, ``$top``, ``filter[id]``, 65
    characters); OpenAI takes them, so a tool is portable only with such keys.
    """
    return isinstance(key, str) and PROPERTY_KEY_RE.match(key) is not None


def _bad_key_message(owner: str, key: Any) -> str:
    return (
        f"{owner}: parameter name {key!r} is refused by Anthropic's API (tool parameter names "
        "are 1 to 64 characters from [a-zA-Z0-9_.-]: ASCII letters, digits, '_', '.', '-'); "
        "rename it"
    )


def check_property_keys(owner: str, schema: Any) -> None:
    """Refuse a parameters schema with a top-level property name Anthropic refuses
    (:func:`property_key_ok`): every request carrying the tool would get a 400.

    Raises:
        ToolDefinitionError: Naming the first such key.
    """
    props = schema.get("properties") if isinstance(schema, dict) else None
    for key in props if isinstance(props, dict) else ():
        if not property_key_ok(key):
            raise ToolDefinitionError(_bad_key_message(owner, key))


def check_plain_json(owner: str, schema: Any) -> None:
    """Refuse a schema that is not plain JSON: a non-finite number (``math.inf`` as a default,
    which every API refuses to parse), a key that is not a string, a value JSON has no type for.

    Raises:
        ToolDefinitionError: Naming where in the schema the problem is.
    """
    import json

    try:
        json.dumps(schema, allow_nan=False)
    except (ValueError, TypeError) as exc:
        where = _not_plain_at(schema, ())
        at = f" at {'.'.join(where)}" if where else ""
        raise ToolDefinitionError(
            f"{owner}: its parameters schema is not plain JSON{at} ({exc}); providers refuse "
            "every request carrying it. A default of math.inf or nan cannot be sent: use None "
            "(with the type made optional) or a finite number"
        ) from None


def _not_plain_at(node: Any, path: tuple[str, ...]) -> tuple[str, ...] | None:
    import math

    if isinstance(node, float):
        return None if math.isfinite(node) else path
    if isinstance(node, dict):
        for k, v in node.items():
            if not isinstance(k, str):
                return (*path, repr(k))
            found = _not_plain_at(v, (*path, k))
            if found is not None:
                return found
        return None
    if isinstance(node, (list, tuple)):
        for n, v in enumerate(node):
            found = _not_plain_at(v, (*path, str(n)))
            if found is not None:
                return found
        return None
    if node is None or isinstance(node, (str, int, bool)):
        return None
    return path


_SPHINX_PARAM = re.compile(
    r"^:(?:param|parameter|arg|argument|key|keyword)\s+(?:[^:]*\s)?\*{0,2}(\w+)\s*:\s*(.*)$"
)
_NUMPY_PARAM = re.compile(r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?$")
_NUMPY_PARAM_SECTIONS = (
    "Parameters",
    "Other Parameters",
    "Params",
    "Arguments",
    "Args",
    "Keyword Arguments",
)


def _numpy_header(lines: list[str], i: int) -> bool:
    """Whether ``lines[i]`` is a NumPy section title: text at the margin underlined by dashes."""
    return (
        i + 1 < len(lines)
        and bool(lines[i].strip())
        and not lines[i].startswith((" ", "\t"))
        and set(lines[i + 1].strip()) == {"-"}
    )


def _numpy_params(lines: list[str], i: int, params: dict[str, str]) -> int:
    """Read a NumPy parameter list starting at ``lines[i]``; return where it ends.

    Each entry is ``name : type`` (or ``x, y : float`` for several) at the
    margin, its description indented under it; blank lines may separate entries.
    """
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if _numpy_header(lines, i) or _SECTION_RE.match(line.strip()):
            break
        if line.startswith((" ", "\t")):  # a description with no entry above it
            i += 1
            continue
        m = _NUMPY_PARAM.match(line.strip())
        if not m:
            break
        i += 1
        text = []
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
            if lines[i].strip():
                text.append(lines[i].strip())
            elif i + 1 < len(lines) and not lines[i + 1].startswith((" ", "\t")):
                break  # a blank line before the next entry
            i += 1
        for name in m.group(1).split(","):
            params[name.strip().lstrip("*")] = " ".join(text)
    return i


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into its description and per-parameter descriptions.

    Understands Google style (``Args:``, ``Other Parameters:`` sections), NumPy
    style (``Parameters``/``Other Parameters`` underlined with dashes, entries
    ``name : type`` or ``x, y : type``, blank lines between them allowed) and
    Sphinx style (``:param name: text``; ``:arg``, ``:parameter``, ``:key``,
    ``:keyword`` alike).

    Returns:
        ``(description, {param: description})``; the description stops at the
        first section header (any NumPy section, ``References`` included).
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
        sphinx = _SPHINX_PARAM.match(stripped)
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
        if _numpy_header(lines, i):
            in_desc = False
            i += 2
            if stripped in _NUMPY_PARAM_SECTIONS:
                i = _numpy_params(lines, i, params)
            continue
        header = _SECTION_RE.match(stripped)
        if header and not line.startswith((" ", "\t")):
            in_desc = False
            section = header.group(1)
            i += 1
            if section.startswith(("Arg", "Param", "Keyword", "Other")):
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

    def more_problems(self, arguments: dict[str, Any], reported: list[str]) -> list[str]:
        """The converter's problems with the parameters ``reported`` (the JSON Schema check's
        problems) says nothing about: a ``dict[int, str]`` key that is not a number, say.

        Lets one error name every problem in the same round, so a model fixing the
        schema's problems is not refused again for one the schema cannot express.
        """
        try:
            self.validate(arguments)
        except Exception as exc:
            named = {_top_field(p) for p in reported}
            return [p for p in validation_problems(exc) if _top_field(p) not in named]
        return []


def _top_field(problem: str) -> str:
    """The parameter a problem line is about: ``"a.b[0]: ..."`` -> ``"a"``."""
    return re.split(r"[.\[:]", problem, maxsplit=1)[0]


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


def validation_problems(exc: Exception) -> list[str]:
    """One line per problem of a pydantic ``ValidationError`` (``str(exc)`` for another error)."""
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
            return parts
    return [str(exc)]


def format_validation_error(exc: Exception) -> str:
    """One line per problem: ``"city: Field required; unit: Input should be 'c' or 'f'"``."""
    return "; ".join(validation_problems(exc))


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
        fields_ = {}
        for k, v in hints.items():
            # Required[...]/NotRequired[...] read from the hint itself: the class's own
            # __required_keys__ misses them when its annotations are strings (Python 3.11,
            # `from __future__ import annotations`)
            wrapper = typing.get_origin(v)
            if wrapper in (typing.Required, typing_extensions.Required):
                is_required, v = True, typing.get_args(v)[0]
            elif wrapper in (typing.NotRequired, typing_extensions.NotRequired):
                is_required, v = False, typing.get_args(v)[0]
            else:
                is_required = k in required
            v = _compat_type(v)
            fields_[k] = v if is_required else typing_extensions.NotRequired[v]
        new = typing_extensions.TypedDict(tp.__name__, fields_)  # type: ignore[misc]
        new.__doc__ = tp.__doc__
        _TD_CACHE[tp] = new
        return new
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _compat_dataclass(tp)
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


def _compat_dataclass(tp: type) -> type:
    """A stdlib dataclass holding a ``typing.TypedDict`` (Python < 3.12), as a subclass whose
    fields hold the rebuilt TypedDict: pydantic takes it, and what it builds is still an
    instance of the user's class (same fields, defaults, name and docstring)."""
    if tp in _TD_CACHE:
        return typing.cast(type, _TD_CACHE[tp])
    _TD_CACHE[tp] = tp  # a dataclass that refers to itself: as it is, while it is rebuilt
    try:
        hints = typing.get_type_hints(tp, include_extras=True)
    except Exception:
        return tp  # pydantic reports what it cannot read
    fields_ = [f for f in dataclasses.fields(tp) if f.name in hints]
    converted = {f.name: _compat_type(hints[f.name]) for f in fields_}
    if all(converted[f.name] is hints[f.name] for f in fields_) or "__pydantic_fields__" in vars(
        tp
    ):
        return tp
    namespace: dict[str, Any] = {
        "__annotations__": converted,
        "__module__": tp.__module__,
        "__qualname__": tp.__qualname__,
        "__doc__": tp.__doc__,
    }
    for f in fields_:
        namespace[f.name] = dataclasses.field(
            default=f.default,
            default_factory=f.default_factory,
            init=f.init,
            repr=f.repr,
            hash=f.hash,
            compare=f.compare,
            metadata=f.metadata,
            kw_only=f.kw_only,
        )
    params = tp.__dataclass_params__  # type: ignore[attr-defined]
    new: type = dataclasses.dataclass(
        type(tp.__name__, (tp,), namespace),
        init=params.init,
        repr=params.repr,
        eq=params.eq,
        order=params.order,
        unsafe_hash=params.unsafe_hash,
        frozen=params.frozen,
    )
    _TD_CACHE[tp] = new
    return new


def callable_label(fn: Any) -> str:
    """How messages name ``fn``: its qualified name, ``partial(name)``, or ``Class instance``."""
    if isinstance(fn, functools.partial):
        return f"partial({callable_label(fn.func)})"
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if isinstance(name, str):
        return name
    return f"{type(fn).__qualname__} instance"


def _is_plain(fn: Any) -> bool:
    """A function, method or builtin (described by itself), not a callable object.

    (Not ``inspect.isroutine``: it counts any object with ``__get__``, a tool made
    from a method among them.)
    """
    return (
        inspect.isfunction(fn)
        or inspect.ismethod(fn)
        or inspect.isbuiltin(fn)
        or isinstance(fn, type)
    )


def _unwrapped(fn: Any) -> Any:
    """What ``fn`` stands for: a partial's function, a wrapping object's ``__wrapped__``."""
    for _ in range(100):  # a chain of wrappers, never a loop
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif not _is_plain(fn) and getattr(fn, "__wrapped__", None) is not None:
            fn = fn.__wrapped__  # a tool made from a tool, say
        else:
            break
    return fn


def call_target(fn: Any) -> Any:
    """The code that runs when ``fn`` is called, whose annotations describe its parameters.

    A ``functools.partial`` is described by the function it wraps, a callable
    object by its class's ``__call__``.
    """
    fn = _unwrapped(fn)
    return fn if _is_plain(fn) else type(fn).__call__


def callable_docs(fn: Any) -> tuple[str, dict[str, str]]:
    """The description and per-parameter descriptions of any callable a tool is made from.

    A ``functools.partial`` has those of the function it wraps; a callable object
    those of its ``__call__``, with its class docstring filling what ``__call__``'s
    leaves out (its summary, its ``Args:``).
    """
    fn = _unwrapped(fn)
    if _is_plain(fn):
        return parse_docstring(getattr(fn, "__doc__", None))
    own_desc, own_params = parse_docstring(getattr(fn, "__doc__", None))
    call_desc, call_params = parse_docstring(getattr(type(fn).__call__, "__doc__", None))
    return call_desc or own_desc, {**own_params, **call_params}


def _annotated_description(annotation: Any) -> str | None:
    """The description an ``Annotated[T, Field(description=...)]`` hint gives itself."""
    from pydantic.fields import FieldInfo

    if typing.get_origin(annotation) is not typing.Annotated:
        return None
    for meta in typing.get_args(annotation)[1:]:
        if isinstance(meta, FieldInfo) and meta.description:
            return meta.description
    return None


def function_parameters(
    fn: Callable[..., Any],
    *,
    skip_first: bool = False,
    docs: dict[str, str] | None = None,
) -> ParameterModel:
    """Build the parameter schema and validator of ``fn``.

    Args:
        fn: The function (or ``execute`` method) to describe: a function, a
            bound method, a ``functools.partial`` (the arguments it binds are
            left out) or a callable object (its ``__call__``).
        skip_first: Skip the first parameter (``self``).
        docs: Parameter descriptions to use where ``fn``'s docstring has none
            (a ``Tool`` class's own ``Args:``).

    Raises:
        ToolDefinitionError: ``*args``/``**kwargs``, a type pydantic cannot
            describe as JSON Schema, or a default that does not match its type.
    """
    import pydantic
    from pydantic.fields import FieldInfo
    from pydantic_core import PydanticUndefined

    label = callable_label(fn)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(
            f"{label}: its parameters cannot be read ({exc}); wrap it in a function"
        ) from None
    try:
        hints = typing.get_type_hints(call_target(fn), include_extras=True)
    except TypeError:  # no annotations to read (a builtin)
        hints = {}
    except NameError as exc:  # a forward reference to a name not in the function's module
        raise ToolDefinitionError(
            f"cannot resolve type hints of {label}: {exc}; every type in a tool's annotations "
            "must be importable from the module the function is defined in (a class defined "
            "inside a function cannot be found once annotations are strings, as under "
            "`from __future__ import annotations`: define it at module level)"
        ) from exc
    except Exception as exc:  # unresolvable forward reference
        raise ToolDefinitionError(f"cannot resolve type hints of {label}: {exc}") from exc
    param_docs = {**(docs or {}), **callable_docs(fn)[1]}
    bound = set(fn.keywords) if isinstance(fn, functools.partial) else set()
    fields: dict[str, Any] = {}
    names: list[str] = []
    defaults: dict[str, Any] = {}
    params = list(sig.parameters.values())
    if skip_first and params:
        params = params[1:]
    for p in params:
        if p.name in INJECTED_PARAMS or p.name in bound:
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"{label}: *args/**kwargs cannot be described to a model; name every parameter"
            )
        if p.kind is p.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"{label}: positional-only parameter {p.name!r} is not supported "
                "(models pass arguments by name)"
            )
        if not property_key_ok(p.name):
            raise ToolDefinitionError(_bad_key_message(label, p.name))
        annotation = _compat_type(hints.get(p.name, Any))
        given = p.default if isinstance(p.default, FieldInfo) else None
        if given is not None:  # `x: int = Field(5, ge=1)`: the field itself
            field = given
            default = given.default if given.default_factory is None else _FACTORY
        else:
            default = ... if p.default is inspect.Parameter.empty else p.default
            field = pydantic.Field(default)
        if default is None and not _accepts_none(annotation):
            annotation = _nullable(annotation)  # `limit: int = None`: null is a value it takes
        elif not any(default is x for x in (..., _FACTORY, PydanticUndefined, None)):
            defaults[p.name] = default
        description = param_docs.get(p.name)
        if description and not _annotated_description(annotation) and not field.description:
            annotation = typing.Annotated[annotation, pydantic.Field(description=description)]
        fields[p.name] = (annotation, field)
        names.append(p.name)
    try:
        model = pydantic.create_model(
            re.sub(r"\W", "_", label) + "_arguments",
            __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
        schema = _clean(model.model_json_schema())
    except Exception as exc:
        raise ToolDefinitionError(_unsupported(label, fields, exc)) from exc
    schema.setdefault("properties", {})
    schema["type"] = "object"
    schema.setdefault("required", [])
    schema["additionalProperties"] = False
    check_plain_json(label, schema)
    _check_defaults(label, defaults, schema)

    def validate(arguments: dict[str, Any]) -> dict[str, Any]:
        instance = model.model_validate(arguments)
        return {name: getattr(instance, name) for name in names}

    return ParameterModel(schema=schema, validate=validate)


_FACTORY = object()  # a default made by a default_factory: not known at declaration


def _accepts_none(tp: Any) -> bool:
    """Whether the type hint ``tp`` takes ``None`` already (``Optional[T]``, ``Any``...)."""
    import types

    if tp is None or tp is type(None) or tp is Any or tp is object:
        return True
    if isinstance(tp, typing.TypeVar):
        return True
    supertype = getattr(tp, "__supertype__", None)  # a NewType
    if supertype is not None:
        return _accepts_none(supertype)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return _accepts_none(args[0])
    if origin is typing.Union or isinstance(tp, types.UnionType):
        return any(_accepts_none(a) for a in args)
    if origin is typing.Literal:
        return None in args
    return False


def _nullable(tp: Any) -> Any:
    """``tp`` taking ``None`` too; an ``Annotated`` hint keeps its metadata outside, so its
    constraints and description stay on the parameter (pydantic applies them to the value)."""
    if typing.get_origin(tp) is typing.Annotated:
        inner, *meta = typing.get_args(tp)
        return typing.Annotated[(typing.Optional[inner], *meta)]  # noqa: UP045
    return typing.Optional[tp]  # noqa: UP045


def _type_label(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__qualname__
    return re.sub(r"\b(typing|collections\.abc|typing_extensions)\.", "", repr(tp))


def _unsupported(label: str, fields: dict[str, Any], exc: Exception) -> str:
    """What to tell the author when pydantic cannot describe a parameter's type.

    Names the parameter and the type, and says what to use instead (pydantic's
    own advice, ``arbitrary_types_allowed=True``, is a setting nbagent's users
    cannot change, and would make a schema the model cannot fill).
    """
    import pydantic

    culprit: tuple[str, Any] | None = None
    if len(fields) > 1:
        for name, spec in fields.items():
            try:
                pydantic.create_model("probe", **{name: spec}).model_json_schema()
            except Exception:
                culprit = (name, spec[0])
                break
    elif fields:
        name, spec = next(iter(fields.items()))
        culprit = (name, spec[0])
    text = str(exc)
    inner = re.search(r"schema for <class '([^']+)'>", text)
    what = inner.group(1).rsplit(".", 1)[-1] if inner else None
    if "CallableSchema" in text:
        what = "a callable"
    if "typing_extensions.TypedDict" in text:
        where = f"parameter {culprit[0]!r}" if culprit else "a parameter"
        return (
            f"{label}: {where} holds a typing.TypedDict where pydantic cannot take it on "
            "Python < 3.12; define that TypedDict with typing_extensions.TypedDict"
        )
    unsupported = isinstance(
        exc,
        (
            pydantic.errors.PydanticSchemaGenerationError,
            pydantic.errors.PydanticInvalidForJsonSchema,
        ),
    )
    if not unsupported or culprit is None:
        first = text.split("\n")[0]
        return f"{label}: cannot describe its parameters as JSON Schema: {first}"
    name, tp = culprit
    shown = _type_label(tp)
    part = "" if what is None or what == shown else f" ({what} in it)"
    if what == "a callable" and shown.startswith("Callable"):
        part = ""
    return (
        f"{label}: parameter {name!r} has type {shown}{part}, which cannot be described to a "
        "model as JSON Schema; use JSON types (str, int, float, bool, list, dict), a pydantic "
        "model, a dataclass or a TypedDict for what the model sends, and build the object "
        "inside the tool"
    )


def _check_defaults(label: str, defaults: dict[str, Any], schema: dict[str, Any]) -> None:
    """Refuse a default the parameter's own schema rejects (``x: int = "many"``).

    A model that leaves the parameter out gets the default, so it must be a value
    the model could have sent. A ``None`` default makes the type nullable instead
    (``limit: int = None`` takes ``null``); a default pydantic cannot write as JSON
    is not checked.
    """
    for name in defaults:
        prop = schema["properties"].get(name)
        if not isinstance(prop, dict) or "default" not in prop:
            continue
        problems = validate_json_schema(prop["default"], prop, name, schema)
        if problems:
            raise ToolDefinitionError(
                f"{label}: the default of {name!r} ({defaults[name]!r}) does not match its "
                f"type ({'; '.join(problems)}); change the default or the type hint"
            )


class SchemaValidationError(NBAgentError, ValueError):
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
JSON_TYPES = frozenset(_JSON_TYPES)
"""The type words JSON Schema knows (what a ``type`` may say)."""


def json_type_name(value: Any) -> str:
    """The JSON name of ``value``'s type, as a model reads it: ``null``, ``string``,
    ``integer``, ``number``, ``boolean``, ``object``, ``array`` (a Python name otherwise)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


def _type_ok(value: Any, t: str) -> bool:
    if t in ("integer", "number") and isinstance(value, bool):
        return False
    if t == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES.get(t, (object,)))


def validate_json_schema(
    value: Any, schema: Any, path: str = "", root: dict[str, Any] | None = None
) -> list[str]:
    """Check ``value`` against the JSON Schema keywords tool and answer schemas use.

    Supports ``type`` (single or list), ``enum``, ``const``, ``properties``,
    ``required``, ``additionalProperties``, ``patternProperties``,
    ``minProperties``/``maxProperties``, ``items``, ``prefixItems``, ``contains``,
    ``minItems``/``maxItems``, ``uniqueItems``, ``anyOf``/``oneOf``/``allOf``/``not``,
    ``minimum``/``maximum``, ``exclusiveMinimum``/``exclusiveMaximum``, ``multipleOf``,
    ``minLength``/``maxLength``, ``pattern``, ``format`` (``date``, ``date-time``,
    ``time``, ``email``, ``uuid``, ``uri``, ``ipv4``, ``ipv6``; other formats are
    not checked), boolean schemas and local ``$ref`` (``#``, ``#/$defs/...``,
    ``#/definitions/...``). Values compare as JSON does (``1`` equals ``1.0``,
    ``true`` is not ``1``). A ``pattern`` Python's ``re`` cannot compile is not checked.

    When a value fits none of an ``anyOf``/``oneOf``'s shapes and only one of them
    is of its JSON type (``Optional[Address]`` given an object), that shape's own
    problems are reported.

    Returns:
        A list of problems, empty when the value is valid.
    """
    return _validate(value, schema, path, root if root is not None else schema, 0)


_MAX_REFS = 64  # $ref hops without going deeper into the value: a schema that loops


def _resolve_ref(ref: Any, root: Any) -> Any:
    if not isinstance(ref, str) or not ref.startswith("#"):
        return {}  # a remote reference: not followed
    target: Any = root
    for part in ref[1:].lstrip("/").split("/") if ref[1:].strip("/") else ():
        part = part.replace("~1", "/").replace("~0", "~")
        target = target.get(part, {}) if isinstance(target, dict) else {}
    return target


def _validate(value: Any, schema: Any, path: str, root: Any, hops: int) -> list[str]:
    where = path or "(arguments)"
    if schema is False:
        return [f"{where}: not allowed here"]
    if not isinstance(schema, dict):
        return []  # true, or not a schema: nothing to check
    problems: list[str] = []
    if "$ref" in schema:
        if hops >= _MAX_REFS:
            return [f"{where}: the schema's $ref {schema['$ref']!r} loops"]
        problems.extend(_validate(value, _resolve_ref(schema["$ref"], root), path, root, hops + 1))
        if problems:
            return problems
    types = schema.get("type")
    if types is not None:
        tlist = [types] if isinstance(types, str) else list(types)
        if not any(_type_ok(value, t) for t in tlist):
            return [f"{where}: expected {' or '.join(tlist)}, got {json_type_name(value)}"]
    enum = schema.get("enum")
    if isinstance(enum, list) and _canon(value) not in {_canon(v) for v in enum}:
        options = [repr(v) for v in enum]
        allowed = " or ".join(options) if len(options) < 3 else ", ".join(options[:-1])
        if len(options) >= 3:
            allowed += f" or {options[-1]}"
        problems.append(f"{where}: Input should be {allowed}")
    if "const" in schema and _canon(value) != _canon(schema["const"]):
        problems.append(f"{where}: must be {schema['const']!r}")
    for key in ("anyOf", "oneOf"):
        variants = schema.get(key)
        if isinstance(variants, list) and variants:
            results = [_validate(value, s, path, root, hops) for s in variants]
            if all(results):
                fitting = [
                    r for s, r in zip(variants, results, strict=True) if _may_be(value, s, root, 0)
                ]
                if len(fitting) == 1:  # the one shape of its type: say what is wrong in it
                    problems.extend(fitting[0])
                else:
                    problems.append(f"{where}: matches none of the allowed shapes")
    for sub in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else ():
        problems.extend(_validate(value, sub, path, root, hops))
    if "not" in schema and not _validate(value, schema["not"], path, root, hops):
        problems.append(f"{where}: matches a shape that is not allowed")
    if isinstance(value, dict):
        problems.extend(_object_problems(value, schema, path, root))
    elif isinstance(value, (list, tuple)):
        problems.extend(_array_problems(value, schema, path, root))
    elif isinstance(value, str):
        problems.extend(_string_problems(value, schema, where))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        problems.extend(_number_problems(value, schema, where))
    return problems


def _object_problems(
    value: dict[Any, Any], schema: dict[str, Any], path: str, root: Any
) -> list[str]:
    where = path or "(arguments)"
    problems: list[str] = []
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    patterns = schema.get("patternProperties")
    patterns = patterns if isinstance(patterns, dict) else {}
    for req in schema.get("required", []) or ():
        if req not in value:
            problems.append(f"{path + '.' if path else ''}{req}: Field required")
    extra = schema.get("additionalProperties", True)
    for k, v in value.items():
        sub = f"{path}.{k}" if path else str(k)
        matched = [
            p for p in patterns if isinstance(k, str) and isinstance(_search(p, k), re.Match)
        ]
        for p in matched:
            problems.extend(_validate(v, patterns[p], sub, root, 0))
        if k in props:
            problems.extend(_validate(v, props[k], sub, root, 0))
        elif matched:
            continue
        elif extra is False:
            problems.append(f"{sub}: unexpected argument")
        elif isinstance(extra, dict):
            problems.extend(_validate(v, extra, sub, root, 0))
    if _number(schema.get("minProperties")) and len(value) < schema["minProperties"]:
        problems.append(f"{where}: needs at least {schema['minProperties']} properties")
    if _number(schema.get("maxProperties")) and len(value) > schema["maxProperties"]:
        problems.append(f"{where}: allows at most {schema['maxProperties']} properties")
    return problems


def _array_problems(
    value: list[Any] | tuple[Any, ...], schema: dict[str, Any], path: str, root: Any
) -> list[str]:
    where = path or "(arguments)"
    problems: list[str] = []
    prefix = schema.get("prefixItems")
    items = schema.get("items")
    if isinstance(items, list):  # the draft 4-7 spelling of prefixItems
        prefix, items = items, schema.get("additionalItems", True)
    prefix = prefix if isinstance(prefix, list) else []
    for n, item in enumerate(value):
        sub = prefix[n] if n < len(prefix) else items
        if sub is False:
            problems.append(f"{where}: allows at most {len(prefix)} items")
            break
        if isinstance(sub, dict):
            problems.extend(_validate(item, sub, f"{path}[{n}]", root, 0))
    if "contains" in schema and not any(
        not _validate(item, schema["contains"], "", root, 0) for item in value
    ):
        problems.append(f"{where}: has no item of the required shape")
    if _number(schema.get("minItems")) and len(value) < schema["minItems"]:
        problems.append(f"{where}: needs at least {schema['minItems']} items")
    if _number(schema.get("maxItems")) and len(value) > schema["maxItems"]:
        problems.append(f"{where}: allows at most {schema['maxItems']} items")
    if schema.get("uniqueItems") is True:
        seen: dict[Any, int] = {}
        for n, item in enumerate(value):
            key = _canon(item)
            if key in seen:
                problems.append(
                    f"{where}: items must be unique ([{seen[key]}] and [{n}] are equal)"
                )
                break
            seen[key] = n
    return problems


def _string_problems(value: str, schema: dict[str, Any], where: str) -> list[str]:
    problems: list[str] = []
    if _number(schema.get("minLength")) and len(value) < schema["minLength"]:
        problems.append(f"{where}: shorter than {schema['minLength']}")
    if _number(schema.get("maxLength")) and len(value) > schema["maxLength"]:
        problems.append(f"{where}: longer than {schema['maxLength']}")
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and _search(pattern, value) is None:
        problems.append(f"{where}: does not match the pattern {pattern!r}")
    fmt = schema.get("format")
    check = _FORMATS.get(fmt) if isinstance(fmt, str) else None
    if check is not None and not check(value):
        problems.append(f"{where}: not a valid {fmt} ({value[:60]!r})")
    return problems


def _number_problems(value: float, schema: dict[str, Any], where: str) -> list[str]:
    problems: list[str] = []
    low, high = schema.get("minimum"), schema.get("maximum")
    xlow, xhigh = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if xlow is True and _number(low):  # draft 4: a flag on minimum
        low, xlow = None, low
    if xhigh is True and _number(high):
        high, xhigh = None, high
    if _number(low) and value < low:
        problems.append(f"{where}: must be >= {low}")
    if _number(high) and value > high:
        problems.append(f"{where}: must be <= {high}")
    if _number(xlow) and value <= xlow:
        problems.append(f"{where}: must be > {xlow}")
    if _number(xhigh) and value >= xhigh:
        problems.append(f"{where}: must be < {xhigh}")
    step = schema.get("multipleOf")
    if _number(step) and step > 0 and not _is_multiple(value, step):
        problems.append(f"{where}: must be a multiple of {step}")
    return problems


def _number(x: Any) -> typing.TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_multiple(value: float, step: float) -> bool:
    """Exact for the decimal numbers JSON carries (``0.3`` is a multiple of ``0.1``)."""
    import decimal

    try:
        return decimal.Decimal(repr(value)) % decimal.Decimal(repr(step)) == 0
    except (decimal.InvalidOperation, ArithmeticError):
        return False


_ECMA_SPACE = (
    "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
)
"""ECMA-262's ``\\s``: more than ASCII whitespace, fewer characters than Python's."""


def ecma_to_python(pattern: str) -> str:
    """A JSON Schema ``pattern`` (ECMA-262, no flags) as a Python ``re`` pattern of the same
    meaning, compiled with ``re.ASCII``.

    ``$`` outside a character class is the end of the input (Python's ``$`` also
    matches before a final newline: ``^[A-Z]{3}$`` would take ``"ABC\\n"``);
    ``\\d``/``\\w``/``\\b`` are ASCII (``re.ASCII``: ``\\d`` would take Arabic-Indic
    digits); ``\\s`` is ECMA's whitespace; ``(?<name>...)`` is a named group;
    ``[^]`` is any character and ``[]`` none; a ``[`` inside a class is literal.
    (``\\S`` inside a class stays ASCII's: all but ASCII whitespace.)
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "s":
                out.append(_ECMA_SPACE if in_class else f"[{_ECMA_SPACE}]")
            elif nxt == "S" and not in_class:
                out.append(f"[^{_ECMA_SPACE}]")
            elif nxt == "k" and pattern.startswith("<", i + 2) and ">" in pattern[i + 3 :]:
                end = pattern.index(">", i + 3)
                out.append(f"(?P={pattern[i + 3 : end]})")
                i = end + 1
                continue
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
                out.append(c)
            elif c in "[&~|":  # literal in ECMA; Python warns of set operations
                out.append("\\" + c)
            else:
                out.append(c)
            i += 1
            continue
        if c == "[":
            if pattern.startswith("[^]", i):
                out.append("[\\s\\S]")
                i += 3
                continue
            if pattern.startswith("[]", i):
                out.append("(?!)")
                i += 2
                continue
            in_class = True
            out.append("[^" if pattern.startswith("[^", i) else "[")
            i += 2 if pattern.startswith("[^", i) else 1
            continue
        if c == "$":
            out.append(r"\Z")
        elif (
            c == "("
            and pattern.startswith("(?<", i)
            and not pattern.startswith(("(?<=", "(?<!"), i)
        ):
            out.append("(?P<")
            i += 3
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str] | None:
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return re.compile(ecma_to_python(pattern), re.ASCII)
    except (re.error, OverflowError, RecursionError):
        return None


def _search(pattern: str, text: str) -> re.Match[str] | bool | None:
    """``re.search`` (JSON Schema patterns are not anchored) with ECMA-262 meaning
    (:func:`ecma_to_python`); ``False``: not compilable here."""
    compiled = _compiled(pattern)
    return False if compiled is None else compiled.search(text)


def _canon(value: Any) -> Any:
    """A hashable key, equal for values JSON calls equal (``1``, ``1.0``; not ``true``, ``1``)."""
    if isinstance(value, bool) or value is None:
        return ("lit", value)
    if isinstance(value, (int, float)):
        return ("num", int(value) if isinstance(value, float) and value.is_integer() else value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, (list, tuple)):
        return ("arr", tuple(_canon(v) for v in value))
    if isinstance(value, dict):
        return ("obj", frozenset((str(k), _canon(v)) for k, v in value.items()))
    return ("other", repr(value))


def _may_be(value: Any, schema: Any, root: Any, hops: int) -> bool:
    """Whether ``schema`` takes values of ``value``'s JSON type (so its problems are the ones)."""
    if not isinstance(schema, dict):
        return schema is not False
    if "$ref" in schema and hops < _MAX_REFS:
        return _may_be(value, _resolve_ref(schema["$ref"], root), root, hops + 1)
    types = schema.get("type")
    if types is not None:
        tlist = [types] if isinstance(types, str) else list(types)
        return any(_type_ok(value, t) for t in tlist)
    if isinstance(schema.get("enum"), list):
        return _canon(value)[0] in {_canon(v)[0] for v in schema["enum"]}
    if "const" in schema:
        return _canon(value)[0] == _canon(schema["const"])[0]
    variants = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(variants, list) and variants:
        return any(_may_be(value, s, root, hops) for s in variants)
    if "properties" in schema or "required" in schema:
        return isinstance(value, dict)
    if "items" in schema or "prefixItems" in schema:
        return isinstance(value, (list, tuple))
    return True


def _is_date(text: str) -> bool:
    import datetime

    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            datetime.date.fromisoformat(text)
            return True
        except ValueError:
            return False
    return _is_datetime(text)  # a date-time at midnight is taken as a date (as pydantic does)


def _is_datetime(text: str) -> bool:
    import datetime

    if not re.match(r"\d{4}-\d{2}-\d{2}([Tt ]|$)", text):
        return False
    try:
        datetime.datetime.fromisoformat(re.sub(r"[zZ]$", "+00:00", text))
        return True
    except ValueError:
        return False


def _is_time(text: str) -> bool:
    import datetime

    try:
        datetime.time.fromisoformat(re.sub(r"[zZ]$", "+00:00", text))
        return True
    except ValueError:
        return False


def _is_uuid(text: str) -> bool:
    import uuid

    try:
        uuid.UUID(text)
        return True
    except ValueError:
        return False


def _is_ip(version: int) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        import ipaddress

        try:
            return ipaddress.ip_address(text).version == version
        except ValueError:
            return False

    return check


_FORMATS: dict[str, Callable[[str], bool]] = {
    "date": _is_date,
    "date-time": _is_datetime,
    "time": _is_time,
    "email": lambda t: re.fullmatch(r"[^@\s]+@[^@\s]+", t) is not None,
    "uuid": _is_uuid,
    "uri": lambda t: re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*:\S+", t) is not None,
    "ipv4": _is_ip(4),
    "ipv6": _is_ip(6),
}
"""The formats checked, each as lenient as pydantic's parsing of the type behind it
(a date-time without a zone, a UUID without dashes), and no more."""
