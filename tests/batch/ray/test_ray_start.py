"""When Ray cannot start, a Ray batch says so in one line, leaves nothing running, and
fails its rows (the bar counts them failed): it never hangs "queued" behind a traceback.

Ray is made to fail deterministically: ``ray.init(include_dashboard=True)`` without
the dashboard's packages starts a GCS server, then raises. The batch runs in a
fresh process (this one may already be connected to the session's Ray).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = r"""
import gc, json, os, sys, warnings
warnings.simplefilter("always", ResourceWarning)  # a Popen of Ray's collected unwaited
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
gc.collect()  # the failed start's half-made node, and its Popen objects, go now
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
    # and each was waited for through Ray's own handle of it: collected unwaited, it warned
    # "subprocess ... is still running" (an error in whichever test pytest was running then)
    assert "is still running" not in proc.stderr, proc.stderr[-3000:]


SLOW_START = r"""
import glob, json, os, signal, time
import nbagent
from _ray_agents import demo_chat
from _ray_stall import stall_first

temp_dir = os.environ["NBA_RAY_TEMP"]
# the first run's dashboard agent stalls past the raylet's wait for it (about 15 s in Ray
# 2.60, not configurable): the raylet ends itself and ray.init times out during startup
stopped = stall_first(temp_dir, "dashboard/agent.py", 20)
started = time.monotonic()
df = nbagent.batch(["Check the status of order 3", "Check the status of order 4"], demo_chat,
                   backend="ray", progress=False,
                   backend_options={"workers": 1, "init": {
                       "_temp_dir": temp_dir, "include_dashboard": False, "num_cpus": 1,
                       "object_store_memory": 128 * 1024 * 1024, "log_to_driver": False}})
out = {
    "status": df["status"].tolist(),
    "error": [e if isinstance(e, str) else None for e in df["error"]],
    "stopped": stopped,
    "sessions": len(glob.glob(os.path.join(temp_dir, "session_2*"))),
    "seconds": time.monotonic() - started,
}
import ray
ray.shutdown()
for pid in stopped:  # still stopped (the batch was quicker than the stall): end it
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
print("RESULT " + json.dumps(out))
"""


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")
def test_a_ray_start_that_times_out_under_load_is_tried_again(tmp_path: Path) -> None:
    """On a loaded machine (2 cores, load 10-15) the raylet gave up waiting for its dashboard
    agent (heavy imports) and every row of the batch failed ``RayUnavailable`` ("timed out
    during startup"), though nothing had run: the backend now starts Ray again (3 attempts
    in all). The load is made real and deterministic: the first run's agent is stopped for
    20 s (SIGSTOP), past the raylet's wait."""
    from _ray_stall import processes_of

    here = Path(__file__).resolve().parent
    short = tempfile.mkdtemp(prefix="nba-ray-")  # Ray's socket paths must stay short
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(here), str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "RAY_USAGE_STATS_ENABLED": "0",
        "NBA_RAY_TEMP": short,
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-c", SLOW_START],
            capture_output=True,
            text=True,
            env=env,
            timeout=400,
            cwd=tmp_path,
        )
        left = processes_of(short)
    finally:
        for pid in processes_of(short):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(short, ignore_errors=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    out = json.loads(lines[-1][len("RESULT ") :])
    assert len(out["stopped"]) == 1, out  # the first run's agent was stalled
    assert out["status"] == ["done", "done"], out
    assert out["sessions"] == 2, out  # it failed once, and Ray was started again
    assert left == [], left  # nothing of either run left running
