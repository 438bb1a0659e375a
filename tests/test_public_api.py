"""The public surface: one import place, a sorted and complete __all__, a light import."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import types

import pytest

import nbagent


def test_all_is_sorted_and_every_name_resolves() -> None:
    names = [n for n in nbagent.__all__ if n != "__version__"]
    assert names == sorted(names, key=str.lower) or names == sorted(names)
    for name in nbagent.__all__:
        assert hasattr(nbagent, name), name


def test_every_public_object_is_exported() -> None:
    exported = set(nbagent.__all__)
    for name, value in vars(nbagent).items():
        if name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        if not str(getattr(value, "__module__", "")).startswith("nbagent"):
            continue  # typing helpers, __future__ features
        assert name in exported, f"{name} is public in nbagent but missing from __all__"


def test_import_stays_light() -> None:
    code = (
        "import sys, nbagent; "
        "heavy = [m for m in ('pandas', 'openai', 'anthropic', 'ipywidgets', 'anywidget', "
        "'matplotlib', 'IPython', 'pydantic') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


PUBLIC_PACKAGES = [
    "nbagent",
    "nbagent.store",
    "nbagent.inbox",
    "nbagent.log",
    "nbagent.notebook",
    "nbagent.providers",
    "nbagent.testing",
]


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_public_objects_report_their_public_module(package: str) -> None:
    """``nbagent.SQLiteStore.__module__ == "nbagent"``: reprs, docs and pickles name the
    path users import from; an object exported by ``nbagent`` itself reports ``nbagent``."""
    module = importlib.import_module(package)
    checked = 0
    for name in module.__all__:
        obj = getattr(module, name)  # lazy names load here, and must report too
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        exported_by_nbagent = any(getattr(nbagent, n) is obj for n in nbagent.__all__)
        expected = "nbagent" if exported_by_nbagent else package
        assert obj.__module__ == expected, f"{package}.{name} reports {obj.__module__}"
        checked += 1
    assert checked, f"{package} exports no class or function"
