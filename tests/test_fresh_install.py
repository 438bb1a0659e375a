"""The front door: ``pip install nbagent ipykernel`` in a fresh venv, no extras, is enough.

A new virtual environment in a temporary directory gets this checkout (copied,
so the build leaves nothing in the worktree; nbagent itself is never taken from
the package registry, where the name ``nbagent`` belongs to another project),
with ipykernel and every dependency from the registry, through pip as a user
would run it. Then a notebook runs on that venv's kernel (nbclient from the test
environment drives it): the approval card is an anywidget widget view, and
``chat.log`` shows as an HTML table. Takes a minute or two, most of it pip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import venv
from pathlib import Path

import nbclient
import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from traitlets import default

pytestmark = [pytest.mark.install, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parent.parent
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
STATE_MIME = "application/vnd.jupyter.widget-state+json"
KERNEL = "nbagent-fresh-venv"

CELLS = [
    "import sys\nimport nbagent\nprint(nbagent.__file__)\nprint(sys.prefix)",
    "from nbagent import Chat, Tool\n"
    "\n"
    "class IssueRefund(Tool):\n"
    '    """Issue a refund for an order."""\n'
    "    requires_approval = True\n"
    "    def execute(self, order_id: int) -> str:\n"
    '        return f"refunded order {order_id}"\n'
    "\n"
    "chat = Chat().with_tools(IssueRefund)  # no API key: the demo model, and a notice\n"
    'chat.ask("Refund order 42")',
    "chat.approve(chat.pending_approvals[0])\nchat.complete()\nchat.log",
]


def _install(tmp: Path) -> Path:
    """A fresh venv with this checkout and ipykernel installed; its python."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "nbagent", src / "nbagent", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    started = time.perf_counter()
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(src), "ipykernel"],
        capture_output=True,
        text=True,
        env=_clean_env(tmp, env_dir),
        timeout=1000,
    )
    assert proc.returncode == 0, f"pip install failed:\n{proc.stdout}\n{proc.stderr}"
    print(f"pip install took {time.perf_counter() - started:.0f} s")
    return python


def _clean_env(tmp: Path, env_dir: Path) -> dict[str, str]:
    """The test's environment without anything pointing back at this checkout or its venv."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "JUPYTER", "VIRTUAL_ENV", "OPENAI_", "ANTHROPIC_"))
    }
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["IPYTHONDIR"] = str(tmp / "ipython")
    return env


def _kernel_manager_class(tmp: Path, python: Path) -> type[AsyncKernelManager]:
    """Kernel managers that find a kernelspec (kept in ``tmp``) running the fresh venv's python."""
    spec_dir = tmp / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "nbagent fresh venv",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    kernel_dirs = [str(tmp / "kernels")]

    class FreshVenvKernelManager(AsyncKernelManager):
        @default("kernel_spec_manager")
        def _only_the_fresh_venv(self) -> KernelSpecManager:
            return KernelSpecManager(kernel_dirs=kernel_dirs)

    return FreshVenvKernelManager


def test_pip_install_nbagent_ipykernel_shows_the_approval_widget_and_the_log(
    tmp_path: Path,
) -> None:
    python = _install(tmp_path)
    env_dir = tmp_path / "venv"
    # No extras: neither JupyterLab nor matplotlib nor pyarrow came along.
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json"],
        capture_output=True,
        text=True,
        check=True,
        env=_clean_env(tmp_path, env_dir),
    )
    installed = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert {"nbagent", "pandas", "ipywidgets", "anywidget", "openai", "anthropic"} <= installed
    assert not {"jupyterlab", "matplotlib", "pyarrow"} & installed
    # The installed metadata: the version is nbagent.__version__ (its one source), and the
    # MIT license text ships with it.
    meta = subprocess.run(
        [str(python), "-c",
         "import importlib.metadata as md, nbagent; d = md.distribution('nbagent'); "
         "lic = [f for f in d.files if f.name == 'LICENSE' and '.dist-info' in str(f)]; "
         "print(d.version == nbagent.__version__, d.metadata['License-Expression'], "
         "len(lic), 'the nbagent authors' in lic[0].read_text())"],
        capture_output=True, text=True, cwd=tmp_path, env=_clean_env(tmp_path, env_dir),
    )  # fmt: skip
    assert meta.returncode == 0, meta.stderr
    assert meta.stdout.split() == ["True", "MIT", "1", "True"], meta.stdout
    # The model SDKs bring OpenTelemetry's API, not its SDK: instrument() says which extra
    # to install instead of sending every span to the API's no-op provider.
    traced = subprocess.run(
        [str(python), "-c", "import nbagent; nbagent.instrument()"],
        capture_output=True, text=True, cwd=tmp_path, env=_clean_env(tmp_path, env_dir),
    )  # fmt: skip
    assert traced.returncode == 1
    assert traced.stderr.strip().splitlines()[-1] == (
        "ModuleNotFoundError: nbagent.instrument() needs opentelemetry.sdk, which is not "
        "installed: pip install 'nbagent[otel]'"
    )

    work = tmp_path / "work"
    work.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    client = nbclient.NotebookClient(
        nb,
        kernel_name=KERNEL,
        kernel_manager_class=_kernel_manager_class(tmp_path, python),
        timeout=120,
        store_widget_state=True,
        resources={"metadata": {"path": str(work)}},
    )
    client.execute(env=_clean_env(tmp_path, env_dir))

    first = "".join(o.get("text", "") for o in nb.cells[0].outputs).split()
    assert first[0].startswith(str(env_dir)), f"nbagent imported from {first[0]}"
    assert first[1] == str(env_dir)

    outputs = [o for cell in nb.cells for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [o for o in outputs if o.get("name") == "stderr"], "something went to stderr"

    # The no-key notice is a small neutral line, above the live view.
    ask = nb.cells[1].outputs
    assert "offline demo model" in ask[0].data["text/plain"]
    assert ask[0].data["text/html"].startswith("<small")
    # The turn showed live as a widget, with an anywidget approval card in it (its state
    # below); the next cell continued the turn, so the saved output is static HTML that
    # says where the turn went, with nothing a new kernel would fail to find.
    assert not any(WIDGET_MIME in o.get("data", {}) for o in ask)
    assert any("-- continued in cell [3]" in o.get("data", {}).get("text/plain", "") for o in ask)
    models = nb.metadata["widgets"][STATE_MIME]["state"].values()
    cards = [m["state"] for m in models if m["model_name"] == "AnyModel"]
    # The first is the card cell 2 showed; the view that continued the turn in cell 3 has
    # the call's (decided, hidden) card too.
    assert {(c["kind"], c["tool"]) for c in cards} == {("approval", "issue_refund")}
    assert cards[0]["state"] == "approved"  # chat.approve() in the next cell updated it

    # chat.log: a pandas DataFrame (one row, the refund), shown as an HTML table of the
    # columns that say what happened, with the way to the whole frame.
    (log,) = [o for o in nb.cells[2].outputs if o.output_type == "execute_result"]
    html = log.data["text/html"]
    assert '<table border="1" class="dataframe">' in html and "<td>issue_refund</td>" in html
    assert "1 call; " in html and "chat.log.frame() shows them all" in html
