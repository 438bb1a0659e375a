"""nbagent's background loop at interpreter exit: its tasks are cancelled and settled.

The loop runs on a daemon thread and was never shut down: a task still pending there at
exit (the keeper that closes a chat's shared async client when its loop ends, made when the
inbox continued a script's batch there) was collected with asyncio's "Task was destroyed but
it is pending!" on stderr after the script's last line, and its client never closed. At
exit its tasks are now cancelled and awaited, as ``asyncio.run`` does with its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

TESTS = os.path.dirname(os.path.abspath(__file__))

INBOX = textwrap.dedent(
    """
    import os, sys, tempfile
    sys.path.insert(0, os.path.join(sys.argv[1], "batch"))
    import nbagent
    from nbagent import Chat, tool
    from nbagent.providers import OpenAIProvider
    from nbagent.testing import FakeLLMServer, FakeToolCall, Turn
    from _batch_setup import first_user_text, tool_messages

    @tool(requires_approval=True)
    def refund(item: str) -> str:
        '''Refund an item.

        Args:
            item: The item.
        '''
        return f"refunded {item}"

    def handler(request):
        prompt = first_user_text(request)
        if tool_messages(request) == 0:
            return Turn(tool_calls=[FakeToolCall("refund", {"item": prompt.split()[-1]})])
        return Turn(text=f"finished {prompt}")

    with FakeLLMServer(handler=handler) as server:
        def make_chat():
            url = server.openai_base_url
            provider = OpenAIProvider("gpt-4.1-mini", base_url=url, api_key="sk-x")
            return Chat(provider=provider).with_tools(refund)

        store = os.path.join(tempfile.mkdtemp(), "b.db")
        res = nbagent.batch([{"key": "r0"}], make_chat, prompt="Work on {key}", key="key",
                            store=store, progress=False, wait_for_decisions=False)
        inbox = nbagent.inbox(res)
        inbox.approve("all")
        inbox.wait()  # the chat is continued on nbagent's background loop
        print(nbagent.batch_results(res).status.tolist())
    print("end of script")
    """
)

PENDING = textwrap.dedent(
    """
    import asyncio
    from nbagent import _aio

    started = __import__("threading").Event()

    async def holds():  # a task that ends only when its loop shuts down, like a client keeper
        try:
            started.set()
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)  # its cleanup may await (a client's close does)
            print("settled", flush=True)

    _aio.spawn(holds())
    started.wait()
    print("end of script", flush=True)
    """
)


def run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, TESTS],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_no_task_destroyed_at_exit_after_the_inbox_continued_a_batch() -> None:
    proc = run(INBOX)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["['done']", "end of script"], proc.stdout
    assert "Task was destroyed" not in proc.stderr, proc.stderr


def test_a_pending_background_task_is_cancelled_and_settled_at_exit() -> None:
    proc = run(PENDING)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["end of script", "settled"], proc.stdout
    assert "Task was destroyed" not in proc.stderr, proc.stderr


# An approved call the background loop was about to run as the interpreter exited: the
# thread pools take no more work by then ("cannot schedule new futures after interpreter
# shutdown"). Refused once it was marked running, the call was answered as an error though it
# never ran: the model was told it failed, and a resumed chat never ran what the person
# approved. It is now refused before it starts: still approved, run once by the next process.

EXITING = textwrap.dedent(
    """
    import concurrent.futures.thread as pools
    import sys, threading, time
    from nbagent import Chat, _aio, tool
    from nbagent.testing import ScriptedProvider, call_tools, reply

    store, ran = sys.argv[2], sys.argv[3]
    running = threading.Event()

    @tool(requires_approval=True)
    def refund(item: str) -> str:
        '''Refund an item.

        Args:
            item: The item.
        '''
        with open(ran, "a") as f:
            f.write(item + "\\n")
        running.set()
        # Held until the interpreter's exit has shut the thread pools (it then waits for
        # this thread): nothing is set then to wait on, so the pools' flag is polled.
        deadline = time.monotonic() + 30
        while not pools._shutdown and time.monotonic() < deadline:
            time.sleep(0.01)
        return f"refunded {item}"

    script = [call_tools(("refund", {"item": "a"}, "c1"), ("refund", {"item": "b"}, "c2"))]
    chat = Chat(provider=ScriptedProvider([*script, reply("done")]), store=store,
                display=False)
    chat.with_tools(refund).with_tool_options(concurrency="sequential")
    chat.ask("refund a and b")
    chat.approve("c1")
    chat.approve("c2")
    _aio.spawn(chat.complete_async())  # continued on the background loop, as the inbox does
    assert running.wait(30)
    print(chat.id, flush=True)  # the script ends while c1 runs: c2 is not started yet
    """
)


def test_an_approved_call_not_started_at_exit_stays_approved_and_runs_once_later(
    tmp_path: Any,
) -> None:
    from nbagent import Chat, tool
    from nbagent.testing import ScriptedProvider, reply

    store, ran = str(tmp_path / "chats.db"), tmp_path / "ran.txt"
    proc = subprocess.run(
        [sys.executable, "-c", EXITING, TESTS, store, str(ran)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert ran.read_text().split() == ["a"]  # c2 never ran there

    again: list[str] = []

    @tool(requires_approval=True)
    def refund(item: str) -> str:
        """Refund an item.

        Args:
            item: The item.
        """
        again.append(item)
        return f"refunded {item}"

    chat = Chat.load(
        proc.stdout.split()[0],
        store=store,
        tools=[refund],
        provider=ScriptedProvider([reply("done")]),
        display=False,
    )
    c1, c2 = chat.tool_calls
    assert c2.status == "approved"  # not an error: it never ran
    # c1 ran there; its result's write races the chat's store being closed at exit (the
    # chat's finalizer runs before the background loop's tasks end): ok, or in doubt
    assert c1.status in ("ok", "in_doubt")
    assert chat.complete().content == "done"
    assert again == ["b"]  # run once, here; c1 is not run again
    assert c2.status == "ok" and c2.result is not None and c2.result.content == "refunded b"
