"""Which arguments an MCP tool's input schema leaves undeclared (refused before anything is
sent: a server built with the official SDK ignores them, so a ``dry_run`` its ``pay`` does
not declare would pay for real), and which schemas say nothing that lets them be refused.

6390e1b refused arguments that valid JSON Schemas take: a name ``required`` (or
``dependentRequired``) lists but ``properties`` does not (such a tool could not be called at
all), any name under ``propertyNames`` alone or a ``$dynamicRef``/``$recursiveRef``, and every
argument of a bare ``{"type": "object"}``, saying "the tool takes no arguments". Only a schema
that declares names (``properties``, ``patternProperties``) and says nothing of others makes
an undeclared name refusable; where the names cannot be told, nothing is refused. The
reference servers and both official SDKs list ``{"type": "object", "properties": {}}`` for a
tool with no arguments, so that one still refuses them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, MCPServer
from nbagent.mcp._server import _undeclared
from nbagent.testing import ScriptedProvider, call_tools, reply

SCHEMAS_SERVER = str(Path(__file__).resolve().parent / "schemas_server.py")

A: dict[str, Any] = {"a": {"type": "string"}}
DEFS: dict[str, Any] = {"A": {"properties": {"a": {}}}, "B": {"properties": {"b": {}}}}

# (schema, arguments, the names refused)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], set[str]]] = {
    "declared, an extra refused": ({"properties": A}, {"a": "x", "dry_run": True}, {"dry_run"}),
    "declared, all taken": ({"properties": A, "required": ["a"]}, {"a": "x"}, set()),
    "the SDKs' no-argument tool": ({"type": "object", "properties": {}}, {"zz": 1}, {"zz"}),
    "required names undeclared": (
        {"type": "object", "properties": A, "required": ["a", "b"]},
        {"a": "x", "b": 1},
        set(),
    ),
    "required, and an extra": (
        {"properties": A, "required": ["a", "b"]},
        {"a": "x", "b": 1, "zz": 2},
        {"zz"},
    ),
    "required in an allOf branch": (
        {"properties": A, "allOf": [{"required": ["b"]}]},
        {"a": "x", "b": 1},
        set(),
    ),
    "dependentRequired names": (
        {"properties": A, "dependentRequired": {"a": ["b"]}},
        {"a": "x", "b": 1},
        set(),
    ),
    "dependentRequired, and an extra": (
        {"properties": A, "dependentRequired": {"a": ["b"]}},
        {"a": "x", "c": 1},
        {"c"},
    ),
    "propertyNames alone": (
        {"type": "object", "propertyNames": {"pattern": "^x_"}},
        {"x_1": 1},
        set(),
    ),
    "propertyNames beside properties": (
        {"properties": A, "propertyNames": {"maxLength": 5}},
        {"zz": 1},
        set(),
    ),
    "$dynamicRef": (
        {
            "$dynamicRef": "#node",
            "$defs": {"n": {"$dynamicAnchor": "node", "properties": {"q": {}}}},
        },
        {"q": 1, "r": 2},
        set(),
    ),
    "$dynamicRef in a branch": (
        {"properties": A, "anyOf": [{"$dynamicRef": "#node"}]},
        {"zz": 1},
        set(),
    ),
    "$recursiveRef": ({"properties": A, "$recursiveRef": "#"}, {"zz": 1}, set()),
    "bare type object": ({"type": "object"}, {"anything": 1, "else": 2}, set()),
    "empty schema": ({}, {"anything": 1}, set()),
    "additionalProperties true": (
        {"properties": A, "additionalProperties": True},
        {"zz": 1},
        set(),
    ),
    "patternProperties takes it": (
        {"properties": A, "patternProperties": {"^x_": {}}},
        {"x_1": 1},
        set(),
    ),
    "patternProperties does not": (
        {"properties": A, "patternProperties": {"^x_": {}}},
        {"y": 1},
        {"y"},
    ),
    "patternProperties alone does not": (
        {"type": "object", "patternProperties": {"^x_": {}}},
        {"x_1": 1, "y": 1},
        {"y"},
    ),
    "a top-level local $ref": (
        {"$ref": "#/$defs/A", "$defs": DEFS},
        {"a": 1, "zz": 2},
        {"zz"},
    ),
    "oneOf of local $refs": (
        {"oneOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}], "$defs": DEFS},
        {"b": 1},
        set(),
    ),
    "a $ref elsewhere": ({"$ref": "https://example.com/s.json"}, {"zz": 1}, set()),
    "properties only in an allOf branch": ({"allOf": [{"properties": A}]}, {"zz": 1}, {"zz"}),
}


@pytest.mark.parametrize(("schema", "arguments", "refused"), CASES.values(), ids=CASES.keys())
def test_what_a_schema_leaves_undeclared(
    schema: dict[str, Any], arguments: dict[str, Any], refused: set[str]
) -> None:
    problems = _undeclared(schema, arguments)
    assert {p.split(":", 1)[0] for p in problems} == refused, problems
    assert all(": unexpected argument (the tool takes " in p for p in problems), problems


def test_the_refusal_says_what_the_tool_takes() -> None:
    [none] = _undeclared({"type": "object", "properties": {}}, {"zz": 1})
    assert none == "zz: unexpected argument (the tool takes no arguments)"
    [some] = _undeclared({"properties": A, "required": ["a", "b"]}, {"a": "", "b": 1, "zz": 1})
    assert some == "zz: unexpected argument (the tool takes 'a', 'b')"
    [named] = _undeclared({"patternProperties": {"^x_": {}}}, {"y": 1})
    assert named == "y: unexpected argument (the tool takes names matching '^x_')"


def test_an_official_sdk_server_gets_what_its_schemas_take() -> None:
    """End to end: each call checked, approved and sent to a real server (stdio)."""
    server = MCPServer.stdio(sys.executable, [SCHEMAS_SERVER], prefix="s")
    script = [
        call_tools(
            ("s_bare", {"text": "hi", "n": 2}),
            ("s_required_only", {"a": "x", "b": 1}),
            ("s_named_by_pattern", {"x_1": 3}),
            ("s_declared", {"a": "x", "dry_run": True}),
        ),
        reply("done"),
    ]
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(server)
    for name in ("s_bare", "s_required_only", "s_named_by_pattern", "s_declared"):
        chat.always_allow(name)
    chat.ask("go")
    got = {c.name: (c.status, c.result and str(c.result.content)) for c in chat.tool_calls}
    assert got["s_bare"] == ("ok", "n=2 text=hi")
    assert got["s_required_only"] == ("ok", "a=x b=1")  # was uncallable
    assert got["s_named_by_pattern"] == ("ok", "x_1=3")
    status, told = got["s_declared"]
    assert status == "error" and told is not None
    assert "dry_run: unexpected argument (the tool takes 'a')" in told and "not run" in told
    chat.close()
    server.close()
