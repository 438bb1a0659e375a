"""Level 2, a real kernel (nbclient): the batch cell is run again while an approved call of
its earlier run is running (the earlier ``batch()`` returned with its rows parked, kept
continuing them on nbagent's loop, and one was approved through the store). The earlier run
is stopped only once that row settled: its call runs to its end, once, and is recorded
``ok``; a row approved as the cell runs again runs its call once, in one of the two runs.

Before, running the cell again stopped the earlier run at once: the approved call (an
async tool three seconds long) was cancelled mid-run ("cancelled while it ran ... not
retried"), never finished, and the new frame called the row done.
"""

from __future__ import annotations

from pathlib import Path

import nbclient
import nbformat
import pytest

pytestmark = pytest.mark.notebook

HERE = Path(__file__).resolve().parent

SETUP = '''
import asyncio, sys, time
sys.path.insert(0, {here!r})
import nbagent
from nbagent import Chat, tool
from nbagent.providers import OpenAIProvider
from nbagent.store import open_store
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn
from _batch_setup import first_user_text, tool_messages

RAN = {ran!r}
STORE = {store!r}

def mark(kind, item):
    with open(RAN, "a") as f:
        f.write(f"{{kind}} {{item}}\\n")

def ran():
    try:
        return open(RAN).read().split("\\n")
    except FileNotFoundError:
        return []

@tool(requires_approval=True)
async def slow_refund(item: str) -> str:
    """Refund slowly.

    Args:
        item: The item.
    """
    mark("start", item)
    await asyncio.sleep(3)
    mark("end", item)
    return f"refunded {{item}}"

def handler(request):
    prompt = first_user_text(request)
    if tool_messages(request) == 0:
        return Turn(tool_calls=[FakeToolCall("slow_refund", {{"item": prompt.rsplit(" ", 1)[-1]}})])
    return Turn(text="finished " + prompt)

server = FakeLLMServer(handler=handler).__enter__()
provider = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key="sk-test-0000")
make = lambda: Chat(provider=provider).with_tools(slow_refund)
rows = [{{"key": "g0"}}, {{"key": "g1"}}]

def approve(item):
    with open_store(STORE) as st:
        call = next(c for c in st.pending_approvals() if c.arguments["item"] == item)
        st.approve(call, by="elsewhere")
'''

RUN = """
result = nbagent.batch(rows, make, prompt="Work on {key}", key="key", store=STORE,
                       name="again", progress=False)
print(list(result["status"]))
"""

APPROVE_G0 = """
approve("g0")
for _ in range(400):
    if "start g0" in ran():
        break
    time.sleep(0.025)
print("started" if "start g0" in ran() else "not started")
"""

RERUN = """
approve("g1")  # decided just before the cell runs again: runs once, in one of the runs
t0 = time.monotonic()
again = nbagent.batch(rows, make, prompt="Work on {key}", key="key", store=STORE,
                      name="again", progress=False)
print(list(again["status"]), "end g0" in ran())
"""

SETTLE = """
for _ in range(400):
    fresh = nbagent.batch_results(again)
    if (fresh["status"] == "done").all():
        break
    await asyncio.sleep(0.025)
print(list(fresh["status"]))
log = nbagent.read_log(open_store(STORE))
print(sorted(zip(log["arguments_json"], log["status"])))
print(sorted(line for line in ran() if line))
"""


def test_running_the_cell_again_lets_a_running_approved_call_finish(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    setup = SETUP.format(
        here=str(HERE), ran=str(tmp_path / "ran.txt"), store=str(tmp_path / "b.db")
    )
    nb.cells = [
        nbformat.v4.new_code_cell(src.strip()) for src in (setup, RUN, APPROVE_G0, RERUN, SETTLE)
    ]
    nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outs = [cell.get("outputs", []) for cell in nb.cells]
    for cell_outs in outs:
        for out in cell_outs:
            assert out.get("output_type") != "error", "\n".join(out.get("traceback", []))
    printed = [
        "".join(o.get("text", "") for o in cell if o.get("name") == "stdout").strip()
        for cell in outs
    ]
    assert printed[1] == str(["awaiting_approval", "awaiting_approval"])
    assert printed[2] == "started"
    statuses, g0_ended = printed[3].rsplit(" ", 1)
    # the rerun waited for g0's row to settle before stopping the earlier run: g0's call
    # had ended, and the new run read its row back from the store
    assert g0_ended == "True", printed[3]
    assert statuses.startswith("['done',"), printed[3]
    said = [o.get("data", {}).get("text/plain", "") for o in outs[3]]
    assert any("waiting for 1 row(s) of this batch's earlier run" in s for s in said), said
    final, log, ran = printed[4].split("\n")
    assert final == str(["done", "done"])
    assert log == str([('{"item": "g0"}', "ok"), ('{"item": "g1"}', "ok")])
    # each approved call ran once, to its end
    assert ran == str(["end g0", "end g1", "start g0", "start g1"])
