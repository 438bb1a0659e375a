"""A Tool subclass as the README writes it type-checks: mypy --strict, as a user runs it.

The package ships ``py.typed``, so a user's mypy checks their ``execute`` override against
``Tool.execute``. Each subclass gives it its own parameters (the tool's schema), sync or
``async``, with or without ``tool_call``; the base declares ``(*args, **kwargs)`` so every such
override is compatible. mypy runs outside the checkout, finding nbagent on MYPYPATH with its own
modules' findings silenced, as for an installed package: only the user's file is judged.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

USER_CODE = '''
from typing import Any

from nbagent import Chat, Tool, ToolCall


class IssueRefund(Tool):
    """Issue a refund for an order."""

    requires_approval = True

    def execute(self, order_id: int) -> str:
        return f"refunded order {order_id}"


class LookUpCustomer(Tool):
    """Look up a customer by email."""

    async def execute(self, email: str, tool_call: ToolCall | None = None) -> dict[str, Any]:
        return {"email": email, "call": tool_call.id if tool_call else None}


class Search(Tool):
    """Search the catalogue."""

    def execute(self, query: str, *, limit: int = 10) -> list[str]:
        return [query] * limit


chat = Chat("demo").with_tools(IssueRefund, LookUpCustomer, Search)
refund: str = IssueRefund().execute(42)
'''


@pytest.mark.timeout(300)
def test_a_readme_style_tool_subclass_passes_mypy_strict(tmp_path: Path) -> None:
    source = tmp_path / "agent_tools.py"
    source.write_text(textwrap.dedent(USER_CODE))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYPY")}
    env["MYPYPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", str(source)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=280,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == ""
