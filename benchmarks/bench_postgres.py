"""What the PostgreSQL store costs against SQLite's, on this machine (issue 17).

Against a throwaway local server (``tests/_postgres.py``: Debian's
``postgresql``, ``fsync=off``, 127.0.0.1; or the server of
``NBAGENT_BENCH_POSTGRES_DSN``, whose database must be empty), measured
interleaved in the same run:

- the 10-round tool loop of ``bench_store`` on the demo model (the store's raw
  cost) and against the loopback fake server (a model behind HTTP): PostgreSQL
  / SQLite, and each against no store;
- ``Chat.load`` of a chat with 1,000 tool calls: PostgreSQL / SQLite;
- how long a decision made through another store object takes to reach a
  process waiting on ``store.watch`` (PostgreSQL: NOTIFY; SQLite: polled);
- 8 chats driven at once on threads, one store object each (the rows of
  different chats are written in parallel on PostgreSQL; SQLite serialises
  every write), PostgreSQL / SQLite.

Ratios, no targets: a loopback server with ``fsync=off`` is the floor of what
a real deployment costs (a network hop and durable commits add to every
transaction).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import nbagent
from benchmarks._common import Result, interleaved
from benchmarks.bench_store import ROUNDS, _demo_loop, _fake_server_loop, _LoopProvider, add
from nbagent import Chat
from nbagent.store import DecisionWatch, PostgresStore, SQLiteStore, Store

TESTS = Path(__file__).resolve().parent.parent / "tests"


@contextmanager
def _server() -> Iterator[Callable[[], str]]:
    """A function giving the DSN of a fresh empty database (or the configured one, once)."""
    configured = os.environ.get("NBAGENT_BENCH_POSTGRES_DSN")
    if configured:
        yield lambda: configured
        return
    sys.path.insert(0, str(TESTS))
    try:
        from _postgres import PostgresServer, _bindir
    finally:
        sys.path.remove(str(TESTS))
    bindir = _bindir()
    if bindir is None:
        raise RuntimeError("no PostgreSQL server: run .ci/ensure-postgres")
    server = PostgresServer(bindir)
    try:
        server.start()
        yield server.new_database
    finally:
        server.stop()


def _ratio(name: str, runs: dict[str, tuple[float, float]], base: str, other: str) -> Result:
    (b, bc), (o, oc) = runs[base], runs[other]
    return Result(
        name,
        o / b,
        "x",
        detail=f"{b * 1000:.2f} -> {o * 1000:.2f} ms, +{(o - b) / ROUNDS * 1e6:.0f} us a round; "
        f"CPU {oc / bc:.2f}x",
    )


def _loops(quick: bool, sqlite: Store, pg: Store) -> list[Result]:
    runs = interleaved(
        {
            "memory": lambda: _demo_loop(None),
            "sqlite": lambda: _demo_loop(sqlite),
            "postgres": lambda: _demo_loop(pg),
        },
        repeat=10 if quick else 30,
    )
    demo = f"demo model: {ROUNDS} tool rounds"
    out = [
        _ratio(f"{demo}, PostgreSQL / SQLite", runs, "sqlite", "postgres"),
        _ratio("  SQLite / no store", runs, "memory", "sqlite"),
        _ratio("  PostgreSQL / no store", runs, "memory", "postgres"),
    ]
    from benchmarks.bench_providers import KEY, Server
    from nbagent.providers import OpenAIProvider

    server = Server()
    try:
        provider = OpenAIProvider(
            "gpt-4.1-mini", base_url=server.openai, api_key=KEY, max_retries=0
        )
        runs = interleaved(
            {
                "memory": lambda: _fake_server_loop(provider, None),
                "sqlite": lambda: _fake_server_loop(provider, sqlite),
                "postgres": lambda: _fake_server_loop(provider, pg),
            },
            repeat=10 if quick else 30,
        )
    finally:
        server.close()
    loop = f"fake server: {ROUNDS}-round tool loop"
    out += [
        _ratio(f"{loop}, PostgreSQL / SQLite", runs, "sqlite", "postgres"),
        _ratio("  SQLite / no store", runs, "memory", "sqlite"),
        _ratio("  PostgreSQL / no store", runs, "memory", "postgres"),
    ]
    return out


def _load(quick: bool, sqlite: Store, pg: Store) -> Result:
    n_calls = 1000
    ids = {}
    for name, store in (("sqlite", sqlite), ("postgres", pg)):
        chat = Chat(provider=_LoopProvider(n_calls), store=store, max_steps=3 * n_calls)
        chat.with_tools(add)
        chat.ask("add a lot")
        assert len(chat.tool_calls) == n_calls
        ids[name] = chat.id
        chat.close()

    def load(store: Store, chat_id: str) -> None:
        loaded = Chat.load(chat_id, store=store, tools=[add], provider=_LoopProvider(n_calls))
        assert len(loaded.tool_calls) == n_calls
        loaded.close()

    runs = interleaved(
        {
            name: (lambda s=s, i=ids[name]: load(s, i))
            for name, s in (("sqlite", sqlite), ("postgres", pg))
        },
        repeat=3 if quick else 7,
        warmup=1,
    )
    (s, _), (p, _) = runs["sqlite"], runs["postgres"]
    return Result(
        f"Chat.load of {n_calls} tool calls, PostgreSQL / SQLite",
        p / s,
        "x",
        detail=f"{s * 1000:.0f} -> {p * 1000:.0f} ms",
    )


def _decision_latency(quick: bool, store: Store, other: Store) -> float:
    """Median ms from ``other.approve`` returning to ``store.watch`` reporting it."""
    times = []
    for _ in range(5 if quick else 15):
        chat = Chat(model="demo", store=store).with_tools(_refund)
        chat.ask("refund order 42")
        call_id = chat.pending_approvals[0].id
        with store.watch([chat.id]) as watch:
            got: list[float] = []

            def wait(w: DecisionWatch = watch, got: list[float] = got) -> None:
                w.wait(10)
                got.append(time.perf_counter())

            waiter = threading.Thread(target=wait)
            waiter.start()
            time.sleep(0.05)
            t0 = time.perf_counter()
            other.approve(call_id, chat_id=chat.id)
            waiter.join()
        times.append((got[0] - t0) * 1000)
        chat.close()
    return statistics.median(times)


@nbagent.tool(requires_approval=True)
def _refund(order_id: int) -> str:
    """Refund an order.

    Args:
        order_id: The order.
    """
    return f"refunded {order_id}"


def _parallel(quick: bool, open_store: Callable[[], Store], chats: int = 8) -> float:
    """Seconds for ``chats`` demo chats of 5 tool rounds each, one thread and store object each."""

    def one(store: Store) -> None:
        chat = Chat(model="demo", store=store).with_tools(add)
        for i in range(5):
            chat.ask(f"add {i} and 1")
        chat.close()

    stores = [open_store() for _ in range(chats)]
    try:
        best = float("inf")
        for _ in range(2 if quick else 4):
            threads = [threading.Thread(target=one, args=(s,)) for s in stores]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            best = min(best, time.perf_counter() - t0)
        return best
    finally:
        for s in stores:
            s.close()


def run(quick: bool = False) -> list[Result]:
    nbagent.configure(quiet=True, display=False)
    with ExitStack() as stack:
        try:
            new_database = stack.enter_context(_server())
        except (RuntimeError, OSError) as exc:
            return [Result(f"PostgreSQL store: not measured ({exc})", 0.0, "")]
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            dsn = new_database()
            results: list[Result] = []
            with SQLiteStore(folder / "bench.db") as sqlite, PostgresStore(dsn) as pg:
                results += _loops(quick, sqlite, pg)
                results.append(_load(quick, sqlite, pg))
                with SQLiteStore(folder / "bench.db") as s2, PostgresStore(dsn) as p2:
                    lat_sqlite = _decision_latency(quick, sqlite, s2)
                    lat_pg = _decision_latency(quick, pg, p2)
            results.append(
                Result(
                    "a decision elsewhere reaches store.watch: PostgreSQL",
                    lat_pg,
                    "ms",
                    detail=f"SQLite (polled every 0.25 s): {lat_sqlite:.1f} ms",
                )
            )
            par_dsn = new_database()
            t_sqlite = _parallel(quick, lambda: SQLiteStore(folder / "parallel.db"))
            t_pg = _parallel(quick, lambda: PostgresStore(par_dsn))
            results.append(
                Result(
                    "8 chats at once (threads, a store each), PostgreSQL / SQLite",
                    t_pg / t_sqlite,
                    "x",
                    detail=f"{t_sqlite * 1000:.0f} -> {t_pg * 1000:.0f} ms",
                )
            )
            return results
    raise AssertionError("unreachable")
