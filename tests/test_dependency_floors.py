"""The lowest versions pyproject.toml declares really work: a tool round through each SDK.

``pip install nbagent`` next to an older pandas or SDK keeps what is there if it meets the
floor, so a floor that is too low fails for real users (openai 2 and anthropic 0.x were
allowed while the providers drive the SDK's httpx2 client, which only openai 3 and
anthropic 1 use: every request failed with ``No module named 'httpx2'``). A fresh venv on
the declared minimum Python gets this checkout with every core dependency pinned at its
floor; then a tool round runs through each wire (Chat Completions, Responses, Messages),
streamed and not, against the loopback fake server. Takes a minute or so, most of it pip.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import venv
from pathlib import Path

import pytest

pytestmark = [pytest.mark.install, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

SMOKE = """
import importlib.metadata as md, json, sys
from nbagent import AnthropicProvider, Chat, OpenAIProvider, tool
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

@tool
def get_weather(city: str) -> dict:
    '''Get the current weather for a city.'''
    return {"city": city, "temperature": 18}

def provider(kind, server):
    if kind == "anthropic":
        return AnthropicProvider("claude-sonnet-4-5", api_key="sk-test",
                                 base_url=server.anthropic_base_url, max_retries=0)
    return OpenAIProvider("gpt-4.1-mini", api=kind, api_key="sk-test",
                          base_url=server.openai_base_url, max_retries=0)

results = {}
for kind in ("chat", "responses", "anthropic"):
    for stream in (False, True):
        turns = [Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})]),
                 Turn(text="18 degrees in Paris")]
        with FakeLLMServer(turns=turns) as server:
            chat = Chat(provider=provider(kind, server), stream=stream, display=False)
            chat.with_tools(get_weather)
            try:
                answer = chat.ask("Weather in Paris?").content
                results[f"{kind}-stream={stream}"] = [answer, list(chat.log["status"])]
            except Exception as exc:
                results[f"{kind}-stream={stream}"] = f"{type(exc).__name__}: {exc}"
names = sys.argv[1:]
print(json.dumps({"versions": {n: md.version(n) for n in names}, "results": results}))
"""


def _floors() -> dict[str, str]:
    """Each core dependency's lowest declared version, e.g. ``{"openai": "3.0"}``."""
    floors = {}
    for requirement in PROJECT["dependencies"]:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?>=([0-9][^,;\s]*)", requirement)
        assert match, f"{requirement!r}: a core dependency is declared as name>=floor"
        floors[match.group(1).lower()] = match.group(2)
    return floors


def _minimum_python() -> tuple[int, int]:
    match = re.fullmatch(r">=\s*3\.(\d+)", PROJECT["requires-python"])
    assert match, PROJECT["requires-python"]
    return 3, int(match.group(1))


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def test_every_core_dependency_at_its_floor_runs_a_tool_round_through_each_sdk(
    tmp_path: Path,
) -> None:
    if sys.version_info[:2] != _minimum_python():
        # The floors are the versions a user on the oldest supported Python may hold (a newer
        # Python's users have newer wheels: pandas 2.1 has none for 3.13).
        pytest.skip(f"the floors are checked on Python {'.'.join(map(str, _minimum_python()))}")
    floors = _floors()
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "nbagent", src / "nbagent", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "VIRTUAL_ENV", "OPENAI_", "ANTHROPIC_", "NBAGENT_"))
    }
    pins = [f"{name}=={floor}" for name, floor in floors.items()]
    # pandas before 2.2.2 was built against NumPy 1: a user holding pandas 2.1 holds NumPy 1.
    pins.append("numpy<2")
    started = time.perf_counter()
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-compile", str(src), *pins],
        capture_output=True, text=True, env=env, timeout=800,
    )  # fmt: skip
    assert proc.returncode == 0, f"pip install failed:\n{proc.stdout}\n{proc.stderr}"
    print(f"pip install took {time.perf_counter() - started:.0f} s")

    proc = subprocess.run(
        [str(python), "-c", SMOKE, *floors],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, floor in floors.items():  # the floor itself, not a newer release
        installed = _version_tuple(report["versions"][name])
        assert installed[: len(_version_tuple(floor))] == _version_tuple(floor), (name, installed)
    expected = ["18 degrees in Paris", ["ok"]]
    assert report["results"] == {
        f"{kind}-stream={stream}": expected
        for kind in ("chat", "responses", "anthropic")
        for stream in (False, True)
    }
