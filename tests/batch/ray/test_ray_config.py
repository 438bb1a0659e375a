"""The Ray backend's choices that need no running Ray, and the bad input it refuses.

Where the store lives (a SQLite file only when every node is this machine),
what travels to workers (a DSN without its password in clear; no provider
object), and options.
"""

from __future__ import annotations

import pickle
import threading
from pathlib import Path
from typing import Any

import pytest
from _ray_agents import KEY

import nbagent
from nbagent import Chat
from nbagent.batch._ray import RayBackend, StoreLocator, check_store_reach, locate_store
from nbagent.providers import OpenAIProvider
from nbagent.store import PostgresStore, SQLiteStore


def test_the_password_never_shows_in_a_locator_yet_a_worker_opens_the_same_store(
    postgres_dsn: str,
) -> None:
    from _postgres import PASSWORD

    assert PASSWORD in postgres_dsn
    with PostgresStore(postgres_dsn, claim_timeout=7.5) as store:
        locator = locate_store(store)
        assert locator is not None and locator.target == store.location
        assert PASSWORD not in repr(locator) and PASSWORD not in str(locator)
        with locator.open() as opened:  # what a worker does: its own connection, same settings
            assert opened is not store and opened.location == store.location
            assert opened.claim_timeout == 7.5 and opened.reveal_dsn() == store.reveal_dsn()


def test_a_sqlite_store_is_refused_when_a_node_is_elsewhere(tmp_path: Path) -> None:
    locator = locate_store(SQLiteStore(tmp_path / "b.db"))
    assert locator is not None and locator.target == str(tmp_path / "b.db")
    here = [{"NodeManagerAddress": "127.0.0.1", "Alive": True}]
    check_store_reach(locator, here)  # one machine: fine
    gone = [*here, {"NodeManagerAddress": "10.0.0.9", "Alive": False}]
    check_store_reach(locator, gone)  # a dead node runs nothing
    with pytest.raises(ValueError) as caught:
        check_store_reach(locator, [*here, {"NodeManagerAddress": "10.0.0.7", "Alive": True}])
    message = str(caught.value)
    assert "10.0.0.7" in message and "PostgresStore(dsn)" in message
    assert str(tmp_path / "b.db") in message
    check_store_reach(StoreLocator("pickled", "host=db"), [{"NodeManagerAddress": "10.0.0.7"}])


def test_a_store_a_worker_cannot_open_is_refused() -> None:
    class Local:
        lock = threading.Lock()

        def __reduce__(self) -> Any:
            raise TypeError("cannot pickle 'Local'")

    with pytest.raises(TypeError, match="cannot open a Local: use a PostgresStore"):
        locate_store(Local())
    assert locate_store(None) is None


def test_options_are_checked() -> None:
    with pytest.raises(TypeError, match=r"unknown Ray backend option.*'adress'"):
        RayBackend.from_options({"adress": "auto"})
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="workers must be a positive int"):
            RayBackend(workers=bad)  # type: ignore[arg-type]
    backend = RayBackend.from_options({"address": "auto", "workers": 3})
    assert (backend.address, backend.workers) == ("auto", 3)
    assert repr(backend) == "RayBackend(address='auto', workers=3)"


def test_a_factory_capturing_a_provider_is_refused_before_anything_runs(
    ray_cluster: Any,
) -> None:
    provider = OpenAIProvider("gpt-4.1-mini", api_key=KEY, base_url="http://127.0.0.1:9/v1")
    with pytest.raises(TypeError) as caught:
        nbagent.batch(["hi"], lambda: Chat(provider=provider), backend="ray", progress=False)
    message = str(caught.value)
    assert "cannot be pickled" in message and "make the provider inside the factory" in message
    assert KEY not in message
    with pytest.raises(TypeError):
        pickle.dumps(provider)  # why: a provider holds its client (and key); never shipped
