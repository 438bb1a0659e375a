"""Smoke test of the browser harness: a plain ipywidgets button clicked in JupyterLab.

Proves the whole chain the notebook UI relies on: JupyterLab serves the
widget front end, a click in Chromium travels over the comm to the kernel,
the handler runs there (side effect on disk), and its output comes back into
the cell's output area. No nbagent code involved.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from _jupyterlab import (
    JupyterLabServer,
    open_notebook,
    run_cell,
    screenshot,
    wait_for_file,
    wait_for_output,
)
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

BUTTON_CELL = """\
import ipywidgets as widgets
from pathlib import Path

counter_file = Path({counter!r})
counter_file.write_text("0")
out = widgets.Output()
button = widgets.Button(description="Harness click")

def on_click(_button):
    n = int(counter_file.read_text()) + 1
    counter_file.write_text(str(n))
    # append_stdout, not print(): handlers may run on a subshell thread and a
    # bare print() would land in the log console, not in this cell.
    out.append_stdout(f"clicked {{n}}\\n")

button.on_click(on_click)
widgets.VBox([button, out])
"""


def _button_notebook(server: JupyterLabServer, name: str) -> tuple[str, Path]:
    counter = server.root_dir / f"{name}.count"
    path = server.write_notebook(
        f"{name}.ipynb",
        [("markdown", "# harness smoke test"), BUTTON_CELL.format(counter=str(counter))],
    )
    return path, counter


def test_click_reaches_kernel(page: Page, jupyterlab_server: JupyterLabServer) -> None:
    path, counter = _button_notebook(jupyterlab_server, "click_once")
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 1)

    button = page.locator(".jupyter-widgets button", has_text="Harness click")
    expect(button).to_be_visible(timeout=30_000)
    assert counter.read_text() == "0"

    button.click()
    wait_for_output(page, 1, "clicked 1", timeout=15)
    assert wait_for_file(counter, "1") == "1"
    screenshot(page, "harness-click-once")


def test_second_click_is_delivered(page: Page, jupyterlab_server: JupyterLabServer) -> None:
    path, counter = _button_notebook(jupyterlab_server, "click_twice")
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 1)

    button = page.get_by_role("button", name="Harness click")
    button.click()
    wait_for_output(page, 1, "clicked 1", timeout=15)
    button.click()
    area = wait_for_output(page, 1, "clicked 2", timeout=15)
    assert wait_for_file(counter, "2") == "2"
    # Exactly one handler run per click (cell indices count the markdown cell).
    expect(area).not_to_contain_text("clicked 3")


def test_a_notebook_opens_alone(page: Page, jupyterlab_server: JupyterLabServer) -> None:
    """Opening a notebook does not reopen the ones opened before it in the session.

    JupyterLab keeps its open tabs in a workspace and restores them on each page load,
    each with a new kernel: left alone, the n-th browser test started n kernels and the
    suite slowed down test by test (teardown 0.2 -> 4.7 s, load 2 -> 7 on two cores).
    """
    server = jupyterlab_server
    first = server.write_notebook("alone-first.ipynb", ["1 + 1"])
    second = server.write_notebook("alone-second.ipynb", ["2 + 2"])
    open_notebook(page, server, first)
    deadline = time.monotonic() + 15
    while first not in json.dumps(server.api("GET", "/lab/api/workspaces/default")):
        assert time.monotonic() < deadline, "JupyterLab never saved its workspace"
        time.sleep(0.1)  # saved a moment after the layout changes
    open_notebook(page, server, second)
    page.wait_for_timeout(1_500)  # anything restored would be opening by now
    paths = page.evaluate(
        """() => Array.from(window.jupyterapp.shell.widgets('main'))
                .map(w => w.context && w.context.path).filter(Boolean)"""
    )
    assert paths == [second]
