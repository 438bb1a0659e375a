"""The documentation site builds with ``mkdocs build --strict`` (any warning fails: a broken
link, a page missing from the files, a docstring the API reference cannot read), renders the
notebooks with their saved outputs without running them, and has the task pages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _docs import DOCS, ROOT

TASK_PAGES = [
    "getting-started.md",
    "approve-from-a-button.md",
    "decide-from-another-process.md",
    "batch.md",
    "mcp.md",
    "replay-and-fork.md",
    "store.md",
    "ray.md",
    "testing.md",
    "controlling-tool-execution.md",
    "analysis.md",
    "ARCHITECTURE.md",
]


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in _nav_pages(value)]
    if isinstance(nav, list):
        return [p for item in nav for p in _nav_pages(item)]
    return []


def _config() -> dict[str, object]:
    # mkdocs.yml has no custom YAML tags, so the safe loader reads it.
    loaded = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_the_navigation_has_every_task_page_and_every_notebook() -> None:
    pages = _nav_pages(_config()["nav"])
    assert [p for p in TASK_PAGES if p not in pages] == []
    assert any(p.startswith("api/") for p in pages)
    notebooks = sorted(f"notebooks/{n.name}" for n in (ROOT / "notebooks").glob("*.ipynb"))
    assert [n for n in notebooks if n not in pages] == []
    # every page in docs/ is reachable from the navigation (mkdocs only logs it otherwise)
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert on_disk - set(pages) == set()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:]
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("WARNING")]
    assert warnings == []
    return out


def test_the_site_builds_strictly(site: Path) -> None:
    assert (site / "index.html").exists()
    for page in TASK_PAGES:
        assert (site / page.removesuffix(".md") / "index.html").exists(), page


def test_the_api_reference_comes_from_the_docstrings(site: Path) -> None:
    html = (site / "api" / "chat" / "index.html").read_text()
    assert 'id="nbagent.Chat"' in html
    assert "pending_approvals" in html and "always_allow" in html
    testing = (site / "api" / "testing" / "index.html").read_text()
    assert "ScriptedProvider" in testing and "FakeLLMServer" in testing


def test_the_notebooks_are_rendered_with_their_saved_outputs(site: Path) -> None:
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        html = (site / "notebooks" / path.stem / "index.html").read_text()
        cells = json.loads(path.read_text())["cells"]
        code = next(c for c in cells if c["cell_type"] == "code" and "".join(c["source"]).strip())
        first_line = "".join(code["source"]).strip().splitlines()[0]
        # the first code line is in the page (highlighted: one token of it at least)
        assert first_line.split("(")[0].split()[-1] in html, path.name
        saved = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
        texts = ["".join(o.get("text", "")) for o in saved if o.get("output_type") == "stream"]
        for text in (t.strip().splitlines()[0] for t in texts if t.strip()):
            assert text[:30].replace("&", "&amp;").replace("<", "&lt;") in html, path.name


def test_the_not_run_titles_show_on_the_site(site: Path) -> None:
    html = (site / "providers" / "index.html").read_text()
    assert "not run: needs API keys" in html
