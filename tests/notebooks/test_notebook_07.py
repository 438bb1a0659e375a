"""The MCP notebook executes with a real kernel, offline: a real MCP server (stdio, shipped
beside it) with the demo model, a call gated by the server's annotation and approved in code,
and a hosted-MCP approval against the loopback fake OpenAI server. The server process is
gone afterwards."""

from __future__ import annotations

import re
from pathlib import Path

import _notebooks
import pytest

pytestmark = pytest.mark.notebook


def _processes_mentioning(needle: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in cmdline:
            found.append(int(proc.name))
    return found


def test_mcp_notebook_runs_offline_and_leaves_no_server_behind() -> None:
    nb = _notebooks.execute("07_mcp.ipynb", timeout=180)
    text = _notebooks.text(nb)
    db = re.search(r"notes database: (\S+)", text)
    assert db is not None, text
    # read-only tools run freely, the destructive one waits (by annotation)
    assert "notes_read_note    from notes: needs approval: False" in text
    assert "notes_delete_note  from notes: needs approval: True" in text
    assert "demo the MCP notebook; ask about the flaky test" in text  # read from SQLite
    assert "awaiting_approval" in text
    assert (
        "why: notes_delete_note requires approval before it runs "
        "(the notes server marks it destructive)"
    ) in text
    # approved in code: it ran once on the server
    assert "notes left: groceries\nstandup" in text
    assert "tool notes · notes_delete_note" in text  # the view names the server
    assert re.search(r"notes_delete_note\s+notes\s+ok\s+approved", text)  # the log's server column
    assert "connected after close: False" in text
    # hosted MCP: one approval sent to the (fake) provider, then its call and the answer
    assert (
        "sent to the provider: [{'type': 'mcp_approval_response', "
        "'approval_request_id': 'mcpr_1', 'approve': True}]"
    ) in text
    assert "provider ran mcp call: docs · search_docs" in text
    assert "Use the `cursor` parameter" in text
    assert re.search(r"search_docs\s+docs\s+True\s+mcp_call\s+ok", text)
    # the hosted cell shows what a user writes; the fake server's script lives beside it
    (hosted,) = [c.source for c in nb.cells if "HostedMCP(" in c.source and c.cell_type == "code"]
    assert "from offline_openai import hosted_docs_provider" in hosted
    assert "FakeLLMServer" not in hosted and "Turn(" not in hosted and "sk-fake" not in hosted
    assert len(hosted.splitlines()) <= 10
    # saved HTML shows the hosted card's outcome and the provider's call folded
    html = "\n".join(_notebooks.mime(nb, "text/html"))
    assert 'data-item-type="mcp_call"' in html
    assert "sent to the provider" in html
    # the kernel is gone and so is the stdio server it started
    assert _processes_mentioning(db.group(1)) == []
