"""A hosted-MCP approval card in a real JupyterLab: click Approve in Chromium.

The notebook's chat uses the OpenAI Responses API (the real ``openai`` SDK)
against the loopback fake server, started by this test in strict mode, with a
``HostedMCP`` tool. The fake first answers with an ``mcp_approval_request``;
the card names the server, says the provider runs the tool once approved and
offers no argument editor. A click on **Approve** must send exactly one
``mcp_approval_response`` (checked on the requests the fake recorded), and the
provider's follow-up ``mcp_call`` (folded, with its output) and the answer
must render in the same output.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

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

from nbagent.testing import FakeLLMServer, Turn, mcp_approval_request, mcp_call, mcp_list_tools

pytestmark = pytest.mark.browser

SETUP = """\
from nbagent import Chat, HostedMCP
from nbagent.providers import OpenAIProvider

provider = OpenAIProvider(
    "gpt-4.1-mini", api="responses", base_url={base_url!r}, api_key="sk-test-browser"
)
chat = Chat(provider=provider).with_tools(
    HostedMCP("wiki", server_url="https://wiki.example/mcp", require_approval="always")
)
"""


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(
        [
            Turn(
                hosted=[
                    mcp_list_tools("wiki", "ask_question"),
                    mcp_approval_request(
                        "wiki", "ask_question", {"question": "When was it built?"}, id="mcpr_b1"
                    ),
                ]
            ),
            Turn(
                text="It was built in 1889.",
                hosted=[
                    mcp_call(
                        "wiki",
                        "ask_question",
                        {"question": "When was it built?"},
                        output="Built 1887-1889 for the World's Fair.",
                        approval_request_id="mcpr_b1",
                    )
                ],
            ),
        ],
        strict=True,
    ) as server:
        yield server


def _approval_responses(fake: FakeLLMServer) -> list[dict]:
    return [
        item
        for request in fake.requests
        for item in request.body.get("input", [])
        if isinstance(item, dict) and item.get("type") == "mcp_approval_response"
    ]


def test_approve_on_a_hosted_mcp_card_sends_one_approval_and_shows_the_providers_call(
    page: Page, jupyterlab_server: JupyterLabServer, fake: FakeLLMServer
) -> None:
    path = jupyterlab_server.write_notebook(
        "hosted-card.ipynb",
        [SETUP.format(base_url=fake.openai_base_url), 'chat.ask("When was the tower built?")'],
    )
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1)
    area = output_area(page, 1)
    card = area.locator(".nba-action").first
    expect(card).to_contain_text("needs approval", timeout=30_000)
    expect(card.locator(".nba-server")).to_have_text("wiki")
    expect(card).to_contain_text("ask_question")
    expect(card).to_contain_text("provider runs ask_question on wiki once you approve")
    expect(card.get_by_role("button", name="Edit arguments")).to_have_count(0)
    # the provider's listing shows, folded, under its step
    # :visible: not the copy in the waiting view's hidden static twin
    expect(area.locator('[data-item-type="mcp_list_tools"]:visible')).to_contain_text("wiki")
    assert len(fake.requests) == 1 and _approval_responses(fake) == []
    screenshot(page, "hosted-card-pending")

    card.get_by_role("button", name="Approve", exact=True).click()
    wait_for_output(page, 1, "It was built in 1889.", timeout=30)
    expect(area.locator(".nba-status:visible")).to_contain_text("complete", timeout=30_000)
    item = area.locator('[data-item-type="mcp_call"]:visible')
    expect(item).to_contain_text("wiki · ask_question")
    expect(item).to_contain_text("Built 1887-1889")
    expect(area).to_contain_text("sent to the provider")
    expect(area.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    time.sleep(0.5)  # nothing more may be sent after the answer
    assert len(fake.requests) == 2
    assert _approval_responses(fake) == [
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_b1", "approve": True}
    ]
    assert fake.errors == []  # strict mode found nothing malformed
    screenshot(page, "hosted-card-approved")
