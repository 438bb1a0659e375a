"""Run the quickstart notebook headless and print its transcript: ``python -m nbagent.demo``.

The notebook runs in a real kernel with nbclient, on the offline demo model
unless an API key is set. Each code cell is printed with its text outputs
(streams, results, and the plain-text form of the live chat views), which is
what ``make demo`` shows.

Usage: ``python -m nbagent.demo [NOTEBOOK] [--timeout SECONDS] [--kernel NAME]``

``python -m nbagent.demo --save NOTEBOOK...`` (``make notebooks``) runs each notebook
on the demo model (API keys unset for the kernel) and writes it back with its outputs,
as they are committed for 01 and 03 so that GitHub shows them: no timing metadata, no
widget state, and the ids a run makes up (the views' CSS classes) renumbered in order,
so a rerun changes only what really changed (and the times). With no widget state saved,
a widget is saved as its static form alone: its output keeps its HTML, Markdown and
text and loses the widget reference, and its twin (the stand-in JupyterLab shows for a
dead widget, which GitHub, whose renderer drops the CSS that hides it, would show as a
second copy) is left out.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from ._optional import require

DEFAULT = Path(__file__).resolve().parents[1] / "notebooks" / "01_quickstart.ipynb"


def cell_text(cell: Any) -> list[str]:
    """The text a terminal would show for one executed code cell.

    A view still waiting for a decision is saved twice (the widget and its static twin
    for a reopened notebook); the terminal shows it once.
    """
    out: list[str] = []
    for o in cell.get("outputs", []):
        kind = o.get("output_type")
        if "nba-twin-" in str(o.get("data", {}).get("text/html", "")):
            continue
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
    """``path`` executed in a fresh kernel (its outputs replaced); a failing cell raises."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=kernel,
        allow_errors=False,
        record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    return nb


_RUN_IDS = re.compile(r"nba-(live|twin)-(?!idle\b)(\w+)")
_WIDGET = "application/vnd.jupyter.widget-view+json"
_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


def _renumber(nb: Any) -> None:
    """The notebook as it is saved: widgets as their static forms, without their twins, and
    the ids a run makes up numbered in order of appearance (see the module docstring)."""
    views: dict[str, str] = {}
    for cell in nb.cells:
        if "outputs" not in cell:
            continue
        cell["outputs"] = [
            out
            for out in cell["outputs"]
            if "nba-twin-" not in str(out.get("data", {}).get("text/html", ""))
        ]
        for out in cell["outputs"]:
            data = out.get("data", {})
            data.pop(_WIDGET, None)
            for kind, value in data.items():
                if isinstance(value, str):
                    data[kind] = _RUN_IDS.sub(
                        lambda m: f"nba-{m[1]}-{views.setdefault(m[2], str(len(views) + 1))}",
                        value,
                    )
    nb.metadata.pop("widgets", None)


def save(paths: list[Path], *, timeout: float = 180, kernel: str = "python3") -> None:
    """Run each notebook on the demo model and write it back with its outputs."""
    import nbformat

    saved = {k: os.environ.pop(k) for k in _KEYS if k in os.environ}
    try:
        for path in paths:
            nb = run(path, timeout=timeout, kernel=kernel)
            _renumber(nb)
            nbformat.write(nb, path)
            print(f"saved {path} with its outputs")
    finally:
        os.environ.update(saved)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nbagent.demo", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("notebook", nargs="*", type=Path, default=[DEFAULT])
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per cell")
    parser.add_argument("--kernel", default="python3", help="kernelspec name")
    parser.add_argument(
        "--save", action="store_true", help="write each notebook back with its outputs"
    )
    args = parser.parse_args(argv)
    notebooks: list[Path] = args.notebook if isinstance(args.notebook, list) else [args.notebook]
    for path in notebooks:
        if not path.exists():
            print(
                f"nbagent.demo: no notebook at {path} (run it from a source checkout, "
                "or pass a notebook path)",
                file=sys.stderr,
            )
            return 2
    if len(notebooks) > 1 and not args.save:
        print("nbagent.demo: one notebook at a time (or --save several)", file=sys.stderr)
        return 2
    try:
        require("nbclient", "python -m nbagent.demo")
    except ModuleNotFoundError as exc:
        print(f"nbagent.demo: {exc}", file=sys.stderr)
        return 2
    if args.save:
        try:
            save(notebooks, timeout=args.timeout, kernel=args.kernel)
        except Exception as exc:  # CellExecutionError carries the cell and the traceback
            print(f"nbagent.demo: the notebook failed:\n{exc}", file=sys.stderr)
            return 1
        return 0
    args.notebook = notebooks[0]
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
