"""A run becomes a test (issue 18, item 4): ``nbagent.testing.to_pytest``.

A chat runs here (scripted model, a tool from an importable module, a gated
tool defined in this file, so not importable by the exported test); the
exported file then runs with pytest in a subprocess, in a clean temporary
directory (no store, no network, no API key, nothing recorded in memory), and
passes. Changing the tool's behaviour or the script makes it fail with a
message that says what differs.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _exported import run_exported

from nbagent import Chat, tool
from nbagent._replay import PROCESS
from nbagent.testing import ScriptedProvider, call_tools, reply, to_pytest

TOOLS = '''
from nbagent import tool


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return f"{city}: 21 C"
'''


@pytest.fixture
def exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The exported test, copied with the tools' module into a clean directory."""
    PROCESS.clear()
    sent: list[str] = []

    @tool(requires_approval=True)
    def send_email(to: str, body: str) -> str:  # a closure: the exported test cannot import it
        """Send an email.

        Args:
            to: Recipient.
            body: Text.
        """
        sent.append(to)
        return f"sent to {to}"

    src = tmp_path / "project"
    src.mkdir()
    (src / "weather_tools_x18.py").write_text(TOOLS)
    monkeypatch.syspath_prepend(str(src))
    lookup = importlib.import_module("weather_tools_x18").lookup
    script = [
        call_tools(("lookup", {"city": "Paris"}), ("send_email", {"to": "a@b.c", "body": "hi"})),
        call_tools(("send_email", {"to": "boss@b.c", "body": "Paris is 21 C"})),
        reply("Paris is 21 C; I emailed a@b.c but was not allowed to email your boss."),
    ]
    chat = Chat(provider=ScriptedProvider(script), system="Be brief.").with_tools(
        lookup, send_email
    )
    chat.ask("Weather in Paris, then email a@b.c and my boss")
    chat.approve(chat.pending_approvals[0])
    chat.complete()
    chat.deny(chat.pending_approvals[0], reason="not the boss")
    chat.complete()
    assert chat.is_complete and sent == ["a@b.c"]
    written = to_pytest(chat, src / "test_weather_replay.py")
    clean = tmp_path / "clean"
    clean.mkdir()
    shutil.copy(written, clean)
    shutil.copytree(
        src / "test_weather_replay_recordings", clean / "test_weather_replay_recordings"
    )
    shutil.copy(src / "weather_tools_x18.py", clean)
    sys.modules.pop("weather_tools_x18", None)
    PROCESS.clear()
    yield clean / "test_weather_replay.py"


def test_the_exported_test_replays_the_chat_offline_and_passes(exported: Path) -> None:
    source = exported.read_text()
    assert "from weather_tools_x18 import lookup" in source  # the real tool runs
    assert "send_email cannot be imported here" in source  # the other one is replayed
    assert "replay_tools=['send_email']" in source
    assert "'not the boss'" in source  # the denial is made again
    assert sorted(p.suffix for p in (exported.parent / "test_weather_replay_recordings").iterdir())
    run = run_exported(exported)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def test_a_tool_that_now_answers_differently_fails_it_saying_where(exported: Path) -> None:
    module = exported.parent / "weather_tools_x18.py"
    module.write_text(module.read_text().replace("21 C", "30 C"))
    run = run_exported(exported)
    assert run.returncode == 1, run.stdout
    assert "ReplayMissError" in run.stdout
    assert "message 3 (tool): now 'result of lookup: Paris: 30 C'" in run.stdout


def test_a_changed_script_fails_it(exported: Path) -> None:
    exported.write_text(exported.read_text().replace("email a@b.c and my boss", "email a@b.c"))
    run = run_exported(exported)
    assert run.returncode == 1, run.stdout
    assert "message 1 (user): now 'Weather in Paris, then email a@b.c'" in run.stdout


def test_a_changed_expectation_fails_it_readably(exported: Path) -> None:
    source = exported.read_text()
    exported.write_text(
        source.replace("('lookup', {'city': 'Paris'}, 'ok')", "('lookup', {'city': 'Rome'}, 'ok')")
    )
    run = run_exported(exported)
    assert run.returncode == 1, run.stdout
    assert (
        "assert [(c.name, c.arguments, c.status) for c in chat.tool_calls] == EXPECTED_CALLS"
        in run.stdout
    )
    assert "'Rome'" in run.stdout and "'Paris'" in run.stdout


def test_nothing_to_export_is_said_clearly(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no recorded model request"):
        to_pytest(Chat(model="demo"), tmp_path / "test_x.py")
    with pytest.raises(ValueError, match=r"writes a \.py file"):
        to_pytest(Chat(model="demo"), tmp_path / "test_x.txt")
