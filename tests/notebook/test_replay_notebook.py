"""A notebook executed twice with nbclient asks the model only the first time (issue 18).

A real kernel each time (a fresh process: nothing in memory survives), the
real OpenAI SDK client against the loopback fake server (which counts the
requests it gets), and the offline demo model; recordings in a directory
beside the notebook (``configure(recordings=...)``).
"""

from __future__ import annotations

import json
from pathlib import Path

import nbclient
import nbformat

from nbagent.testing import FakeLLMServer, FakeToolCall, Turn


def _notebook(base_url: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import nbagent\n"
            "from nbagent import Chat, tool\n"
            "from nbagent.providers import OpenAIProvider\n"
            "nbagent.configure(replay='auto', recordings='recordings')\n"
            "\n"
            "@tool\n"
            "def lookup(city: str) -> str:\n"
            '    """Look a city up.\n\n    Args:\n        city: The city.\n    """\n'
            "    return f'{city}: 21 C'\n"
        ),
        nbformat.v4.new_code_cell(
            f"provider = OpenAIProvider('gpt-4.1-mini', base_url={base_url!r}, "
            "api_key='sk-test-notebook', max_retries=0)\n"
            "chat = Chat(provider=provider).with_tools(lookup)\n"
            "chat.ask('Weather in Paris?')"
        ),
        nbformat.v4.new_code_cell(
            "demo = Chat('demo').with_tools(lookup)\ndemo.ask('What is the weather in Tokyo?')"
        ),
        nbformat.v4.new_code_cell(
            "print(repr(chat.last_assistant_message.content))\n"
            "print(repr(demo.last_assistant_message.content))\n"
            "print(sorted(chat.replayed_steps), sorted(demo.replayed_steps))\n"
            "print(chat.cost_usd, chat.steps['replayed'].tolist())"
        ),
    ]
    return nb


def _execute(nb: nbformat.NotebookNode, where: Path) -> list[str]:
    nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(where)}}
    ).execute()
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error", "\n".join(out.get("traceback", []))
    return "".join(o.get("text", "") for o in nb.cells[-1].outputs).splitlines()


def _html(nb: nbformat.NotebookNode, cell: int) -> str:
    return "".join(o.get("data", {}).get("text/html", "") for o in nb.cells[cell].outputs)


def test_a_notebook_run_twice_asks_the_model_only_the_first_time(tmp_path: Path) -> None:
    turns = [
        Turn(tool_calls=[FakeToolCall("lookup", {"city": "Paris"})]),
        Turn(text="Paris is 21 C today."),
    ]
    with FakeLLMServer(turns) as server:
        first_nb = _notebook(server.openai_base_url)
        first = _execute(first_nb, tmp_path)
        assert len(server.requests) == 2
        second_nb = _notebook(server.openai_base_url)
        second = _execute(second_nb, tmp_path)
        assert len(server.requests) == 2  # the rerun asked nothing
    assert first[:2] == second[:2]  # the same answers
    assert first[0] == "'Paris is 21 C today.'"
    assert first[2] == "[] []" and second[2] != "[] []"
    fake_steps, demo_steps = second[2].split("] [")
    assert fake_steps == "[1, 3" and demo_steps.startswith("1")  # every request replayed
    assert second[3] == "0.0 [True, True]"
    # the view marks the replayed steps, and only those
    assert "replayed" in _html(second_nb, 1) and "replayed" not in _html(first_nb, 1)
    assert "replayed" in _html(second_nb, 2)
    # the recordings are plain JSON files, without the key
    files = list((tmp_path / "recordings").glob("*.json"))
    assert len(files) >= 3
    text = "".join(f.read_text() for f in files)
    assert "sk-test-notebook" not in text
    assert all(json.loads(f.read_text())["key"] == f.stem for f in files)
