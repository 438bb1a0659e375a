"""nbagent against the reference ``everything`` server (@modelcontextprotocol/server-everything,
pinned in .ci/mcp-servers), a server nobody here wrote, over stdio and streamable HTTP.

Every tool it lists to nbagent is reached and exercised, its resources read and its prompts
asked. nbagent declares elicitation, sampling and roots, so the server also lists the tools
that ask the client for input (``trigger-elicitation-request``, ``trigger-url-elicitation``,
``trigger-sampling-request``, ``get-roots-list``): each one's request parks on the chat as a
pending input (roots are answered from ``MCPServer(roots=)``). Three tools need tasks, which
the SDK's client cannot run: ``simulate-research-query`` runs only as a task (listed, not
offered: checked here) and ``trigger-*-request-async`` ask the client to run a request as a
task (the server lists them only to a client declaring tasks).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _mcp_servers import TOKEN, answering, free_port

from nbagent import (
    Chat,
    ImagePart,
    InputError,
    MCPServer,
    ModelRequest,
    PendingInput,
    ToolCallProgress,
)
from nbagent.testing import ScriptedProvider, call_tools, reply

ENTRY = (
    Path(__file__).resolve().parents[2]
    / ".ci/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)

EXERCISED = {
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
    "read_resource",  # nbagent's: the model reads the server's resources with it
}
INPUT_REQUESTS = {  # listed only to a client with elicitation / sampling / roots
    "trigger-elicitation-request",
    "trigger-url-elicitation",
    "trigger-sampling-request",
    "get-roots-list",
}
TASKS = {"trigger-elicitation-request-async", "trigger-sampling-request-async"}  # client tasks


def _node() -> str:
    node = shutil.which("node")
    if node is None or not ENTRY.is_file():
        why = "server-everything is not installed (run .ci/ensure-mcp-servers)"
        flag = os.environ.get("NBAGENT_REQUIRE_MCP_SERVERS", "").strip().lower()
        if flag not in ("", "0", "no", "false"):
            pytest.fail(f"NBAGENT_REQUIRE_MCP_SERVERS is set but {why}", pytrace=False)
        pytest.skip(why)
    return node


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    node = _node()
    port = free_port()
    proc = subprocess.Popen(
        [node, str(ENTRY), "streamableHttp"],
        env={**os.environ, "PORT": str(port), "EVERYTHING_TOKEN": TOKEN},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120  # a hang bound: seconds, longer only under load
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError("the everything server exited") from None
                if time.monotonic() > deadline:
                    raise RuntimeError("the everything server did not listen") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture(scope="module", params=["stdio", "http"])
def everything(request: pytest.FixtureRequest) -> Iterator[MCPServer]:
    if request.param == "stdio":
        server = MCPServer.stdio(
            _node(), [str(ENTRY), "stdio"], env={"EVERYTHING_TOKEN": TOKEN}, prefix="ev"
        )
    else:
        server = MCPServer.http(
            request.getfixturevalue("http_url"), headers={"X-Token": TOKEN}, prefix="ev"
        )
    yield server
    server.close()


def run(server: MCPServer, name: str, arguments: dict[str, object], approve: bool = True) -> Chat:
    """One call of ``ev_<name>`` through a chat (approved if gated); the chat."""
    provider = ScriptedProvider([call_tools((f"ev_{name}", arguments, "c1")), reply("done")])
    chat = Chat(provider=provider, display=False).with_tools(server)
    chat.ask(f"use {name}")
    if chat.pending_approvals:
        assert approve, f"{name} was gated"
        chat.approve("c1")
        chat.complete()
    assert chat.get_call("c1").status == "ok", chat.get_call("c1").result
    return chat


def content(chat: Chat) -> str:
    result = chat.get_call("c1").result
    assert result is not None
    return result.content


def test_it_hides_nothing_but_what_needs_input_requests_or_tasks(everything: MCPServer) -> None:
    names = {t.remote_name for t in everything.list_tools()}
    assert names == EXERCISED | INPUT_REQUESTS  # nothing hidden from nbagent but tasks
    assert "simulate-research-query" not in names and not names & TASKS
    gated = {t.remote_name for t in everything.list_tools() if t.requires_approval}
    assert gated == {
        "gzip-file-as-resource",
        "toggle-simulated-logging",
        "toggle-subscriber-updates",
        "trigger-elicitation-request",  # not read-only by its annotations
        "trigger-url-elicitation",
        "trigger-sampling-request",
    }


def test_plain_tools(everything: MCPServer) -> None:
    assert content(run(everything, "echo", {"message": "hi"})) == "Echo: hi"
    assert "5" in content(run(everything, "get-sum", {"a": 2, "b": 3}))
    chat = run(everything, "get-structured-content", {"location": "New York"})
    value = chat.get_call("c1").result.value  # type: ignore[union-attr]
    assert value.structured_content["temperature"] is not None


def test_images_reach_the_model_as_images(everything: MCPServer) -> None:
    for name, args in (
        ("get-tiny-image", {}),
        ("get-annotated-message", {"messageType": "success", "includeImage": True}),
    ):
        result = run(everything, name, args).get_call("c1").result
        assert result is not None and len(result.parts) == 1
        assert isinstance(result.parts[0], ImagePart)
        assert result.parts[0].data.startswith(b"\x89PNG")


def test_get_env_never_shows_the_servers_secret(everything: MCPServer) -> None:
    chat = run(everything, "get-env", {})
    text = content(chat)
    if "EVERYTHING_TOKEN" in text:  # stdio: the env it was given (HTTP: the server's own)
        assert json.loads(text)["EVERYTHING_TOKEN"] == "***"
    everything_seen = [text, repr(chat.events), chat.log.frame().to_csv()]
    everything_seen.append(chat._repr_mimebundle_()["text/html"])
    assert not [x for x in everything_seen if TOKEN in x]


def test_resource_links_and_references_are_followed_with_the_read_tool(
    everything: MCPServer,
) -> None:
    links = content(run(everything, "get-resource-links", {"count": 2}))
    uris = [
        line.split("[resource link: ")[1].split(" ")[0]
        for line in links.splitlines()
        if line.startswith("[resource link: ")
    ]
    assert len(uris) == 2
    for uri in uris:
        read = content(run(everything, "read_resource", {"uri": uri}))
        assert read and "[resource link" not in read
    ref = content(
        run(everything, "get-resource-reference", {"resourceType": "Text", "resourceId": 1})
    )
    assert "Resource 1" in ref or "resource 1" in ref.lower()


def test_gzip_a_data_uri_as_a_resource_after_approval(everything: MCPServer) -> None:
    data = "data:text/plain;base64," + base64.b64encode(b"hello " * 50).decode()
    chat = run(
        everything,
        "gzip-file-as-resource",
        {"name": "hello.txt.gz", "data": data, "outputType": "resource"},
    )
    assert "hello.txt.gz" in content(chat)
    denied = ScriptedProvider(
        [
            call_tools(("ev_gzip-file-as-resource", {"name": "x.gz", "data": data}, "c1")),
            reply("ok"),
        ]
    )
    chat2 = Chat(provider=denied, display=False).with_tools(everything)
    chat2.ask("gzip it")
    chat2.deny("c1")
    chat2.complete()
    assert chat2.get_call("c1").status == "denied"


def test_progress_of_a_long_running_operation(everything: MCPServer) -> None:
    chat = run(everything, "trigger-long-running-operation", {"duration": 1, "steps": 4})
    progress = [e for e in chat.events if isinstance(e, ToolCallProgress)]
    assert [(e.progress, e.total) for e in progress] == [(float(i), 4.0) for i in range(1, 5)]
    assert chat.record.call("c1").progress == 4.0


def test_toggles_and_simulated_logging(
    everything: MCPServer, caplog: pytest.LogCaptureFixture
) -> None:
    assert "Started" in content(run(everything, "toggle-subscriber-updates", {}))
    assert "Stopped" in content(run(everything, "toggle-subscriber-updates", {}))
    with caplog.at_level(logging.DEBUG, logger="nbagent.mcp"):
        assert "Started" in content(run(everything, "toggle-simulated-logging", {}))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
            r.name == "nbagent.mcp" and "level message" in r.getMessage() for r in caplog.records
        ):
            time.sleep(0.2)
        assert "Stopped" in content(run(everything, "toggle-simulated-logging", {}))
    messages = [r.getMessage() for r in caplog.records if r.name == "nbagent.mcp"]
    assert any("level message" in m for m in messages)
    assert not any("Debug-level message" in m for m in messages)  # below the level asked for


def test_every_listed_resource_reads_and_every_prompt_asks(everything: MCPServer) -> None:
    resources = everything.resources()
    assert resources
    for r in resources:
        read = everything.read_resource(r.uri)
        assert read.uri == r.uri and (str(read) or read.parts)
    arguments = {
        "simple-prompt": {},
        "args-prompt": {"city": "Paris", "state": "TX"},
        "completable-prompt": {"department": "Engineering", "name": "Ada"},
        "resource-prompt": {"resourceType": "Text", "resourceId": "2"},
    }
    assert {p.name for p in everything.prompts()} == set(arguments)
    for name, args in arguments.items():
        prompt = everything.prompt(name, **args)
        assert prompt or prompt.before, name
    provider = ScriptedProvider([reply("Paris is in Texas too")])
    chat = Chat(provider=provider, display=False)
    chat.ask(everything.prompt("args-prompt", city="Paris", state="TX"))
    assert "Paris" in chat.transcript[0].content  # type: ignore[union-attr]


# ------------------------------------------------------------------ the server asks for input


def ask_once(
    server: MCPServer, name: str, arguments: dict[str, object], provider: Any = None
) -> Chat:
    """A chat whose model calls ``ev_<name>`` once (approved if gated), then answers."""
    script = [call_tools((f"ev_{name}", arguments, "c1")), reply("done")]
    chat = Chat(provider=provider or ScriptedProvider(script), display=False).with_tools(server)
    chat.ask_later(f"use {name}")
    chat.step()  # the model's request: the call is asked for (and gated or not)
    if chat.pending_approvals:
        chat.approve("c1")
    return chat


def test_its_elicitation_form_parks_on_the_chat_and_the_answer_reaches_it(
    everything: MCPServer,
) -> None:
    seen: list[PendingInput] = []

    def person(chat: Chat, pending: PendingInput) -> None:
        seen.append(pending)
        with pytest.raises(InputError):  # the schema's one required field is missing
            chat.answer(pending, {"check": True})
        assert chat.pending_inputs == [pending]  # a bad answer loses nothing
        chat.answer(pending, {"name": "Ada Lovelace", "check": True, "integer": 7}, by="ada")

    chat = ask_once(everything, "trigger-elicitation-request", {})
    answering(chat, person)
    chat.complete()
    (pending,) = seen
    assert (pending.kind, pending.call_id, pending.server) == ("elicitation", "c1", "ev")
    assert pending.schema is not None and pending.schema["required"] == ["name"]
    text = content(chat)
    assert "User provided the requested information" in text and "Ada Lovelace" in text
    (record,) = chat.record.inputs
    assert (record.status, record.answered_by) == ("accept", "ada")


def test_its_url_elicitation_parks_with_the_link_and_a_decline_is_told(
    everything: MCPServer,
) -> None:
    seen: list[PendingInput] = []

    def person(chat: Chat, pending: PendingInput) -> None:
        seen.append(pending)
        chat.decline(pending, "not now")

    url = "https://example.com/consent?step=1"
    chat = ask_once(everything, "trigger-url-elicitation", {"url": url})
    answering(chat, person)
    chat.complete()
    (pending,) = seen
    assert pending.kind == "elicitation_url" and pending.content["url"] == url
    assert "declined to open the URL" in content(chat)


def test_its_sampling_request_runs_on_the_chats_model_once_approved(
    everything: MCPServer,
) -> None:
    sampled: list[str] = []
    call = ("ev_trigger-sampling-request", {"prompt": "the tides", "maxTokens": 50}, "c1")

    def model(request: ModelRequest) -> Any:
        texts = [str(getattr(m, "content", "") or "") for m in request.messages]
        if any("context: the tides" in t for t in texts):  # the server's sampling request
            sampled.append(f"{request.system}|{request.max_tokens}")
            return reply("The moon pulls the sea.")
        if any(getattr(m, "role", "") == "tool" for m in request.messages):
            return reply("done")
        return call_tools(call)

    provider = ScriptedProvider([model], repeat_last=True)
    chat = ask_once(everything, "trigger-sampling-request", {}, provider=provider)
    answering(chat, lambda chat, p: chat.answer(p))  # approved: it runs on the chat's model
    chat.complete()
    assert sampled == ["You are a helpful test server.|50"]  # once, as the server asked
    assert "The moon pulls the sea." in content(chat)
    (record,) = chat.record.inputs
    assert (record.kind, record.status) == ("sampling", "accept")


def test_its_roots_request_is_answered_from_the_servers_roots(tmp_path: Path) -> None:
    server = MCPServer.stdio(_node(), [str(ENTRY), "stdio"], prefix="ev", roots=[tmp_path])
    try:
        chat = ask_once(server, "get-roots-list", {})
        chat.complete()
        assert tmp_path.as_uri() in content(chat)
        assert chat.record.inputs == ()  # nobody was asked
    finally:
        server.close()
