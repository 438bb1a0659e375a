"""When Ray cannot start, a Ray batch says so in one line, leaves nothing running, and
fails its rows (the bar counts them failed): it never hangs "queued" behind a traceback.

Ray is made to fail deterministically: ``ray.init(include_dashboard=True)`` without
the dashboard's packages starts a GCS server, then raises. The batch runs in a
fresh process (this one may already be connected to the session's Ray).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = r"""
import json, os, sys
import pandas as pd
import nbagent
from nbagent import Chat
from nbagent.batch import RayUnavailable
from nbagent.batch._ray import _children

tickets = pd.DataFrame({"ask": ["status", "status", "refund"], "order_id": [1, 2, 3]})
init = {"include_dashboard": True, "log_to_driver": False}
df = nbagent.batch(tickets, lambda row: Chat(model="demo", display=False),
                   prompt="{ask} {order_id}", backend="ray", progress=False,
                   backend_options={"init": init})
run = df.attrs["nbagent_batch"]
out = {
    "status": df["status"].tolist(),
    "error": df["error"].tolist(),
    "error_type": df["error_type"].tolist(),
    "counts": run.progress.snapshot().counts,
    "left": sorted(_children()),
}
try:
    nbagent.batch(tickets, lambda row: Chat(model="demo", display=False),
                  prompt="{ask} {order_id}", backend="ray", progress=False,
                  backend_options={"init": init}, on_error="raise")
except RayUnavailable as exc:
    out["raised"] = str(exc)
    out["left_after_raise"] = sorted(_children())
print("RESULT " + json.dumps(out))
"""


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")
def test_a_ray_that_cannot_start_fails_the_rows_in_one_line_and_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    dashboard = importlib.util.find_spec("aiohttp") is not None and (
        importlib.util.find_spec("opencensus") is not None
    )
    assert not dashboard, "the dashboard's packages are installed: this test needs another way"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    short = tempfile.mkdtemp(prefix="nba-ray-")  # Ray's socket paths must stay short
    env.update(RAY_USAGE_STATS_ENABLED="0", RAY_TMPDIR=short)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", SCRIPT],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=tmp_path,
        )
    finally:
        shutil.rmtree(short, ignore_errors=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    out = json.loads(lines[-1][len("RESULT ") :])
    assert out["status"] == ["failed"] * 3
    assert set(out["error_type"]) == {"RayUnavailable"}
    error = out["error"][0]
    assert error.startswith("Ray could not start on this machine: ") and "\n" not in error
    assert "dashboard" in error  # Ray's own reason, in the same line
    assert out["counts"]["failed"] == 3 and out["counts"].get("queued", 0) == 0
    assert out["left"] == []  # no GCS server or other Ray process left running
    assert out["raised"] == error and out["left_after_raise"] == []
