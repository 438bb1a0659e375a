# nbagent developer entry points. Every target uses the venv's binaries
# explicitly (no `source`), and an install is a no-op unless pyproject.toml
# changed since the last successful one.
#
# Two installs share one venv: `make lab` and `make demo` need only the package
# and its light `lab` extra (JupyterLab, a kernel, what most example notebooks use;
# Ray and pyarrow are extras of their own, named by the cells that need them);
# test, lint, bench and notebooks need `dev`, which includes everything.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The stamps live inside the venv so deleting .venv also forces a reinstall.
STAMP     := $(VENV)/.nbagent-installed
LAB_STAMP := $(VENV)/.nbagent-lab-installed

# `make test` / .ci/run: a missing browser fails the browser tests instead of
# skipping them. `make test NBAGENT_REQUIRE_BROWSER=` allows skipping.
NBAGENT_REQUIRE_BROWSER ?= 1
# Likewise a missing PostgreSQL server fails the PostgreSQL store tests
# (.ci/ensure-postgres installs Debian's package; the tests start their own cluster).
NBAGENT_REQUIRE_POSTGRES ?= 1
# Likewise a missing Ray fails tests/batch/ray (`make test NBAGENT_REQUIRE_RAY=` allows skipping).
NBAGENT_REQUIRE_RAY ?= 1
# Likewise missing reference MCP servers fail tests/mcp_client/test_reference_servers.py,
# test_everything_server.py (Node; .ci/ensure-mcp-servers installs them) and
# test_python_reference_servers.py (mcp-server-time and mcp-server-git: the dev extra).
NBAGENT_REQUIRE_MCP_SERVERS ?= 1
# Likewise a missing Arize Phoenix (its own venv; .ci/ensure-phoenix installs it) fails
# tests/otel/test_phoenix.py.
NBAGENT_REQUIRE_PHOENIX ?= 1
PYTEST_ARGS ?=
# `make test` runs the suite on this many pytest-xdist workers, each test file whole on one
# worker (--dist loadfile: a file's fixtures and order as written). Most of the suite waits
# (kernels, browsers, servers, subprocesses), so two workers halve it even on two cores
# (22-25 -> 12-15 min measured); the CPUs, at least 2 and at most 4. TEST_WORKERS=0: one process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -lt 2 ] && n=2; [ $$n -gt 4 ] && n=4; echo $$n)
LAB_ARGS    ?=
# JupyterLab refuses to start as root without --allow-root.
ALLOW_ROOT  := $(if $(filter 0,$(shell id -u)),--allow-root,)
# `make lab` adds the repository's .jupyter to Jupyter's config path: its
# labconfig/default_setting_overrides.json turns off JupyterLab's news popup
# (a user's own settings still win).
LAB_CONFIG_PATH := $(CURDIR)/.jupyter$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH),)

.DEFAULT_GOAL := help
.PHONY: help venv install kernel lab demo notebooks test screenshot docs docs-serve lint imports bench clean distclean

help:
	@echo "make lab      create $(VENV), pip install -e '.[lab]', JupyterLab at the repository"
	@echo "              on notebooks/01_quickstart.ipynb (LAB_ARGS=...)"
	@echo "make install  create $(VENV) and pip install -e '.[dev]' (skipped if up to date)"
	@echo "make demo     run the quickstart notebook headless and print the transcript"
	@echo "make notebooks  rerun notebooks 01, 03 and 11 on the demo model and save their outputs"
	@echo "make test     whole pytest suite, browser tests included, on TEST_WORKERS processes"
	@echo "              (PYTEST_ARGS=...; TEST_WORKERS=0: one process)"
	@echo "make screenshot  regenerate docs/images/live-view.png (the README's picture) in JupyterLab"
	@echo "make docs     build the documentation site strictly into site/ (docs-serve: serve it)"
	@echo "make lint     ruff check + mypy + import contracts (lint-imports)"
	@echo "make imports  the import contracts alone: six layers, faces, no cycles (pyproject.toml)"
	@echo "make bench    python -m benchmarks"
	@echo "make clean    remove caches and build output (distclean: also $(VENV))"

# nbagent needs Python 3.11 or newer (requires-python): an older one fails here in one line,
# where pip would backtrack through every release of every dependency for minutes first.
PY_OK := import sys; sys.exit(sys.version_info < (3, 11))
define CHECK_PYTHON
@$(PYTHON) -c '$(PY_OK)' 2>/dev/null || { echo "nbagent needs Python 3.11 or newer; PYTHON=$(PYTHON) is $$($(PYTHON) -V 2>&1 || echo 'not found'): make $(or $(MAKECMDGOALS),lab) PYTHON=python3.11 (or newer)" >&2; exit 1; }
endef

$(PY):
	$(CHECK_PYTHON)
	$(PYTHON) -m venv $(VENV)

# A venv whose pip does not run (half-created, Python upgraded) or whose Python is older than
# 3.11 (made before PYTHON was set right) is recreated with $(PYTHON).
define ENSURE_PIP
@{ $(PY) -c '$(PY_OK)' && $(PY) -m pip --version; } >/dev/null 2>&1 || { \
	  $(PYTHON) -c '$(PY_OK)' 2>/dev/null || { echo "nbagent needs Python 3.11 or newer; PYTHON=$(PYTHON) is $$($(PYTHON) -V 2>&1 || echo 'not found'): make $(or $(MAKECMDGOALS),lab) PYTHON=python3.11 (or newer)" >&2; exit 1; }; \
	  echo "$(VENV) is broken or its Python is older than 3.11; recreating it with $(PYTHON)"; \
	  $(PYTHON) -m venv --clear $(VENV); }
endef

# --no-compile: pip would byte-compile every module of every package (most never
# imported: test suites, locales), which is a third of the install's time and size on a
# small machine; Python compiles what it imports on first use instead.
$(LAB_STAMP): pyproject.toml | $(PY)
	$(ENSURE_PIP)
	$(PY) -m pip install --disable-pip-version-check --no-compile -e '.[lab]'
	@touch $@

# dev includes lab, so a dev install brings lab up to date too.
$(STAMP): pyproject.toml | $(PY)
	$(ENSURE_PIP)
	$(PY) -m pip install --disable-pip-version-check -e '.[dev]'
	@touch $@ $(LAB_STAMP)

venv install: $(STAMP)

# The `python3` kernelspec must launch this venv's interpreter. ipykernel's
# wheel ships one in $(VENV)/share/jupyter/kernels (argv[0] "python", which
# jupyter_client maps to the server's own interpreter); reinstall it if it is
# missing or changed. A spec found first elsewhere (a user's, or on JUPYTER_PATH) that
# starts another Python shadows the venv's, reinstalled or not: that fails, naming it.
KERNEL_CHECK := import os, sys; from jupyter_client.kernelspec import KernelSpecManager as K; \
	m = K(); d = m.find_kernel_specs().get("python3"); a = d and m.get_kernel_spec("python3").argv[0]; \
	ok = a in ("python", "python3", sys.executable); \
	own = os.path.realpath(os.path.join(sys.prefix, "share", "jupyter", "kernels", "python3")); \
	shadow = bool(d) and not ok and os.path.realpath(d) != own; \
	shadow and print(f"The python3 kernelspec in {d} starts {a}, not {sys.executable}, and shadows the one in {own}: JupyterLab would run the notebooks on that Python. Remove it (rm -r {d}) or take its folder off JUPYTER_PATH, then rerun.", file=sys.stderr); \
	sys.exit(0 if ok else 2 if shadow else 1)
define ENSURE_KERNEL
@said=$$($(PY) -c '$(KERNEL_CHECK)' 2>&1); rc=$$?; \
	  if [ $$rc = 2 ]; then echo "$$said" >&2; exit 1; fi; \
	  if [ $$rc != 0 ]; then $(PY) -m ipykernel install --sys-prefix --name python3; fi
endef

kernel: $(STAMP)
	$(ENSURE_KERNEL)

# Rooted at the repository (README, package and notebooks all visible), opening
# the quickstart; without --ServerApp.root_dir, a notebook argument would root
# the server at notebooks/.
lab: $(LAB_STAMP)
	$(ENSURE_KERNEL)
	JUPYTER_CONFIG_PATH="$(LAB_CONFIG_PATH)" $(PY) -m jupyterlab $(ALLOW_ROOT) \
	  --ServerApp.root_dir="$(CURDIR)" notebooks/01_quickstart.ipynb $(LAB_ARGS)

demo: $(LAB_STAMP)
	$(PY) -m nbagent.demo

# The notebooks committed with their outputs (GitHub shows them before any install);
# tests/notebook/test_saved_outputs.py fails when they are stale versus the code.
SAVED_NOTEBOOKS := notebooks/01_quickstart.ipynb notebooks/03_approvals.ipynb \
                   notebooks/11_people_in_the_loop.ipynb

notebooks: kernel
	$(PY) -m nbagent.demo --save $(SAVED_NOTEBOOKS)

test: kernel
	bash .ci/ensure-chromium
	bash .ci/ensure-postgres
	bash .ci/ensure-mcp-servers
	PYTHON=$(PYTHON) bash .ci/ensure-phoenix
	NBAGENT_REQUIRE_BROWSER=$(NBAGENT_REQUIRE_BROWSER) NBAGENT_REQUIRE_POSTGRES=$(NBAGENT_REQUIRE_POSTGRES) \
	  NBAGENT_REQUIRE_RAY=$(NBAGENT_REQUIRE_RAY) NBAGENT_REQUIRE_MCP_SERVERS=$(NBAGENT_REQUIRE_MCP_SERVERS) \
	  NBAGENT_REQUIRE_PHOENIX=$(NBAGENT_REQUIRE_PHOENIX) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The README's picture of the live view, taken in JupyterLab by a browser test.
screenshot: kernel
	bash .ci/ensure-chromium
	NBAGENT_REQUIRE_BROWSER=1 NBAGENT_README_IMAGE="$(CURDIR)/docs/images/live-view.png" \
	  $(PY) -m pytest -q -p no:cacheprovider tests/browser/test_readme_screenshot.py

# The documentation site (mkdocs.yml): strict, so a broken link or an unreadable docstring
# fails the build; tests/test_docs_site.py builds it the same way in `make test`.
# NO_MKDOCS_2_WARNING: Material's banner about its successor, printed on every build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict

# Runs every tool even if one fails; fails if any does.
lint: $(STAMP)
	@status=0; \
	echo "+ ruff check ."; $(PY) -m ruff check . || status=1; \
	echo "+ ruff format --check"; $(PY) -m ruff format --check nbagent tests benchmarks || status=1; \
	echo "+ mypy"; $(PY) -m mypy || status=1; \
	echo "+ lint-imports"; $(VENV)/bin/lint-imports || status=1; \
	exit $$status

imports: $(STAMP)
	$(VENV)/bin/lint-imports

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf build dist site .cache *.egg-info test-artifacts .pytest_cache .mypy_cache .ruff_cache
	find . -path ./$(VENV) -prune -o -type d \( -name __pycache__ -o -name .ipynb_checkpoints \) -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
