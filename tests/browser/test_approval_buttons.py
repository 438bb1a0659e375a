"""The approval card in a real JupyterLab: click Approve / Deny in Chromium.

A notebook with a gated tool that appends to a side-effect file asks the demo
model for it; the cell returns with the approval card showing. The test
clicks a button and asserts the side effect on disk (or its absence) and the
model's final text in the cell's output area. It runs with JupyterLab's comms
over subshells on (the default, ``perCommTarget``: the click handler runs on a
subshell thread) and off (``disabled``: it runs on the kernel's main thread),
and records which thread decided to prove it.

``NBAGENT_EXTRA_KERNEL_PYTHONS`` adds kernels with other ipykernel versions
(see the ``kernel`` fixture) to run the same clicks on them too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _jupyterlab import (
    JupyterLabServer,
    open_notebook,
    output_area,
    run_cell,
    screenshot,
    wait_for_output,
)
from _kernel_tools import refund_tool
from playwright.sync_api import Locator, Page, expect

from nbagent.notebook._continuation import RENDER_GRACE

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.browser

SETUP = """\
import threading
from pathlib import Path
import nbagent
from nbagent import Chat, ApprovalDecided

DECIDER = Path({decider!r})

chat = Chat(model="demo").with_tools(IssueRefund)
chat.on(ApprovalDecided, lambda e: DECIDER.write_text(threading.current_thread().name));
"""

ASK = 'reply = chat.ask("Refund order 42")'
ASK_ASYNC = 'reply = await chat.ask_async("Refund order 42")\nprint("cell finished:", chat.status)'

SETTINGS = "/lab/api/settings/@jupyterlab/apputils-extension:kernels-settings"


def _extra_pythons() -> list[str]:
    raw = os.environ.get("NBAGENT_EXTRA_KERNEL_PYTHONS", "")
    return [p for p in raw.split(os.pathsep) if p.strip()]


KERNELS = ["python3", *(f"extra-{i}" for i in range(len(_extra_pythons())))]


@pytest.fixture(params=["perCommTarget", "disabled"], ids=["subshells-on", "subshells-off"])
def comms_mode(
    request: pytest.FixtureRequest, jupyterlab_server: JupyterLabServer
) -> Iterator[str]:
    """JupyterLab's "Kernel comms over subshells" setting for this test."""
    mode: str = request.param
    jupyterlab_server.api("PUT", SETTINGS, {"raw": json.dumps({"commsOverSubshells": mode})})
    try:
        yield mode
    finally:
        jupyterlab_server.api("PUT", SETTINGS, {"raw": "{}"})
        jupyterlab_server.shutdown_kernels()


@pytest.fixture(params=KERNELS)
def kernel(
    request: pytest.FixtureRequest, jupyterlab_server: JupyterLabServer
) -> tuple[str, tuple[int, ...]]:
    """The kernelspec to run on, and its ipykernel version.

    ``python3`` is this venv's kernel. ``NBAGENT_EXTRA_KERNEL_PYTHONS`` (paths
    joined by ``os.pathsep``) adds interpreters with other ipykernel versions
    (e.g. 6.29, 7.1), each with ipywidgets, anywidget and pydantic installed;
    nbagent comes from this checkout through PYTHONPATH.
    """
    name: str = request.param
    python = sys.executable
    if name != "python3":
        python = _extra_pythons()[int(name.split("-")[1])]
        kernel_dir = Path(jupyterlab_server.env["JUPYTER_PATH"]) / "kernels" / name
        kernel_dir.mkdir(parents=True, exist_ok=True)
        (kernel_dir / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": f"Python 3 ({name})",
                    "language": "python",
                    "env": {"PYTHONPATH": str(REPO)},
                }
            )
        )
    out = subprocess.run(
        [python, "-c", "import ipykernel; print(ipykernel.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    version = tuple(int(x) for x in out.split(".")[:2])
    return name, version


def _notebook(server: JupyterLabServer, name: str, ask: str, kernel: str) -> tuple[str, Path, Path]:
    side_effect = server.root_dir / f"{name}.effects"
    decider = server.root_dir / f"{name}.decider"
    for p in (side_effect, decider):
        p.unlink(missing_ok=True)
    path = server.write_notebook(
        f"{name}.ipynb",
        [refund_tool(side_effect) + SETUP.format(decider=str(decider)), ask],
    )
    if kernel != "python3":
        nb_path = server.root_dir / path
        nb = json.loads(nb_path.read_text())
        nb["metadata"]["kernelspec"] = {
            "name": kernel,
            "display_name": kernel,
            "language": "python",
        }
        nb_path.write_text(json.dumps(nb))
    return path, side_effect, decider


def _card(page: Page, cell_index: int) -> Locator:
    card = output_area(page, cell_index).locator(".nba-action").first
    expect(card).to_be_visible(timeout=30_000)
    return card


def _check_decider(decider: Path, mode: str, version: tuple[int, ...]) -> str:
    """The thread that ran the click handler (it recorded the decision).

    With subshells off, or on ipykernel 6, it must be the main thread. With
    them on, JupyterLab sends comm messages to a subshell: ipykernel 7.0-7.3
    runs the handler on that subshell's thread, while ipykernel >= 7.4 routes
    a comm's messages back to the shell that last published on it (the main
    shell, for widgets a cell created). Either way the continuation must reach
    the kernel's main loop, which the rest of the test checks.
    """
    deadline = time.monotonic() + 5
    while not decider.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    thread = decider.read_text().strip() if decider.exists() else ""
    assert thread, "no decision was recorded"
    if mode == "disabled" or version < (7, 0):
        assert thread == "MainThread", thread
    elif version < (7, 4):
        assert thread != "MainThread", f"expected a subshell thread, got {thread!r}"
    print(f"click handled on thread {thread!r} ({mode}, ipykernel {version})")
    return thread


def test_approve_runs_the_tool_once(
    page: Page,
    jupyterlab_server: JupyterLabServer,
    comms_mode: str,
    kernel: tuple[str, tuple[int, ...]],
) -> None:
    name, version = kernel
    path, side_effect, decider = _notebook(
        jupyterlab_server, f"approve-{comms_mode}-{name}", ASK, name
    )
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1)
    card = _card(page, 1)
    expect(card).to_contain_text("needs approval")
    expect(card.locator(".nba-tool")).to_have_text("issue_refund")  # one card, the name once
    assert not side_effect.exists()
    screenshot(page, f"approval-pending-{comms_mode}-{name}")

    approve = card.get_by_role("button", name="Approve", exact=True)
    approve.dblclick()  # a double click must not run the tool twice
    wait_for_output(page, 1, "refunded order 42", timeout=30)
    wait_for_output(page, 1, "issue_refund(order_id=42): refunded order 42", timeout=30)
    wait_for_output(page, 1, "complete", timeout=30)
    time.sleep(0.5)
    assert side_effect.read_text() == "42\n"
    _check_decider(decider, comms_mode, version)
    screenshot(page, f"approval-approved-{comms_mode}-{name}")


def test_deny_sends_the_denial(
    page: Page,
    jupyterlab_server: JupyterLabServer,
    comms_mode: str,
    kernel: tuple[str, tuple[int, ...]],
) -> None:
    name, version = kernel
    path, side_effect, decider = _notebook(
        jupyterlab_server, f"deny-{comms_mode}-{name}", ASK, name
    )
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1)
    card = _card(page, 1)
    card.get_by_placeholder("reason (optional)").fill("not this order")
    card.get_by_role("button", name="Deny", exact=True).click()
    area = wait_for_output(page, 1, "was not run", timeout=30)
    expect(area).to_contain_text("not this order")
    expect(area).to_contain_text("denied by you")
    time.sleep(0.5)
    assert not side_effect.exists()
    _check_decider(decider, comms_mode, version)
    screenshot(page, f"approval-denied-{comms_mode}-{name}")


def test_ask_async_and_the_click(
    page: Page,
    jupyterlab_server: JupyterLabServer,
    comms_mode: str,
    kernel: tuple[str, tuple[int, ...]],
) -> None:
    """ipykernel >= 7.4: the awaiting cell gets the click and finishes the turn itself.

    Older kernels cannot deliver a click to an awaiting cell: ``ask_async``
    returns with the approval pending, and the click continues the turn in
    the same output, as after ``ask()``.
    """
    name, version = kernel
    path, side_effect, _ = _notebook(
        jupyterlab_server, f"await-{comms_mode}-{name}", ASK_ASYNC, name
    )
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    waits = version >= (7, 4)
    run_cell(page, 1, wait=not waits)
    card = _card(page, 1)
    if waits:
        # Past the grace after which an unattended wait gives up: the card told the
        # kernel it was drawn, so the cell is still waiting for the click.
        time.sleep(RENDER_GRACE + 1)
        expect(output_area(page, 1)).not_to_contain_text("cell finished")
        # The status line counts down (approval_wait is 300 s by default).
        countdown = re.compile(r"waiting for your decision, 4:5\d left \(then it stays pending\)")
        expect(
            card.locator("xpath=ancestor::div[contains(@class, 'nba-chat')][1]")
        ).to_contain_text(countdown)
    else:
        wait_for_output(page, 1, "cell finished: awaiting_approval")
    assert not side_effect.exists()
    card.get_by_role("button", name="Approve", exact=True).click()
    if waits:
        wait_for_output(page, 1, "cell finished: complete", timeout=30)
        assert "waiting for your decision" not in output_area(page, 1).inner_text()
    wait_for_output(page, 1, "refunded order 42", timeout=30)
    wait_for_output(page, 1, "issue_refund(order_id=42): refunded order 42", timeout=30)
    time.sleep(0.3)
    assert side_effect.read_text() == "42\n"
    screenshot(page, f"approval-await-{comms_mode}-{name}")
