"""Running a test file ``to_pytest`` wrote, as its user would: pytest in a subprocess, in the
file's own directory, with this checkout's nbagent and nothing else (no API key, no base URL,
no proxy)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbagent

ROOT = Path(nbagent.__file__).resolve().parent.parent


def run_exported(test: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's nbagent, nothing else of the project
    env["NO_PROXY"] = "*"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test.name],
        cwd=test.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
