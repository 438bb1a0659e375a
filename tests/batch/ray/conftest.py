"""One local Ray instance (2 CPUs) per test process, shared by the tests of tests/batch/ray it runs.

``ray_cluster`` (session) starts it on first use and shuts it down at the end
of the session: no dashboard, no usage statistics (no network), quiet logs, and
its own temporary directory (``mktemp -d``: sessions of other users and helpers
share /tmp). It starts in about 5 to 8 s on a 2-core machine (measured: the
``ray_start_seconds`` attribute), once per session; on a loaded machine it may time out
starting (its raylet waits a fixed ~15 s for its dashboard agent) and is started again, as
``RayBackend.connect`` does. Under ``make test`` (``--dist loadfile``) this directory's
files all go to one pytest-xdist worker (``ONE_WORKER_DIRS`` in tests/conftest.py), so it
starts once in the run.

The workers import test helpers by module name, so the fixture gives them this
directory and the repository root on ``PYTHONPATH`` (inherited by the raylet):
the code a worker runs is the code under test, not an installed copy.

Without Ray installed the tests are skipped, unless ``NBAGENT_REQUIRE_RAY`` is
set (``make test`` sets it): then they fail, so CI never calls a skip a pass.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nbagent.batch._ray import START_ATTEMPTS, START_TIMED_OUT, _children, _end, _is_ray

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

NUM_CPUS = 2
OBJECT_STORE_BYTES = 128 * 1024 * 1024
"""The object store holds a run's spec and the rows' small updates and results."""


def ray_required() -> bool:
    """Whether a missing Ray fails the tests instead of skipping them."""
    return os.environ.get("NBAGENT_REQUIRE_RAY", "").strip().lower() not in ("", "0", "no", "false")


@dataclass
class RayCluster:
    """The running local Ray instance.

    Attributes:
        address: The GCS address (``ray.init(address=...)`` from another process).
        temp_dir: Ray's session files (logs, sockets).
        start_seconds: How long ``ray.init`` took.
    """

    address: str
    temp_dir: str
    start_seconds: float


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    if importlib.util.find_spec("ray") is None:
        message = "Ray is not installed: pip install 'nbagent[ray]'"
        if ray_required():
            pytest.fail(f"NBAGENT_REQUIRE_RAY is set but {message}", pytrace=False)
        pytest.skip(message)
    # Workers and the raylet inherit the driver's environment at start; this
    # one keeps Ray from ever reporting usage statistics over the network.
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray

    if ray.is_initialized():  # someone else's instance: never reuse it silently
        ray.shutdown()
    temp_dir = tempfile.mkdtemp(prefix="nbagent-ray-")
    # The raylet and its workers inherit this environment: a job-level
    # runtime_env would start every worker afresh instead of from Ray's
    # pre-started pool (seconds per worker on a busy machine).
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), str(ROOT), saved) if p)
    started = time.perf_counter()
    try:
        for attempt in range(1, START_ATTEMPTS + 1):
            before = _children()
            try:
                context: Any = ray.init(
                    num_cpus=NUM_CPUS,
                    # small: a CI container's /dev/shm may be 64 MB (else Ray uses the temp dir)
                    object_store_memory=OBJECT_STORE_BYTES,
                    include_dashboard=False,
                    _temp_dir=temp_dir,
                    namespace="nbagent-tests",
                    logging_level=logging.ERROR,
                    log_to_driver=False,
                )
                break
            except Exception as exc:  # a loaded machine: as RayBackend.connect does
                ray.shutdown()
                # what the failed start left running, each waited for through Ray's Popen
                # (collected unwaited, it failed a later test with "still running")
                _end({p for p in _children() - before if _is_ray(p)})
                if START_TIMED_OUT not in str(exc) or attempt == START_ATTEMPTS:
                    raise
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    cluster = RayCluster(
        address=context.address_info["gcs_address"],
        temp_dir=temp_dir,
        start_seconds=time.perf_counter() - started,
    )
    try:
        yield cluster
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture
def server() -> Iterator[Any]:
    """The fake model server the Ray tests' chats talk to (``_ray_agents.handler``); the
    providers the test made are closed after it."""
    from _ray_agents import close_providers, handler

    from nbagent.testing import FakeLLMServer

    with FakeLLMServer(handler=handler) as fake:
        try:
            yield fake
        finally:
            close_providers()
