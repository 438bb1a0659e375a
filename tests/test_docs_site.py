"""The documentation site builds with ``mkdocs build --strict`` (any warning fails: a broken
link, a page missing from the files, a docstring the API reference cannot read), renders the
notebooks with their saved outputs without running them, and has the task pages."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _docs import DOCS, ROOT

# A full build takes one to two minutes on a busy 2-core machine (most of it importing
# nbconvert and rendering ten notebooks), past the suite's 300 s default when it is busier.
pytestmark = pytest.mark.timeout(900)

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


def _page_text(html_page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", html_page))


def test_the_notebooks_are_rendered_with_their_saved_outputs(site: Path) -> None:
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        text = _page_text((site / "notebooks" / path.stem / "index.html").read_text())
        cells = json.loads(path.read_text())["cells"]
        code = [c for c in cells if c["cell_type"] == "code" and "".join(c["source"]).strip()]
        assert "".join(code[0]["source"]).strip().splitlines()[0] in text, path.name
        for output in (o for c in code for o in c.get("outputs", [])):
            if output.get("output_type") == "stream" and "".join(output["text"]).strip():
                first = re.sub(r"\x1b\[[0-9;]*m", "", "".join(output["text"])).strip()
                assert first.splitlines()[0][:40] in text, path.name


def test_a_notebook_is_rendered_from_its_outputs_and_never_run(tmp_path: Path) -> None:
    """With the site's own mkdocs-jupyter options: a notebook whose saved output is not what
    its code would print shows the saved output (nothing ran it)."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    plugins = _config()["plugins"]
    assert isinstance(plugins, list)
    options = next(
        p["mkdocs-jupyter"] for p in plugins if isinstance(p, dict) and "mkdocs-jupyter" in p
    )
    assert options["execute"] is False
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n")
    notebook = {
        "cells": [
            {"cell_type": "markdown", "id": "title", "metadata": {}, "source": ["# A notebook"]},
            {
                "cell_type": "code",
                "id": "code",
                "execution_count": 1,
                "metadata": {},
                "source": ["print('computed now')"],
                "outputs": [
                    {"output_type": "stream", "name": "stdout", "text": ["saved before\n"]}
                ],
            },
        ],
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (docs / "nb.ipynb").write_text(json.dumps(notebook))
    config_file = tmp_path / "mkdocs.yml"
    config_file.write_text(
        yaml.safe_dump(
            {
                "site_name": "t",
                "docs_dir": str(docs),
                "site_dir": str(tmp_path / "site"),
                # its own cache: the plugin's default, .cache/mkdocs-jupyter under the working
                # directory (the checkout), lost every entry this small build did not use
                "plugins": [
                    {
                        "mkdocs-jupyter": {
                            **options,
                            "include": ["*.ipynb"],
                            "cache_dir": str(tmp_path / "cache"),
                        }
                    }
                ],
                "nav": ["index.md", "nb.ipynb"],
            }
        )
    )
    build(load_config(str(config_file), strict=True))
    text = _page_text((tmp_path / "site" / "nb" / "index.html").read_text())
    assert "saved before" in text and "computed now" in text  # the output, and the code
    assert "computed now\n" not in text.split("print(")[-1]  # never the code's own output


def test_the_not_run_titles_show_on_the_site(site: Path) -> None:
    html = (site / "providers" / "index.html").read_text()
    assert "not run: needs API keys" in html


# ---------------------------------------------------------------- the API reference's entries
def _public_packages() -> list[str]:
    """``nbagent`` and its wings: every public subpackage (a folder of nbagent/ whose name has
    no underscore) that says what it exports."""
    wings = sorted(
        f"nbagent.{p.parent.name}"
        for p in (ROOT / "nbagent").glob("*/__init__.py")
        if not p.parent.name.startswith("_")
    )
    return ["nbagent", *wings]


def _resolve(dotted: str) -> object:
    """The object an entry's id names (``nbagent.batch.RayUnavailable``, ``nbagent.Chat.ask``):
    the longest importable module, then attributes. None if nothing has that path."""
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return None
            obj = getattr(obj, name)
        return obj
    return None


def _entries(site: Path, level: str = r"h\d") -> list[str]:
    """The ids of the API reference's headings of objects (``nbagent.store.SQLiteStore``)."""
    return [
        found
        for page in sorted((site / "api").glob("*/index.html"))
        for found in re.findall(rf'<{level} id="(nbagent[\w.]*)"', page.read_text())
    ]


def test_every_public_name_has_an_entry_in_the_api_reference(site: Path) -> None:
    """Each name of ``nbagent.__all__`` and of each wing's ``__all__`` is an entry of the built
    reference: a heading whose id ends with that name and names that object, or (an alias, as
    ``nbagent.testing.ScriptedRequest`` of ``ModelRequest``) an entry of the same class or
    function. Reading the built pages, not docs/api/*.md: a directive the reference's reader
    cannot follow (a name loaded on first use) renders nothing and fails no build."""
    import importlib
    import inspect

    by_name: dict[str, list[object]] = {}
    documented: list[object] = []
    for entry in _entries(site):
        obj = _resolve(entry)
        by_name.setdefault(entry.rsplit(".", 1)[-1], []).append(obj)
        documented.append(obj)
    missing = []
    packages = _public_packages()
    assert {"nbagent.batch", "nbagent.store", "nbagent.testing", "nbagent.mcp"} <= set(packages)
    for package in packages:
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", []):
            if name == "__version__":
                continue
            obj = getattr(module, name)
            if any(o is obj for o in by_name.get(name, [])):
                continue
            own = inspect.isclass(obj) or inspect.isfunction(obj)
            if own and any(o is obj for o in documented):
                continue
            missing.append(f"{package}.{name}")
    assert missing == []


def test_no_object_has_two_entries(site: Path) -> None:
    """``::: nbagent.inbox`` (the package, ``Inbox`` among its members) and ``::: nbagent.Inbox``
    showed ``Inbox`` twice. An entry of a module's object, at any level (a class's members
    are left out: a subclass shows the methods it inherits)."""
    import types

    seen: dict[tuple[str, int], list[str]] = {}
    for entry in _entries(site):
        parent, _, name = entry.rpartition(".")
        if isinstance(_resolve(parent), types.ModuleType):
            seen.setdefault((name, id(_resolve(entry))), []).append(entry)
    assert [entries for entries in seen.values() if len(entries) > 1] == []


def test_the_many_chats_page_shows_the_functions_users_call_first(site: Path) -> None:
    """``::: nbagent.batch`` rendered the package: its backend seam (``ProgressSink``,
    ``Job``, ``BatchRun.stop_anywhere``...) before, and instead of, the ``batch(...)``
    function's parameters."""
    entries = _entries(site, "h2")
    many = re.findall(r'<h2 id="(nbagent[\w.]*)"', (site / "api/many/index.html").read_text())
    assert many[:3] == [
        "nbagent.batch.batch",
        "nbagent.batch.batch_async",
        "nbagent.batch.batch_results",
    ]
    assert "nbagent.inbox.inbox" in many and "nbagent.batch" not in many
    assert "nbagent.inbox" not in entries
    text = _page_text((site / "api/many/index.html").read_text())
    start = text.index("Writing a batch backend")
    for seam in ("ProgressSink", "RunSpec", "register_backend", "stop_anywhere"):
        assert text.index(seam) > start, seam


# A Sphinx role as Markdown shows it (`:class:` before code), and reST's literal-block marker.
_RAW_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|mod|exc|data|obj|const|ref):`?")
_RAW_LITERAL = re.compile(r"\S::(?=\s|$)|^\s*::\s*$", re.M)


def test_the_api_reference_shows_no_restructured_text(site: Path) -> None:
    """The docstrings' ``:class:`Chat``` and ``Example::`` showed literally (about 370 of
    them); docs/_hooks.py:SphinxMarkup turns them into code as the reference reads them."""
    found = []
    for page in sorted((site / "api").glob("*/index.html")):
        prose = re.sub(r"<(pre|code)\b.*?</\1>", " ", page.read_text(), flags=re.S)
        text = _page_text(prose)
        for pattern in (_RAW_ROLE, _RAW_LITERAL):
            found += [f"{page.parent.name}: {m.group()!r}" for m in pattern.finditer(text)]
    assert found == []
    chat = (site / "api" / "chat" / "index.html").read_text()
    assert "<code>" in chat and "highlight" in chat
