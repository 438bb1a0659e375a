"""A kernel without ipywidgets: the chat's static output follows the turn to its end.

What such a kernel saves is the static view's output, updated by display id as
the chat settles; it must hold the whole turn, not the first moment of it.
"""

from __future__ import annotations

import nbclient
import nbformat

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

CELLS = [
    "import sys\nsys.modules['ipywidgets'] = None  # as if it were not installed\n"
    "from nbagent import Chat, tool\n\n"
    "@tool\ndef get_weather(city: str) -> str:\n"
    '    """Get the weather for a city."""\n'
    '    return f"sunny in {city}"\n',
    'chat = Chat(model="demo").with_tools(get_weather)\nchat.ask("What is the weather in Oslo?");',
]


def test_the_static_view_is_saved_with_the_settled_turn() -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    outputs = nb.cells[1].outputs
    assert not any(o.get("output_type") == "error" for o in outputs)
    datas = [o["data"] for o in outputs if "data" in o]
    assert datas and not any(WIDGET_MIME in d for d in datas)
    text = "".join(d.get("text/plain", "") for d in datas)
    assert "What is the weather in Oslo?" in text
    assert "sunny in Oslo" in text  # the tool ran after the view was first shown
    assert "complete" in text
