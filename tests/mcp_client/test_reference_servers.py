"""nbagent against the official reference MCP servers (Node, @modelcontextprotocol/server-*;
the ``everything`` server has its own module, test_everything_server.py).

The servers are pinned in .ci/mcp-servers/package-lock.json and installed by
.ci/ensure-mcp-servers (``make test`` runs it). Without them these tests skip, unless
``NBAGENT_REQUIRE_MCP_SERVERS`` is set (``make test`` sets it), when they fail.

The case of issue 23 (A.4): the model asked for ``create_entities`` (gated: the server marks
it neither read-only nor destructive) and then ``read_graph`` (read-only, ungated) in one
response. By default the read runs at once, while the write waits, and reads an empty graph:
the result is marked "ran before create_entities was decided". Under ``order="listed"``
the read waits for the write and sees the entity.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import nbagent
from nbagent import Chat, MCPServer, ToolResultMessage
from nbagent.testing import ScriptedProvider, call_tools, reply

MODULES = Path(__file__).resolve().parents[2] / ".ci" / "mcp-servers" / "node_modules"


def _required() -> bool:
    flag = os.environ.get("NBAGENT_REQUIRE_MCP_SERVERS", "").strip().lower()
    return flag not in ("", "0", "no", "false")


def reference_server(package: str, *args: str, **kwargs: object) -> MCPServer:
    """A fresh stdio connection to one reference server (its own node process)."""
    entry = MODULES / "@modelcontextprotocol" / package / "dist" / "index.js"
    node = shutil.which("node")
    if node is None or not entry.is_file():
        why = f"{package} is not installed (run .ci/ensure-mcp-servers)"
        if _required():
            pytest.fail(f"NBAGENT_REQUIRE_MCP_SERVERS is set but {why}", pytrace=False)
        pytest.skip(why)
    return MCPServer.stdio(node, [str(entry), *args], **kwargs)  # type: ignore[arg-type]


@pytest.fixture(params=["sequential", "threads", "async"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MCPServer]:
    nbagent.configure(tool_concurrency=request.param)
    server = reference_server(
        "server-memory", env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}, prefix="memory"
    )
    yield server
    server.close()


ENTITY = {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}


def write_then_read(server: MCPServer, order: str | None) -> Chat:
    provider = ScriptedProvider(
        [
            call_tools(
                ("memory_create_entities", {"entities": [ENTITY]}, "w1"),
                ("memory_read_graph", {}, "r1"),
            ),
            reply("done"),
        ]
    )
    chat = Chat(provider=provider).with_tools(server)
    if order is not None:
        chat.with_tool_options(order=order)
    chat.ask("remember Ada, then show me the graph")
    return chat


def graph_names(chat: Chat, call_id: str) -> list[str]:
    result = next(
        m for m in chat.transcript if isinstance(m, ToolResultMessage) and m.tool_call_id == call_id
    )
    return [e["name"] for e in json.loads(result.content)["entities"]]


def test_the_servers_annotations_gate_the_write_and_not_the_reads(memory: MCPServer) -> None:
    gated = {t.name: t.requires_approval for t in memory.list_tools()}
    assert gated["memory_create_entities"] and gated["memory_delete_entities"]
    assert not gated["memory_read_graph"] and not gated["memory_search_nodes"]


def test_by_default_the_read_runs_first_reads_nothing_and_is_marked(memory: MCPServer) -> None:
    chat = write_then_read(memory, None)
    assert [c.id for c in chat.pending_approvals] == ["w1"]
    assert chat.get_call("r1").status == "ok"
    chat.approve("w1")
    chat.complete()
    assert chat.is_complete
    assert graph_names(chat, "r1") == []  # it ran while the write waited
    assert chat.log.set_index("call_id").loc["r1", "ran_before"] == "memory_create_entities (w1)"
    # the write did run, once, after the approval: a new read sees Ada
    assert "Ada" in memory.call("read_graph")


def test_listed_the_read_waits_for_the_write_and_sees_it(memory: MCPServer) -> None:
    chat = write_then_read(memory, "listed")
    assert chat.awaiting_approval and chat.get_call("r1").status == "requested"
    chat.approve("w1")
    chat.complete()
    assert chat.is_complete
    assert graph_names(chat, "r1") == ["Ada"]
    assert chat.log["ran_before"].isna().all()


def test_listed_a_denied_write_is_never_made_and_the_read_runs_after_the_denial(
    memory: MCPServer,
) -> None:
    chat = write_then_read(memory, "listed")
    chat.deny("w1", reason="not now")
    chat.complete()
    assert chat.is_complete
    assert chat.get_call("w1").status == "denied"
    assert graph_names(chat, "r1") == []
    assert "Ada" not in memory.call("read_graph")


@pytest.fixture
def files(tmp_path: Path) -> Iterator[tuple[MCPServer, Path]]:
    root = tmp_path / "allowed"
    root.mkdir()
    server = reference_server("server-filesystem", str(root), prefix="fs")
    yield server, root
    server.close()


def test_a_denied_write_never_reaches_the_disk_and_an_approved_one_writes_once(
    files: tuple[MCPServer, Path],
) -> None:
    server, root = files
    target = root / "notes.txt"
    provider = ScriptedProvider(
        [
            call_tools(("fs_write_file", {"path": str(target), "content": "first"}, "w1")),
            reply("not written"),
            call_tools(("fs_write_file", {"path": str(target), "content": "second"}, "w2")),
            reply("written"),
        ]
    )
    chat = Chat(provider=provider).with_tools(server)
    gated = {t.name: t.requires_approval for t in server.list_tools()}
    assert gated["fs_write_file"] and not gated["fs_read_text_file"]
    chat.ask("write first")
    assert [c.id for c in chat.pending_approvals] == ["w1"]
    chat.deny("w1", reason="wrong file")
    chat.complete()
    assert not target.exists()
    chat.ask("write second")
    chat.approve("w2")
    chat.complete()
    assert target.read_text() == "second"
    assert [c.status for c in chat.tool_calls] == ["denied", "ok"]
