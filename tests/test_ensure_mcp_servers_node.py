"""`.ci/ensure-mcp-servers` with a Node.js older than 20 (Debian 12's nodejs is 18) fails at
once, saying which Node it found, instead of installing servers that then fail in the tests.

A stub ``node`` (and ``npm``) first on PATH reports 18; the script stops before ``npm ci``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
def test_a_node_older_than_20_fails_saying_so(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.log"
    node = bin_dir / "node"
    node.write_text(
        "#!/bin/sh\n"
        f'echo "node $*" >> {calls}\n'
        'case "$1" in -p) echo 18 ;; --version) echo v18.19.0 ;; esac\n'
    )
    npm = bin_dir / "npm"
    npm.write_text(f'#!/bin/sh\necho "npm $*" >> {calls}\n')
    for stub in (node, npm):
        stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        ["bash", str(ROOT / ".ci" / "ensure-mcp-servers")],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1
    assert (
        f"need Node.js 20 or newer; {node} is v18.19.0 (Debian 12's nodejs package is 18)"
        in " ".join(proc.stderr.split())
    )
    assert not [c for c in calls.read_text().splitlines() if c.startswith("npm")]
