"""Run every ``benchmarks/bench_*.py`` module and print one report.

Each module defines ``run(quick: bool) -> list[Result]``. Numbers are reported as
ratios against a baseline measured in the same run (interleaved), never as
absolute pass/fail timings. ``python -m benchmarks [name ...] [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
import time
import traceback
from pathlib import Path

from benchmarks._common import Result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("names", nargs="*", help="bench modules to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    args = parser.parse_args(argv)
    here = Path(__file__).parent
    modules = sorted(
        m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_")
    )
    if args.names:
        modules = [m for m in modules if any(n in m for n in args.names)]
    results: list[Result] = []
    failed = 0
    broken: list[str] = []
    for name in modules:
        print(f"\n== {name} ==", flush=True)
        t0 = time.perf_counter()
        try:
            module = importlib.import_module(f"benchmarks.{name}")
            for r in module.run(quick=args.quick):
                results.append(r)
                print(r.line(), flush=True)
                failed += r.target_met is False
        except Exception:  # one broken bench must not take the rest of a long run with it
            traceback.print_exc()
            broken.append(name)
        print(f"   ({time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"\n{len(results)} measurements, {failed} target(s) missed")
    if broken:
        print(f"{len(broken)} bench module(s) failed to run: {', '.join(broken)}")
    if args.json:
        args.json.write_text(json.dumps([r.as_dict() for r in results], indent=2))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
