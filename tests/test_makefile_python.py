"""The Makefile and the Python it is given: too old fails at once, a venv too old is remade,
and a kernelspec that shadows the venv's is named instead of reinstalled on every run.

nbagent needs Python 3.11 or newer. Given an older one, pip backtracks through every release
of every dependency for minutes before failing; the Makefile checks first and says how to
fix it in one line. Pythons here are small shell stubs (one that reports 3.10, one that
records what it is asked), so no venv is made and nothing is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")

OLD_PYTHON = """#!/bin/sh
# Python 3.10: its version check fails, as `sys.version_info < (3, 11)` would
case "$1" in
  -V|--version) echo "Python 3.10.13" ;;
  *) exit 1 ;;
esac
"""

# Python 3.11 that records each call; `-m venv [--clear] DIR` makes DIR/bin/python a copy of
# itself (so the venv's pip install is recorded too, and installs nothing).
RECORDING_PYTHON = """#!/bin/sh
echo "$0 $*" >> {log}
case "$1" in
  -V|--version) echo "Python 3.11.9" ;;
  -m) if [ "$2" = venv ]; then
        for dir; do :; done
        mkdir -p "$dir/bin" && cp "$0" "$dir/bin/python"
      fi ;;
esac
exit 0
"""


def _stub(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "JUPYTER"))}
    return subprocess.run(
        ["make", *args], cwd=ROOT, capture_output=True, text=True, env={**base, **(env or {})},
        timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("target", ["lab", "install", "test"])
def test_a_python_older_than_3_11_fails_at_once_saying_how_to_fix_it(
    target: str, tmp_path: Path
) -> None:
    old = _stub(tmp_path / "python3.10", OLD_PYTHON)
    started = time.perf_counter()
    proc = _make(target, f"VENV={tmp_path / 'venv'}", f"PYTHON={old}")
    assert time.perf_counter() - started < 30
    assert proc.returncode != 0
    assert proc.stderr.splitlines()[0] == (
        f"nbagent needs Python 3.11 or newer; PYTHON={old} is Python 3.10.13: "
        f"make {target} PYTHON=python3.11 (or newer)"
    )
    assert not (tmp_path / "venv").exists()


def test_a_venv_made_with_an_older_python_is_remade_with_the_one_given(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _stub(venv / "bin" / "python", OLD_PYTHON)  # `make lab` once run with python3.10
    log = tmp_path / "calls.log"
    new = _stub(tmp_path / "python3.11", RECORDING_PYTHON.format(log=log))
    proc = _make("install", f"VENV={venv}", f"PYTHON={new}")
    assert proc.returncode == 0, proc.stderr
    assert f"{venv} is broken or its Python is older than 3.11; recreating it with {new}" in (
        proc.stdout
    )
    calls = log.read_text().splitlines()
    assert f"{new} -m venv --clear {venv}" in calls
    # then the install ran on the new venv's Python, not the old one
    installs = [c for c in calls if " -m pip install " in c]
    assert installs and all(c.startswith(f"{venv}/bin/python ") for c in installs)
    assert calls.index(f"{new} -m venv --clear {venv}") < calls.index(installs[0])


def test_a_venv_of_the_right_python_is_kept(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    new = _stub(tmp_path / "python3.11", RECORDING_PYTHON.format(log=log))
    venv = tmp_path / "venv"
    _stub(venv / "bin" / "python", RECORDING_PYTHON.format(log=log))
    proc = _make("install", f"VENV={venv}", f"PYTHON={new}")
    assert proc.returncode == 0, proc.stderr
    assert "recreating" not in proc.stdout
    assert not [c for c in log.read_text().splitlines() if " venv " in c]


def test_a_kernelspec_that_shadows_the_venvs_is_named_not_reinstalled(tmp_path: Path) -> None:
    """A python3 spec earlier on JUPYTER_PATH starting another Python: reinstalling the venv's
    (as the Makefile did on every run) changes nothing JupyterLab starts. It fails instead,
    naming the spec, and leaves the venv alone."""
    venv = Path(sys.executable).parent.parent  # the venv running the tests: its spec is right
    shadow = tmp_path / "jupyter" / "kernels" / "python3"
    shadow.mkdir(parents=True)
    spec = {"argv": ["/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3", "language": "python"}  # fmt: skip
    (shadow / "kernel.json").write_text(json.dumps(spec))
    own = venv / "share" / "jupyter" / "kernels" / "python3" / "kernel.json"
    before = own.stat().st_mtime_ns if own.exists() else None
    stamp = venv / ".nbagent-installed"
    proc = _make("-o", str(stamp), "kernel", f"VENV={venv}",
                 env={"JUPYTER_PATH": str(tmp_path / "jupyter")})  # fmt: skip
    assert proc.returncode != 0
    assert f"The python3 kernelspec in {shadow} starts /usr/bin/python3" in proc.stderr
    assert f"Remove it (rm -r {shadow})" in proc.stderr
    assert "ipykernel install" not in proc.stdout
    assert (own.stat().st_mtime_ns if own.exists() else None) == before

    # A spec there that starts "python" (the server's own interpreter) shadows nothing.
    spec["argv"][0] = "python"
    (shadow / "kernel.json").write_text(json.dumps(spec))
    proc = _make("-o", str(stamp), "kernel", f"VENV={venv}",
                 env={"JUPYTER_PATH": str(tmp_path / "jupyter")})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
