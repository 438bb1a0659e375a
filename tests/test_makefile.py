"""The Makefile's front door: `make lab` installs only the lab extra, roots JupyterLab at the
repository, opens the quickstart, and turns off JupyterLab's news popup; `make test` installs dev.

Checked with `make -n` against a venv path that does not exist, so every install step shows.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def dry_run(target: str, tmp_path: Path, *settings: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "JUPYTER"))}
    proc = subprocess.run(
        ["make", "-n", target, f"VENV={tmp_path / 'venv'}", *settings],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return proc.stdout


def test_make_lab_installs_the_lab_extra_only(tmp_path: Path) -> None:
    out = dry_run("lab", tmp_path)
    assert "pip install --disable-pip-version-check --no-compile -e '.[lab]'" in out
    assert ".[dev]" not in out


def test_make_lab_roots_jupyterlab_at_the_repository_on_the_quickstart(tmp_path: Path) -> None:
    out = dry_run("lab", tmp_path)
    command = out[out.index("-m jupyterlab") :]
    assert f'--ServerApp.root_dir="{ROOT}"' in command
    assert "notebooks/01_quickstart.ipynb" in command
    assert f'JUPYTER_CONFIG_PATH="{ROOT}/.jupyter"' in out


def test_make_test_and_lint_install_dev(tmp_path: Path) -> None:
    for target in ("test", "lint"):
        assert "pip install --disable-pip-version-check -e '.[dev]'" in dry_run(target, tmp_path)


def test_the_repositorys_jupyter_config_turns_off_the_news_popup(tmp_path: Path) -> None:
    """JupyterLab reads labconfig/default_setting_overrides.json on its config path (as
    `make lab` sets it) into its settings' defaults; "false" means never ask about news."""
    code = (
        "import json\n"
        "from jupyter_server.services.config.manager import ConfigManager\n"
        "cm = ConfigManager(config_dir_name='labconfig')\n"
        "print(json.dumps(cm.get('default_setting_overrides')))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env["JUPYTER_CONFIG_PATH"] = str(ROOT / ".jupyter")
    env["JUPYTER_CONFIG_DIR"] = str(tmp_path)  # no user config in the way
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    overrides = json.loads(proc.stdout)
    notification = overrides["@jupyterlab/apputils-extension:notification"]
    assert notification == {"fetchNews": "false", "checkForUpdates": False}


def test_make_notebooks_saves_01_and_03_with_their_outputs(tmp_path: Path) -> None:
    """The notebooks committed with outputs are refreshed by one target (and checked by
    tests/notebook/test_saved_outputs.py)."""
    out = dry_run("notebooks", tmp_path)
    assert (
        "-m nbagent.demo --save notebooks/01_quickstart.ipynb notebooks/03_approvals.ipynb" in out
    )
    assert ".[dev]" in out  # nbclient and the kernel come with the dev install


def test_make_screenshot_retakes_the_readme_picture_in_a_browser(tmp_path: Path) -> None:
    out = dry_run("screenshot", tmp_path)
    assert f'NBAGENT_README_IMAGE="{ROOT}/docs/images/live-view.png"' in out
    assert "tests/browser/test_readme_screenshot.py" in out and "NBAGENT_REQUIRE_BROWSER=1" in out
    readme = (ROOT / "README.md").read_text()
    assert "](docs/images/live-view.png)" in readme[:2000]  # near the top
    assert (ROOT / "docs/images/live-view.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_make_test_runs_whole_files_on_parallel_workers(tmp_path: Path) -> None:
    """Two to four pytest-xdist workers, a file whole on one (its fixtures and order as
    written); TEST_WORKERS=0 runs the suite in one process."""
    out = dry_run("test", tmp_path)
    workers = int(out.split("-m pytest -n ", 1)[1].split()[0])
    assert 2 <= workers <= 4 and "--dist loadfile" in out
    assert "-m pytest -n 0 --dist loadfile" in dry_run("test", tmp_path, "TEST_WORKERS=0")
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(d.startswith("pytest-xdist") for d in dev["dev"])


def test_make_test_installs_postgresql_and_never_skips_its_tests(tmp_path: Path) -> None:
    out = dry_run("test", tmp_path)
    assert "bash .ci/ensure-postgres" in out
    assert "NBAGENT_REQUIRE_POSTGRES=1" in out


def test_a_missing_postgresql_skips_or_fails_as_required(tmp_path: Path) -> None:
    """No initdb on the machine: the PostgreSQL tests skip, unless NBAGENT_REQUIRE_POSTGRES
    is set (as make test sets it), when they fail saying why."""
    test = tmp_path / "test_needs_pg.py"
    test.write_text("def test_it(postgres_dsn):\n    pass\n")
    (tmp_path / "conftest.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "import _postgres\n"
        "_postgres._bindir = lambda: None\n"
        "from _postgres import postgres_dsn, postgres_server\n"
    )
    for required, outcome in (("", "1 skipped"), ("1", "1 error")):
        env = dict(os.environ, NBAGENT_REQUIRE_POSTGRES=required)
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
        )
        assert outcome in proc.stdout, proc.stdout
        if required:
            assert "PostgreSQL is required" in proc.stdout


def test_make_test_requires_ray(tmp_path: Path) -> None:
    """CI never calls a skipped Ray test a pass (tests/batch/ray/conftest.py)."""
    out = dry_run("test", tmp_path)
    assert "NBAGENT_REQUIRE_RAY=1" in out[out.index("NBAGENT_REQUIRE_BROWSER=") :]


def test_make_test_installs_the_reference_mcp_servers_and_requires_them(tmp_path: Path) -> None:
    """The reference MCP servers (Node) are installed by the project's own script, pinned by
    its lock file, and their tests never skip under make test."""
    out = dry_run("test", tmp_path)
    assert "bash .ci/ensure-mcp-servers" in out
    assert "NBAGENT_REQUIRE_MCP_SERVERS=1" in out[out.index("NBAGENT_REQUIRE_BROWSER=") :]
    lock = json.loads((ROOT / ".ci/mcp-servers/package-lock.json").read_text())
    wanted = lock["packages"][""]["dependencies"]
    servers = {"@modelcontextprotocol/server-memory", "@modelcontextprotocol/server-filesystem"}
    assert servers <= set(wanted)
    assert all(v[0].isdigit() for v in wanted.values())  # exact versions, no ranges


def test_missing_reference_servers_skip_or_fail_as_required(tmp_path: Path) -> None:
    test = tmp_path / "test_needs_memory.py"
    test.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'tests' / 'mcp_client')!r})\n"
        "import test_reference_servers as t\n"
        "from pathlib import Path\n"
        "t.MODULES = Path('/nonexistent')\n"
        "def test_it():\n"
        "    t.reference_server('server-memory')\n"
    )
    for required, outcome in (("", "1 skipped"), ("1", "1 failed")):
        env = dict(os.environ, NBAGENT_REQUIRE_MCP_SERVERS=required)
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
        )
        assert outcome in proc.stdout, proc.stdout
        if required:
            assert "NBAGENT_REQUIRE_MCP_SERVERS is set" in proc.stdout


def test_make_docs_builds_the_site_strictly_with_the_dev_install(tmp_path: Path) -> None:
    out = dry_run("docs", tmp_path)
    assert "pip install --disable-pip-version-check -e '.[dev]'" in out
    assert f"{tmp_path / 'venv'}/bin/mkdocs build --strict --site-dir site" in out
    serve = dry_run("docs-serve", tmp_path)
    assert f"{tmp_path / 'venv'}/bin/mkdocs serve" in serve


def test_the_docs_extra_is_in_dev_and_site_is_ignored() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    names = {req.split(">")[0].split("[")[0].split("<")[0] for req in extras["docs"]}
    assert names == {"mkdocs", "mkdocs-material", "mkdocstrings", "mkdocstrings-python",
                     "mkdocs-jupyter"}  # fmt: skip
    assert "docs" in extras["dev"][0]  # nbagent[lab,...,docs]
    assert "site/" in (ROOT / ".gitignore").read_text().splitlines()


def test_make_test_installs_phoenix_in_its_own_venv_and_requires_it(tmp_path: Path) -> None:
    """The OTLP receiver of tests/otel/test_phoenix.py is installed by the project's own
    script, pinned, outside the project's venv (Phoenix pins anthropic<2)."""
    out = dry_run("test", tmp_path)
    assert "bash .ci/ensure-phoenix" in out
    assert "NBAGENT_REQUIRE_PHOENIX=1" in out[out.index("NBAGENT_REQUIRE_BROWSER=") :]
    pins = (ROOT / ".ci/phoenix/requirements.txt").read_text().splitlines()
    assert any(line.startswith("arize-phoenix==") for line in pins)
    assert all("==" in line for line in pins if line and not line.startswith("#"))
