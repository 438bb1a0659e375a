"""A fork made into its parent's store (``chat.fork()``) holds a lease of its own on it.

The fork used to get the parent's shared store object without a lease: ``f = c.fork();
c.close(); f.ask(...)`` raised ``StoreError: store ... is closed``, and at exit the fork
warned it was "closed without writing its last 1 event(s)": its turn was lost. Now the
shared store closes with the last of the parent and its forks, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import gc
import time
import warnings
from typing import Any

from nbagent import Chat
from nbagent.store import SQLiteStore, open_store
from nbagent.store._shared import shared_count


def _settled(where: str) -> None:
    """The store of ``where`` is no longer shared: closed with the last chat holding it (this
    store's only: an earlier test's store, left to the collector, lets go when it will)."""
    deadline = time.monotonic() + 10
    while shared_count(where):  # a collected chat lets go from a worker thread
        assert time.monotonic() < deadline, f"{where} is still shared"
        time.sleep(0.02)


def test_a_fork_goes_on_writing_after_its_parent_is_closed(backend: Any) -> None:
    parent = Chat(model="demo", store=backend.url)
    parent.ask("Hello")
    assert shared_count(backend.url) == 1
    fork = parent.fork()
    parent.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "closed without writing" either
        fork.ask("Hello again")
        fork.refresh()
        assert fork.status == "complete"
        fork.close()
    with open_store(backend.url) as panel:
        assert len(panel.load(fork.id).messages) == 4  # its own turn reached the store
        assert len(panel.load(parent.id).messages) == 2
    _settled(backend.url)  # the shared store closed with the last of them


def test_the_parent_goes_on_writing_after_its_fork_is_closed_or_collected(backend: Any) -> None:
    parent = Chat(model="demo", store=backend.url)
    parent.ask("Hello")
    assert shared_count(backend.url) == 1
    parent.fork().close()
    parent.fork()  # collected at once
    gc.collect()
    parent.ask("Still here")
    parent.close()
    with open_store(backend.url) as panel:
        assert len(panel.load(parent.id).messages) == 4
    _settled(backend.url)


def test_a_fork_of_a_chat_given_a_store_object_leaves_it_to_its_owner(tmp_path: Any) -> None:
    store = SQLiteStore(tmp_path / "agent.db")
    parent = Chat(model="demo", store=store)
    parent.ask("Hello")
    fork = parent.fork()
    parent.close()
    fork.ask("Hello again")
    fork.close()
    assert not store.closed  # the user's: they close it
    assert len(store.load(fork.id).messages) == 4
    store.close()
