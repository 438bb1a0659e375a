"""Batches: nbagent.batch against a raw AsyncOpenAI + asyncio.gather loop doing the same work.

1,000 chats x 3 tool rounds (4 requests each), C=16, against the fake LLM
server in a child process answering at once (0 ms) and after 50 ms; each side
runs in its own fresh child process (so each one's peak RSS is its own),
interleaved raw / nbagent (no store, SQLite, PostgreSQL), and the median is kept.
The chats are made with nbagent's defaults (``Chat(provider=...)``).

Targets (issue 28, all ratios in this one run, the load average printed):

- throughput >= 0.9x the raw loop's with SQLite and with PostgreSQL, >= 1.0x
  without a store, at 0 ms and at 50 ms;
- peak RSS growth per 1,000 chats <= 2x the raw loop's (at 0 ms);
- resident size after the batch returned (its result still held, after a
  collection) <= 1.2x the size before it, at N = 1,000 and 5,000.

With PostgreSQL, a fourth loop is measured without a target: the raw loop
committing each step's rows before it goes on (the prompt, each response with
its calls claimed, each result, the answer), the chats' waiting rows sent as one
insert through psycopg's ``AsyncConnection`` on the same loop. It is the floor of
what a store can cost on that loop, and it tells what the PostgreSQL line misses
by: nbagent's own store work, not the database's being there.

Without a store, the N = 5,000 memory line is measured a second time, without a
target, with "before" taken after a one-chat batch in the same process: what a
process pays once (the async HTTP stack's first use, the batch's modules,
pyarrow's memory pool for the frame's text columns, about 12 MiB) is then not
counted as memory the batch kept.

Most of that is pyarrow's, when it is installed (the ``parquet`` extra; the dev
environment has it): pandas keeps ``str`` columns in Arrow, whose mimalloc arena
is committed eagerly and backed by transparent huge pages, so the first frames a
process makes hold a few 2 MiB pages however small they are. Measured here: the
result frame of 5,000 rows allocates 0.49 MiB from the pool and leaves 10 MiB
resident in it (five huge pages); pandas alone, in a process without nbagent,
grows 8 MiB for a 500-row text frame. With ``MIMALLOC_ARENA_EAGER_COMMIT=0`` or
``ARROW_DEFAULT_MEMORY_POOL=system`` those pages are not there.

A client run during which the hypervisor gave more than 5% of a CPU to other guests (steal
time, read from ``/proc/stat``) is run again, twice at most, and the run that lost least is
kept: on this kind of machine such a run measures the neighbours (one that lost 8% of the
CPUs took 36% longer). Each line says the most any of its kept runs lost and how many were
redone.

The client's CPU per request is reported too: when the client is not the
bottleneck (the fake server, on 2 shared cores, is) the throughput ratio says
little, and CPU per request is the honest cost. With PostgreSQL the throwaway
server's own CPU per request is reported too: it shares the machine's cores with
the client, so it counts against the store's throughput. The baseline is the faster of
two raw loops: the SDK's documented idiom (the history holds the returned
message objects) and the same loop keeping the history as dicts.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from benchmarks._common import Result, steal_seconds

STORES = {"nbagent": "no store", "nbagent-sqlite": "SQLite", "nbagent-postgres": "PostgreSQL"}
FLOOR = "raw-postgres"
"""The raw loop committing what a store must before each step goes on, grouped, through
psycopg's async connection (``_batch_client``): what PostgreSQL costs at the least here."""
LATENCIES = (0.0, 0.05)
STEAL_LIMIT = 0.05
"""A client run during which the hypervisor took more than this share of one CPU for other
guests (steal time) is run again, twice at most, and the least disturbed run kept.
Measured here: a raw loop that lost 3 s of 16 to steal (8% of the two CPUs) took 36% longer
than the same loop beside it with none; quiet runs lose under 1%."""

SERVER = r"""
import sys
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

USAGE = {"input_tokens": 50, "output_tokens": 10}

DELAY = float(sys.argv[1])

def handler(request):
    done = sum(1 for m in request.body["messages"] if m.get("role") == "tool")
    if done < 3:
        return Turn(
            tool_calls=[FakeToolCall("lookup", {"item": f"x{done}"})], usage=USAGE, delay=DELAY
        )
    return Turn(text="All found.", usage=USAGE, delay=DELAY)

with FakeLLMServer(handler=handler) as server:
    print(server.port, flush=True)
    sys.stdin.read()
"""


def _client(
    mode: str, port: int, n: int, concurrency: int, dsn: str = "", warm: bool = False
) -> dict[str, float]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    if dsn:
        env["NBAGENT_BENCH_DSN"] = dsn
    if warm:
        env["NBAGENT_BENCH_WARM"] = "1"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks._batch_client",
            mode,
            str(port),
            str(n),
            str(concurrency),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=False,
    )
    if out.returncode:
        raise RuntimeError(f"{mode} client failed:\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _quietly(run: Callable[[], dict[str, float]]) -> dict[str, float]:
    """``run()`` (one client run), again while the host stole more than
    :data:`STEAL_LIMIT` of a CPU during it, three runs at most; the run kept, the one the
    host stole least from (a later run is no truer than an earlier one), says how much was
    stolen (``steal``: seconds per second of its wall time) and how many runs were dropped
    (``reruns``)."""
    tried: list[dict[str, float]] = []
    for _ in range(3):
        before = steal_seconds()
        got = run()
        got["steal"] = (steal_seconds() - before) / got["wall"]
        tried.append(got)
        if got["steal"] <= STEAL_LIMIT:
            break
    kept = min(tried, key=lambda r: r["steal"])
    kept["reruns"] = len(tried) - 1
    return kept


@contextlib.contextmanager
def _fake_server(delay: float) -> Iterator[int]:
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(delay)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        yield int(server.stdout.readline())
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)


@contextlib.contextmanager
def _postgres() -> Iterator[Callable[[], str] | None]:
    """A function giving a fresh database's DSN, or ``None`` (no PostgreSQL here)."""
    configured = os.environ.get("NBAGENT_BENCH_POSTGRES_DSN")
    if configured:
        yield lambda: configured
        return
    tests = str(Path(__file__).resolve().parent.parent / "tests")
    sys.path.insert(0, tests)
    try:
        from _postgres import PostgresServer, _bindir
    finally:
        sys.path.remove(tests)
    bindir = _bindir()
    if bindir is None:
        yield None
        return
    server = PostgresServer(bindir)
    try:
        server.start()
        yield server.new_database
    finally:
        server.stop()


def _server_cpu(new_db: Callable[[], str] | None) -> Callable[[], float] | None:
    """Seconds of CPU the throwaway PostgreSQL cluster used so far (its postmaster, the
    backends it reaped and those alive), or ``None`` (a configured server elsewhere)."""
    server = getattr(new_db, "__self__", None)
    data = getattr(server, "data", None)
    if data is None:
        return None
    tick = os.sysconf("SC_CLK_TCK")

    def used() -> float:
        try:
            postmaster = int((Path(data) / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return 0.0
        total = 0
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(pid) == postmaster:  # its own and its reaped children's
                total += sum(int(x) for x in stat[11:15])
            elif int(stat[1]) == postmaster:
                total += int(stat[11]) + int(stat[12])
        return total / tick

    return used


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.1f} {five:.1f} {fifteen:.1f}"


def run(quick: bool = False) -> list[Result]:
    n = 200 if quick else 1000
    # NBAGENT_BENCH_REPEAT: fewer interleaved repeats on a machine too busy for three
    repeat = 1 if quick else int(os.environ.get("NBAGENT_BENCH_REPEAT", "3"))
    concurrency = 16
    out: list[Result] = []
    with _postgres() as new_db:
        modes = ["raw", "raw-dicts", "nbagent", "nbagent-sqlite"]
        if new_db is not None:
            modes += ["nbagent-postgres", "raw-postgres"]
        else:
            out.append(Result("batch with PostgreSQL: not measured (no server)", 0.0, ""))
        server_cpu = _server_cpu(new_db)  # where PostgreSQL's time goes: its own CPU too
        runs: dict[float, dict[str, list[dict[str, float]]]] = {}
        for delay in LATENCIES:
            with _fake_server(delay) as port:
                runs[delay] = {m: [] for m in modes}
                for _ in range(repeat):
                    for mode in modes:

                        def one(mode: str = mode, port: int = port) -> dict[str, float]:
                            dsn = new_db() if mode.endswith("postgres") and new_db else ""
                            before = server_cpu() if server_cpu else 0.0
                            got = _client(mode, port, n, concurrency, dsn)
                            if server_cpu and dsn:
                                got["server_cpu"] = server_cpu() - before
                            return got

                        got = _quietly(one)
                        runs[delay][mode].append(got)
                        print(f"   {delay * 1000:.0f} ms {mode}: {got}", file=sys.stderr)
            out += _throughput(runs[delay], n, concurrency, delay)
        out += _memory(runs[0.0], n)
        # the second size, each store in its own fresh client process
        big = 1000 if quick else 5000
        with _fake_server(0.0) as port:
            for mode in modes:
                if mode.startswith("raw"):
                    continue
                dsn = new_db() if mode == "nbagent-postgres" and new_db else ""
                r = _client(mode, port, big, concurrency, dsn)
                print(f"   N={big} {mode}: {r}", file=sys.stderr)
                out.append(_given_back(mode, big, r))
            # no target: the same line with what the process pays once left out of it
            r = _client("nbagent", port, big, concurrency, warm=True)
            print(f"   N={big} nbagent, after one chat: {r}", file=sys.stderr)
            out.append(_given_back("nbagent", big, r, warm=True))
    return out


def _med(runs: dict[str, list[dict[str, float]]], mode: str, key: str) -> float:
    return statistics.median(r[key] for r in runs[mode])


def _throughput(
    runs: dict[str, list[dict[str, float]]], n: int, concurrency: int, delay: float
) -> list[Result]:
    # the baseline is the faster raw loop: the SDK's idiom (history of message objects),
    # or the same loop keeping the history as dicts
    raw_mode = min(("raw", "raw-dicts"), key=lambda m: _med(runs, m, "wall"))
    raw_tp = n / _med(runs, raw_mode, "wall")
    requests = runs[raw_mode][0]["requests"]
    assert requests == n * 4
    raw_cpu = _med(runs, raw_mode, "cpu") / requests * 1e3
    out = []
    for mode, label in [*STORES.items(), (FLOOR, "PostgreSQL floor")]:
        if mode not in runs:
            continue
        assert runs[mode][0]["requests"] == requests
        tp = n / _med(runs, mode, "wall")
        ratio = tp / raw_tp
        goal = None if mode == FLOOR else 1.0 if mode == "nbagent" else 0.9
        cpu = _med(runs, mode, "cpu") / requests * 1e3
        server = ""
        if "server_cpu" in runs[mode][0]:  # the server shares the machine with the client
            server = (
                f"; server CPU/request {_med(runs, mode, 'server_cpu') / requests * 1e3:.2f} ms"
            )
        out.append(
            Result(
                f"batch {n}x3 rounds, {delay * 1000:.0f} ms, {label}: throughput vs raw",
                ratio,
                "x",
                "" if goal is None else f">= {goal}x raw",
                None if goal is None else ratio >= goal,
                f"{tp:.0f} vs {raw_tp:.0f} chats/s; CPU/request {cpu:.2f} vs {raw_cpu:.2f} ms "
                f"({cpu / raw_cpu:.2f}x){server}; C={concurrency}; {_load()}; "
                f"{_stolen(runs, mode, raw_mode)}",
            )
        )
    return out


def _stolen(runs: dict[str, list[dict[str, float]]], *modes: str) -> str:
    """What the host took from the runs of ``modes`` (the most of a CPU during one run)
    and how many runs were dropped for it (:data:`STEAL_LIMIT`)."""
    kept = [r for m in modes for r in runs[m]]
    most = max(r.get("steal", 0.0) for r in kept)
    dropped = sum(int(r.get("reruns", 0)) for r in kept)
    return f"steal up to {most:.1%} of a CPU, {dropped} run(s) redone"


def _memory(runs: dict[str, list[dict[str, float]]], n: int) -> list[Result]:
    per_1000 = 1000 / n
    raw_mode = min(("raw", "raw-dicts"), key=lambda m: _med(runs, m, "wall"))
    raw = (_med(runs, raw_mode, "rss_peak") - _med(runs, raw_mode, "rss_before")) * per_1000
    out = []
    for mode, label in STORES.items():
        if mode not in runs:
            continue
        grown = (_med(runs, mode, "rss_peak") - _med(runs, mode, "rss_before")) * per_1000
        ratio = grown / max(raw, 0.5)
        out.append(
            Result(
                f"batch peak RSS growth per 1,000 chats, {label} vs raw",
                ratio,
                "x",
                "<= 2x raw",
                ratio <= 2.0,
                f"{grown:.1f} MiB vs raw {raw:.1f} MiB",
            )
        )
        r = {k: _med(runs, mode, k) for k in ("rss_now_before", "rss_now_after")}
        out.append(_given_back(mode, n, r))
    return out


def _given_back(mode: str, n: int, r: dict[str, float], warm: bool = False) -> Result:
    ratio = r["rss_now_after"] / r["rss_now_before"]
    if warm:  # informational: "before" measured after a one-chat batch of the same kind
        return Result(
            f"RSS after / before a batch of {n:,} (result kept), {STORES[mode]}, "
            "after a one-chat batch",
            ratio,
            "x",
            detail=f"{r['rss_now_before']:.0f} -> {r['rss_now_after']:.0f} MiB; the costs a "
            "process pays once left out",
        )
    return Result(
        f"RSS after / before a batch of {n:,} (result kept), {STORES[mode]}",
        ratio,
        "x",
        "<= 1.2x",
        ratio <= 1.2,
        f"{r['rss_now_before']:.0f} -> {r['rss_now_after']:.0f} MiB",
    )
