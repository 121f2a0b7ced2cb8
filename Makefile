# branchpoint: `make quickstart` and `make test` set up .venv on a fresh machine and reuse it after.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: quickstart test test-fast install install-embedded docs lint imports typecheck check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Python dependencies (re-run when pyproject.toml changes).
$(VENV)/.deps: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

# llama.cpp runtime for the embedded default model, built with safe CPU flags (see the script).
$(VENV)/.embedded: scripts/install-llama-cpp.sh | $(VENV)/.deps
	scripts/install-llama-cpp.sh $(BIN)/python
	touch $@

install: $(VENV)/.deps $(VENV)/.embedded

install-embedded: $(VENV)/.embedded

## Run the main job on the embedded default stack: search vs no search on the demo set.
quickstart: install
	$(BIN)/branchpoint quickstart

## The whole suite: unit tests with the scripted model + the real llama.cpp integration test, spread
## over the machine's cores (pytest-xdist; work stealing evens out the long validation tests).
PYTEST_WORKERS ?= auto
test: install
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist worksteal

## Unit tests only (no llama.cpp server).
test-fast: $(VENV)/.deps
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist worksteal -m "not integration"

## The manual (mkdocs-material, docs/ + mkdocs.yml), built strictly into site/: any warning (a
## broken link, a missing page, a docstring mkdocstrings cannot read) fails the build.
docs: $(VENV)/.deps
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

## Lint and format check (ruff), the import layers (lint-imports), type check (mypy: strict flags
## on traces, registry and errors; see pyproject.toml), and the strict docs build. CI runs this
## before `make test`.
lint: $(VENV)/.deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## The layers (import-linter contracts in pyproject.toml): which package may import which; every
## import counts, those inside functions too.
imports: $(VENV)/.deps
	$(BIN)/lint-imports

typecheck: $(VENV)/.deps
	$(BIN)/python -m mypy

check: lint imports typecheck docs

clean:
	rm -rf $(VENV) runs .pytest_cache site
