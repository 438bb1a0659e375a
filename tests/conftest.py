"""Shared fixtures: no API keys, no network, quiet and default configuration."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import nbagent
from nbagent import _config


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # after pytest's own unraisable hook is in place: an unclosed socket's report says where
    # it was opened (tests/_sockets.py)
    import _sockets

    _sockets.install()


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
