"""2026-07-28 input requests parked with the call, durable like an approval (issue 26.2).

With a store, a server's ``InputRequiredResult`` ends the call's run: the call parks on
its inputs (stored with the server's ``request_state`` and each input's key), answerable
in the cell, from another process (``store.answer``) or after a kernel restart
(``Chat.load``); once every input is answered the call is claimed and retried once with
``input_responses`` + ``request_state``. The test server (``durable_server.py``) seals its
state with a fixed key, so a server process started after the restart accepts it, and
counts the calls that really ran. Both stores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, InputError, MCPServer, ModelRequest
from nbagent.store import open_store
from nbagent.testing import ScriptedProvider, call_tools, reply

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SERVER = str(HERE / "durable_server.py")


def durable_server(counter: Path, sleep: float = 0.0) -> MCPServer:
    return MCPServer.stdio(
        sys.executable,
        [SERVER],
        prefix="dur",
        timeout=60,
        approval="never",
        roots=[str(HERE)],
        env={"NBAGENT_TEST_COUNTER": str(counter), "NBAGENT_TEST_SLEEP": str(sleep)},
    )


def scripted(name: str, arguments: dict[str, Any]) -> ScriptedProvider:
    """Asks for one call, then replies quoting the result it read."""

    def answer(request: ModelRequest) -> Any:
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if not results:
            return call_tools((name, arguments, "c1"))
        return reply(" | ".join(f"{m.status}:{m.content}" for m in results))

    return ScriptedProvider([answer], repeat_last=True)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "agent.db")
    server = request.getfixturevalue("postgres_server")
    return str(server.new_database())


def runs(counter: Path) -> list[str]:
    return counter.read_text().splitlines() if counter.exists() else []


_PARK = """
import json, os, sys, time
sys.path.insert(0, {here!r})
from test_mcp_durable_inputs import durable_server, scripted
from pathlib import Path
from nbagent import Chat
chat = Chat(provider=scripted("dur_book_table", {{"day": "Friday"}}), display=False,
            store=sys.argv[1]).with_tools(durable_server(Path(sys.argv[2])))
chat.ask("book a table")
print(json.dumps({{"chat": chat.id, "status": chat.status,
                  "inputs": [p.id for p in chat.pending_inputs]}}), flush=True)
time.sleep(600)  # killed here: a kernel restart while the input waits
"""


def test_a_kernel_restart_between_the_request_and_the_answer_runs_the_call_once(
    url: str, tmp_path: Path
) -> None:
    counter = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", _PARK.format(here=str(HERE)), url, str(counter)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its MCP server process dies with it (the kernel's group)
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line, child.stderr.read() if child.stderr else ""
        parked = json.loads(line)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()  # reads what is left, closes the pipes
    assert parked["status"] == "awaiting_approval" and len(parked["inputs"]) == 1
    assert runs(counter) == []  # the server has not run the tool: it asked first

    with open_store(url) as store:  # another process: nobody has the chat open
        (waiting,) = store.pending_inputs()
        assert (waiting.id, waiting.kind, waiting.call_id) == (
            parked["inputs"][0],
            "elicitation",
            "c1",
        )
        assert waiting.resume is not None and waiting.resume["request_state"]
        assert set(waiting.schema["required"]) == {"name", "guests"}  # type: ignore[index]
        with pytest.raises(InputError, match="does not match"):
            store.answer(waiting.id, {"name": "Ada"})  # checked first: nothing written
        store.answer(waiting.id, {"name": "Ada", "guests": 2}, by="host")
        assert store.call("c1").status == "requested"  # the parked run let its claim go

    provider = scripted("dur_book_table", {"day": "Friday"})
    server = durable_server(counter)
    with Chat.load(parked["chat"], store=url, tools=[server], provider=provider) as chat:
        assert chat.pending_inputs == []  # the answer given while nobody had it open
        final = chat.complete()
        assert final is not None
        assert final.content.startswith("ok:booked Friday for Ada, 2 guests (roots: mcp_client)")
        assert chat.get_call("c1").status == "ok"
        (record,) = chat.record.inputs
        assert (record.status, record.answered_by, record.elsewhere) == ("accept", "host", True)
    server.close()
    assert len(runs(counter)) == 1  # the call ran exactly once, in the new server process
    with Chat.load(parked["chat"], store=url, provider=provider) as again:
        assert again.status == "complete" and again.get_call("c1").status == "ok"
    assert len(runs(counter)) == 1


def test_in_the_cell_the_call_parks_then_runs_once_with_the_answer(
    url: str, tmp_path: Path
) -> None:
    counter = tmp_path / "runs"
    server = durable_server(counter)
    provider = scripted("dur_book_table", {"day": "Monday"})
    with Chat(provider=provider, display=False, store=url).with_tools(server) as chat:
        chat.ask("book a table")
        assert chat.status == "awaiting_approval" and chat.awaiting_input
        (request,) = chat.pending_inputs
        assert chat.get_call("c1").status == "awaiting_input"
        assert runs(counter) == []
        chat.answer(request, {"name": "Bo", "guests": 4})
        assert chat.get_call("c1").status == "requested"  # runnable: retried at the next step
        final = chat.complete()
        assert final is not None and final.content.startswith("ok:booked Monday for Bo, 4 guests")
        assert len(runs(counter)) == 1
    server.close()


KEY = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"  # a key a form asks for


def test_a_form_answered_in_the_chats_process_reaches_the_server_as_typed(
    url: str, tmp_path: Path
) -> None:
    """docs/mcp.md: a form that must carry a secret is filled with ``chat.answer`` in the
    chat's process. The record and the store keep the answer with the key as ``***``, and
    the retry was built from that record: the server received ``sk-ant-***``. The value as
    typed is kept in this process until the retry has sent it."""
    counter = tmp_path / "runs"
    server = durable_server(counter)
    provider = scripted("dur_book_table", {"day": "Monday"})
    with Chat(provider=provider, display=False, store=url).with_tools(server) as chat:
        chat.ask("book a table")
        (request,) = chat.pending_inputs
        chat.answer(request, {"name": KEY, "guests": 2})
        (answered,) = chat.record.inputs
        assert answered.data == {"name": "sk-ant-***", "guests": 2}  # recorded scrubbed
        final = chat.complete()
        assert final is not None and final.content.startswith("ok:booked Monday for sk-ant-***")
        assert [line.split(" ", 1)[1] for line in runs(counter)] == [f"book_table Monday for {KEY}"]
        assert KEY not in repr(vars(chat))  # not kept once the retry has sent it
        chat_id = chat.id
    server.close()
    with open_store(url) as store:
        assert KEY not in json.dumps([i.data for i in store.inputs(chat_id)])


def test_a_form_answered_through_the_store_reaches_the_server_as_stored(
    url: str, tmp_path: Path
) -> None:
    """An answer given through the store (another process, the inbox) is only what the store
    keeps: its key reaches the server as ``***``, as docs/mcp.md says."""
    counter = tmp_path / "runs"
    server = durable_server(counter)
    provider = scripted("dur_book_table", {"day": "Monday"})
    with Chat(provider=provider, display=False, store=url).with_tools(server) as chat:
        chat.ask("book a table")
        (request,) = chat.pending_inputs
        with open_store(url) as store:
            store.answer(request.id, {"name": KEY, "guests": 2}, by="host")
        chat.complete()
        assert [line.split(" ", 1)[1] for line in runs(counter)] == [
            "book_table Monday for sk-ant-***"
        ]
    server.close()


def test_a_declined_form_is_told_to_the_server_and_a_sampling_request_runs_once(
    url: str, tmp_path: Path
) -> None:
    counter = tmp_path / "runs"
    server = durable_server(counter)
    provider = scripted("dur_book_table", {"day": "Sunday"})
    with Chat(provider=provider, display=False, store=url).with_tools(server) as chat:
        chat.ask("book a table")
        chat.decline(chat.pending_inputs[0], "no")
        final = chat.complete()
        assert final is not None and final.content == "ok:not booked (decline)"
    assert runs(counter) == []

    def answer(request: ModelRequest) -> Any:  # the chat's model, and the sampling request's
        if request.messages and "Title:" in str(request.messages[-1].content):
            return reply("A Fine Title")
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if not results:
            return call_tools(("dur_title", {"text": "a long story"}, "c1"))
        return reply(" | ".join(f"{m.status}:{m.content}" for m in results))

    sampler = ScriptedProvider([answer], repeat_last=True)
    with Chat(provider=sampler, display=False, store=url).with_tools(server) as chat:
        chat.ask("title it")
        (request,) = chat.pending_inputs
        assert request.kind == "sampling"
        with open_store(url) as store:  # approved from another process
            store.answer(request.id, by="editor")
        chat.refresh()
        final = chat.complete()
        assert final is not None and "title by" in final.content and "A Fine Title" in final.content
        assert len(chat.record.inputs) == 1 and chat.record.inputs[0].usage is not None
    server.close()
    assert runs(counter) == [runs(counter)[0]] and runs(counter)[0].endswith("title")


_COMPLETE = """
import json, sys, time, warnings
sys.path.insert(0, {here!r})
from pathlib import Path
from test_mcp_durable_inputs import durable_server, scripted
from nbagent import Chat
url, chat_id, counter, go = sys.argv[1:5]
server = durable_server(Path(counter))
chat = Chat.load(chat_id, store=url, tools=[server],
                 provider=scripted("dur_book_table", {{"day": "Friday"}}))
chat.tools  # the server is connected before the start
while not Path(go).exists():
    time.sleep(0.01)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the loser's StoreConflictWarning
    chat.complete()
print(json.dumps({{"call": chat.get_call("c1").status}}), flush=True)
chat.close()
server.close()
"""


def test_two_processes_resuming_the_answered_call_at_once_send_it_once(
    url: str, tmp_path: Path
) -> None:
    counter = tmp_path / "runs"
    server = durable_server(counter)
    provider = scripted("dur_book_table", {"day": "Friday"})
    with Chat(provider=provider, display=False, store=url).with_tools(server) as chat:
        chat.ask("book a table")
        chat_id, (request,) = chat.id, chat.pending_inputs
    server.close()
    with open_store(url) as store:
        store.answer(request.id, {"name": "Cy", "guests": 1}, by="host")
    for attempt in range(2):  # a repeated race: the call is retried by exactly one of them
        go = tmp_path / f"go{attempt}"
        paths = [str(counter), str(go)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _COMPLETE.format(here=str(HERE)), url, chat_id, *paths],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for _ in range(2)
        ]
        time.sleep(3.0)  # both loaded and connected (the race is the same without)
        go.touch()
        outs = [p.communicate(timeout=300) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [o[1][-3000:] for o in outs]
        assert len(runs(counter)) == 1  # sent once, whoever won, whatever the attempt
    with Chat.load(chat_id, store=url, provider=provider) as done:
        assert done.get_call("c1").status == "ok" and done.status == "complete"


_RETRY = """
import sys
sys.path.insert(0, {here!r})
from pathlib import Path
from test_mcp_durable_inputs import durable_server, scripted
from nbagent import Chat
url, chat_id, counter = sys.argv[1:4]
chat = Chat.load(chat_id, store=url, tools=[durable_server(Path(counter), sleep=600)],
                 provider=scripted("dur_book_table", {{"day": "Friday"}}))
chat.complete()  # killed while the retry is in flight
"""


def test_a_process_dying_during_the_retry_leaves_the_call_in_doubt_never_sent_twice(
    url: str, tmp_path: Path
) -> None:
    counter = tmp_path / "runs"
    server = durable_server(counter)
    provider = scripted("dur_book_table", {"day": "Friday"})
    with Chat(provider=provider, display=False, store=url).with_tools(server) as chat:
        chat.ask("book a table")
        chat_id, (request,) = chat.id, chat.pending_inputs
    server.close()
    with open_store(url) as store:
        store.answer(request.id, {"name": "Di", "guests": 5}, by="host")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", _RETRY.format(here=str(HERE)), url, chat_id, str(counter)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    try:
        for _ in range(1200):  # until the server ran the retried call (a liveness bound)
            if runs(counter) or child.poll() is not None:
                break
            time.sleep(0.1)
        assert len(runs(counter)) == 1 and child.poll() is None
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the kernel dies while the call is in flight
        child.wait()
    with open_store(url) as store:
        assert store.call("c1").status == "running"  # claimed before it was sent
    again = durable_server(counter)
    with Chat.load(chat_id, store=url, tools=[again], provider=provider) as chat:
        assert chat.get_call("c1").status == "in_doubt"  # never sent again silently
        final = chat.complete()
        assert final is not None and final.content.startswith("in_doubt:")
    again.close()
    assert len(runs(counter)) == 1
