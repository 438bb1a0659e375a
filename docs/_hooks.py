"""MkDocs hook: the example notebooks live in notebooks/ (beside the package, where `make lab`
opens them), not under docs/; this adds them to the site as ``notebooks/<name>.ipynb`` so that
mkdocs-jupyter renders them, with the outputs they were saved with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent


@event_priority(100)  # before mkdocs-jupyter's on_files turns .ipynb files into pages
def on_files(files: Files, config: Any) -> Files:
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        files.append(
            File(
                f"notebooks/{notebook.name}",
                src_dir=str(ROOT),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files
