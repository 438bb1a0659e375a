"""The README's picture: the live view of a chat with an approval card, in JupyterLab.

Runs like any browser test (the image goes to ``test-artifacts/live-view.png``).
``make screenshot`` runs it with ``NBAGENT_README_IMAGE`` set, which writes the
image the README shows, ``docs/images/live-view.png``: regenerate it after the
view's look changes. The picture is cropped to the cell's output area.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from _jupyterlab import ARTIFACTS_DIR, JupyterLabServer, open_notebook, output_area, run_cell
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

SETUP = """\
from nbagent import Chat, Tool, tool

@tool
def get_weather(city: str) -> dict:
    \"\"\"Get the current weather for a city.\"\"\"
    return {"city": city, "temperature": 18, "sky": "clear"}

class IssueRefund(Tool):
    \"\"\"Issue a refund for an order.\"\"\"
    requires_approval = True

    def execute(self, order_id: int, amount: float = 20.0) -> str:
        return f"refunded {amount:.2f} EUR on order {order_id}"

chat = Chat(model="demo").with_tools(get_weather, IssueRefund)
"""

ASK = 'chat.ask("Check the weather in Paris and refund order 42");'


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_live_view_with_an_approval_card(page: Page, jupyterlab_server: JupyterLabServer) -> None:
    page.set_viewport_size({"width": 1100, "height": 1000})
    path = jupyterlab_server.write_notebook("live-view.ipynb", [SETUP, ASK])
    open_notebook(page, jupyterlab_server, path)
    page.evaluate("() => window.jupyterapp.commands.execute('application:toggle-left-area')")
    run_cell(page, 0)
    run_cell(page, 1)
    area = output_area(page, 1)
    card = area.locator(".nba-action").first
    expect(card).to_be_visible(timeout=30_000)
    expect(area).to_contain_text("Check the weather in Paris and refund order 42")
    expect(area).to_contain_text("get_weather")
    expect(area).to_contain_text("awaiting approval")
    expect(card).to_contain_text("issue_refund")
    expect(card.get_by_role("button", name="Approve", exact=True)).to_be_enabled()
    page.mouse.move(0, 0)  # no hover state in the picture
    target = Path(os.environ.get("NBAGENT_README_IMAGE") or ARTIFACTS_DIR / "live-view.png")
    target.parent.mkdir(parents=True, exist_ok=True)
    area.screenshot(path=str(target), animations="disabled")
    width, height = _png_size(target)
    assert 500 <= width <= 1100 and 200 <= height <= 1000, (width, height)
    print(f"live view: {target} ({width}x{height})")
