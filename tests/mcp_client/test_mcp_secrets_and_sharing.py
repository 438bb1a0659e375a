"""A server's secrets in everything it says, a server shared by chats, and rules that name
no tool (the second MCP probe's findings).

- A server's request on the older protocol (which does not say which call it is for) is
  never given to another chat's call: refused while calls of several chats are in flight.
- The server's own secrets (its ``env=``) are out of the text it sends besides results:
  tool descriptions and schemas, prompts, elicitation and sampling requests; out of the
  SDK's own log records; and out of their escaped forms (JSON, ``Authorization: Basic``).
- A server's label and ``repr`` never show a secret of its command line or URL.
- Closing one chat of two sharing a server does not cut off the other's call.
- ``approval={name: ...}`` and ``tools(include=/exclude=)`` naming no tool say so.

The server is tests/mcp_client/secrets_server.py, built with the official ``mcp`` SDK,
started as a process (stdio) or over streamable HTTP.
"""

from __future__ import annotations

import base64
import json
import logging
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _mcp_servers import answering, http_server
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, MCPServer, ModelRequest, PendingInput
from nbagent.testing import ScriptedProvider, call_tools, reply

SECRETS_SERVER = str(Path(__file__).with_name("secrets_server.py"))
TOKEN = "plain-leaky-token-42"  # not key-shaped: only env= says it is a secret


def secrets_server(*flags: str, token: str = TOKEN, **kwargs: Any) -> MCPServer:
    kwargs.setdefault("prefix", "s")
    kwargs.setdefault("timeout", 60)
    return MCPServer.stdio(
        sys.executable, [SECRETS_SERVER, *flags], env={"LEAKY_TOKEN": token}, **kwargs
    )


def wait_until(predicate: Any, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def stored(db: Path) -> str:
    """Every row of every table of a store, as text."""
    with sqlite3.connect(db) as con:
        tables = [t for (t,) in con.execute("select name from sqlite_master where type='table'")]
        return "\n".join(repr(r) for t in tables for r in con.execute(f"select * from {t}"))


# -- 1. a request on the older protocol goes to its own chat, or to nobody -------------------


@pytest.fixture(scope="module")
def legacy() -> Iterator[MCPServer]:
    s = secrets_server("--legacy")
    s.connect()
    assert s._connection.client.protocol_version != "2026-07-28"
    yield s
    s.close()


def in_flight(server: MCPServer) -> int:
    return len(server._requests._in_flight)


def test_a_sampling_request_is_never_given_to_another_chats_call(legacy: MCPServer) -> None:
    """Chat A runs a slow call; chat B's call asks for sampling with its private text. The
    request must not appear on A (its person, provider, budget, record): it is refused,
    saying why, and B's call fails with that; A's call finishes untouched."""
    asked_a: list[str] = []
    seen_by_a: list[str] = []

    def a_model(request: ModelRequest) -> Any:
        seen_by_a.append(repr(request.messages))
        if not any(getattr(m, "role", "") == "tool" for m in request.messages):
            return call_tools(("s_wait", {"seconds": 3}))
        return reply("a done")

    a = Chat(provider=ScriptedProvider([a_model], repeat_last=True), display=False)
    a.with_tools(legacy)
    a.on(nbagent.InputRequested, lambda e: asked_a.append(repr(e)))
    b = Chat(
        provider=ScriptedProvider(
            [call_tools(("s_summarize", {"text": "B's private notes"})), reply("b done")]
        ),
        display=False,
    ).with_tools(legacy)
    runner = threading.Thread(target=lambda: a.ask("wait"))
    runner.start()
    try:
        wait_until(lambda: in_flight(legacy) == 1)
        b.ask("summarize")
        assert a.pending_inputs == () or list(a.pending_inputs) == []
    finally:
        runner.join(30)
    [b_call] = b.tool_calls
    assert b_call.status == "error" and b_call.result is not None
    assert "cannot be attributed" in b_call.result.content
    [a_call] = a.tool_calls
    assert a_call.status == "ok" and a_call.result is not None
    assert a_call.result.content == "waited 3 s"
    assert asked_a == [] and a.record.inputs == ()
    assert not any("private notes" in text for text in seen_by_a)
    assert b.record.inputs == ()  # nobody was asked on B's behalf either


def test_a_request_during_a_call_made_in_code_is_not_given_to_a_chat(legacy: MCPServer) -> None:
    """``server.call()`` in code has nobody to ask; a chat's call running meanwhile must not
    answer its request either (the request is refused as unattributable)."""
    done: dict[str, Any] = {}
    code = threading.Thread(
        target=lambda: done.setdefault("r", legacy.call("wait", {"seconds": 3}))
    )
    code.start()
    try:
        time.sleep(1.0)  # the call is sent (the server is connected)
        b = Chat(
            provider=ScriptedProvider(
                [call_tools(("s_summarize", {"text": "chat text"})), reply("b done")]
            ),
            display=False,
        ).with_tools(legacy)
        b.ask("summarize")
    finally:
        code.join(30)
    [b_call] = b.tool_calls
    assert b_call.status == "error" and b_call.result is not None
    assert "cannot be attributed" in b_call.result.content
    assert done["r"] == "waited 3 s"


def test_a_request_of_the_only_chat_in_flight_still_parks_on_it(legacy: MCPServer) -> None:
    chat = Chat(
        provider=ScriptedProvider(
            [call_tools(("s_summarize", {"text": "mine"})), reply("a summary"), reply("done")]
        ),
        display=False,
    ).with_tools(legacy)
    answering(chat, lambda chat, p: chat.answer(p))
    chat.ask("summarize")
    [call] = chat.tool_calls
    assert call.result is not None and call.result.content == "summary: a summary"


# -- 4. the server's secrets out of the text it sends besides results -----------------------


@pytest.fixture(scope="module", params=["2026-07-28", "legacy"])
def leaky(request: pytest.FixtureRequest) -> Iterator[MCPServer]:
    s = secrets_server(*(("--legacy",) if request.param == "legacy" else ()))
    yield s
    s.close()


def test_tool_descriptions_and_schemas_never_show_the_servers_secret(leaky: MCPServer) -> None:
    tools = {t.name: t for t in leaky.list_tools()}
    lookup = tools["s_lookup"]
    assert TOKEN not in lookup.description and "***" in lookup.description
    assert TOKEN not in json.dumps(lookup.parameters)
    provider = ScriptedProvider([reply("ok")])
    Chat(provider=provider, display=False).with_tools(leaky).ask("hi")
    sent = repr(provider.requests)
    assert "s_lookup" in sent and TOKEN not in sent  # the definitions the model was given


def test_prompts_never_show_the_servers_secret(leaky: MCPServer, tmp_path: Path) -> None:
    prompt = leaky.prompt("leaky", topic="rivers")
    assert "rivers" in prompt and TOKEN not in prompt
    assert TOKEN not in repr([m.content for m in prompt.messages])
    provider = ScriptedProvider([reply("ok")])
    chat = Chat(provider=provider, store=tmp_path / "c.db", display=False)
    chat.ask(prompt)
    chat.close()
    assert TOKEN not in repr(provider.requests)
    assert TOKEN not in stored(tmp_path / "c.db")


def test_elicitation_and_sampling_requests_never_show_the_servers_secret(
    leaky: MCPServer, tmp_path: Path
) -> None:
    sent: list[str] = []

    def model(request: ModelRequest) -> Any:
        sent.append(f"{request.system}|{request.messages!r}")
        texts = [getattr(m, "content", "") or "" for m in request.messages]
        if texts and texts[-1].startswith("Summarize:"):
            return reply("a summary")
        if not any(getattr(m, "role", "") == "tool" for m in request.messages):
            return call_tools(("s_ask_name", {}), ("s_sample_token", {}))
        return reply("done")

    chat = Chat(provider=ScriptedProvider([model], repeat_last=True), store=tmp_path / "c.db")
    # one call at a time: with both in flight, a request can be given to the chat's other
    # call and cancelled when that one ends first (under load, on both protocols: the
    # closing note's "left alone"); what this checks is the secrets in what is shown
    chat.with_tools(leaky)
    chat.display = False
    shown: list[str] = []

    def person(chat: Chat, pending: PendingInput) -> None:
        shown.append(repr(pending) + pending.message + json.dumps(pending.content))
        shown.append(json.dumps(pending.schema))
        if pending.kind == "sampling":
            chat.answer(pending)
        else:
            chat.answer(pending, {"name": "Ada"})

    answering(chat, person)
    chat.ask("go")
    deadline = time.monotonic() + 60
    while chat.status != "complete":  # with a store, a 2026-07-28 call parks on its inputs
        assert time.monotonic() < deadline, chat.status
        if chat.pending_inputs:  # the person (another thread) has not answered yet
            time.sleep(0.05)
        else:
            chat.complete()
    results = {c.name: c.result.content for c in chat.tool_calls if c.result is not None}
    assert results == {"s_ask_name": "asked: accept", "s_sample_token": "sampled: a summary"}
    assert len(shown) >= 4 and any("***" in s for s in shown)
    assert not [s for s in shown if TOKEN in s]
    assert any("Summarize: my token is ***" in s and "You serve token ***." in s for s in sent)
    assert not [s for s in sent if TOKEN in s]  # the sampling request the provider ran
    chat.close()
    assert TOKEN not in stored(tmp_path / "c.db")


# -- 8. escaped forms of a secret ------------------------------------------------------------


@pytest.mark.parametrize("token", ['ab"cd\\efgh123', "pässwort-geheim1"])
def test_a_secret_said_back_as_json_is_scrubbed_in_its_escaped_form(token: str) -> None:
    escaped = {json.dumps(token)[1:-1], json.dumps(token, ensure_ascii=False)[1:-1]}
    with secrets_server(token=token) as server:
        provider = ScriptedProvider([call_tools(("s_echo_token", {})), reply("done")])
        chat = Chat(provider=provider, display=False).with_tools(server)
        chat.ask("go")
        [call] = chat.tool_calls
        assert call.result is not None and '"token": "***"' in call.result.content
        sent = "".join(m.content for m in chat.record.messages if m.role == "tool")
        assert not [form for form in (token, *escaped) if form in sent]
        direct = server.call("echo_token")
        assert not [form for form in (token, *escaped) if form in str(direct)]


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=6, max_size=24).filter(lambda s: "*" not in s and s.strip() == s))
def test_every_json_form_of_a_secret_is_replaced(secret: str) -> None:
    from nbagent.mcp._secrets import _replaced, server_secrets

    assume(secret not in '{"token": ""}')
    secrets = server_secrets(env={"K": secret})
    for ascii_only in (True, False):
        text = json.dumps({"token": secret}, ensure_ascii=ascii_only)
        out = _replaced(text, secrets)
        assert secret not in out and json.dumps(secret, ensure_ascii=ascii_only)[1:-1] not in out


def test_url_credentials_sent_as_basic_auth_and_said_back_are_scrubbed() -> None:
    user, password = "alice", "urlPASSword55"
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    with http_server(SECRETS_SERVER) as (url, _):
        authed = url.replace("http://", f"http://{user}:{password}@")
        with MCPServer.http(authed, prefix="h") as server:
            provider = ScriptedProvider([call_tools(("h_echo_auth", {})), reply("done")])
            chat = Chat(provider=provider, display=False).with_tools(server)
            chat.ask("go")
            [call] = chat.tool_calls
            assert call.result is not None and call.result.content == "you sent Basic ***"
            assert basic not in repr(provider.requests)
            assert basic not in str(server.call("echo_auth"))


# -- 7. the SDK's own log records ------------------------------------------------------------


def test_the_sdks_debug_log_never_shows_url_credentials_headers_or_query_tokens(
    caplog: pytest.LogCaptureFixture,
) -> None:
    password, query, header = "urlPASSword55", "qTOKENabc12345", "hdrTOKENvalue987654"
    caplog.set_level(logging.DEBUG)
    with http_server(SECRETS_SERVER) as (url, _):
        authed = url.replace("http://", f"http://alice:{password}@") + f"?api_key={query}"
        with MCPServer.http(authed, headers={"X-Api-Token": header}, prefix="h") as server:
            assert server.call("lookup", {"query": "x"}) == "found x"
    logged = caplog.text + "".join(
        (r.exc_text or "") + str(r.args) for r in caplog.records if r.name.startswith("mcp")
    )
    assert any(r.name.startswith("mcp.") for r in caplog.records)  # the SDK did log
    assert "127.0.0.1" in caplog.text  # ...its requests (their URL) too
    for secret in (password, query, header):
        assert secret not in logged, secret


# -- 3 and 9. labels and reprs ---------------------------------------------------------------

_SECRET_VALUE = st.text(
    alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789._-"),
    min_size=8,
    max_size=40,
).filter(lambda v: not v.startswith("-") and any(c.isalnum() for c in v))


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["--password", "--token", "--api-key", "--secret", "--auth"]),
    _SECRET_VALUE,
    st.booleans(),
)
def test_a_secret_argument_is_never_the_label_nor_in_the_repr(
    option: str, value: str, joined: bool
) -> None:
    fixed = f"python server.py {option}"
    assume(value not in fixed and value not in "stdio not connected")
    args = ["server.py", f"{option}={value}"] if joined else ["server.py", option, value]
    server = MCPServer.stdio("python", args)
    assert server.label == "server"
    assert value not in repr(server)
    assert value in server._secrets or len(value) < 6


@settings(max_examples=100, deadline=None)
@given(_SECRET_VALUE.filter(lambda v: len(v) >= 12))
def test_a_url_argument_shows_no_query_value_nor_credentials(value: str) -> None:
    assume(value not in "npx -y mcp-remote https://mcp.example.com/mcp?token=*** stdio")
    remote = MCPServer.stdio(
        ["npx", "-y", "mcp-remote", f"https://mcp.example.com/mcp?token={value}"]
    )
    assert value not in repr(remote) and "token=***" in repr(remote)
    assert value in remote._secrets
    dsn = MCPServer.stdio("uvx", ["server-pg", f"postgresql://app:{value}@db.internal/prod"])
    assert value not in repr(dsn) and "db.internal" in repr(dsn)
    assert value in dsn._secrets and dsn.label == "uvx"


def test_a_shell_command_or_a_token_never_becomes_the_label() -> None:
    cases = {
        ("sh", "-c", "API_KEY=sk-proj-abcdefghijklmnop1234 exec python server.py"): "sh",
        ("python", "server.py", "--token", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.SflKxwRJ"): (
            "server"
        ),
        ("node", "build/index.js"): "index",
        ("java", "-jar", "server.jar"): "server",
        ("npx", "-y", "@modelcontextprotocol/server-everything"): "npx",
    }
    for (command, *args), label in cases.items():
        server = MCPServer.stdio(command, args)
        assert server.label == label, (args, server.label)
    shell = MCPServer.stdio("sh", ["-c", "API_KEY=sk-proj-abcdefghijklmnop1234 exec python x.py"])
    assert "sk-proj" not in repr(shell) and "abcdefghijklmnop1234" not in repr(shell)
    assert "sk-proj-abcdefghijklmnop1234" in shell._secrets


def test_a_server_that_fails_to_start_names_itself_without_its_secret() -> None:
    server = MCPServer.stdio(
        sys.executable,
        ["-c", "import sys; sys.exit(3)", "--password", "correct.horse.battery"],
        connect_timeout=20,
    )
    with pytest.raises(nbagent.MCPServerError) as info:
        server.connect()
    assert "correct.horse" not in str(info.value) and "correct.horse" not in repr(server)
    assert "correct" not in server.label


@pytest.mark.parametrize(
    "url",
    [
        "https://mcp.zapier.com/api/mcp/s/ZjA4NzVhYmQtMjE3Ny00YjYxLWI2ZTItMzYx/mcp",
        "https://hooks.example.com/mcp/3f9a2c1e7b8d4f60a1b2c3d4e5f60718/mcp",
    ],
)
def test_an_http_url_with_a_key_in_its_path_shows_no_key(url: str) -> None:
    key = url.split("/")[-2]
    server = MCPServer.http(url)
    assert key not in repr(server) and "/***/mcp" in repr(server)
    assert key in server._secrets


# -- 6. a server shared by chats -------------------------------------------------------------


def test_closing_one_chat_does_not_cut_off_another_chats_call() -> None:
    with secrets_server() as server:
        a = Chat(
            provider=ScriptedProvider([call_tools(("s_lookup", {"query": "q"})), reply("a")]),
            display=False,
        ).with_tools(server)
        a.ask("look")
        b = Chat(
            provider=ScriptedProvider([call_tools(("s_wait", {"seconds": 2})), reply("b done")]),
            display=False,
        ).with_tools(server)
        runner = threading.Thread(target=lambda: b.ask("wait"))
        runner.start()
        try:
            wait_until(lambda: in_flight(server) == 1)
            started = time.monotonic()
            with a:  # an unrelated, finished chat's block ends
                pass
            assert time.monotonic() - started < 1.5  # close does not wait for B's call
        finally:
            runner.join(30)
        [call] = b.tool_calls
        assert call.status == "ok" and call.result is not None
        assert call.result.content == "waited 2 s"


def test_a_close_during_a_call_stops_the_server_once_the_call_ends() -> None:
    with secrets_server() as server:
        server.connect()
        out: dict[str, Any] = {}
        runner = threading.Thread(
            target=lambda: out.setdefault("r", server.call("wait", {"seconds": 3}))
        )
        runner.start()
        time.sleep(1.0)  # the call is sent (the server is connected)
        server.close()
        assert server.connected  # the call is still in flight
        runner.join(30)
        assert out["r"] == "waited 3 s"
        wait_until(lambda: not server.connected, 15)


# -- 10. rules naming no tool ----------------------------------------------------------------


def test_an_approval_rule_or_a_selection_naming_no_tool_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with secrets_server(approval={"lookupp": "always", "*": "annotations"}) as server:
        tools = {t.name: t for t in server.list_tools()}
        assert not tools["s_lookup"].requires_approval
        said = capsys.readouterr().err
        assert "approval={'lookupp': ...} names no tool" in said and "lookup" in said
        chat = Chat(provider=ScriptedProvider([reply("x")]), display=False)
        chat.with_tools(server.tools(exclude=["lokup", "wait"]))
        names = [t.name for t in chat.tools]
        assert "s_lookup" in names and "s_wait" not in names
        said = capsys.readouterr().err
        assert "tools(exclude=['lokup']) matches no tool" in said and "'wait'" not in said
        chat.with_tools(server.tools(include=["s_lookup"]))  # a prefixed name matches
        assert "matches no tool" not in capsys.readouterr().err


@settings(max_examples=200, deadline=None)
@given(
    _SECRET_VALUE.filter(lambda v: len(v) >= 6 and v[0].isalnum() and v[-1].isalnum()),
    st.sampled_from(
        [
            ["--token", "{v}"],
            ["--api-key={v}"],
            ["API_KEY={v}", "python", "x.py"],
            ["https://h.example/mcp?token={v}"],
            ["--url=https://h.example/mcp?sig={v}"],
            ["postgresql://app:{v}@db/prod"],
            ["-c", "API_KEY={v} exec python x.py"],
            ["-c", "exec python x.py --password {v}"],
        ]
    ),
)
def test_a_secret_in_any_usual_place_of_a_command_line_is_masked_and_scrubbed(
    value: str, template: list[str]
) -> None:
    from nbagent.mcp._secrets import masked_argv

    argv = [a.replace("{v}", value) for a in template]
    plain = " ".join(template).replace("{v}", "")
    assume(value not in plain)
    # text every such server shows whatever its secret ("(not connected)", "MCPServer"):
    # a value that is part of it says nothing about masking
    fixed = MCPServer.stdio("tool", [a.replace("{v}", "\x00") for a in template])
    assume(value not in repr(fixed) and value not in fixed.label)
    shown, secrets = masked_argv(argv)
    assert value not in " ".join(shown)
    assert any(value in s for s in secrets)
    server = MCPServer.stdio("tool", argv)
    assert value not in repr(server) and value not in server.label


def test_a_server_two_chats_use_stays_up_until_the_last_of_them_closes() -> None:
    """Closing one chat stopped the server the other (idle, open) chat used: its next step
    started a fresh server, the session's state lost."""
    with secrets_server() as server:
        chats = [
            Chat(
                provider=ScriptedProvider([call_tools(("s_lookup", {"query": "q"})), reply("ok")]),
                display=False,
            ).with_tools(server)
            for _ in range(2)
        ]
        chats[0].ask("look")
        fork = chats[0].fork()  # a fork uses its parent's server too
        assert server.connected
        chats[0].close()
        fork.close()
        assert server.connected  # the other chat still uses it
        chats[1].close()
        assert not server.connected  # the last user closed: the process stops
