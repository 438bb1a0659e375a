"""The floor plan, checked: who may change a call's lifecycle, who may touch a chat's
internals, and that docs/ARCHITECTURE.md draws the package as it is.

The import layers and the absence of cycles are import-linter's job
(``make imports``, run by ``.ci/run``; contracts in pyproject.toml).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "nbagent"

# The core: the chat's own modules at the package root. Everything in a
# subpackage (store, log, notebook, providers, testing) and the demo is outside it.
CORE = {p for p in PACKAGE.glob("_*.py")}
LIFECYCLE = {"status", "result", "decision", "approval", "started_at", "finished_at"}
# Objects that have a field of one of those names but are not calls: the
# notebook view's own entries (a card's display state).
NOT_CALLS = {"nbagent/notebook/_state.py": {"entry", "e"}}


def _outside_core() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in CORE or path == PACKAGE / "__init__.py":
            continue
        rel = path.relative_to(ROOT).as_posix()
        yield rel, ast.parse(path.read_text(), rel)


def _targets(node: ast.AST) -> Iterator[ast.expr]:
    if isinstance(node, ast.Assign):
        for t in node.targets:
            yield from _flatten(t)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        yield from _flatten(node.target)


def _flatten(target: ast.expr) -> Iterator[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        for t in target.elts:
            yield from _flatten(t)
    else:
        yield target


def _setattr_name(node: ast.AST) -> str | None:
    """The attribute name of ``setattr(x, "name", v)`` / ``object.__setattr__(x, "name", v)``."""
    if not isinstance(node, ast.Call) or len(node.args) < 2:
        return None
    f = node.func
    named = (isinstance(f, ast.Name) and f.id == "setattr") or (
        isinstance(f, ast.Attribute) and f.attr == "__setattr__"
    )
    arg = node.args[1]
    if named and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    return None


def test_only_the_core_changes_a_calls_lifecycle() -> None:
    """No module outside the core assigns a call's status, result, decision, approval or
    times: the store, the view and the log ask the core (``ChatHost``), which applies the
    change with its own rules and emits its event."""
    offences = []
    for rel, tree in _outside_core():
        allowed = NOT_CALLS.get(rel, set())
        for node in ast.walk(tree):
            for t in _targets(node):
                if isinstance(t, ast.Attribute) and t.attr in LIFECYCLE:
                    base = ast.unparse(t.value)
                    if base not in allowed:
                        offences.append(f"{rel}:{t.lineno}: {ast.unparse(t)} = ...")
            name = _setattr_name(node)
            if name in LIFECYCLE:
                offences.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert offences == []


def test_the_check_above_finds_an_offence() -> None:
    """The lifecycle check is not vacuous: it flags the forms it looks for."""
    code = "c.status = 'ok'\na.b, call.result = 1, 2\nsetattr(c, 'decision', d)\n"
    tree = ast.parse(code)
    found = [ast.unparse(t) for n in ast.walk(tree) for t in _targets(n) if _is_lifecycle(t)]
    found += [n for n in map(_setattr_name, ast.walk(tree)) if n in LIFECYCLE]
    assert found == ["c.status", "call.result", "decision"]


def _is_lifecycle(t: ast.expr) -> bool:
    return isinstance(t, ast.Attribute) and t.attr in LIFECYCLE


_PRIVATE = re.compile(r"^_[a-z0-9]\w*$")


def test_wings_touch_no_private_chat_attribute() -> None:
    """Outside the core, nothing reads or writes ``<chat>._anything`` (nor through
    ``getattr``): a wing sees a chat through its public API and ``ChatHost``."""
    offences = []
    for rel, tree in _outside_core():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _PRIVATE.match(node.attr):
                base = ast.unparse(node.value)
                if "chat" in base.lower() or base.endswith("host"):
                    offences.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "setattr", "hasattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and _PRIVATE.match(node.args[1].value)
                and "chat" in ast.unparse(node.args[0]).lower()
            ):
                offences.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert offences == []


# ---------------------------------------------------------------- the map
def _tree_in_doc() -> set[str]:
    """The files named in the package tree of docs/ARCHITECTURE.md (its first code block)."""
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    block = doc.split("```", 2)[1]
    names: set[str] = set()
    folder = ""
    for line in block.splitlines():
        m = re.match(r"^  (\S+)", line)  # a top-level entry: "  _types.py ..." or "  store/"
        if m:
            entry = m.group(1)
            if entry.endswith("/"):
                folder = entry
                continue
            folder = ""
            names.add(entry)
            continue
        m = re.match(r"^    (\S+\.(?:py|js|css))\b", line)  # a file in the folder above
        if m and folder:
            names.add(folder + m.group(1))
    return names


def test_architecture_doc_draws_the_package_as_it_is() -> None:
    on_disk = {
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*")
        if p.suffix in (".py", ".js", ".css") and "__pycache__" not in p.parts
    }
    drawn = _tree_in_doc()
    assert sorted(on_disk - drawn) == [], "in the package, missing from docs/ARCHITECTURE.md"
    assert sorted(drawn - on_disk) == [], "in docs/ARCHITECTURE.md, not in the package"


@pytest.mark.parametrize(
    "module", sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
)
def test_a_wing_face_is_only_a_face(module: str) -> None:
    """A package's ``__init__`` holds no code its own modules import (they import siblings):
    the names it re-exports for the rest of nbagent never loop back into it."""
    pkg = PACKAGE / module
    for path in pkg.glob("_*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None:
                names = [a.name for a in node.names]
                assert all(n.startswith("_") for n in names), (
                    f"{path.name} imports {names} from its package's face"
                )


def test_test_modules_have_unique_names() -> None:
    """pytest imports test files by basename (rootdir import mode): two test files of one
    name in different folders stop the whole run at collection."""
    tests = Path(__file__).resolve().parent
    names = [p.name for p in tests.rglob("test_*.py")]
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"test modules with the same name in two folders: {twice}"


# A wing's tests live in the folder named after it; ``mcp`` is the one exception, because
# a ``tests/mcp`` folder on ``sys.path`` (pytest's rootdir import mode puts test folders
# there) would be a namespace package named like the MCP SDK.
TEST_FOLDER = {"mcp": "mcp_client"}
# Test folders that mirror no package: the example notebooks (the repository's
# ``notebooks/``), the seed documents, and JupyterLab driven in Chromium.
NOT_A_PACKAGE = {"notebooks", "seeds", "browser"}


def test_the_test_layout_mirrors_the_package() -> None:
    """Every wing of ``nbagent`` has its folder under ``tests/`` (``tests/store`` for
    ``nbagent/store``...), a nested package its nested folder (``tests/batch/ray`` for the
    Ray backend of ``nbagent/batch``), and the top level holds only the core's and the
    whole project's tests: no ``tests/test_log.py`` beside ``tests/log/``."""
    tests = Path(__file__).resolve().parent
    wings = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    folders = {TEST_FOLDER.get(w, w) for w in wings}
    missing = sorted(f for f in folders if not (tests / f).is_dir())
    assert not missing, f"wings without a test folder: {missing}"
    strays = sorted(
        p.name
        for p in tests.iterdir()
        if p.is_dir()
        and not p.name.startswith((".", "_"))
        and p.name not in folders | NOT_A_PACKAGE
    )
    assert not strays, f"test folders that mirror no package of nbagent: {strays}"
    top = [p.stem.removeprefix("test_") for p in tests.glob("test_*.py")]
    misplaced = sorted(t for t in top for w in wings if t == w or t.startswith(f"{w}_"))
    assert not misplaced, f"top-level tests named after a wing: {misplaced}"


# ------------------------------------------------------- faces and layers
def _contracts() -> dict[str, dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["type"]: c for c in config["contracts"]}


def test_the_layers_state_the_intent_in_six_layers() -> None:
    """values, providers, the core, wings, many-chat wings, the face: every module placed."""
    layers = _contracts()["layers"]
    assert layers["containers"] == ["nbagent"] and layers["exhaustive"] is True
    assert len(layers["layers"]) <= 6
    assert "ignore_imports" not in layers


def test_faces_hold_for_the_whole_package_without_exceptions() -> None:
    faces = _contracts()["private_modules"]
    assert faces["packages_with_private_modules"] == ["nbagent"]
    assert "ignore_imports" not in faces


def _lint_copy(tmp_path: Path, edit: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """lint-imports with this repository's contracts on a copy of nbagent changed by ``edit``
    (path in the package -> a line appended, or a new module's text)."""
    shutil.copytree(PACKAGE, tmp_path / "nbagent", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for rel, line in edit.items():
        with (tmp_path / "nbagent" / rel).open("a") as f:
            f.write("\n" + line + "\n")
    lint = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run(
        [str(lint), "--no-cache"], cwd=tmp_path, env=env, capture_output=True, text=True
    )


@pytest.mark.parametrize(
    ("edit", "broken", "named"),
    [
        (  # a wing reaching into another wing's private module
            {"batch/_run.py": "from ..store._attach import attach_store"},
            "Faces",
            "nbagent.batch._run -> nbagent.store._attach",
        ),
        (  # the core reaching into the providers' private modules
            {"_loop.py": "from .providers._registry import resolve_provider"},
            "Faces",
            "nbagent._loop -> nbagent.providers._registry",
        ),
        (  # a value importing the core (one the core does not import: else a cycle too)
            {"_claims.py": "from . import _tools"},
            "Six layers",
            "nbagent._claims is not allowed to import nbagent._tools",
        ),
        (  # the core importing a wing, through its face
            {"_loop.py": "from . import log"},
            "Six layers",
            "nbagent._loop is not allowed to import nbagent.log",
        ),
        (  # one wing importing another of its layer
            {"log/_projection.py": "from .. import store"},
            "Six layers",
            "nbagent.log is not allowed to import nbagent.store",
        ),
        (  # a new module no layer names
            {"_new.py": "X = 1"},
            "Six layers",
            "nbagent._new",
        ),
    ],
)
def test_the_contracts_catch_a_violation(
    tmp_path: Path, edit: dict[str, str], broken: str, named: str
) -> None:
    """The contracts are not vacuous: each of these changes to a copy of the package breaks one."""
    out = _lint_copy(tmp_path, edit)
    assert out.returncode != 0, out.stdout
    verdicts = [line for line in out.stdout.splitlines() if line.endswith(("KEPT", "BROKEN"))]
    assert [v for v in verdicts if v.endswith("BROKEN")] == [
        v for v in verdicts if v.startswith(broken)
    ], out.stdout
    assert named in out.stdout
