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
