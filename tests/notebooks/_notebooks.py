"""Executing the example notebooks in tests: one way to run them, one way to read them."""

from __future__ import annotations

import re
from pathlib import Path

import nbclient
import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def execute(name: str, *, timeout: int = 120, **client: object) -> nbformat.NotebookNode:
    """Run ``notebooks/<name>`` with a real kernel, in its own folder; no cell may fail."""
    path = NOTEBOOKS / name
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        **client,  # type: ignore[arg-type]
    ).execute()
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error", "\n".join(out.get("traceback", []))
    return nb


def outputs(nb: nbformat.NotebookNode) -> list[dict]:
    """Every output of every cell, in order."""
    return [out for cell in nb.cells for out in cell.get("outputs", [])]


def text(nb: nbformat.NotebookNode) -> str:
    """The printed text and ``text/plain`` of every output, one per line."""
    return "\n".join(
        o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in outputs(nb)
    )


def mime(nb: nbformat.NotebookNode, kind: str) -> list[str]:
    """The ``kind`` data (e.g. ``text/markdown``, ``image/png``) of every output that has it."""
    return [o["data"][kind] for o in outputs(nb) if kind in o.get("data", {})]


# What changes from one run to the next on its own: times, durations, made-up ids, paths.
_SCRUB = (
    (
        re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[+-]\d{2}:\d{2}|Z)?"),
        "<time>",
    ),
    (re.compile(r"<?\b\d+(?:\.\d+)?\s?(?:ms|s)\b"), "<dur>"),
    (re.compile(r"\b\d+\.\d{3,}\b"), "<num>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<id>"),
    (re.compile(r"nba-(live|twin)-\w+"), r"nba-\1"),
    (re.compile(r"(?:/[\w.+-]+)+/(?=[\w.-]+\b)"), "<path>/"),
    (re.compile(r"\s+"), " "),
)


def scrub(text: str) -> str:
    for pattern, replacement in _SCRUB:
        text = pattern.sub(replacement, text)
    return text.strip()


def saved_outputs(nb: nbformat.NotebookNode) -> list[list[str]]:
    """Each code cell's outputs as a reader sees them, scrubbed of what changes every run:
    printed text, a DataFrame's table (HTML: it does not wrap with the values' widths),
    every other output's plain text."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        shown: list[str] = []
        last_stream = None
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            html = str(data.get("text/html", ""))
            if out.get("output_type") == "stream":
                # How a stream's text is cut into outputs depends on when the kernel
                # flushed it: one stream's consecutive outputs are one text to a reader.
                head = f"{out.get('name')}: "
                if shown and shown[-1].startswith(head) and last_stream == out.get("name"):
                    shown[-1] += str(out.get("text", ""))
                else:
                    shown.append(head + str(out.get("text", "")))
                last_stream = out.get("name")
                continue
            elif 'class="dataframe' in html:
                shown.append(html)
            else:
                shown.append(str(data.get("text/plain", out.get("output_type"))))
            last_stream = None
        cells.append([scrub(s) for s in shown])
    return cells
