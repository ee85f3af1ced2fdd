# Two set-up commands on a fresh machine (Python 3.11, Java 17):
#   make demo   creates .venv, installs dal, runs the end-to-end example on the embedded catalog
#   make test   creates .venv, installs dal, its extras and the dev group; runs lint, types, the docs build and the whole test suite
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Azurite (Microsoft's Azure Blob emulator) for the abfs:// tests, from npm; pinned
AZURITE := .cache/azurite/node_modules/.bin/azurite-blob

.PHONY: install demo test lint typecheck docs pytest clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (set PYTHON=...)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# pip >= 25.1 reads PEP 735 dependency groups (--group dev: the test tools, not in the wheel's metadata)
	$(BIN)/python -m pip install -q --upgrade "pip>=25.1"
	# the extras declare ranges (torch>=2.3,<3); the tests run on the one torch build pinned here (the CPU wheel
	# this machine keeps on disk: an unpinned torch would download several GB). The suite runs on the previous
	# majors of pandas, polars and duckdb; tests/test_wheel_install.py runs the adapters' tests on the current ones
	$(BIN)/python -m pip install -q -e ".[all,ray,mlflow]" --group dev "torch==2.13.0" "pandas<3" "polars<2" "duckdb<2"
	touch $@

demo: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash examples/demo.sh

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

# the guides and the API reference (mkdocstrings reads the docstrings without importing dal) into build/site;
# --strict: a reference to a name that moved, a broken link or anchor, a page left out of the nav fails
# (not with --quiet: it hides the warnings --strict counts, and the build passed with a broken link).
# NO_MKDOCS_2_WARNING: Material for MkDocs prints a notice about its end of life (May 2027) on every build
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

$(AZURITE):
	@command -v npm >/dev/null || { echo "need Node.js and npm (the Azure tests run Azurite)"; exit 1; }
	npm install --prefix .cache/azurite --no-audit --no-fund --loglevel=error azurite@3.37.0

pytest: install $(AZURITE)
	bash scripts/ensure-services.sh
	bash scripts/ensure-browser.sh
	$(BIN)/python -m pytest

test: lint typecheck docs pytest

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
