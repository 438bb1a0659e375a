"""The way to forget the process's recordings that nbagent's replay module names is real."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import nbagent
from nbagent._replay import PROCESS


def test_the_spelling_the_replay_module_gives_for_clearing_recordings_works() -> None:
    source = Path(nbagent.__file__).with_name("_replay.py").read_text(encoding="utf-8")
    named = re.findall(r"``(nbagent[\w.]*)\.PROCESS\.clear\(\)``", source)
    assert named, "the replay module no longer says how to forget the process's recordings"
    for module in named:
        assert importlib.import_module(module).PROCESS is PROCESS, module
