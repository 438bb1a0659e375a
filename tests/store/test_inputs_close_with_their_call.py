"""An input closes with its call in the store as in the chat's record.

A call that asks mid-call (an MCP server of the older protocol) waits in its process;
killed there (``kill -9``), the call is in doubt when ``Chat.load`` finds it and the chat's
record closes its input (``cancel``, "the call ended"). Before, the store did not: an input
nobody answered stayed ``pending`` in ``store.inputs()`` (though ``pending_inputs()`` left
it out), and an answer ``store.answer`` took after the process died stayed ``accept``, not
applied, forever, as if a chat would still apply it. Now the first reads ``cancel`` "the
call ended", the second ``closed="not applied: the call ended first"``, and ``store.answer``
refuses both with an error that says the call ended.

The child is a real process driving a stored chat; the parent kills it with SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from nbagent import Chat, InputError, MCPServer, ModelRequest
from nbagent.store import StoredInput, open_store
from nbagent.testing import ScriptedProvider, call_tools, reply

if TYPE_CHECKING:
    from conftest import Backend  # tests/store's

ROOT = Path(__file__).resolve().parents[2]
SERVER = str(ROOT / "tests" / "mcp_client" / "inputs_server.py")


def _model() -> ScriptedProvider:
    def answer(request: ModelRequest) -> Any:
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if not results:
            return call_tools(("inp_book_table", {"day": "Friday"}, "c1"))
        return reply(" | ".join(f"{m.status}:{m.content}" for m in results))

    return ScriptedProvider([answer], repeat_last=True)


def _server() -> MCPServer:
    return MCPServer.stdio(sys.executable, [SERVER, "--legacy"], prefix="inp", timeout=60)


def _child(url: str) -> None:
    """Drive a stored chat until its call waits for the server's question (forever)."""
    chat = Chat(provider=_model(), display=False, store=url).with_tools(_server())
    print(chat.id, flush=True)
    chat.ask("book a table")


def _waiting_then_killed(url: str) -> tuple[str, StoredInput]:
    """A child parked mid-call on the server's question, then killed; the chat and input."""
    child = subprocess.Popen(
        [sys.executable, __file__, url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(ROOT),
    )
    try:
        assert child.stdout is not None
        chat_id = child.stdout.readline().strip()
        assert chat_id, child.stderr.read() if child.stderr else ""
        store = open_store(url)
        try:
            deadline = time.monotonic() + 60
            while not (waiting := store.pending_inputs(chat_id)):
                assert time.monotonic() < deadline, "the call never asked"
                assert child.poll() is None, child.stderr.read() if child.stderr else ""
                time.sleep(0.1)
        finally:
            store.close()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        for pipe in (child.stdout, child.stderr):
            if pipe is not None:
                pipe.close()
    assert child.returncode == -signal.SIGKILL
    (request,) = waiting
    return chat_id, request


def _load(url: str, chat_id: str) -> list[tuple[str, str | None]]:
    """``Chat.load`` in this process: the call is in doubt; the record's inputs."""
    server = _server()
    try:
        chat = Chat.load(chat_id, store=url, tools=[server], provider=_model(), display=False)
        try:
            assert chat.get_call("c1").status == "in_doubt"
            assert chat.pending_inputs == []
            return [(r.status, r.reason) for r in chat.record.inputs]
        finally:
            chat.close()
    finally:
        server.close()


@pytest.mark.timeout(180)
def test_an_answer_taken_after_the_driver_died_reads_not_applied(backend: Backend) -> None:
    chat_id, request = _waiting_then_killed(backend.url)
    store = backend.open()
    try:
        taken = store.answer(request.id, {"name": "Late", "guests": 3}, by="ops", chat_id=chat_id)
        assert (taken.status, taken.applied) == ("accept", False)  # taken: nobody applied it

        assert _load(backend.url, chat_id) == [("cancel", "the call ended")]

        (now,) = store.inputs(chat_id)
        assert (now.status, now.answered_by, now.data) == ("accept", "ops", taken.data)
        assert now.applied is False
        assert getattr(now, "closed", None) == "not applied: the call ended first"
        assert "not applied: the call ended first" in repr(now)
        assert store.pending_inputs(chat_id) == []
        with pytest.raises(InputError, match="its call ended before any chat applied it"):
            store.answer(request.id, {"name": "Again", "guests": 1}, by="ops", chat_id=chat_id)
    finally:
        store.close()


@pytest.mark.timeout(180)
def test_an_input_nobody_answered_closes_with_its_call_and_takes_no_answer(
    backend: Backend,
) -> None:
    chat_id, request = _waiting_then_killed(backend.url)
    assert _load(backend.url, chat_id) == [("cancel", "the call ended")]
    store = backend.open()
    try:
        (now,) = store.inputs(chat_id)
        assert (now.status, now.reason) == ("cancel", "the call ended")  # as its record has it
        assert now.closed == "the call ended"
        assert now.answered_at is not None and now.data is None
        assert store.pending_inputs(chat_id) == []  # the two lists agree
        assert [si for si in store.inputs() if si.status == "pending"] == []
        with pytest.raises(InputError, match=r"its call 'c1' ended \(in_doubt\) before an answer"):
            store.answer(request.id, {"name": "Late", "guests": 3}, by="ops", chat_id=chat_id)
        with pytest.raises(InputError, match="waits for nothing now"):
            store.decline(request.id, by="ops", chat_id=chat_id)
        (still,) = store.inputs(chat_id)
        assert still == now  # nothing was written
    finally:
        store.close()


if __name__ == "__main__":
    _child(sys.argv[1])
