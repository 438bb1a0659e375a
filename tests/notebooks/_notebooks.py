"""Executing the example notebooks in tests: one way to run them, one way to read them."""

from __future__ import annotations

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
