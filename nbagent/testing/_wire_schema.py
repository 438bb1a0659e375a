"""Structured output and tool definitions on the fake server's three wire formats, and the
strict checks the APIs apply to them (tool definitions: :func:`check_tools`).

Where each API takes the schema of a structured answer:

- Chat Completions: ``response_format: {type: json_schema, json_schema: {name, schema, strict}}``;
- Responses: ``text: {format: {type: json_schema, name, schema, strict}}``;
- Anthropic Messages: ``output_config: {format: {type: json_schema, schema}}``.

In strict mode the fake answers what the real APIs reject with their 400:
OpenAI with ``strict: true`` wants an object at the top, ``additionalProperties:
false`` and every property in ``required`` on every object, and only the
keywords it supports; Anthropic wants ``additionalProperties: false`` on every
object and rejects the constraints it does not support.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ._script import Api, WireError

_COMMON = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "enum",
    "const",
    "$ref",
    "$defs",
    "definitions",
    "description",
    "title",
}
_PERMITTED = {
    "openai": _COMMON
    | {
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
    "anthropic": _COMMON | {"format", "minItems", "allOf"},
}
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}\Z")
_OPENAI_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]+\Z")
_ANTHROPIC_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}\Z")
_ANTHROPIC_KEY = re.compile(r"^[a-zA-Z0-9_.-]{1,64}\Z")


def _format(api: Api, body: Mapping[str, Any]) -> Any:
    if api == "chat":
        rf = body.get("response_format")
        if not isinstance(rf, Mapping):
            return rf
        return {**rf.get("json_schema", {}), "type": rf.get("type")}
    holder = body.get("text" if api == "responses" else "output_config")
    return holder.get("format") if isinstance(holder, Mapping) else None


def check_output(api: Api, body: Mapping[str, Any]) -> WireError | None:
    """The 400 the API answers for the request's structured-output schema, or ``None``."""
    fmt = _format(api, body)
    if fmt is None:
        return None
    param = {
        "chat": "response_format",
        "responses": "text.format",
        "anthropic": "output_config.format",
    }[api]
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        return _invalid(api, f"{param}.type: only 'json_schema' is supported here", param)
    schema = fmt.get("schema")
    if not isinstance(schema, Mapping):
        return _invalid(api, f"Missing required parameter: '{param}.schema'.", param)
    if api == "anthropic":
        problem = _walk(schema, "anthropic", ())
        return None if problem is None else _invalid(api, f"{param}.schema: {problem}", param)
    name = fmt.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        return _invalid(
            api,
            f"Invalid '{param}.name': string does not match pattern. Expected a string "
            "that matches the pattern '^[a-zA-Z0-9_-]+$'.",
            f"{param}.name",
        )
    if fmt.get("strict") is not True:
        return None
    if schema.get("type") != "object":
        return _invalid(
            api,
            f"Invalid schema for response_format '{name}': schema must be a JSON Schema of "
            f"'type: \"object\"', got 'type: \"{schema.get('type')}\"'.",
            param,
        )
    problem = _walk(schema, "openai", ())
    if problem is None:
        return None
    return _invalid(api, f"Invalid schema for response_format '{name}': {problem}", param)


def _walk(node: Any, dialect: str, context: tuple[str, ...]) -> str | None:
    if not isinstance(node, Mapping):
        return f"In context={context}, schema must be an object."
    for key in node:
        if key not in _PERMITTED[dialect]:
            return f"In context={context}, '{key}' is not permitted."
    if node.get("type") == "object":
        if node.get("additionalProperties") is not False:
            return (
                f"In context={context}, 'additionalProperties' is required to be supplied "
                "and to be false."
            )
        props = node.get("properties") or {}
        if dialect == "openai":
            required = node.get("required")
            missing = [k for k in props if not isinstance(required, list) or k not in required]
            if missing:
                return (
                    f"In context={context}, 'required' is required to be supplied and to be "
                    f"an array including every key in properties. Missing '{missing[0]}'."
                )
        for key, sub in props.items():
            problem = _walk(sub, dialect, (*context, "properties", key))
            if problem:
                return problem
    if "items" in node:
        problem = _walk(node["items"], dialect, (*context, "items"))
        if problem:
            return problem
    for key in ("anyOf", "allOf"):
        for n, sub in enumerate(node.get(key, ())):
            problem = _walk(sub, dialect, (*context, key, str(n)))
            if problem:
                return problem
    for key in ("$defs", "definitions"):
        for name, sub in (node.get(key) or {}).items():
            problem = _walk(sub, dialect, (*context, key, name))
            if problem:
                return problem
    return None


def check_tools(api: Api, body: Mapping[str, Any]) -> WireError | None:
    """The 400 the API answers for the request's function tool definitions, or ``None``.

    OpenAI: a name outside ``^[a-zA-Z0-9_-]+$`` or over 64 characters, parameters
    that are not an object schema. Anthropic: a custom tool's name outside
    ``^[a-zA-Z0-9_-]{1,128}$``, an ``input_schema`` missing or not of type object,
    a top-level property key outside ``^[a-zA-Z0-9_.-]{1,64}$``, two tools of one
    name. (A ``NaN``/``Infinity`` anywhere is refused earlier, as unparsable JSON.)
    """
    tools = body.get("tools")
    if not isinstance(tools, list):
        return None
    if api == "anthropic":
        return _anthropic_tools(tools)
    for n, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            continue
        spec = tool.get("function") if api == "chat" else tool
        where = f"tools[{n}].function" if api == "chat" else f"tools[{n}]"
        if not isinstance(spec, Mapping):
            return _invalid(api, f"Missing required parameter: '{where}'.", where)
        name = spec.get("name")
        if not isinstance(name, str):
            return _invalid(api, f"Missing required parameter: '{where}.name'.", f"{where}.name")
        if len(name) > 64:
            return WireError(
                400,
                f"Invalid '{where}.name': string too long. Expected a string with maximum "
                f"length 64, but got a string with length {len(name)} instead.",
                "invalid_request_error",
                "string_above_max_length",
                f"{where}.name",
            )
        if not _OPENAI_TOOL_NAME.match(name):
            return WireError(
                400,
                f"Invalid '{where}.name': string does not match pattern. Expected a string "
                "that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                "invalid_request_error",
                "invalid_value",
                f"{where}.name",
            )
        params = spec.get("parameters")
        if params is not None and (
            not isinstance(params, Mapping) or params.get("type") != "object"
        ):
            got = params.get("type") if isinstance(params, Mapping) else params
            return WireError(
                400,
                f"Invalid schema for function '{name}': schema must be a JSON Schema of "
                f"'type: \"object\"', got 'type: \"{got}\"'.",
                "invalid_request_error",
                "invalid_function_parameters",
                f"{where}.parameters",
            )
    return None


def _anthropic_tools(tools: list[Any]) -> WireError | None:
    seen: set[str] = set()
    for n, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            continue
        custom = tool.get("type") in (None, "custom")
        name = tool.get("name")
        where = f"tools.{n}.custom" if custom else f"tools.{n}"
        if custom:
            if not isinstance(name, str):
                return _invalid("anthropic", f"{where}.name: Field required", "")
            if len(name) > 128:
                return _invalid(
                    "anthropic", f"{where}.name: String should have at most 128 characters", ""
                )
            if not _ANTHROPIC_TOOL_NAME.match(name):
                return _invalid(
                    "anthropic",
                    f"{where}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'",
                    "",
                )
            schema = tool.get("input_schema")
            if not isinstance(schema, Mapping):
                return _invalid("anthropic", f"{where}.input_schema: Field required", "")
            if schema.get("type") != "object":
                return _invalid(
                    "anthropic", f"{where}.input_schema.type: Input should be 'object'", ""
                )
            props = schema.get("properties")
            if isinstance(props, Mapping) and any(
                not isinstance(k, str) or not _ANTHROPIC_KEY.match(k) for k in props
            ):
                return _invalid(
                    "anthropic",
                    f"{where}.input_schema.properties: Property keys should match pattern "
                    "'^[a-zA-Z0-9_.-]{1,64}$'",
                    "",
                )
        if isinstance(name, str):
            if name in seen:
                return _invalid("anthropic", "tools: Tool names must be unique.", "")
            seen.add(name)
    return None


def _invalid(api: Api, message: str, param: str) -> WireError:
    if api == "anthropic":
        return WireError(status=400, message=message, type="invalid_request_error")
    return WireError(status=400, message=message, type="invalid_request_error", param=param)


__all__ = ["check_output", "check_tools"]
