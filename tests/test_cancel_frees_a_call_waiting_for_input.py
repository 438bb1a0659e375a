"""``chat.cancel()`` (the notebook's stop button) while a tool waits on
``current_input_asker().ask(...)``'s answer: nothing freed the wait, so ``ask()`` never
returned, in every concurrency mode. Now the cancel withdraws the input (recorded
``cancel`` by nbagent, as a tool's ``timeout=`` does), the tool reads ``("cancel", None)``,
and the run stops with :class:`~nbagent.ChatCancelled`.

The cancel itself only signals: the withdrawal is recorded (and written to a store) by
whoever drives the call, when it ends, never on the cancelling thread; a store write there
stalled the canceller (a task on the driver's own event loop waiting out a PostgreSQL lock).

Each mode runs in a child process with a timeout: the old code hangs forever.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import json, sys, threading, time
    from typing import Any
    from nbagent import Chat, ChatCancelled, InputError, ModelRequest, current_input_asker, tool
    from nbagent.testing import ScriptedProvider, call_tools, reply

    seen = []
    in_window = []

    @tool
    def confirm(what: str) -> str:
        '''Confirm with a person.

        Args:
            what: What.
        '''
        iid, fut = current_input_asker().ask(
            "ask_user", f"OK to {what}?", {"question": "?"}, {"type": "string"}, None
        )
        action, data = fut.result()
        seen.append([action, data])
        try:  # freed by the cancel, not yet recorded as withdrawn: it takes no answer either
            chat.answer(iid, "yes")
            in_window.append("accepted")
        except InputError:
            in_window.append("refused")
        return f"{what}: {action}"

    def answer(request: ModelRequest) -> Any:
        if any(getattr(m, "role", "") == "tool" for m in request.messages):
            return reply("done")
        return call_tools(("confirm", {"what": "deploy"}, "c1"))

    mode = {"seq": False, "threads": "threads", "async": "async"}[sys.argv[1]]
    chat = Chat(provider=ScriptedProvider([answer], repeat_last=True), display=False)
    chat.with_tools(confirm).with_tool_options(concurrency=mode)

    def canceller() -> None:
        while not chat.pending_inputs:
            time.sleep(0.01)
        chat.cancel()

    recorded_on = []
    chat.on("input_answered", lambda e: recorded_on.append(threading.current_thread().name))
    threading.Thread(target=canceller, daemon=True, name="canceller").start()
    out = {}
    try:
        chat.ask("go")
        out["raised"] = None
    except ChatCancelled:
        out["raised"] = "ChatCancelled"
    out["seen"] = seen
    out["recorded_on"] = recorded_on
    out["in_window"] = in_window
    out["pending"] = [p.id for p in chat.pending_inputs]
    out["inputs"] = [[r.status, r.answered_by] for r in chat.record.inputs]
    try:
        chat.answer(chat.record.inputs[0].input_id, "yes")
        out["late"] = "accepted"
    except InputError:
        out["late"] = "refused"
    print(json.dumps(out))
    """
)


@pytest.mark.parametrize("mode", ["seq", "threads", "async"])
def test_cancel_withdraws_the_input_and_stops_the_run(mode: str) -> None:
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{mode}: chat.cancel() never freed the tool waiting for its input")
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["raised"] == "ChatCancelled"
    assert out["seen"] == [["cancel", None]]  # the tool read the cancel, once
    assert out["pending"] == []
    assert out["inputs"] == [["cancel", "nbagent"]]
    assert out["in_window"] == ["refused"]
    assert len(out["recorded_on"]) == 1
    assert out["recorded_on"] != ["canceller"]  # recorded by the driver, not the canceller
    assert out["late"] == "refused"  # a withdrawn input takes no answer
