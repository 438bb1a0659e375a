"""Batches on Ray: ``backend="ray"`` with 1 and 2 workers against the local backend.

The same batch as ``bench_batch`` (N chats x 3 tool rounds, 16 at once,
against the fake LLM server in a child process), run by one driver process
on the local backend and on a local Ray (this machine's CPUs) with 1 and 2
worker actors, interleaved, medians kept. Reported as throughput ratios
against the local backend measured in the same run, plus Ray's start time
and the cold first batch (workers starting), which a notebook pays once.

No target: here the fake server, the driver and the workers share 2 cores.
One worker adds a process and a hop per row (the driver forwards each row's
progress and result) to the same single-threaded client work, so it is
slower than local; two workers split the client's CPU over both cores. On a
cluster, workers bring their own cores.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from benchmarks._common import Result
from benchmarks.bench_batch import _fake_server


def run(quick: bool = False) -> list[Result]:
    try:
        import ray  # noqa: F401
    except ImportError:
        return [Result("ray backend (Ray not installed: pip install 'nbagent[ray]')", 0.0, "")]
    n = 200 if quick else 1000
    repeat = 1 if quick else 3
    concurrency = 16
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    with _fake_server(0.0) as port:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks._ray_client",
                *map(str, (port, n, concurrency, repeat)),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=1800,
        )
    if out.returncode:
        raise RuntimeError(f"benchmarks._ray_client failed:\n{out.stderr[-3000:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    walls = {mode: statistics.median(w) for mode, w in data["walls"].items()}
    local_tp = n / walls["local"]
    results = []
    for mode, label in (("ray1", "1 worker"), ("ray2", "2 workers")):
        tp = n / walls[mode]
        results.append(
            Result(
                f"ray backend, {label}, {n} chats x 3 tool rounds (vs local)",
                tp / local_tp,
                "x",
                "",
                None,
                f"ray {tp:.0f} chats/s, local {local_tp:.0f} chats/s, concurrency {concurrency}",
            )
        )
    cold = data["cold_s"]
    results.append(
        Result(
            "ray start (ray.init, local, this machine's CPUs)",
            data["init_s"],
            "s",
            "",
            None,
            f"first 16-chat batch: 1 worker {cold['ray1']:.1f} s, 2 workers "
            f"{cold['ray2']:.1f} s, local {cold['local']:.1f} s",
        )
    )
    return results
