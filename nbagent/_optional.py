"""Imports of third-party modules on first use, with a one-line fix when one is missing.

``pip install nbagent`` brings everything the documented notebook features use
(pandas, the OpenAI and Anthropic SDKs, ipywidgets, anywidget); the extras
bring the heavy or optional rest: ``plots`` (matplotlib), ``parquet``
(pyarrow), ``lab`` (JupyterLab, a kernel, nbclient for ``python -m
nbagent.demo``, and the plots and mcp extras the example notebooks use),
``mcp`` (the official MCP SDK, for ``nbagent.MCPServer``), ``postgres``
(psycopg 3, for ``nbagent.store.PostgresStore``), ``ray`` (Ray, for
``nbagent.batch(..., backend="ray")``), ``otel`` (OpenTelemetry's API, SDK and OTLP
exporter, for ``nbagent.instrument()``).
A feature whose module is missing fails with one line that says which extra
(or which dependency) to install, never with a bare ``No module named ...``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

EXTRAS = {
    "matplotlib": "plots",
    "pyarrow": "parquet",
    "nbclient": "lab",
    "mcp": "mcp",
    "psycopg": "postgres",
    "ray": "ray",
    "opentelemetry": "otel",
}
"""The module each extra brings, by top-level module name."""

PARTS = ("opentelemetry.sdk",)
"""Packages of a namespace shared by several distributions whose other parts may well be
installed (the model SDKs depend on ``opentelemetry-api``; the ``otel`` extra adds
``opentelemetry-sdk``): a message names the part, not the namespace."""


def missing_message(module: str, feature: str) -> str:
    """The one line telling how to get ``module`` for ``feature``."""
    top = module.partition(".")[0]
    extra = EXTRAS.get(top)
    if extra is not None:
        name = next((p for p in PARTS if module == p or module.startswith(p + ".")), top)
        return f"{feature} needs {name}, which is not installed: pip install 'nbagent[{extra}]'"
    return (
        f"{feature} needs {top}, a dependency of nbagent that is not installed: "
        f"pip install {top} (or reinstall nbagent)"
    )


def require(module: str, feature: str) -> ModuleType:
    """Import ``module`` for ``feature`` (e.g. ``"log.plot_timeline()"``).

    Raises:
        ModuleNotFoundError: ``module`` (or its package) is not installed; the
            message is one line naming the extra or dependency that brings it.
            A module that is installed but fails to import (a broken install, a
            missing dependency of its own) raises its own error unchanged.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.partition(".")[0]
        if (exc.name or "").partition(".")[0] != top:
            raise
        raise ModuleNotFoundError(missing_message(module, feature), name=top) from None
