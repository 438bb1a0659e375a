"""Fixtures for the browser tests: one JupyterLab server and one Chromium, shared.

* ``jupyterlab_server`` (session) -> ``_jupyterlab.JupyterLabServer``: ``url``,
  ``token``, ``root_dir``, ``env``, ``write_notebook()``, ``lab_url()``,
  ``api()``, ``shutdown_kernels()``, ``shutdown_sessions()``, ``log_text()``
* ``browser`` -> ``playwright.sync_api.Browser`` (Debian's /usr/bin/chromium)
* ``browser_context`` -> ``BrowserContext`` shared by the browser tests (one
  HTTP cache, so JupyterLab's bundles load fast after the first page)
* ``page`` -> a fresh ``Page`` per test; on failure a screenshot goes to
  ``test-artifacts/`` and the report gets the server log and browser console;
  on teardown the server's sessions (kernels) are shut down.

The browser is launched on first use and closed as soon as the next test does
not use it: Playwright's sync API keeps an asyncio loop marked *running* in
the main thread while it is started, which makes every ``asyncio.run()`` in
later, unrelated tests fail ("cannot be called from a running event loop").
So ``browser``/``browser_context`` are function-scoped handles on one shared
instance, and nothing should keep them across tests.

Helpers (``open_notebook``, ``run_cell``, ``run_all``, ``wait_for_output``,
``screenshot``...) live in ``_jupyterlab.py``: ``from _jupyterlab import ...``.
"""

from __future__ import annotations

import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

# Make `import _jupyterlab` work whatever pytest's import mode is.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from _jupyterlab import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    JupyterLabServer,
    browser_required,
    screenshot,
    start_jupyterlab,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page, Playwright

_BROWSER_FIXTURES = ("browser", "browser_context", "page")


class _SharedBrowser:
    """Playwright + Chromium + one context, started lazily, closable any time."""

    def __init__(self) -> None:
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._context: BrowserContext | None = None

    def browser(self) -> Browser:
        if self._browser is None:
            from playwright.sync_api import sync_playwright

            self._playwright = sync_playwright().start()
            try:
                self._browser = self._playwright.chromium.launch(
                    executable_path=CHROMIUM, args=CHROMIUM_ARGS
                )
            except BaseException:
                self.close()
                raise
        return self._browser

    def context(self) -> BrowserContext:
        if self._context is None:
            self._context = self.browser().new_context(viewport={"width": 1280, "height": 900})
        return self._context

    def close(self) -> None:
        context, browser, pw = self._context, self._browser, self._playwright
        self._context = self._browser = self._playwright = None
        try:
            if context is not None:
                context.close()
            if browser is not None:
                browser.close()
        finally:
            if pw is not None:
                pw.stop()


_SHARED = _SharedBrowser()


def _uses_browser(item: pytest.Item | None) -> bool:
    names = getattr(item, "fixturenames", ())
    return any(name in names for name in _BROWSER_FIXTURES)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    try:
        return (yield)
    finally:
        if not _uses_browser(nextitem):
            _SHARED.close()


def pytest_sessionfinish(session: pytest.Session) -> None:
    _SHARED.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, Any]:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        server = funcargs.get("jupyterlab_server")
        if isinstance(server, JupyterLabServer):
            report.sections.append(("jupyterlab server log (tail)", server.log_text()))
        console = funcargs.get("page_console")
        if console:
            report.sections.append(("browser console", "\n".join(console)))
    return report


@pytest.fixture(scope="session")
def jupyterlab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLabServer]:
    """A JupyterLab server with private config/data dirs and a venv ``python3`` kernel."""
    server = start_jupyterlab(tmp_path_factory.mktemp("jupyterlab"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def browser() -> Browser:
    """Headless Debian Chromium driven by Playwright's sync API (shared, see above).

    Skips when /usr/bin/chromium is missing, unless NBAGENT_REQUIRE_BROWSER is
    set (``make test``, ``.ci/run``): then it fails.
    """
    missing = None
    if not Path(CHROMIUM).exists():
        missing = f"{CHROMIUM} not found (apt-get install chromium, or run .ci/ensure-chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError as exc:
            missing = f"the playwright package is not importable ({exc}); pip install -e '.[dev]'"
    if missing is not None:
        if browser_required():
            pytest.fail(f"NBAGENT_REQUIRE_BROWSER is set but {missing}", pytrace=False)
        pytest.skip(f"browser tests need Debian's Chromium: {missing}")
    return _SHARED.browser()


@pytest.fixture
def browser_context(browser: Browser) -> BrowserContext:
    """The context shared by consecutive browser tests (HTTP cache survives)."""
    return _SHARED.context()


@pytest.fixture
def page_console() -> list[str]:
    """Browser console errors/warnings and page errors of the current test."""
    return []


@pytest.fixture
def page(
    browser_context: BrowserContext, page_console: list[str], request: pytest.FixtureRequest
) -> Iterator[Page]:
    """A fresh page; screenshot into test-artifacts/ on failure.

    On teardown the page is closed and, if the test used ``jupyterlab_server``,
    every session/kernel on it is shut down so kernels don't pile up.
    """
    pg = browser_context.new_page()
    pg.set_default_timeout(30_000)
    pg.on(
        "console",
        lambda msg: (
            page_console.append(f"[{msg.type}] {msg.text}")
            if msg.type in ("error", "warning")
            else None
        ),
    )
    pg.on("pageerror", lambda exc: page_console.append(f"[pageerror] {exc}"))
    try:
        yield pg
    finally:
        rep = getattr(request.node, "rep_call", None)
        if rep is not None and rep.failed:
            try:
                path = screenshot(pg, f"FAILED-{request.node.name}")
                print(f"screenshot: {path}")
            except Exception as exc:  # the page may be gone already
                print(f"no screenshot: {exc}")
        pg.close()
        if "jupyterlab_server" in request.fixturenames:
            server = request.getfixturevalue("jupyterlab_server")
            try:
                server.shutdown_sessions()
            except OSError as exc:
                print(f"could not shut down sessions: {exc}")
