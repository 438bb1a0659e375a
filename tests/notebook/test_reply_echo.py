"""A reply shown live is not echoed again as Out[n] in the same cell; later it displays."""

from __future__ import annotations

import nbclient
import nbformat
import pytest

pytestmark = pytest.mark.notebook

CELLS = [
    "import nbagent\n"
    "from nbagent import Chat, tool\n"
    "@tool\n"
    "def get_weather(city: str) -> dict:\n"
    '    """Get the weather for a city."""\n'
    '    return {"city": city, "temperature": 18}\n'
    'chat = Chat(model="demo").with_tools(get_weather)',
    'chat.ask("What is the weather in Paris?")',
    "chat.transcript[-1]",
    'nbagent.configure(display=False)\nchat.ask("What is the weather in Oslo?")',
]


def _texts(outputs: list[dict]) -> list[str]:
    out = []
    for o in outputs:
        data = o.get("data", {})
        out.append(data.get("text/markdown", "") + data.get("text/plain", "") + o.get("text", ""))
    return out


REPLY = "get_weather(city=Paris): city Paris, temperature 18"  # the demo model's answer


def test_reply_is_not_echoed_under_its_live_view() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nbclient.NotebookClient(nb, timeout=60, kernel_name="python3").execute()
    live, later, unviewed = nb.cells[1].outputs, nb.cells[2].outputs, nb.cells[3].outputs
    assert any(REPLY in t for t in _texts(live))  # the live view shows it
    assert not [o for o in live if o["output_type"] == "execute_result"]
    replies = [t for t in _texts(live) if t.startswith(REPLY)]
    assert replies == [], "the reply was echoed below the view that shows it"
    assert any(t.startswith(REPLY) for t in _texts(later))
    assert any("Oslo" in t for t in _texts(unviewed))  # no live view: the reply displays
