"""The site's build code (mkdocs.yml names this file twice).

- As an MkDocs hook: the example notebooks live in notebooks/ (beside the package, where
  `make lab` opens them), not under docs/; :func:`on_files` adds them to the site as
  ``notebooks/<name>.ipynb`` so that mkdocs-jupyter renders them, with the outputs they were
  saved with.
- As a griffe extension (``SphinxMarkup``, the API reference's loader): the package's
  docstrings are Google style with a little reStructuredText in them (``:class:`Chat```,
  ``:meth:`~nbagent.Chat.ask```, ``Example::`` before an indented literal block), which
  Markdown shows literally. :func:`markdown_of` turns that into Markdown as the docstrings
  are read, so the reference shows code, not roles; the package's source stays as it is.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import griffe
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


# A Sphinx role: `:class:`X``, `:py:meth:`~a.b.C.d``, `:attr:`title <a.b.c>``.
_ROLE = re.compile(r"(?<![\w`]):(?:[a-z]+:)?[a-z]+:`([^`\n]+)`")
_FENCE = re.compile(r"^\s*(```|~~~)")
_LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+")


def _role_text(target: str) -> str:
    """What Sphinx shows for a role's target: the title of ``title <target>``; the last
    component of ``~a.b.c``; else the target as written."""
    titled = re.fullmatch(r"(.+?)\s*<([^<>]+)>", target.strip())
    if titled:
        return titled.group(1)
    text = target.strip().lstrip("!")
    if text.startswith("~"):
        text = text[1:].rsplit(".", 1)[-1]
    return text


def _roles(line: str) -> str:
    return _ROLE.sub(lambda m: f"`{_role_text(m.group(1))}`", line)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _content_indent(line: str) -> int:
    """Where the text of ``line`` starts: past a list item's marker, if it has one."""
    item = _LIST_ITEM.match(line)
    return item.end() if item else _indent(line)


def _joined_names(lines: list[str]) -> list[str]:
    """An attribute item naming several attributes whose names wrap (``id / kind /`` then,
    more indented, ``requested_at: As on ...``) as one line, which griffe reads as one item."""
    out: list[str] = []
    for line in lines:
        previous = out[-1] if out else ""
        if (
            previous.endswith(" /")
            and ":" not in previous
            and _indent(line) > _indent(previous)
            and line.strip()
        ):
            out[-1] = f"{previous} {line.strip()}"
        else:
            out.append(line)
    return out


def markdown_of(text: str) -> str:
    """A docstring's reStructuredText bits as Markdown.

    - a role (``:class:`Chat```, ``:meth:`~nbagent.Chat.ask```) becomes inline code of
      what Sphinx would show (``Chat``, ``ask``);
    - ``Example::`` (``text ::``, a lone ``::``) followed by a more indented block becomes
      ``Example:`` (``text``, nothing) and a fenced Python block; a ``::`` ending a line with
      no block after it becomes ``:``;
    - an item naming several attributes whose names wrap to the next line is one line.

    Fenced blocks are left as they are.
    """
    lines = _joined_names(text.split("\n"))
    out: list[str] = []
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            in_fence = not in_fence
            out.append(line)
            i += 1
            continue
        if in_fence:
            out.append(line)
            i += 1
            continue
        stripped = line.rstrip()
        if not stripped.endswith("::"):
            out.append(_roles(line))
            i += 1
            continue
        head = stripped[:-2]
        intro = None if not head.strip() else head.rstrip() if head.endswith(" ") else head + ":"
        level = _content_indent(line)
        start = i + 1
        while start < len(lines) and not lines[start].strip():
            start += 1
        if start < len(lines) and _indent(lines[start]) > level:
            end = start
            while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > level):
                end += 1
            while not lines[end - 1].strip():
                end -= 1
            body = textwrap.dedent("\n".join(lines[start:end])).split("\n")
            pad = " " * level  # where the line's text starts: the margin, or a list item's
            if intro is not None:
                out += [_roles(intro), ""]
            out += [f"{pad}```python", *(pad + b if b else "" for b in body), f"{pad}```"]
            i = end
        else:
            if intro is not None:
                out.append(_roles(intro))
            i += 1
    return "\n".join(out)


class SphinxMarkup(griffe.Extension):
    """Rewrites each docstring the API reference reads with :func:`markdown_of`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_of(obj.docstring.value)
