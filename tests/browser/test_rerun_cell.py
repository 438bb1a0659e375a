"""A cell run again in a real JupyterLab lets go of what its last run showed.

JupyterLab removes a cell's outputs when it runs again and names the cell in the
request; the kernel then closes the cards the old outputs held and lets go of their
chat, which nothing else names. Before, every run of ``chat = Chat(...);
chat.ask(...)`` that left a card waiting kept its chat, its card and its view for the
life of the kernel. Nothing is decided: the old calls never run, and the new card
still works.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from _jupyterlab import (
    JupyterLabServer,
    _run_command,
    open_notebook,
    output_area,
    run_cell,
    wait_for_output,
)
from _kernel_tools import refund_tool
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

SETUP = """\
import gc, time
from nbagent import Chat

def live_chats():
    deadline = time.monotonic() + 5
    while True:
        gc.collect()
        n = sum(isinstance(o, Chat) for o in gc.get_objects())
        if n <= 1 or time.monotonic() > deadline:
            return n
        time.sleep(0.05)
"""

ASK = 'chat = Chat(model="demo").with_tools(IssueRefund)\nchat.ask("Refund order 42")'
PROBE = 'print("live chats:", live_chats())'


def test_a_cell_run_again_lets_go_of_its_old_card_and_the_new_one_works(
    page: Page, jupyterlab_server: JupyterLabServer, tmp_path: Path
) -> None:
    side_effect = tmp_path / "refunds.txt"
    path = jupyterlab_server.write_notebook(
        "rerun.ipynb", [refund_tool(side_effect) + SETUP, ASK, PROBE]
    )
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    for _ in range(4):
        run_cell(page, 1)
        expect(output_area(page, 1).locator(".nba-action")).to_have_count(1, timeout=30_000)
    run_cell(page, 2)
    wait_for_output(page, 2, "live chats: 1")  # four runs, one chat: the one `chat` names
    assert not side_effect.exists()  # nothing was decided
    card = output_area(page, 1).locator(".nba-action").first
    card.get_by_role("button", name="Approve", exact=True).click()
    wait_for_output(page, 1, "refunded order 42", timeout=30)
    time.sleep(0.5)
    assert side_effect.read_text() == "42\n"  # the new card's call, once


ASK_UNNAMED = 'Chat(model="demo").with_tools(IssueRefund).ask("Refund order 7")'


def test_a_deleted_cell_lets_go_of_its_card(
    page: Page, jupyterlab_server: JupyterLabServer, tmp_path: Path
) -> None:
    """JupyterLab names the cells deleted since the last run in the next request: the card a
    deleted cell showed closes, and its chat, which no name holds, is let go. Nothing ran."""
    side_effect = tmp_path / "refunds.txt"
    path = jupyterlab_server.write_notebook(
        "deleted.ipynb", [refund_tool(side_effect) + SETUP, ASK_UNNAMED, PROBE]
    )
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1)
    expect(output_area(page, 1).locator(".nba-action")).to_have_count(1, timeout=30_000)
    _run_command(page, "notebook:delete-cell", 1, True, 10.0)
    run_cell(page, 1)  # the probe, now second
    wait_for_output(page, 1, "live chats: 0")
    assert not side_effect.exists()
