"""The providers notebook runs offline with a real kernel and shows each wire format."""

from __future__ import annotations

import _notebooks
import pytest

pytestmark = pytest.mark.notebook


def test_providers_notebook_runs_offline() -> None:
    nb = _notebooks.execute("02_providers.ipynb")
    text = _notebooks.text(nb)
    markdown = "\n".join(_notebooks.mime(nb, "text/markdown"))
    assert "offline mode" in text
    for name in ("OpenAI", "Anthropic", "Local"):
        assert f"[{name}] It is 21 °C and sunny in Paris." in text
    assert "get_weather({'city': 'Paris'}) -> ok" in text
    # the tool round on each wire
    assert '"role": "tool"' in text and '"type": "tool_result"' in text
    assert '"type": "function_call_output"' in text  # Responses
    # the wire form of each tool choice and calls value, produced by the adapters
    assert '`{"tool_choice": {"type": "any", "disable_parallel_tool_use": true}}`' in markdown
    assert '`{"tool_choice": "required", "parallel_tool_calls": false}`' in markdown
    assert '{"type": "function", "function": {"name": "get_weather"}}' in markdown
    assert "server received the same body: True" in text
    assert "ProviderConnectionError" in text and "AuthenticationError (status 401)" in text
    assert "sk-never-printed" not in text and "offline-key" not in text
