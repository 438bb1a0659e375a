"""The README and the documentation pages as tests read them: their code blocks, by page and by
heading (tests/test_docs_code_blocks.py states the marker convention)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"

# A fence at the start of a line: its info string, its body, the closing fence.
_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)
_TITLE = re.compile(r'title="([^"]*)"')


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    path: Path
    line: int  # of the opening fence, 1-based
    language: str  # "" for a fence without one (a diagram)
    title: str  # "" when the fence has none
    code: str

    @property
    def runs_here(self) -> bool:
        """Plain ```python: tests/test_docs_code_blocks.py runs it."""
        return self.language == "python" and not self.title

    @property
    def run_by(self) -> str | None:
        """The test file a ``title="run by test_x.py: why"`` names (by its name, so that moving
        it between folders of tests/ keeps the mark true), else None."""
        found = re.match(r"run by (test_\w+\.py)\b", self.title)
        return found.group(1) if found else None

    @property
    def not_run(self) -> bool:
        return self.title.startswith("not run: ") and len(self.title) > len("not run: ")

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    """The README and every Markdown page of the site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def blocks(path: Path, text: str | None = None) -> list[Block]:
    text = path.read_text() if text is None else text
    found = []
    for match in _FENCE.finditer(text):
        info = match.group(1).strip()
        language = info.split()[0] if info else ""
        title = _TITLE.search(info)
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(path, line, language, title.group(1) if title else "", match.group(2)))
    return found


def section(path: Path, heading: str) -> str:
    """The text under ``heading`` (a whole Markdown heading line) up to the next heading of the
    same or a higher level."""
    text = path.read_text()
    start = re.search(rf"^{re.escape(heading)}[ \t]*$", text, re.M)
    assert start is not None, f"{path.name} has no heading {heading!r}"
    level = len(heading) - len(heading.lstrip("#"))
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(text, start.end())
    return text[start.start() : end.start() if end else len(text)]


def python_after(path: Path, heading: str, *, index: int = 0) -> str:
    """The ``index``-th python block under ``heading`` (runnable or not)."""
    found = [b for b in blocks(path, section(path, heading)) if b.language == "python"]
    assert len(found) > index, f"{path.name}, {heading!r}: fewer than {index + 1} python blocks"
    return found[index].code
