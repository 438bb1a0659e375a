"""Run the quickstart notebook headless and print its transcript: ``python -m nbagent.demo``.

The notebook runs in a real kernel with nbclient, on the offline demo model
unless an API key is set. Each code cell is printed with its text outputs
(streams, results, and the plain-text form of the live chat views), which is
what ``make demo`` shows.

Usage: ``python -m nbagent.demo [NOTEBOOK] [--timeout SECONDS] [--kernel NAME]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from ._optional import require

DEFAULT = Path(__file__).resolve().parents[1] / "notebooks" / "01_quickstart.ipynb"


def cell_text(cell: Any) -> list[str]:
    """The text a terminal would show for one executed code cell."""
    out: list[str] = []
    for o in cell.get("outputs", []):
        kind = o.get("output_type")
        if kind == "stream":
            out.append(str(o.get("text", "")).rstrip("\n"))
        elif kind in ("display_data", "execute_result"):
            text = o.get("data", {}).get("text/plain")
            if text:
                out.append(str(text).rstrip("\n"))
        elif kind == "error":
            out.append(f"{o.get('ename')}: {o.get('evalue')}")
    return out


def transcript(nb: Any) -> str:
    lines: list[str] = []
    n = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            heading = next((ln for ln in cell.source.splitlines() if ln.startswith("#")), "")
            if heading:
                if lines and lines[-1]:
                    lines.append("")
                lines += [f"=== {heading.lstrip('# ')} ===", ""]
            continue
        if cell.cell_type != "code":
            continue
        n += 1
        source = cell.source.rstrip()
        lines.append(f"In [{n}]: " + source.replace("\n", "\n" + " " * (len(str(n)) + 7)))
        for text in cell_text(cell):
            lines.append(text)
        lines.append("")
    return "\n".join(lines)


def run(path: Path, *, timeout: float = 180, kernel: str = "python3") -> Any:
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=kernel,
        allow_errors=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nbagent.demo", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("notebook", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per cell")
    parser.add_argument("--kernel", default="python3", help="kernelspec name")
    args = parser.parse_args(argv)
    if not args.notebook.exists():
        print(
            f"nbagent.demo: no notebook at {args.notebook} (run it from a source checkout, "
            "or pass a notebook path)",
            file=sys.stderr,
        )
        return 2
    try:
        require("nbclient", "python -m nbagent.demo")
    except ModuleNotFoundError as exc:
        print(f"nbagent.demo: {exc}", file=sys.stderr)
        return 2
    print(f"Running {args.notebook} headless (nbclient, kernel {args.kernel!r})...\n", flush=True)
    t0 = time.perf_counter()
    try:
        nb = run(args.notebook, timeout=args.timeout, kernel=args.kernel)
    except Exception as exc:  # CellExecutionError carries the cell and the traceback
        print(f"nbagent.demo: the notebook failed:\n{exc}", file=sys.stderr)
        return 1
    print(transcript(nb))
    print(f"({len(nb.cells)} cells in {time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
