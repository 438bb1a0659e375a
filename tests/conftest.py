"""Shared fixtures: no API keys, no network, quiet and default configuration."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import nbagent
from nbagent import _config


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # after pytest's own unraisable hook is in place: an unclosed socket's report says where
    # it was opened (tests/_sockets.py)
    import _sockets

    _sockets.install()


# Test directories whose tests share a costly session fixture. Under ``--dist loadfile``
# (``make test``) each is one work unit, run whole by one worker, so the fixture starts once
# in the run instead of once in every worker that happens to get one of its files: the Ray
# instance (tests/batch/ray/conftest.py) takes 10-30 s to start, and both cores while it does.
ONE_WORKER_DIRS = ("tests/batch/ray/",)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadfile":
        return None  # xdist's own scheduler for every other mode
    from xdist.scheduler import LoadFileScheduling

    class _LoadFileKeepingDirsTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            for directory in ONE_WORKER_DIRS:
                if nodeid.startswith(directory):
                    return directory
            return super()._split_scope(nodeid)

    return _LoadFileKeepingDirsTogether(config, log)


@pytest.fixture(autouse=True)
def _isolate(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    saved = _config.get_config()
    nbagent.configure(quiet=True, display=False)
    yield
    _config._config = saved


# A real PostgreSQL server (session) and a fresh database per test: tests/_postgres.py.
from _postgres import postgres_dsn, postgres_server  # noqa: E402, F401
