"""Every code block of the README and of the docs runs in a test, or says that it does not.

The convention (docs/development.md, "Writing the docs"):

- a fence of plain ``python`` runs here, offline (no key: the demo model), the blocks of one
  page in order in one namespace, in a temporary directory;
- ``title="not run: <why>"`` marks a block that cannot run here (it needs a key, a server, a
  notebook front end); the title shows above the block on the site;
- ``title="run by test_<name>.py: <why>"`` names the test file (somewhere in tests/) that
  runs it;
- ``text`` blocks are output, fences without a language are diagrams.

Every keyword an example passes, in a block or an inline span, must exist on what it calls.
"""

from __future__ import annotations

import ast
import gc
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from _docs import DOCS, README, ROOT, Block, blocks, pages

import nbagent

OUTPUT_LANGUAGES = {"text", ""}


def _all_blocks() -> list[Block]:
    return [b for page in pages() for b in blocks(page)]


def test_the_pages_have_code_and_most_of_it_runs() -> None:
    found = _all_blocks()
    running = [b for b in found if b.runs_here]
    assert len(running) >= 25, len(running)
    assert {b.path for b in running} >= {README, DOCS / "getting-started.md", DOCS / "testing.md"}


def test_every_block_runs_or_says_why_not() -> None:
    unmarked = [
        f"{b.where()}: ```{b.language} {b.title!r}"
        for b in _all_blocks()
        if b.language not in OUTPUT_LANGUAGES and not (b.runs_here or b.not_run or b.run_by)
    ]
    assert unmarked == []


def test_a_block_run_elsewhere_names_a_test_that_reads_its_page() -> None:
    elsewhere = [b for b in _all_blocks() if b.run_by]
    assert elsewhere
    for block in elsewhere:
        assert block.run_by is not None
        tests = sorted((ROOT / "tests").rglob(block.run_by))
        assert len(tests) == 1, f"{block.where()} names {block.run_by}: found {tests}"
        assert block.path.name in tests[0].read_text(), f"{block.run_by} never reads {block.path}"


def test_the_marker_reader_tells_the_kinds_apart(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nx = 1\n```\n\n"
        '```python title="not run: needs an API key"\ny\n```\n\n'
        '```python title="run by test_ray_readme.py: needs Ray"\nz\n```\n\n'
        '```python title="not run:"\nw\n```\n\n'
        "```bash\nmake docs\n```\n\n```text\noutput\n```\n"
    )
    found = blocks(page)
    assert [(b.runs_here, b.not_run, b.run_by) for b in found] == [
        (True, False, None),
        (False, True, None),
        (False, False, "test_ray_readme.py"),
        (False, False, None),  # a marker without a reason is no marker
        (False, False, None),  # an unmarked shell block: reported
        (False, False, None),  # output: allowed
    ]
    assert [b.line for b in found] == [1, 5, 9, 13, 17, 21]


def _close_everything(namespace: dict[str, Any]) -> None:
    """Chats and stores a page made hold threads and files: release them."""
    values: list[Any] = []
    for value in namespace.values():
        values.extend(value if isinstance(value, list | tuple) else [value])
    for value in values:
        if isinstance(value, nbagent.Chat):
            value.close()
    for value in values:
        if isinstance(value, nbagent.Store):
            value.close()


RUNNABLE_PAGES = sorted({b.path for b in _all_blocks() if b.runs_here})


@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_runnable_blocks_of_a_page_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In order, in one namespace, as a reader would paste them into cells (no key: the
    demo model, no network)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict[str, Any] = {"__name__": "docs_example", "print": lambda *a, **k: None}
    try:
        for block in (b for b in blocks(page) if b.runs_here):
            code = compile(block.code, block.where(), "exec")
            try:
                exec(code, namespace)
            except Exception as error:
                pytest.fail(f"{block.where()} raised {error!r}")
    finally:
        _close_everything(namespace)
        if "matplotlib.pyplot" in __import__("sys").modules:
            __import__("matplotlib.pyplot").pyplot.close("all")
        gc.collect()


# ---------------------------------------------------------------- keywords
def _namespace() -> dict[str, Any]:
    import nbagent.log
    import nbagent.providers
    import nbagent.store
    import nbagent.testing

    names: dict[str, Any] = {}
    for module in (nbagent.testing, nbagent.store, nbagent.providers, nbagent):
        names.update({n: getattr(module, n) for n in module.__all__})
    names.update(
        nbagent=nbagent,
        log=nbagent.log,
        chat=nbagent.Chat,
        chat1=nbagent.Chat,
        provider=nbagent.OpenAIProvider,
        store=nbagent.SQLiteStore,
    )
    return names


def _resolve(node: ast.expr, names: dict[str, Any]) -> Any:
    """The function or class a call names, or None when it cannot be known statically."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, names)
        if not (inspect.isclass(base) or inspect.ismodule(base)):
            return None  # a property's value, a call's result...
        attr = inspect.getattr_static(base, node.attr, None)
        assert attr is not None, f"the docs use {ast.unparse(node)}, which does not exist"
        return getattr(base, node.attr) if callable(attr) or inspect.ismodule(attr) else None
    return None


def _python_in(text: str) -> list[ast.AST]:
    """Every python code block, and every inline code span that parses as an expression
    (``Chat(timeout=, max_retries=)`` included: a bare ``kw=`` is read as ``kw=...``)."""
    trees: list[ast.AST] = []
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    for block in blocks(Path("page.md"), text):
        if block.language == "python":
            trees.append(compile(block.code, "page.md", "exec", flags=flags))
    prose = re.sub(r"^```.*?^```[ \t]*$", "", text, flags=re.S | re.M)
    for span in re.findall(r"`([^`]+)`", prose):
        try:
            trees.append(ast.parse(re.sub(r"=\s*(?=[,)])", "=...", span), mode="eval"))
        except SyntaxError:
            continue
    return trees


def _unknown_keywords(text: str) -> tuple[list[str], int]:
    """Keywords passed in ``text``'s examples that their callable does not take; how many fit."""
    names = _namespace()
    bad: list[str] = []
    checked = 0
    for tree in _python_in(text):
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            target = _resolve(call.func, names)
            keywords = [k.arg for k in call.keywords if k.arg is not None]
            if target is None or not keywords:
                continue
            params = inspect.signature(target).parameters
            # e.g. OpenAIProvider(**client_kwargs): the SDK client takes the rest; the
            # keywords it names itself are still checked.
            rest = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
            for name in keywords:
                if name in params and params[name].kind is not inspect.Parameter.POSITIONAL_ONLY:
                    checked += 1
                elif not rest:
                    bad.append(f"{ast.unparse(call)}: {ast.unparse(call.func)} takes no {name}=")
    return bad, checked


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_keyword_in_the_docs_exists(page: Path) -> None:
    """``Chat(timeout=...)`` in a page while ``Chat`` takes no ``timeout`` is a bug."""
    bad, _ = _unknown_keywords(page.read_text())
    assert bad == []


def test_the_keyword_check_checks_enough() -> None:
    checked = sum(_unknown_keywords(page.read_text())[1] for page in pages())
    assert checked >= 60, checked
    assert _unknown_keywords(README.read_text())[1] >= 3  # the README checks its own too


def test_the_keyword_check_finds_an_offence() -> None:
    text = "Retries: `Chat(timeout=, max_retries=)`.\n```python\nchat.ask_later(x, wait=1)\n```\n"
    bad, _ = _unknown_keywords(text)
    assert bad == [
        "chat.ask_later(x, wait=1): chat.ask_later takes no wait=",
        "Chat(timeout=..., max_retries=...): Chat takes no timeout=",
        "Chat(timeout=..., max_retries=...): Chat takes no max_retries=",
    ]
