"""A small harness to drive JupyterLab in Debian's Chromium from pytest.

The fixtures in ``conftest.py`` start one JupyterLab server and one browser per
test session; the helpers here open notebooks, run cells through JupyterLab's
own command registry and wait on a cell's output area.

Facts this relies on:

* the server runs with ``--LabApp.expose_app_in_browser=True`` so the page has
  ``window.jupyterapp``; cells are run with
  ``jupyterapp.commands.execute('notebook:run-cell')`` because keystrokes into
  the editor get lost now and then;
* assertions look at ``.jp-Cell-outputArea`` of one cell, not the whole cell;
  while a view waits for a decision, that area also holds the view's static
  *twin* (hidden: it shows only once the widget is dead), so a locator over the
  whole area that must match one element takes ``:visible``;
* notebook windowing is switched off in the server's user settings, so every
  cell of a notebook is in the DOM and the n-th ``.jp-Cell`` is cell n.

Times (``timeout`` arguments) are in seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS_DIR = Path(os.environ.get("NBAGENT_TEST_ARTIFACTS", REPO_ROOT / "test-artifacts"))
# Debian's package; NBAGENT_CHROMIUM overrides it (e.g. to check the skip path).
CHROMIUM = os.environ.get("NBAGENT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

SERVER_START_TIMEOUT = 60.0
KERNEL_START_TIMEOUT = 60.0

# JupyterLab user settings written into the server's private settings dir:
# no windowing (all cells stay in the DOM, in order), no news/update toasts.
LAB_USER_SETTINGS: dict[str, dict[str, Any]] = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none",
    },
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "checkForUpdates": False,
        "fetchNews": "false",
    },
}


def browser_required() -> bool:
    """True when a missing browser must fail the tests instead of skipping them."""
    return os.environ.get("NBAGENT_REQUIRE_BROWSER", "").strip().lower() not in (
        "",
        "0",
        "false",
        "no",
    )


# ---------------------------------------------------------------------------
# The JupyterLab server
# ---------------------------------------------------------------------------


@dataclass
class JupyterLabServer:
    """A running ``python -m jupyterlab`` in its own process group."""

    url: str  # "http://127.0.0.1:PORT", no trailing slash
    token: str
    root_dir: Path  # the server's --ServerApp.root_dir; notebooks go here
    port: int
    log_path: Path
    env: dict[str, str] = field(repr=False)
    proc: subprocess.Popen[bytes] = field(repr=False)

    def lab_url(self, path: str = "") -> str:
        """URL of ``/lab/tree/<path>`` with the token."""
        return f"{self.url}/lab/tree/{path.lstrip('/')}?token={self.token}"

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        """Call the server's REST API (``path`` like ``/api/kernels``); JSON in and out."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.url}{path}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def kernels(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("GET", "/api/kernels")
        return result

    def shutdown_sessions(self) -> None:
        """Close every session and its kernel (what closing all notebooks does)."""
        for session in self.api("GET", "/api/sessions"):
            with contextlib.suppress(urllib.error.URLError, OSError):
                self.api("DELETE", f"/api/sessions/{session['id']}")

    def shutdown_kernels(self) -> None:
        """Shut down every running kernel."""
        for kernel in self.kernels():
            with contextlib.suppress(urllib.error.URLError, OSError):
                self.api("DELETE", f"/api/kernels/{kernel['id']}")

    def reset_workspace(self) -> None:
        """Forget the notebooks JupyterLab would reopen on the next page load.

        JupyterLab keeps the open tabs in its ``default`` workspace and reopens them
        all, each with a new kernel, when a page loads ``/lab/tree/<path>``: without
        this, the n-th test of a session starts n kernels.
        """
        try:
            self.api("DELETE", "/lab/api/workspaces/default")
        except urllib.error.HTTPError as exc:
            if exc.code != 404:  # none saved yet
                raise

    def log_text(self, tail: int = 200) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError as exc:
            return f"(no server log: {exc})"
        return "\n".join(lines[-tail:])

    def write_notebook(self, name: str, cells: Iterable[str | tuple[str, str]]) -> str:
        """Write a notebook into ``root_dir`` and return its path relative to it.

        ``cells`` are code cell sources, or ``("markdown", source)`` /
        ``("code", source)`` pairs. The notebook names the ``python3`` kernel
        so JupyterLab starts it without asking.
        """
        write_notebook(self.root_dir / name, cells)
        return name

    def stop(self) -> None:
        stop_process_tree(self.proc, self)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _private_jupyter_env(base: Path, python: str) -> dict[str, str]:
    """Environment that keeps Jupyter away from the user's config and data.

    The venv's own ``share/jupyter`` (labextensions such as ipywidgets and
    anywidget, and ipykernel's kernelspec) stays on the path because it comes
    from ``sys.prefix``, not from these variables.
    """
    config_dir = base / "config"
    data_dir = base / "data"
    settings_dir = config_dir / "lab" / "user-settings"
    for d in (
        config_dir,
        data_dir,
        base / "path",
        base / "runtime",
        base / "ipython",
        base / "workspaces",
    ):
        d.mkdir(parents=True, exist_ok=True)
    for rel, value in LAB_USER_SETTINGS.items():
        target = settings_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(value, indent=2))

    # An explicit python3 kernelspec that runs exactly this interpreter (which
    # has nbagent installed editable). It goes on JUPYTER_PATH, the only place
    # that beats the venv's own share/jupyter: inside a venv jupyter_core
    # prefers sys.prefix over JUPYTER_DATA_DIR.
    kernel_dir = base / "path" / "kernels" / "python3"
    kernel_dir.mkdir(parents=True, exist_ok=True)
    (kernel_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (nbagent tests)",
                "language": "python",
                "metadata": {"debugger": True},
                "kernel_protocol_version": "5.5",
            },
            indent=1,
        )
    )

    env = dict(os.environ)
    # No user-level Jupyter paths, and no provider keys: notebooks in browser
    # tests run on the offline demo model whatever the developer has set.
    for var in (
        "JUPYTER_PATH",
        "JUPYTER_CONFIG_PATH",
        "JUPYTER_TOKEN",
        "JUPYTER_PLATFORM_DIRS",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
    ):
        env.pop(var, None)
    bindir = str(Path(python).parent)
    env.update(
        JUPYTER_CONFIG_DIR=str(config_dir),
        JUPYTER_DATA_DIR=str(data_dir),
        JUPYTER_PATH=str(base / "path"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(settings_dir),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
        IPYTHONDIR=str(base / "ipython"),
        PATH=bindir + os.pathsep + env.get("PATH", ""),
        PYTHONUNBUFFERED="1",
    )
    return env


def start_jupyterlab(
    base: Path,
    *,
    python: str = sys.executable,
    attempts: int = 3,
    timeout: float = SERVER_START_TIMEOUT,
) -> JupyterLabServer:
    """Start JupyterLab with a private config under ``base``; wait for ``/api/status``.

    Retries on a new port if the chosen one was taken in the meantime (the
    server runs with ``port_retries=0`` so it never silently moves elsewhere).
    """
    root_dir = base / "root"
    root_dir.mkdir(parents=True, exist_ok=True)
    env = _private_jupyter_env(base / "jupyter", python)
    errors: list[str] = []
    for attempt in range(1, attempts + 1):
        port = free_port()
        token = secrets.token_hex(16)
        log_path = base / f"jupyterlab-{attempt}.log"
        cmd = [
            python,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            "--LabApp.expose_app_in_browser=True",
            f"--ServerApp.root_dir={root_dir}",
            # No PyPI extension listing from the extension manager.
            "--LabApp.extension_manager=readonly",
        ]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=root_dir,
                start_new_session=True,
            )
        server = JupyterLabServer(
            url=f"http://127.0.0.1:{port}",
            token=token,
            root_dir=root_dir,
            port=port,
            log_path=log_path,
            env=env,
            proc=proc,
        )
        problem = _wait_until_ready(server, timeout)
        if problem is None:
            try:
                _check_kernelspec(server, python)
            except BaseException:
                stop_process_tree(proc, None)
                raise
            return server
        stop_process_tree(proc, None)
        log_text = server.log_text()
        errors.append(f"attempt {attempt} on port {port}: {problem}\n{log_text}")
        port_taken = re.search(r"already in use|Address already in use|Errno 98", log_text)
        if not port_taken:
            break
    raise RuntimeError("JupyterLab did not start:\n" + "\n\n".join(errors))


def _wait_until_ready(server: JupyterLabServer, timeout: float) -> str | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            return f"server exited with code {server.proc.returncode}"
        try:
            status = server.api("GET", "/api/status", timeout=2)
            if isinstance(status, dict) and "started" in status:
                return None
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(0.1)
    return f"no answer on /api/status within {timeout:.0f}s"


def _check_kernelspec(server: JupyterLabServer, python: str) -> None:
    specs = server.api("GET", "/api/kernelspecs")
    spec = specs["kernelspecs"].get("python3")
    if spec is None:
        raise RuntimeError(f"server has no python3 kernelspec: {sorted(specs['kernelspecs'])}")
    argv0 = spec["spec"]["argv"][0]
    if argv0 != python:
        raise RuntimeError(f"python3 kernelspec runs {argv0!r}, expected {python!r}")


def _children(pid: int) -> list[int]:
    """All descendant pids of ``pid`` (Linux /proc; empty elsewhere)."""
    by_parent: dict[int, list[int]] = {}
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        return []
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ..."; comm may contain spaces and parens.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        by_parent.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in by_parent.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill(pid: int, sig: int, group: bool) -> None:
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_process_tree(proc: subprocess.Popen[bytes], server: JupyterLabServer | None) -> None:
    """Stop the server, its kernels (own sessions!) and anything they started."""
    if server is not None and proc.poll() is None:
        # Graceful first: the server shuts its kernels down itself.
        with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
            server.shutdown_kernels()
    # Kernels are launched with start_new_session=True, so they are not in the
    # server's process group: collect them before the server goes away.
    descendants = _children(proc.pid)
    _kill(proc.pid, signal.SIGTERM, group=True)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        _kill(proc.pid, signal.SIGKILL, group=True)
        proc.wait(timeout=10)
    _kill(proc.pid, signal.SIGKILL, group=True)  # stragglers in the group
    for pid in descendants:
        _kill(pid, signal.SIGKILL, group=True)
        _kill(pid, signal.SIGKILL, group=False)


# ---------------------------------------------------------------------------
# Notebooks
# ---------------------------------------------------------------------------


def write_notebook(path: Path, cells: Iterable[str | tuple[str, str]]) -> Path:
    """Write an nbformat 4.5 notebook naming the ``python3`` kernel.

    Plain JSON on purpose: ``import nbformat`` pulls in jsonschema's format
    checkers, whose ``rfc3987_syntax`` compiles ~40 lark grammars at import
    (2-4 s on this machine). JupyterLab validates the file when it opens it.
    """
    nb_cells: list[dict[str, Any]] = []
    for cell in cells:
        kind, source = ("code", cell) if isinstance(cell, str) else cell
        entry: dict[str, Any] = {
            "cell_type": kind,
            "id": secrets.token_hex(4),
            "metadata": {},
            "source": source,
        }
        if kind == "code":
            entry.update(execution_count=None, outputs=[])
        elif kind != "markdown":
            raise ValueError(f"unknown cell type {kind!r}")
        nb_cells.append(entry)
    notebook = {
        "cells": nb_cells,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notebook, indent=1) + "\n")
    return path


# ---------------------------------------------------------------------------
# Driving the page
# ---------------------------------------------------------------------------

_JS_NOTEBOOK_READY = """(path) => {
  const app = window.jupyterapp;
  const w = app && app.shell && app.shell.currentWidget;
  if (!w || !w.content || !w.sessionContext || !w.context) return false;
  if (path !== null && w.context.path !== path) return false;
  const sc = w.sessionContext;
  const k = sc.session && sc.session.kernel;
  return !!(w.context.isReady && sc.isReady && k && k.status === 'idle'
            && k.connectionStatus === 'connected');
}"""

# Select exactly cell `index` in the current notebook, then start a command.
# The command's promise is parked on window so Python can wait for it without
# blocking page.evaluate (which has no timeout).
_JS_START_COMMAND = """async ([command, index]) => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  const nb = panel.content;
  if (index !== null) {
    if (index < 0 || index >= nb.widgets.length)
      throw new Error(`cell ${index} out of range (${nb.widgets.length} cells)`);
    nb.activeCellIndex = index;
    nb.deselectAll();
    nb.mode = 'command';
  }
  window.__nbtest = window.__nbtest || {seq: 0, done: {}};
  const id = ++window.__nbtest.seq;
  app.commands.execute(command).then(
    (r) => { window.__nbtest.done[id] = {ok: r !== false}; },
    (e) => { window.__nbtest.done[id] = {ok: false, error: String(e)}; });
  return id;
}"""


def _current_panel_selector(page: Page) -> str:
    panel_id = page.evaluate(
        "() => { const w = window.jupyterapp.shell.currentWidget; return w ? w.id : null; }"
    )
    if not panel_id:
        raise AssertionError("no current widget in JupyterLab's main area")
    return f'[id="{panel_id}"]'


_JS_RESTART_KERNEL = """() => { const w = window.jupyterapp.shell.currentWidget;
    const s = w && w.sessionContext && w.sessionContext.session;
    return s && s.kernel ? s.kernel.restart().then(() => true, () => false) : false; }"""


def _port_races(server: JupyterLabServer) -> int:
    """How many kernels of this server died binding a port another process took."""
    try:
        return server.log_path.read_text(errors="replace").count("Address already in use")
    except OSError:
        return 0


def open_notebook(
    page: Page, server: JupyterLabServer, path: str, timeout: float = KERNEL_START_TIMEOUT
) -> None:
    """Open ``path`` (relative to the server root), alone, and wait until its kernel is idle.

    Earlier tests' notebooks are not reopened (:meth:`JupyterLabServer.reset_workspace`).
    """
    if page.url != "about:blank":
        page.goto("about:blank")  # no save of the old page's workspace after the reset
    server.reset_workspace()
    page.goto(server.lab_url(path), wait_until="domcontentloaded", timeout=timeout * 1000)
    deadline = time.monotonic() + timeout
    page.wait_for_function("() => !!window.jupyterapp", timeout=timeout * 1000)
    port_races = _port_races(server)
    while True:
        if page.evaluate(_JS_NOTEBOOK_READY, path):
            break
        # A notebook without kernel metadata makes JupyterLab ask; take the default.
        dialog = page.locator(".jp-Dialog .jp-mod-accept")
        if dialog.count():
            dialog.first.click()
        if _port_races(server) > port_races:
            # A TCP kernel picks free ports, releases them and binds them again as it
            # starts; on a busy machine another process can take one in between, and the
            # kernel dies ("Address already in use") before the page connects. Start a
            # new one, as a user would with Kernel > Restart.
            port_races = _port_races(server)
            page.evaluate(_JS_RESTART_KERNEL)
        if time.monotonic() > deadline:
            state = page.evaluate(
                """() => { const w = window.jupyterapp.shell.currentWidget;
                    const k = w && w.sessionContext && w.sessionContext.session
                              && w.sessionContext.session.kernel;
                    return {widget: w && w.id, path: w && w.context && w.context.path,
                            kernel: k && k.status, conn: k && k.connectionStatus}; }"""
            )
            raise AssertionError(f"notebook {path!r} not ready after {timeout:.0f}s: {state}")
        time.sleep(0.1)
    page.locator(f"{_current_panel_selector(page)} .jp-Notebook .jp-Cell").first.wait_for(
        timeout=timeout * 1000
    )


def _run_command(page: Page, command: str, index: int | None, wait: bool, timeout: float) -> None:
    run_id = page.evaluate(_JS_START_COMMAND, [command, index])
    if not wait:
        return
    page.wait_for_function(
        "(id) => window.__nbtest && window.__nbtest.done[id] !== undefined",
        arg=run_id,
        timeout=timeout * 1000,
    )
    result = page.evaluate("(id) => window.__nbtest.done[id]", run_id)
    if not result.get("ok"):
        detail = ""
        if index is not None:
            text = output_area(page, index).inner_text(timeout=5000)
            detail = f"\noutput of cell {index}:\n{text[-2000:]}"
        raise AssertionError(f"{command} (cell {index}) failed: {result}{detail}")


def run_cell(page: Page, index: int, *, wait: bool = True, timeout: float = 60.0) -> None:
    """Run cell ``index`` of the current notebook via ``notebook:run-cell``.

    With ``wait`` (default) return once the kernel reports the execution done;
    a cell that raised counts as failed (JupyterLab resolves ``false``).
    """
    _run_command(page, "notebook:run-cell", index, wait, timeout)


def run_all(page: Page, *, wait: bool = True, timeout: float = 120.0) -> None:
    """Run every cell of the current notebook via ``notebook:run-all-cells``."""
    _run_command(page, "notebook:run-all-cells", None, wait, timeout)


def cell(page: Page, index: int) -> Locator:
    """Locator of cell ``index`` (``.jp-Cell``) in the current notebook."""
    return page.locator(f"{_current_panel_selector(page)} .jp-Notebook .jp-Cell").nth(index)


def cell_count(page: Page) -> int:
    """How many cells the current notebook has (other open notebooks' cells are not counted)."""
    return page.locator(f"{_current_panel_selector(page)} .jp-Notebook .jp-Cell").count()


def output_area(page: Page, index: int) -> Locator:
    """Locator of the ``.jp-Cell-outputArea`` of cell ``index``."""
    return cell(page, index).locator(".jp-Cell-outputArea")


def wait_for_output(
    page: Page, cell_index: int, text: str | re.Pattern[str], timeout: float = 30.0
) -> Locator:
    """Assert that the output area of ``cell_index`` comes to contain ``text``."""
    from playwright.sync_api import expect

    area = output_area(page, cell_index)
    expect(area).to_contain_text(text, timeout=timeout * 1000)
    return area


def screenshot(page: Page, name: str) -> Path:
    """Save a full-page PNG to ``test-artifacts/<name>.png`` and return its path."""
    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "screenshot"
    path = ARTIFACTS_DIR / (safe if safe.endswith(".png") else f"{safe}.png")
    page.screenshot(path=str(path), full_page=True)
    return path


def wait_for_file(path: Path, expected: str, timeout: float = 10.0) -> str:
    """Poll ``path`` until its stripped text equals ``expected``; return the last text."""
    deadline = time.monotonic() + timeout
    text = ""
    while True:
        try:
            text = path.read_text().strip()
        except OSError:
            text = ""
        if text == expected or time.monotonic() > deadline:
            return text
        time.sleep(0.05)


__all__: Sequence[str] = (
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "JupyterLabServer",
    "browser_required",
    "cell",
    "open_notebook",
    "output_area",
    "run_all",
    "run_cell",
    "screenshot",
    "start_jupyterlab",
    "stop_process_tree",
    "wait_for_file",
    "wait_for_output",
    "write_notebook",
)
