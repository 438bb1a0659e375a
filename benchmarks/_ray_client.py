"""The Ray benchmark's driver, in its own process: ``python -m benchmarks._ray_client PORT N C R``.

Starts a local Ray (this machine's CPUs, no dashboard), then runs the same
batch (N chats x 3 tool rounds against the fake server on PORT, C at once) R
times each on the local backend and on Ray with 1 and 2 workers,
interleaved, after one warm-up of each (worker processes started and
imports done: what a notebook's second batch costs). Prints one JSON line:
the wall seconds of each run, Ray's start time and the first (cold) Ray
batch's time.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
import time
from typing import Any

from benchmarks._batch_client import KEY, MODEL, lookup

_PROVIDER: Any = None


class Factory:
    """One chat per input; the provider (its connection pool) is made once per process."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def __call__(self) -> Any:
        global _PROVIDER
        from nbagent import Chat, tool
        from nbagent.providers import OpenAIProvider

        if _PROVIDER is None:  # on each worker, from its own environment and arguments
            _PROVIDER = OpenAIProvider(MODEL, base_url=self.base_url, api_key=KEY)
        return Chat(provider=_PROVIDER, stream=False).with_tools(tool(lookup))


def main() -> None:
    port, n, concurrency, repeat = (int(a) for a in sys.argv[1:5])
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray

    import nbagent

    nbagent.configure(quiet=True, display=False)
    temp_dir = tempfile.mkdtemp(prefix="nbagent-bench-ray-")
    t0 = time.perf_counter()
    ray.init(
        include_dashboard=False,
        _temp_dir=temp_dir,
        logging_level=logging.ERROR,
        log_to_driver=False,
    )
    init_s = time.perf_counter() - t0
    # by its module's name, not __main__'s (which cloudpickle would copy, globals and all)
    from benchmarks._ray_client import Factory

    make = Factory(f"http://127.0.0.1:{port}/v1")
    prompts = [f"task {i}" for i in range(n)]
    modes: dict[str, dict[str, Any]] = {
        "local": {},
        "ray1": {"backend": "ray", "backend_options": {"workers": 1}},
        "ray2": {"backend": "ray", "backend_options": {"workers": 2}},
    }

    def once(mode: str, count: int = n) -> float:
        w0 = time.perf_counter()
        result = nbagent.batch(
            prompts[:count], make, concurrency=concurrency, progress=False, **modes[mode]
        )
        wall = time.perf_counter() - w0
        assert (result["status"] == "done").all(), result["error"].dropna().head()
        assert int(result["calls"].sum()) == 3 * count
        return wall

    cold = {mode: once(mode, 16) for mode in modes}  # warm-up: workers start, imports
    walls: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(repeat):
        for mode in modes:
            walls[mode].append(once(mode))
    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)
    print(json.dumps({"walls": walls, "init_s": init_s, "cold_s": cold}))


if __name__ == "__main__":
    main()
