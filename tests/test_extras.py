"""Packaging: the extras in pyproject.toml, and what happens when one is not installed.

``pip install nbagent`` brings the core (pandas, the SDKs, the widget packages);
the extras bring the heavy or optional rest. A feature whose extra is missing
fails with one line naming the extra. A missing module is simulated in a fresh
interpreter with ``sys.modules[name] = None``, which makes importing it fail as
if it were not installed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from nbagent._optional import EXTRAS, missing_message, require

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

SETUP = """
import sys
for name in {missing!r}:
    sys.modules[name] = None
import nbagent
from nbagent import Chat, Tool, log

class IssueRefund(Tool):
    '''Issue a refund for an order.'''
    requires_approval = True
    def execute(self, order_id: int) -> str:
        return f"refunded order {{order_id}}"

chat = Chat(model="demo").with_tools(IssueRefund)
chat.ask("Refund order 42")
chat.approve(chat.pending_approvals[0])
chat.complete()
"""


def run(missing: list[str], code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    source = SETUP.format(missing=missing) + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )


def last_line(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stderr.strip().splitlines()[-1]


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def _installs(extra: str) -> set[str]:
    """What ``pip install 'nbagent[extra]'`` brings besides the core, through nested extras."""
    names: set[str] = set()
    for requirement in PYPROJECT["optional-dependencies"][extra]:
        nested = re.fullmatch(r"nbagent\[([\w,]+)\]", requirement)
        if nested:
            for inner in nested.group(1).split(","):
                names |= _installs(inner)
        else:
            names |= _requirement_names([requirement])
    return names


def test_the_core_is_what_the_notebook_features_use() -> None:
    core = _requirement_names(PYPROJECT["dependencies"])
    assert core == {
        "pydantic", "pandas", "ipywidgets", "anywidget", "markdown-it-py", "openai", "anthropic",
        "httpx2",  # the SDKs' HTTP client, which the providers and the MCP client import
    }  # fmt: skip
    extras = PYPROJECT["optional-dependencies"]
    assert set(extras) == {
        "plots", "parquet", "lab", "mcp", "postgres", "ray", "otel", "docs", "dev",
    }  # fmt: skip
    assert "jupyterlab" in _requirement_names(extras["lab"])
    assert "jupyterlab" not in core  # VS Code and Colab bring their own front end


def test_each_extra_named_in_errors_brings_its_module() -> None:
    extras = PYPROJECT["optional-dependencies"]
    distribution = {"opentelemetry": "opentelemetry-sdk"}  # a namespace of several
    for module, extra in EXTRAS.items():
        wanted = distribution.get(module, module)
        assert wanted in _requirement_names(extras[extra]), (module, extra)
    # lab is light: what the quickstart and most notebooks use; the heavy pieces (pyarrow
    # for one cell of 05, Ray for the last section of 09) are their own extras, and dev
    # (make test, make lint) has everything.
    lab = _installs("lab")
    assert {"jupyterlab", "ipykernel", "nbclient", "matplotlib", "mcp"} <= lab
    assert not lab & {"ray", "pyarrow", "psycopg"}
    every_module = {distribution.get(m, m).split(".")[0] for m in EXTRAS}
    assert every_module <= _installs("dev")
    assert not lab & {"opentelemetry-sdk", "arize-phoenix"}


@pytest.mark.parametrize(
    ("missing", "code", "extra", "feature"),
    [
        (["matplotlib"], "log.plot_timeline(chat)", "plots", "log.plot_timeline()"),
        (["matplotlib"], "log.plot_durations(chat)", "plots", "log.plot_durations()"),
        (["pyarrow"], "log.to_parquet(chat.log, 'calls.parquet')", "parquet", "log.to_parquet()"),
        (["pyarrow"], "log.read_parquet('calls.parquet')", "parquet", "log.read_parquet()"),
        (
            ["mcp"],
            "nbagent.MCPServer.stdio('notes-server')",
            "mcp",
            "nbagent.MCPServer (MCP servers as tool sources)",
        ),
        (
            ["mcp"],
            "nbagent.MCPServer.http('http://127.0.0.1:9/mcp')",
            "mcp",
            "nbagent.MCPServer (MCP servers as tool sources)",
        ),
        (
            ["psycopg"],
            "nbagent.store.PostgresStore('postgresql://u:pw@127.0.0.1:9/db')",
            "postgres",
            "PostgresStore",
        ),
        (
            ["psycopg"],
            "Chat(model='demo', store='postgresql://u:pw@127.0.0.1:9/db')",
            "postgres",
            "PostgresStore",
        ),
        (
            ["ray"],
            "nbagent.batch(['hello'], lambda: Chat('demo'), backend='ray', progress=False)",
            "ray",
            'nbagent.batch(..., backend="ray")',
        ),
        # The model SDKs depend on OpenTelemetry's API: only the SDK (the extra) is missing.
        (["opentelemetry.sdk"], "nbagent.instrument()", "otel", "nbagent.instrument()"),
    ],
)
def test_a_feature_without_its_extra_says_which_extra_in_one_line(
    missing: list[str], code: str, extra: str, feature: str, tmp_path: Path
) -> None:
    proc = run(missing, code, tmp_path)
    assert proc.returncode == 1
    assert last_line(proc) == (
        f"ModuleNotFoundError: {feature} needs {missing[0]}, which is not installed: "
        f"pip install 'nbagent[{extra}]'"
    )
    assert "During handling" not in proc.stderr  # the bare import error is not chained


def test_instrument_with_a_provider_needs_only_the_api(tmp_path: Path) -> None:
    # A provider given explicitly (here the API's own no-op one) is used as it is: the SDK
    # is needed only for the global provider to export anything.
    proc = run(
        ["opentelemetry.sdk"],
        """
        from opentelemetry import trace
        nbagent.instrument(trace.NoOpTracerProvider())
        print(nbagent.uninstrument())
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


def test_the_log_itself_needs_no_extra(tmp_path: Path) -> None:
    proc = run(
        ["matplotlib", "pyarrow"],
        """
        df = chat.log
        assert list(df["status"]) == ["ok"], df
        log.to_csv(df, "calls.csv")
        print(log.summary(log.read_csv("calls.csv")).loc["issue_refund", "calls"])
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1"


def test_the_demo_without_the_lab_extra_says_so(tmp_path: Path) -> None:
    code = "import sys\nsys.modules['nbclient'] = None\n"
    code += "from nbagent.demo import main\nsys.exit(main())"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        "nbagent.demo: python -m nbagent.demo needs nbclient, which is not installed: "
        "pip install 'nbagent[lab]'\n"
    )


@pytest.mark.parametrize(
    ("missing", "code", "feature"),
    [
        (["pandas"], "chat.log", "chat.log (and every nbagent.log frame)"),
        (
            ["pandas"],
            "nbagent.batch(['hi'], lambda: Chat('demo'))",
            "nbagent.batch (its result is a DataFrame)",
        ),
        (["openai"], "Chat(model='gpt-4.1-mini')", "OpenAIProvider (OpenAI and compatible models)"),
        (["anthropic"], "Chat(model='claude-sonnet-4-5')", "AnthropicProvider (Claude models)"),
    ],
)
def test_a_missing_core_dependency_says_so_in_one_line(
    missing: list[str], code: str, feature: str, tmp_path: Path
) -> None:
    """Only a broken install gets here (they are dependencies), but it still gets a fix."""
    proc = run(missing, code, tmp_path)
    assert proc.returncode == 1
    assert last_line(proc) == (
        f"ModuleNotFoundError: {feature} needs {missing[0]}, a dependency of nbagent that is "
        f"not installed: pip install {missing[0]} (or reinstall nbagent)"
    )


def test_an_installed_module_that_fails_inside_keeps_its_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``require`` names an extra only when the module itself is missing."""
    (tmp_path / "nbagent_broken_pkg.py").write_text("import nbagent_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as info:
        require("nbagent_broken_pkg", "x")
    assert info.value.name == "nbagent_no_such_dependency"
    assert "nbagent_no_such_dependency" in str(info.value)


def test_require_returns_the_module() -> None:
    assert require("json", "x").__name__ == "json"
    assert "\n" not in missing_message("matplotlib.figure", "log.plot_timeline()")


def _cell_source(notebook: str, needle: str) -> str:
    nb = json.loads((ROOT / "notebooks" / notebook).read_text())
    (source,) = [
        "".join(c["source"])
        for c in nb["cells"]
        if c["cell_type"] == "code" and needle in "".join(c["source"])
    ]
    return source


@pytest.mark.parametrize(
    ("notebook", "needles", "missing", "line"),
    [
        (
            "09_batch.ipynb",
            ['backend="ray"', "ray.shutdown()"],
            "ray",
            'This section runs on Ray, which is not installed: %pip install "nbagent[ray]", '
            "then run it again.",
        ),
        (
            "05_log_analysis.ipynb",
            ["log.to_parquet"],
            "pyarrow",
            'Parquet needs pyarrow, which is not installed: %pip install "nbagent[parquet]" '
            "(CSV below)",
        ),
    ],
)
def test_a_notebook_section_without_its_extra_says_which_in_one_line(
    notebook: str, needles: list[str], missing: str, line: str, tmp_path: Path
) -> None:
    """`make lab` leaves Ray and pyarrow out: the cells that use them say so in one line and
    go on (the notebook's own cells, run with the module hidden)."""
    cells = [_cell_source(notebook, needle) for needle in needles]
    code = "import pandas as pd\ncalls = chat.log\n"
    code += "".join(f"exec({cell!r})\n" for cell in cells)
    proc = run([missing], code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout.strip().splitlines()
    assert printed[0] == line
    assert missing not in "".join(printed[1:])  # the rest of the cell did not try it
