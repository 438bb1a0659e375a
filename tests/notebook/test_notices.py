"""What nbagent tells a notebook user in passing is information, not an error box.

Front ends draw a stderr stream as an error (JupyterLab: a pink box), so in a
kernel the no-API-key notice and the no-widgets hint are small neutral display
lines, each shown once per process.
"""

from __future__ import annotations

import nbclient
import nbformat
import pytest

pytestmark = pytest.mark.notebook

CELLS = [
    "import nbagent\nfrom nbagent import Chat\nnbagent.configure(quiet=False)\nchat = Chat()",
    "again = Chat()",  # once per process: nothing the second time
    # A kernel where the widget packages cannot be imported: static views, one hint.
    "import sys\n"
    "sys.modules['anywidget'] = None  # as if not installed\n"
    'chat.ask("hello")\n'
    'chat.ask("hello again")',
]


def test_notices_are_neutral_lines_shown_once() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nbclient.NotebookClient(nb, timeout=60, kernel_name="python3").execute()
    outputs = [o for cell in nb.cells for o in cell.outputs]
    assert not [o for o in outputs if o.get("name") == "stderr"], "a notice went to stderr"

    (notice,) = nb.cells[0].outputs
    assert notice.output_type == "display_data"
    assert notice.data["text/plain"].startswith("nbagent: no OPENAI_API_KEY or ANTHROPIC_API_KEY")
    assert notice.data["text/html"].startswith('<small class="nba-notice">nbagent: no OPENAI')
    assert "\n" not in notice.data["text/plain"]
    assert nb.cells[1].outputs == []

    hints = [
        o
        for o in nb.cells[2].outputs
        if "has no buttons" in o.get("data", {}).get("text/plain", "")
    ]
    assert len(hints) == 1
    assert "pip install ipywidgets anywidget" in hints[0].data["text/plain"]
    # The turns still show, in their static form.
    views = [o for o in nb.cells[2].outputs if "nba-chat" in o.get("data", {}).get("text/html", "")]
    assert len(views) == 2
