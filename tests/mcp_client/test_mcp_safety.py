"""What a misbehaving MCP server cannot do through nbagent (issue 23, part B).

- N2: a server that says its secrets back (``isError`` text, a JSON-RPC error)
  does not get them to the model, the log, the store, the screen or an
  exception; ``repr(server)`` hides secret-looking arguments.
- N9: tool names that collide once made valid are all offered, under
  deterministic names, with a notice; a tool listed twice is offered once.
- N10: a tool annotated both read-only and destructive asks first.

The server is tests/mcp_client/tricky_server.py, a real server built with the
official ``mcp`` SDK, started as a process.
"""

from __future__ import annotations

import re
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, MCPServer
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

TRICKY = str(Path(__file__).with_name("tricky_server.py"))
SECRET = "hunter2-PLAIN-env-secret"  # not key-shaped: only the server's env says it is secret
ARG_TOKEN = "argv-token-7Qm2Zx9LpR4tYw8NvB3k"
KEY = "sk-live-0123456789abcdefXYZ"  # key-shaped text the server makes up itself
LONG = "search_the_knowledge_base_for_documents_matching_a_query_in_every_"


def tricky(*flags: str, **kwargs: Any) -> MCPServer:
    kwargs.setdefault("env", {"MY_SECRET": SECRET, "DEBUG": "1"})
    return MCPServer.stdio(sys.executable, [TRICKY, "--token", ARG_TOKEN, *flags], **kwargs)


@pytest.fixture(scope="module")
def server() -> Iterator[MCPServer]:
    s = tricky(prefix="t")
    yield s
    s.close()


def chain(exc: BaseException | None) -> list[BaseException]:
    """``exc`` and everything it chains, at any depth."""
    out: list[BaseException] = []
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or any(e is seen for seen in out):
            continue
        out.append(e)
        todo += [e.__cause__, e.__context__]
    return out


def shows(text: str) -> list[str]:
    return [s for s in (SECRET, ARG_TOKEN, KEY) if s in text]


def exception_texts(exc: BaseException) -> str:
    parts = [repr(e) + str(e) + repr(e.args) for e in chain(exc)]
    parts.append("".join(traceback.format_exception(exc)))
    return "\n".join(parts)


# -- N2: secrets the server says back ----------------------------------------------


def test_the_servers_secrets_never_leave_through_its_errors(
    server: MCPServer, tmp_path: Path
) -> None:
    from nbagent.notebook import ChatView
    from nbagent.notebook._fallback import chat_mimebundle

    # the server was given the token, and says it back: even a result hides it (all of it)
    assert server.call("whoami") == "***"
    db = tmp_path / "chats.db"
    provider = ScriptedProvider(
        [call_tools(("t_leak_error", {}), ("t_leak_rpc", {})), reply("done")]
    )
    chat = Chat(provider=provider, store=db, display=False).with_tools(server)
    view = ChatView(chat)
    chat.ask("go")
    assert chat.status == "complete"
    error, rpc = (c.result for c in chat.tool_calls)
    assert error is not None and rpc is not None
    assert error.status == rpc.status == "error"
    assert "auth failed with token ***" in error.content  # the error is still said
    assert "(key sk-***)" in error.content
    assert "upstream refused token ***" in rpc.content

    # the model's next request (what the tools answered)
    assert not shows(repr(provider.requests))
    # the log, every frame, every column
    for frame in (chat.log, chat.steps, chat.messages):
        assert not shows(frame.to_json(default_handler=str, date_format="iso"))
    assert not shows(nbagent.read_log(chat).to_json(default_handler=str, date_format="iso"))
    # the view (live and static), tracebacks included
    state_text = repr([vars(e) for e in view.state.entries])
    assert "Traceback" in state_text  # the view keeps the tool's traceback...
    assert not shows(state_text)  # ...with no secret in it
    live = view._repr_mimebundle_()
    assert "auth failed with token ***" in live["text/html"]
    assert not shows(repr(live))
    assert not shows(repr(chat_mimebundle(chat)))
    chat.close()
    # the store: every file of the database, byte by byte
    stored = b""
    for path in tmp_path.iterdir():
        data = path.read_bytes()
        stored += data
        assert not [s for s in (SECRET, ARG_TOKEN, KEY) if s.encode() in data], path
    assert b"auth failed with token ***" in stored  # the error itself was stored


@pytest.mark.parametrize(
    ("tool", "kind"),
    [("leak_error", nbagent.MCPToolError), ("leak_rpc", nbagent.MCPServerError)],
)
def test_an_error_raised_to_the_caller_shows_no_secret_in_its_whole_chain(
    server: MCPServer, tool: str, kind: type[Exception]
) -> None:
    with pytest.raises(kind) as info:
        server.call(tool)
    assert not shows(exception_texts(info.value)), exception_texts(info.value)
    assert "***" in str(info.value)


def test_the_async_call_scrubs_the_same_way(server: MCPServer) -> None:
    import asyncio

    with pytest.raises(nbagent.MCPServerError) as info:
        asyncio.run(server.call_async("leak_rpc"))
    assert not shows(exception_texts(info.value))


def test_a_header_said_back_over_http_is_scrubbed() -> None:
    from _mcp_servers import http_server

    header = "plain-header-token-value"  # not key-shaped: only headers= says it is secret
    with (
        http_server(TRICKY) as (url, _),
        MCPServer.http(url, headers={"X-Api-Token": header}, prefix="h") as server,
    ):
        provider = ScriptedProvider([call_tools(("h_leak_header", {})), reply("done")])
        chat = Chat(provider=provider, display=False).with_tools(server)
        chat.ask("go")
        [call] = chat.tool_calls
        assert call.result is not None and call.result.content.endswith("token *** was refused")
        assert header not in repr(provider.requests)
        assert header not in chat.log.to_json(default_handler=str, date_format="iso")
        with pytest.raises(nbagent.MCPToolError) as info:
            server.call("leak_header")
        assert header not in exception_texts(info.value)


def test_short_values_are_not_scrubbed_out_of_every_message() -> None:
    from nbagent.mcp._secrets import MIN_SECRET_CHARS, server_secrets

    secrets = server_secrets(env={"DEBUG": "1", "MODE": "true", "KEY": "abcdef"})
    assert secrets == ("abcdef",)
    assert MIN_SECRET_CHARS == 6


def test_the_repr_hides_secret_looking_arguments() -> None:
    key = "sk-proj-AbCdEf0123456789xyz"
    server = MCPServer.stdio(
        "npx",
        [
            "-y",
            "some-mcp-server",
            "--token=abc123secret",
            "--api-key",
            "xyz-plain-value",
            "--password",
            "pw",
            key,
            "ghp_0123456789abcdefABCDEF",
            "--port",
            "8080",
            "server.py",
        ],
        env={"GITHUB_TOKEN": "plain-env-secret"},
    )
    shown = repr(server)
    for hidden in ("abc123secret", "xyz-plain-value", key, "ghp_0123", "plain-env-secret"):
        assert hidden not in shown, shown
    assert "pw'" not in shown and " pw " not in shown
    assert "--token=***" in shown and "--api-key ***" in shown and "--password ***" in shown
    for kept in ("-y", "some-mcp-server", "--port 8080", "server.py", "npx"):
        assert kept in shown, shown


def test_http_headers_and_url_credentials_are_secrets() -> None:
    from nbagent.mcp._secrets import server_secrets

    secrets = server_secrets(
        headers={"Authorization": "Bearer tok-abcdef-123"},
        url="https://user:pa55word@example.org/mcp?api_key=qs-secret-value",
    )
    assert {"Bearer tok-abcdef-123", "tok-abcdef-123", "pa55word", "qs-secret-value"} <= set(
        secrets
    )
    server = MCPServer.http(
        "https://user:pa55word@example.org/mcp?api_key=qs-secret-value",
        headers={"Authorization": "Bearer tok-abcdef-123"},
    )
    assert not [s for s in secrets if s in repr(server)]


@given(st.lists(st.text(min_size=1, max_size=30), max_size=8))
def test_masking_arguments_keeps_their_number_and_hides_what_it_reports(argv: list[str]) -> None:
    from nbagent.mcp._secrets import key_shaped, masked_argv

    shown, secrets = masked_argv(argv)
    assert len(shown) == len(argv)
    for arg, out in zip(argv, shown, strict=True):
        assert out == arg or "***" in out
        if key_shaped(arg):  # hidden whole, or only its secret part (a URL's password...)
            assert out != arg and "***" in out
            assert arg in secrets or any(s in arg for s in secrets)


# -- N10: destructive wins over read-only ------------------------------------------


def test_a_tool_both_read_only_and_destructive_waits_for_approval(server: MCPServer) -> None:
    wipe = {t.remote_name: t for t in server.list_tools()}["wipe"]
    assert wipe.annotations == {"readOnlyHint": True, "destructiveHint": True}
    provider = ScriptedProvider([call_tools(("t_wipe", {})), reply("ok")])
    chat = Chat(provider=provider, display=False).with_tools(server)
    chat.ask("wipe it")
    [pending] = chat.pending_approvals
    assert pending.name == "t_wipe" and pending.status == "awaiting_approval"
    assert wipe.approval_note == "the t server marks it destructive"
    chat.deny(pending)
    chat.complete()
    assert pending.status == "denied"


# -- N9: colliding names ------------------------------------------------------------


def test_colliding_names_are_all_offered_under_stable_names_with_a_notice(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = tricky("--duplicate", prefix="t")
    try:
        tools = server.list_tools()
        noticed = capsys.readouterr().err
        by_remote = {t.remote_name: t.name for t in tools}
        names = [t.name for t in tools]
        assert len(names) == len(set(names))  # nothing shadows anything
        assert set(by_remote) >= {"a.b", "a_b", LONG + "first", LONG + "second"}
        assert [t.remote_name for t in tools].count("a_b") == 1  # listed twice, offered once
        assert all(len(n) <= 64 for n in names)
        assert by_remote["a.b"] != "t_a_b" and by_remote["a.b"].startswith("t_a_b_")
        assert by_remote["a_b"].startswith("t_a_b_")
        assert by_remote["leak_error"] == "t_leak_error"  # no collision: the plain name
        # a notice names the colliding tools and what they are called now
        assert "'a.b'" in noticed and "'a_b'" in noticed and by_remote["a.b"] in noticed
        assert "lists tool 'a_b' twice" in noticed
        # each name reaches its own tool
        assert server.call(by_remote["a.b"]) == "dot"
        assert server.call(by_remote["a_b"]) == "underscore"
        assert server.call(by_remote[LONG + "second"]) == "second long"
        # the same names after a reconnection, and for a new server object (Chat.load)
        server.close()
        assert {t.remote_name: t.name for t in server.list_tools()} == by_remote
        again = tricky(prefix="t")
        try:
            assert {t.remote_name: t.name for t in again.list_tools()} == by_remote
        finally:
            again.close()
        assert capsys.readouterr().err.count("twice") == 0  # said once per server object
    finally:
        server.close()


@given(st.lists(st.text(min_size=1, max_size=80), max_size=12), st.randoms())
def test_local_names_are_unique_valid_and_independent_of_listing_order(
    remotes: list[str], rnd: Any
) -> None:
    from nbagent.mcp._server import local_names

    names, _ = local_names("p", remotes)
    shuffled = list(remotes)
    rnd.shuffle(shuffled)
    assert local_names("p", shuffled)[0] == names
    assert len(set(names.values())) == len(names)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", n) for n in names.values())
    # a remote tool's name depends on it and its collisions only: adding tools never gives
    # an existing name to another remote tool
    more, _ = local_names("p", [*remotes, "extra.tool", "extra_tool"])
    for remote, name in more.items():
        owner = [r for r, n in names.items() if n == name]
        assert owner in ([], [remote])


def test_a_tool_hidden_by_another_of_the_same_name_is_said_once(
    server: MCPServer, capsys: pytest.CaptureFixture[str]
) -> None:
    @nbagent.tool
    def t_whoami() -> str:
        """A local tool named like the server's."""
        return "local"

    chat = Chat(provider=ScriptedProvider([reply("a"), reply("b")]), display=False)
    chat.with_tools(server, t_whoami)
    assert {t.name: t for t in chat.tools}["t_whoami"].server is None  # the local one wins
    chat.ask("one")
    chat.ask("two")
    said = capsys.readouterr().err
    line = "two tools are named 't_whoami': the local tool hides the t server's tool 'whoami'"
    assert said.count(line) == 1, said
