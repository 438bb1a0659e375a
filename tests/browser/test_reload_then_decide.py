"""A page reloaded while its kernel runs on, then the waiting call decided.

The reloaded page draws the view again from the kernel's widget state, but it never
receives the output's display updates (those go to the cell's first run, which the new
page does not listen to). When the turn settled, the view used to close its widgets,
which revealed its twin: the stand-in for a kernel that ended ("run the cells again to
ask anew") over a call that was approved and ran, an invitation to a second refund.
The view now keeps its container on such a page with the settled transcript in it.
"""

from __future__ import annotations

import json
import time
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
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

SETUP = '''\
from pathlib import Path
from nbagent import Chat, Tool

class IssueRefund(Tool):
    """Issues a refund for an order."""
    requires_approval = True
    def execute(self, order_id: int) -> str:
        with Path({effects!r}).open("a") as f:
            f.write(f"{{order_id}}\\n")
        return f"refunded order {{order_id}}"

chat = Chat(model="demo").with_tools(IssueRefund)
'''

ENDED = "kernel session that has ended"


def _save(page: Page, path: Path) -> None:
    before = path.stat().st_mtime_ns
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    deadline = time.monotonic() + 20
    while path.stat().st_mtime_ns == before:
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} was not saved")
        time.sleep(0.2)
    time.sleep(0.5)


@pytest.mark.parametrize("how", ["click", "code"])
def test_a_call_decided_after_a_reload_shows_its_transcript_not_the_ended_stand_in(
    page: Page, jupyterlab_server: JupyterLabServer, how: str
) -> None:
    server = jupyterlab_server
    effects = server.root_dir / f"reload-{how}.effects"
    effects.unlink(missing_ok=True)
    cells = [
        SETUP.format(effects=str(effects)),
        'chat.ask("Refund order 13")',
        "chat.approve(chat.pending_approvals[0]); chat.complete(); print(chat.status)",
        "print(chat.status)",
    ]
    name = server.write_notebook(f"reload-{how}.ipynb", cells)
    try:
        open_notebook(page, server, name)
        run_cell(page, 0)
        run_cell(page, 1)
        expect(
            output_area(page, 1).get_by_role("button", name="Approve", exact=True)
        ).to_be_visible()
        _save(page, server.root_dir / name)

        open_notebook(page, server, name)  # the page again; the kernel runs on
        view = output_area(page, 1)
        approve = view.get_by_role("button", name="Approve", exact=True)
        expect(approve).to_be_visible(timeout=30_000)  # drawn anew from the kernel
        if how == "click":
            approve.click()
            expect(view).to_contain_text("refunded order 13", timeout=30_000)
            run_cell(page, 3)
        else:
            run_cell(page, 2)
            expect(view).to_contain_text("continued in cell", timeout=30_000)
        wait_for_output(page, 3 if how == "click" else 2, "complete")
        time.sleep(1.5)  # anything that would still hide the view has happened by now
        screenshot(page, f"reload-then-{how}")
        shown = view.inner_text()  # what is visible only
        assert ENDED not in shown, shown
        settled = "refunded order 13" if how == "click" else "continued in cell"
        assert settled in shown, shown
        assert "awaiting approval" not in shown, shown
        assert effects.read_text().splitlines() == ["13"]

        # Saved, and the notebook opened again while the kernel runs: the same.
        _save(page, server.root_dir / name)
        open_notebook(page, server, name)
        view = output_area(page, 1)
        expect(view).to_contain_text(settled, timeout=30_000)
        time.sleep(1.5)
        shown = view.inner_text()
        assert ENDED not in shown, shown
        assert "awaiting approval" not in shown, shown
        assert view.get_by_role("button", name="Approve", exact=True).count() == 0
    finally:
        server.shutdown_sessions()


WIDGETS_SETTINGS = "/lab/api/settings/@jupyter-widgets/jupyterlab-manager:plugin"


def test_saved_with_widget_state_it_reopens_settled_after_the_kernel_ended(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    """With *Save Widget State Automatically*, the notebook saved after the reload and the
    click reopens (the kernel gone) with the settled transcript, not the stand-in."""
    server = jupyterlab_server
    effects = server.root_dir / "reload-saved.effects"
    effects.unlink(missing_ok=True)
    cells = [SETUP.format(effects=str(effects)), 'chat.ask("Refund order 13")']
    name = server.write_notebook("reload-saved.ipynb", cells)
    server.api("PUT", WIDGETS_SETTINGS, {"raw": json.dumps({"saveState": True})})
    try:
        open_notebook(page, server, name)
        run_cell(page, 0)
        run_cell(page, 1)
        view = output_area(page, 1)
        expect(view.get_by_role("button", name="Approve", exact=True)).to_be_visible()
        _save(page, server.root_dir / name)
        open_notebook(page, server, name)  # reloaded; the kernel runs on
        view = output_area(page, 1)
        approve = view.get_by_role("button", name="Approve", exact=True)
        expect(approve).to_be_visible(timeout=30_000)
        approve.click()
        expect(view).to_contain_text("refunded order 13", timeout=30_000)
        time.sleep(1.5)
        _save(page, server.root_dir / name)

        server.shutdown_sessions()
        open_notebook(page, server, name)  # a new kernel; nothing run
        time.sleep(2.0)
        screenshot(page, "reload-saved-reopened")
        view = output_area(page, 1)
        expect(view).to_contain_text("refunded order 13", timeout=30_000)
        shown = view.inner_text()
        assert ENDED not in shown, shown
        assert "awaiting approval" not in shown, shown
    finally:
        server.api("PUT", WIDGETS_SETTINGS, {"raw": "{}"})
        server.shutdown_sessions()
