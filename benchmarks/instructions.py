"""The client's instructions a 10-round tool loop, nbagent or the raw SDK: a count, not a time.

A timed run on a shared virtual machine does not resolve a change of a few percent: the
10-round Anthropic loop's wall ratio moved between 0.79 and 0.90 over runs of the same code
in one afternoon. The number of instructions the client process executes barely moves, so
this counts them with valgrind's callgrind (not installed by the project: ``apt-get install
valgrind``), the way ``bench_providers`` runs the loop: the fake server in a child process
(not counted), the loop run ``--warm`` times, then ``--loops`` more in a second process; the
difference over ``--loops`` is one loop's instructions, startup and imports cancelled out.

    python -m benchmarks.instructions anthropic            # nbagent, JSON
    python -m benchmarks.instructions anthropic --stream --raw

It counts work, not time: a cache miss or a page fault costs no instruction, so it says
which of two versions does less, and the timed benches say what that is worth.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

from benchmarks.bench_providers import MODELS

_LOOP = """
import os, sys
sys.path.insert(0, os.environ["NBAGENT_ROOT"])
import nbagent
from benchmarks.bench_providers import Server, nbagent_loop, raw_loop
nbagent.configure(quiet=True, display=False)
server = Server()
try:
    make = raw_loop if os.environ["NBAGENT_RAW"] == "1" else nbagent_loop
    fn = make(os.environ["NBAGENT_KIND"], os.environ["NBAGENT_STREAM"] == "1", server, 10)
    for _ in range(int(os.environ["NBAGENT_N"])):
        fn()
finally:
    server.close()
"""


_CALLGRIND = ("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null")


def _count(env: dict[str, str], n: int) -> int:
    out = subprocess.run(
        [*_CALLGRIND, sys.executable, "-c", _LOOP],
        env={**env, "NBAGENT_N": str(n)},
        capture_output=True,
        text=True,
        check=True,
    )
    return collected(out.stderr)


def collected(report: str) -> int:
    """The instruction count in callgrind's closing lines (``==PID== Collected : N``)."""
    found = re.search(r"Collected\s*:\s*([\d,]+)", report)
    if found is None:
        raise RuntimeError(f"callgrind said no count:\n{report[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions")
    parser.add_argument("kind", choices=sorted(MODELS))
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--raw", action="store_true", help="the raw SDK's loop")
    parser.add_argument("--warm", type=int, default=3)
    parser.add_argument("--loops", type=int, default=20)
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {
        **os.environ,
        "NBAGENT_ROOT": root,
        "NBAGENT_KIND": args.kind,
        "NBAGENT_STREAM": "1" if args.stream else "0",
        "NBAGENT_RAW": "1" if args.raw else "0",
    }
    warm = _count(env, args.warm)
    more = _count(env, args.warm + args.loops)
    who = "raw SDK" if args.raw else "nbagent"
    how = "stream" if args.stream else "json"
    print(f"{args.kind} {how}, {who}: {(more - warm) / args.loops / 1e6:.2f}M instructions a loop")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
