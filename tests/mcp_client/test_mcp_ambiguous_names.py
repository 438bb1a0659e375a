"""A tool name that is one tool's on the server and another's in the chat is refused.

With ``prefix="files"``, a server listing ``files_delete`` (it deletes) and ``delete``
(read-only) has them offered as ``files_files_delete`` and ``files_delete``. The name
``files_delete`` then names both: the server's ``files_delete`` by its name on the server,
its ``delete`` by its name in the chat. ``server.call("files_delete")`` ran the server's
``files_delete`` (the first match), and ``approval={"files_delete": False}`` un-gated both
(a probe's repro). Such a name, in ``approval=``, ``idempotent=``, ``tools(include=,
exclude=)`` or ``call()``, is now refused with a ``ToolDefinitionError`` naming both
tools and the names that tell them apart; a name that names one tool works as before.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import types

from nbagent import Chat, MCPServer, ToolDefinitionError
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

NAMES_SERVER = str(Path(__file__).with_name("names_server.py"))


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "calls.log"
    path.touch()
    return path


def names_server(log: Path, **kwargs: Any) -> MCPServer:
    return MCPServer.stdio(sys.executable, [NAMES_SERVER], env={"NAMES_LOG": str(log)}, **kwargs)


@pytest.fixture
def files(log: Path) -> Iterator[MCPServer]:
    server = names_server(log, prefix="files")
    yield server
    server.close()


def ran(log: Path) -> list[str]:
    return log.read_text().splitlines()


def test_the_names_as_offered(files: MCPServer) -> None:
    offered = {t.name: (t.remote_name, t.requires_approval) for t in files.list_tools()}
    assert offered == {
        "files_files_delete": ("files_delete", True),
        "files_delete": ("delete", False),
    }


def _says_both(error: BaseException) -> None:
    text = str(error)
    assert "'files_delete'" in text and "two tools" in text, text
    assert "'files_files_delete'" in text and "'delete'" in text, text  # the names to use


def test_call_with_a_name_of_two_tools_is_refused_and_nothing_runs(
    files: MCPServer, log: Path
) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        files.call("files_delete", {"path": "/x"})
    _says_both(info.value)
    assert ran(log) == []


def test_call_async_with_a_name_of_two_tools_is_refused(files: MCPServer, log: Path) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        asyncio.run(files.call_async("files_delete", {"path": "/x"}))
    _says_both(info.value)
    assert ran(log) == []


def test_call_with_a_name_of_one_tool_runs_that_tool(files: MCPServer, log: Path) -> None:
    assert str(files.call("files_files_delete", {"path": "/a"})) == "deleted /a"
    assert str(files.call("delete", {"path": "/b"})) == "would delete /b"
    assert ran(log) == ["files_delete /a", "delete /b"]


def test_an_approval_key_of_two_tools_is_refused_before_the_model_is_asked(log: Path) -> None:
    server = names_server(log, prefix="files", approval={"files_delete": False})
    provider = ScriptedProvider([call_tools(("files_files_delete", {"path": "/x"})), reply("")])
    chat = Chat(provider=provider).with_tools(server)
    try:
        with pytest.raises(ToolDefinitionError) as info:
            chat.ask("delete /x")
        _says_both(info.value)
        assert "approval=" in str(info.value)
        assert ran(log) == [] and not chat.tool_calls
        with pytest.raises(ToolDefinitionError):  # every listing says so, none is kept
            server.list_tools()
    finally:
        chat.close()
        server.close()


def test_approval_keys_of_one_tool_each_gate_that_tool(log: Path) -> None:
    rules = {"files_files_delete": False, "delete": True}
    with names_server(log, prefix="files", approval=rules) as server:
        gated = {t.name: t.requires_approval for t in server.list_tools()}
    assert gated == {"files_files_delete": False, "files_delete": True}


def test_without_a_prefix_a_name_is_one_tools_on_both_sides(log: Path) -> None:
    with names_server(log, approval={"files_delete": False}) as server:
        gated = {t.name: t.requires_approval for t in server.list_tools()}
        assert gated == {"files_delete": False, "delete": False}
        assert str(server.call("files_delete", {"path": "/c"})) == "deleted /c"
    assert ran(log) == ["files_delete /c"]


def test_an_idempotent_name_of_two_tools_is_refused(log: Path) -> None:
    server = names_server(log, prefix="files", idempotent=["files_delete"])
    with server, pytest.raises(ToolDefinitionError) as info:
        server.list_tools()
    _says_both(info.value)
    assert "idempotent=" in str(info.value)


@pytest.mark.parametrize("which", ["include", "exclude"])
def test_a_selection_name_of_two_tools_is_refused(files: MCPServer, which: str) -> None:
    selection = files.tools(**{which: ["files_delete"]})
    with pytest.raises(ToolDefinitionError) as info:
        selection.source_tools()
    _says_both(info.value)
    assert f"{which}=" in str(info.value)


def test_selection_names_of_one_tool_each_select_it(files: MCPServer) -> None:
    chosen = files.tools(include=["files_files_delete", "delete"], exclude=["delete"])
    assert [t.remote_name for t in chosen.source_tools()] == ["files_delete"]


# ------------------------------------------------------------------ the property

_REMOTES = st.lists(
    st.sampled_from(["a", "b", "p_a", "p_b", "p_p_a", "a.b", "a_b", "p_a.b", "p_a_b"]),
    min_size=1,
    max_size=6,
    unique=True,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    remotes=_REMOTES,
    prefix=st.sampled_from([None, "p"]),
    keys=st.lists(
        st.sampled_from(["a", "b", "p_a", "p_b", "p_p_a", "a_b", "p_a_b", "p_p_a_b"]),
        max_size=3,
        unique=True,
    ),
)
def test_a_rule_applies_to_the_one_tool_its_key_names_or_is_refused(
    remotes: list[str], prefix: str | None, keys: list[str]
) -> None:
    """No listing ever gives one key's rule to two tools, nor two rules to one tool: the
    rule of every key goes to the only tool it names (by its name on the server or as
    offered), and a listing is refused exactly when some key names two tools or a tool's
    two names carry different rules."""
    rules = {key: i % 2 == 0 for i, key in enumerate(keys)}
    server = MCPServer.stdio(sys.executable, ["unused.py"], prefix=prefix, approval=rules)
    definitions = [types.Tool(name=r, input_schema={"type": "object"}) for r in remotes]
    try:
        tools = server._rebuild(definitions)
    except ToolDefinitionError:
        tools = None
    # what the listing offers, without the rules (they change no name)
    offered = MCPServer.stdio(sys.executable, ["unused.py"], prefix=prefix)._rebuild(definitions)
    owners = {k: {t.remote_name for t in offered if k in (t.name, t.remote_name)} for k in keys}
    # one tool named by both its names, with two different rules: which to follow is a guess
    split = any(len({rules[k] for k in keys if owners[k] == {t.remote_name}}) > 1 for t in offered)
    assert (tools is None) == (any(len(o) > 1 for o in owners.values()) or split)
    if tools is None:
        return
    for t in tools:
        mine = [k for k in keys if owners[k] == {t.remote_name}]
        if mine:  # its one rule, under either name
            assert t.requires_approval is rules[mine[0]]
        else:
            assert t.requires_approval is True  # unannotated: the annotations ask first


def test_one_tool_given_two_different_rules_by_its_two_names_is_refused(log: Path) -> None:
    """``approval={"delete": "always", "x_delete": "never"}`` with ``prefix="x"``: both keys
    name the server's ``delete`` (on the server, and as offered); the rule under the
    server's name won silently, so the call the user meant to let through was gated (or
    the other way round). Two different rules for one tool are refused; the same rule
    twice (``True`` is ``"always"``) is fine."""
    server = names_server(log, prefix="x", approval={"delete": "always", "x_delete": "never"})
    try:
        with pytest.raises(ToolDefinitionError, match=r"gives tool 'x_delete' two rules"):
            server.list_tools()
    finally:
        server.close()
    same = names_server(log, prefix="x", approval={"delete": True, "x_delete": "always"})
    try:
        tools = {t.name: t.requires_approval for t in same.list_tools()}
    finally:
        same.close()
    assert tools["x_delete"] is True
    assert ran(log) == []
