"""An offline stand-in for OpenAI's Responses API, for the hosted-MCP section of 07_mcp.

:func:`hosted_docs_provider` starts nbagent's loopback fake OpenAI server
(:class:`nbagent.testing.FakeLLMServer`, on 127.0.0.1) with a scripted
conversation, and returns a real :class:`~nbagent.providers.OpenAIProvider`
pointed at it: the provider lists a remote "docs" MCP server's tools and asks
to call ``search_docs``; once approved, it "runs" the call and answers. With an
API key, use ``OpenAIProvider("gpt-4.1-mini", api="responses")`` instead.
"""

from __future__ import annotations

from nbagent.providers import OpenAIProvider
from nbagent.testing import FakeLLMServer, Turn, mcp_approval_request, mcp_call, mcp_list_tools

QUERY = {"query": "pagination"}


def hosted_docs_provider() -> tuple[OpenAIProvider, FakeLLMServer]:
    """A provider whose (fake) OpenAI server calls a hosted "docs" MCP server, and that server.

    The server's ``last_request`` is what the provider was last sent (the
    notebook shows the approval it carried).
    """
    fake = FakeLLMServer(
        [
            Turn(
                hosted=[
                    mcp_list_tools("docs", "search_docs", "read_page"),
                    mcp_approval_request("docs", "search_docs", QUERY, id="mcpr_1"),
                ]
            ),
            Turn(
                text="Use the `cursor` parameter: each page returns the cursor of the next one.",
                hosted=[
                    mcp_call(
                        "docs",
                        "search_docs",
                        QUERY,
                        output="Pagination: pass `cursor` from the previous page.",
                        approval_request_id="mcpr_1",
                    )
                ],
            ),
        ]
    )
    provider = OpenAIProvider(
        "gpt-4.1-mini", api="responses", base_url=fake.openai_base_url, api_key="sk-fake"
    )
    return provider, fake
