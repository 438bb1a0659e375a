"""nbagent against the reference Python MCP servers from PyPI, ``mcp-server-time`` and
``mcp-server-git`` (issue 26, item 6), over stdio: servers nobody here wrote.

They are pinned in the ``dev`` extra (pyproject.toml: they need ``mcp>=2.3,<3``, the same
SDK nbagent uses, so they share the project's venv). Without them these tests skip, unless
``NBAGENT_REQUIRE_MCP_SERVERS`` is set (``make test`` sets it), when they fail.

Every tool each server lists is reached through a chat and exercised: the time server's two
(read-only, so ungated; structured results with an output schema; a bad timezone or time is
an error result the model reads), and the git server's twelve on a throwaway repository
made by each test (its reads ungated, its writes gated by their annotations: ``git_reset``
as destructive). The git server is confined to one directory (``--repository``); a path
outside it is refused by the server, and the model reads why. One process per server for
the module: they start as subprocesses.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nbagent import Chat, MCPServer, MCPToolError
from nbagent.testing import ScriptedProvider, call_tools, reply


def _installed(module: str) -> None:
    if importlib.util.find_spec(module) is not None:
        return
    why = f"{module} is not installed (pip install -e '.[dev]')"
    flag = os.environ.get("NBAGENT_REQUIRE_MCP_SERVERS", "").strip().lower()
    if flag not in ("", "0", "no", "false"):
        pytest.fail(f"NBAGENT_REQUIRE_MCP_SERVERS is set but {why}", pytrace=False)
    pytest.skip(why)


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    )
    return out.stdout


def new_repo(root: Path, name: str) -> Path:
    repo = root / name
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Ada")
    git(repo, "config", "user.email", "ada@example.org")
    return repo


@pytest.fixture(scope="module")
def time_server() -> Iterator[MCPServer]:
    _installed("mcp_server_time")
    server = MCPServer.stdio(
        sys.executable, ["-m", "mcp_server_time", "--local-timezone", "UTC"], prefix="time"
    )
    yield server
    server.close()


@pytest.fixture(scope="module")
def confined(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory the git server may touch (itself a repository: the server insists);
    each test makes its own repository inside it."""
    return new_repo(tmp_path_factory.mktemp("git-server"), "allowed")


@pytest.fixture(scope="module")
def git_server(confined: Path) -> Iterator[MCPServer]:
    _installed("mcp_server_git")
    server = MCPServer.stdio(
        sys.executable, ["-m", "mcp_server_git", "--repository", str(confined)]
    )
    yield server
    server.close()


@pytest.fixture
def repo(confined: Path, request: pytest.FixtureRequest) -> Path:
    return new_repo(confined, request.node.name.replace("[", "_").replace("]", "_"))


def run(
    server: MCPServer, name: str, arguments: dict[str, object], decide: str = "approve"
) -> Chat:
    """One call of ``name`` through a chat (approved or denied if gated); the chat."""
    chat = Chat(
        provider=ScriptedProvider([call_tools((name, arguments, "c1")), reply("done")]),
        display=False,
    ).with_tools(server)
    chat.ask(f"use {name}")
    if chat.pending_approvals:
        if decide == "approve":
            chat.approve("c1")
        else:
            chat.deny("c1", reason="not now")
        chat.complete()
    assert chat.is_complete
    return chat


def ok(server: MCPServer, name: str, **arguments: object) -> str:
    """The text the model read from one successful call of ``name``."""
    call = run(server, name, arguments).get_call("c1")
    assert call.status == "ok", call.result
    assert call.result is not None
    return call.result.content


def gated_call(server: MCPServer, name: str, **arguments: object) -> tuple[bool, str]:
    """Whether ``name`` waited for an approval, and what the model read once approved."""
    chat = Chat(
        provider=ScriptedProvider([call_tools((name, arguments, "c1")), reply("done")]),
        display=False,
    ).with_tools(server)
    chat.ask(f"use {name}")
    waited = [c.id for c in chat.pending_approvals] == ["c1"]
    if waited:
        chat.approve("c1")
        chat.complete()
    call = chat.get_call("c1")
    assert call.status == "ok", call.result
    assert call.result is not None
    return waited, call.result.content


# --- mcp-server-time ----------------------------------------------------------------------


def test_time_lists_two_read_only_tools_with_output_schemas(time_server: MCPServer) -> None:
    tools = {t.remote_name: t for t in time_server.list_tools()}
    assert set(tools) == {"get_current_time", "convert_time"}
    for t in tools.values():
        assert not t.requires_approval  # readOnlyHint: true
        assert t.output_schema is not None and t.output_schema["type"] == "object"
    assert tools["convert_time"].parameters["required"] == [
        "source_timezone",
        "time",
        "target_timezone",
    ]


def test_get_current_time_runs_ungated_with_a_structured_result(time_server: MCPServer) -> None:
    chat = run(time_server, "time_get_current_time", {"timezone": "Asia/Tokyo"})
    call = chat.get_call("c1")
    assert call.status == "ok" and call.decision is None
    value = call.result.value  # type: ignore[union-attr]
    assert value.structured_content["timezone"] == "Asia/Tokyo"
    assert value.structured_content["datetime"].endswith("+09:00")  # Tokyo keeps no DST
    assert '"timezone": "Asia/Tokyo"' in call.result.content  # type: ignore[union-attr]


def test_convert_time_between_real_timezones(time_server: MCPServer) -> None:
    value = (
        run(
            time_server,
            "time_convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Kathmandu"},
        )
        .get_call("c1")
        .result.value
    )  # type: ignore[union-attr]
    structured = value.structured_content
    assert structured["source"]["datetime"].endswith("T12:00:00+00:00")
    assert structured["target"]["datetime"].endswith("T17:45:00+05:45")
    assert structured["time_difference"] == "+5.75h"


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("time_get_current_time", {"timezone": "Mars/Olympus_Mons"}, "Invalid timezone"),
        (
            "time_convert_time",
            {"source_timezone": "UTC", "time": "25:99", "target_timezone": "Europe/Paris"},
            "Invalid time format",
        ),
    ],
)
def test_a_bad_timezone_or_time_is_an_error_the_model_reads(
    time_server: MCPServer, name: str, arguments: dict[str, object], message: str
) -> None:
    chat = run(time_server, name, arguments)
    call = chat.get_call("c1")
    assert call.status == "error"
    assert message in call.result.content  # type: ignore[union-attr]
    assert chat.transcript[-1].content == "done"  # the turn went on
    with pytest.raises(MCPToolError, match=message):
        time_server.call(name.removeprefix("time_"), arguments)


# --- mcp-server-git -----------------------------------------------------------------------

READS = {
    "git_status",
    "git_diff_unstaged",
    "git_diff_staged",
    "git_diff",
    "git_log",
    "git_show",
    "git_branch",
}
WRITES = {"git_add", "git_commit", "git_reset", "git_create_branch", "git_checkout"}


def test_git_gates_its_writes_and_not_its_reads_by_annotation(git_server: MCPServer) -> None:
    tools = {t.name: t for t in git_server.list_tools()}
    assert set(tools) == READS | WRITES
    assert {n for n, t in tools.items() if t.requires_approval} == WRITES
    assert tools["git_reset"].approval_note == "the mcp-git server marks it destructive"
    assert tools["git_commit"].approval_note == "the mcp-git server does not mark it read-only"


def test_every_git_tool_on_a_throwaway_repository(git_server: MCPServer, repo: Path) -> None:
    where = str(repo)
    exercised: set[str] = set()

    def read(name: str, **arguments: object) -> str:
        waited, text = gated_call(git_server, name, repo_path=where, **arguments)
        assert not waited, f"{name} is a read and was gated"
        exercised.add(name)
        return text

    def write(name: str, **arguments: object) -> str:
        waited, text = gated_call(git_server, name, repo_path=where, **arguments)
        assert waited, f"{name} is a write and ran without an approval"
        exercised.add(name)
        return text

    (repo / "notes.txt").write_text("first line\n")
    assert "notes.txt" in read("git_status")
    assert write("git_add", files=["notes.txt"]) == "Files staged successfully"
    assert "+first line" in read("git_diff_staged")
    assert write("git_commit", message="add notes").startswith("Changes committed successfully")
    assert "Message: add notes" in read("git_log", max_count=5)
    assert git(repo, "log", "--format=%s") == "add notes\n"  # it ran, once

    (repo / "notes.txt").write_text("first line\nsecond line\n")
    assert "+second line" in read("git_diff_unstaged")
    write("git_add", files=["notes.txt"])
    assert write("git_reset") == "All staged changes reset"
    assert git(repo, "diff", "--cached") == ""

    assert (
        write("git_create_branch", branch_name="feature") == "Created branch 'feature' from 'main'"
    )
    assert "feature" in read("git_branch", branch_type="local")
    assert write("git_checkout", branch_name="feature") == "Switched to branch 'feature'"
    write("git_add", files=["notes.txt"])
    write("git_commit", message="second line")
    assert "+second line" in read("git_diff", target="main")
    shown = read("git_show", revision="HEAD")
    assert "    second line" in shown and "+second line" in shown
    assert read("git_show", revision="main:notes.txt") == "first line\n"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "feature"
    assert exercised == READS | WRITES


def test_a_denied_git_commit_never_runs(git_server: MCPServer, repo: Path) -> None:
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    chat = run(git_server, "git_commit", {"repo_path": str(repo), "message": "no"}, "deny")
    assert chat.get_call("c1").status == "denied"
    assert git(repo, "rev-list", "--all") == ""  # no commit was made
    assert git(repo, "diff", "--cached", "--name-only") == "a.txt\n"


def test_paths_outside_the_repository_are_refused(
    git_server: MCPServer, repo: Path, tmp_path: Path
) -> None:
    outside = new_repo(tmp_path, "elsewhere")
    chat = run(git_server, "git_status", {"repo_path": str(outside)})
    call = chat.get_call("c1")
    assert call.status == "error"
    assert "is outside the allowed repository" in call.result.content  # type: ignore[union-attr]

    secret = tmp_path / "secret.txt"
    secret.write_text("do not stage\n")
    chat = run(git_server, "git_add", {"repo_path": str(repo), "files": [f"../../{secret}"]})
    call = chat.get_call("c1")
    assert call.status == "error"  # approved, run, refused by the server
    assert "is outside the repository" in call.result.content  # type: ignore[union-attr]
    assert git(repo, "diff", "--cached", "--name-only") == ""
    with pytest.raises(MCPToolError, match="outside the allowed repository"):
        git_server.call("git_log", {"repo_path": str(outside)})
