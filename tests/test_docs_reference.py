"""The API reference as the docs' build reads it: the package's reStructuredText bits become
Markdown (docs/_hooks.py), every parameter of a documented callable is described, and every
``nbagent.<wing>.<name>`` the pages write works after a bare ``import nbagent``."""

from __future__ import annotations

import importlib.util
import logging
import re
import subprocess
import sys
from types import ModuleType

import pytest
from _docs import DOCS, README, ROOT


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("nbagent_docs_hooks", DOCS / "_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- docs/_hooks.py:markdown_of
def test_a_role_becomes_the_code_sphinx_would_show() -> None:
    md = _hooks().markdown_of
    assert md("See :class:`Chat` and :meth:`Chat.ask`.") == "See `Chat` and `Chat.ask`."
    assert md("(:func:`~nbagent.store.follow`)") == "(`follow`)"
    assert md(":attr:`Case.tools <nbagent.evaluation.Case.tools>`") == "`Case.tools`"
    assert md(":py:class:`!Thing`, :mod:`nbagent.store`") == "`Thing`, `nbagent.store`"
    assert md("a ratio:`x` and `:class:`") == "a ratio:`x` and `:class:`"  # not roles


def test_a_literal_block_becomes_a_fenced_block() -> None:
    md = _hooks().markdown_of
    text = "Run it.\n\nExample::\n\n    chat = Chat()\n        nested()\n\nMore."
    assert md(text) == (
        "Run it.\n\nExample:\n\n```python\nchat = Chat()\n    nested()\n```\n\nMore."
    )
    assert md("Tables ::\n\n    a\n") == "Tables\n\n```python\na\n```\n"
    assert md("::\n\n    x = 1") == "```python\nx = 1\n```"
    # in a list item, at the item's text
    item = "- :class:`A`: offline::\n\n      with A():\n          pass\n- next"
    assert md(item) == "- `A`: offline:\n\n  ```python\n  with A():\n      pass\n  ```\n- next"
    assert md("Ends here::") == "Ends here:"  # no block after it
    fenced = "```python\nx = {'a':: 1}::\n:class:`X`\n```"
    assert md(fenced) == fenced  # a fenced block is code: left alone


def test_wrapped_attribute_names_are_one_item() -> None:
    md = _hooks().markdown_of
    text = "Attributes:\n    a / b /\n        c: As on X.\n    d: D."
    assert md(text) == "Attributes:\n    a / b / c: As on X.\n    d: D."


# ---------------------------------------------------------------- the described parameters
def _documented_callables() -> list[tuple[str, object]]:
    """Every function and method of the objects docs/api/*.md names, as griffe reads them
    (what the reference renders)."""
    import griffe

    logging.getLogger("griffe").setLevel(logging.ERROR)
    package = griffe.load("nbagent", search_paths=[str(ROOT)], docstring_parser="google")
    pages = "\n".join(p.read_text() for p in sorted((DOCS / "api").glob("*.md")))
    found: list[tuple[str, object]] = []
    for path in re.findall(r"^::: (nbagent\.\S+)$", pages, re.M):
        obj = package[path.removeprefix("nbagent.")]
        obj = obj.final_target if obj.is_alias else obj
        if obj.is_function:
            found.append((path, obj))
        elif obj.is_class:
            for name, member in obj.all_members.items():
                if name.startswith("_"):
                    continue
                try:
                    member = member.final_target if member.is_alias else member
                except Exception:  # an inherited member from outside nbagent
                    continue
                if member.is_function:
                    found.append((f"{path}.{name}", member))
    return found


def test_every_parameter_of_a_documented_callable_with_args_is_described() -> None:
    """``Chat.fork`` described only ``store`` and pointed at ``nbagent.BaseChat.fork``, on no
    page: ``call``, ``step``, ``result``, ``arguments``, ``decision``, ``reason``, ``system``,
    ``model``, ``tool_options`` and ``by`` were described nowhere in the reference."""
    undescribed = []
    callables = _documented_callables()
    assert "nbagent.Chat.fork" in dict(callables)
    for path, fn in callables:
        sections = fn.docstring.parse("google") if fn.docstring else []  # type: ignore[attr-defined]
        described = {
            p.name.lstrip("*") for s in sections if s.kind.value == "parameters" for p in s.value
        }
        if not described:
            continue  # no Args section: described in prose (checked by reading, not here)
        params = [
            p.name
            for p in fn.parameters  # type: ignore[attr-defined]
            if p.name not in ("self", "cls") and not p.name.startswith("_")
        ]
        missing = [p for p in params if p not in described]
        if missing:
            undescribed.append(f"{path}: {missing}")
    assert undescribed == []


# ---------------------------------------------------------------- the spellings the pages use
_WINGS = sorted(
    p.parent.name for p in (ROOT / "nbagent").glob("*/__init__.py") if p.parent.name[0] != "_"
)


def test_every_dotted_public_name_in_the_docs_works_after_import_nbagent() -> None:
    """``nbagent.batch.RayUnavailable`` (docs/ray.md) is an AttributeError: ``nbagent.batch`` is
    the function; ``nbagent.evaluation.score`` (docs/evaluate.md) was one until something
    imported ``nbagent.evaluation``. Each ``nbagent.<wing>.<Name>`` of the README and the pages
    (the architecture's private ``nbagent._x``, the traces' attribute names and the
    reference's ``::: path`` directives aside), from a fresh interpreter that ran only
    ``import nbagent``."""
    pattern = re.compile(rf"\bnbagent\.(?:{'|'.join(_WINGS)})\.[A-Za-z]\w*\b")
    text = "\n".join(page.read_text() for page in (README, *DOCS.rglob("*.md")))
    text = re.sub(r"^::: .*$", "", text, flags=re.M)  # the reference's directives: griffe paths
    spelled = sorted(set(pattern.findall(text)))
    assert "nbagent.evaluation.score" in spelled and "nbagent.store.follow" in spelled
    code = (
        "import functools, nbagent\n"
        f"for name in {spelled!r}:\n"
        "    try:\n"
        "        functools.reduce(getattr, name.split('.')[1:], nbagent)\n"
        "    except AttributeError as exc:\n"
        "        print(name, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == ""


@pytest.mark.parametrize("wing", ["evaluation", "otel", "store", "testing"])
def test_a_wing_is_an_attribute_after_import_nbagent(wing: str) -> None:
    code = f"import nbagent; print(nbagent.{wing}.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"nbagent.{wing}"
