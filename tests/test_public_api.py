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


# What `import nbagent` must not load: what a first `Chat()` does not need (issue 28, item 6).
HEAVY = (
    # other packages: the SDKs, the data and notebook stacks, the store and MCP clients
    "pandas", "numpy", "openai", "anthropic", "httpx", "ipywidgets", "anywidget", "matplotlib",
    "IPython", "pydantic", "mcp", "psycopg", "ray", "pyarrow", "sqlite3",
    # asyncio: a sync chat runs its coroutines inline; the core imports it where it needs a loop
    "asyncio",
    # what a chat needs only once it runs tools in threads, waits for an input, shows a
    # traceback or digests a request: concurrent.futures (and logging, traceback), uuid (and
    # platform), hashlib (OpenSSL), base64
    "concurrent.futures", "logging", "traceback", "uuid", "platform", "hashlib", "base64",
    # nbagent's wings a chat plugs in only when asked, and the demo model's reading
    "nbagent.store", "nbagent.mcp", "nbagent.batch", "nbagent.inbox", "nbagent.comparison",
    "nbagent.log", "nbagent.notebook", "nbagent.providers._demo", "nbagent.providers._openai",
    "nbagent.providers._anthropic",
)  # fmt: skip


def _fresh(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_import_stays_light() -> None:
    code = f"import sys, nbagent; print([m for m in {HEAVY!r} if m in sys.modules])"
    assert _fresh(code) == "[]"


def test_every_public_name_imports_from_a_fresh_interpreter() -> None:
    """`from nbagent import X` for each name, lazy or not, in a fresh process; each reports
    nbagent as its module however it was loaded, and `dir(nbagent)` lists it (completion)."""
    code = (
        "import inspect, nbagent\n"
        "from nbagent.store import SQLiteStore  # a lazy name's module loaded first\n"
        "import nbagent.batch, nbagent.inbox  # the subpackages named like their functions\n"
        "bad = []\n"
        "for name in nbagent.__all__:\n"
        "    exec(f'from nbagent import {name} as obj')\n"
        "    own = inspect.isclass(obj) or inspect.isfunction(obj)\n"
        "    if own and obj.__module__ != 'nbagent':\n"
        "        bad.append((name, obj.__module__))\n"
        "    if name not in dir(nbagent): bad.append((name, 'not in dir'))\n"
        "print(bad, inspect.isfunction(nbagent.batch), inspect.isfunction(nbagent.inbox))"
    )
    assert _fresh(code) == "[] True True"
    # the public subpackages are attributes after `import nbagent`, as they were
    code = "import nbagent; print(nbagent.store.PostgresStore is nbagent.PostgresStore)"
    assert _fresh(code) == "True"
    code = "import nbagent; print(nbagent.mcp.MCPServer.__name__, 'testing' in dir(nbagent))"
    assert _fresh(code) == "MCPServer True"


def test_a_first_chat_on_the_demo_model_needs_no_wing_it_does_not_use() -> None:
    code = (
        "import sys, nbagent\n"
        "chat = nbagent.Chat(model='demo')\n"
        "chat.ask('Say hi')\n"
        "print([m for m in ('nbagent.store', 'nbagent.mcp', 'nbagent.batch', 'nbagent.inbox',"
        " 'nbagent.comparison', 'sqlite3') if m in sys.modules])"
    )
    assert _fresh(code) == "[]"


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


def test_a_batch_without_a_store_needs_no_store() -> None:
    """A batch's done row asked whether its chat had a store by importing the store package
    (sqlite3 and 23 modules, 3 MiB of a batch's memory) when the chat had no extension."""
    code = (
        "import sys, nbagent\n"
        "nbagent.configure(quiet=True, display=False)\n"
        "r = nbagent.batch(['hi', 'yo'], lambda: nbagent.Chat(model='demo'), progress=False)\n"
        "assert list(r['status']) == ['done', 'done'], r\n"
        "print([m for m in ('nbagent.store', 'nbagent.mcp', 'nbagent.inbox', 'sqlite3')"
        " if m in sys.modules])"
    )
    assert _fresh(code) == "[]"
