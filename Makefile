# attnviz: two commands to start — `make install`, then `make test` (or `make demo`).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# torch is pinned here (not in pyproject) because on this machine pip finds the
# CPU wheel of exactly this release; an unpinned torch pulls a multi-GB CUDA build.
TORCH  ?= torch==2.13.0

.PHONY: install test lint demo bench clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

test: install
	$(BIN)/ruff check attnviz tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check attnviz tests benchmarks
	$(BIN)/ruff format --check attnviz tests benchmarks
	$(BIN)/mypy

demo: install
	$(BIN)/attnviz show
	$(BIN)/attnviz heads --layer 3 "Vi João e Maria ontem. Eles estavam juntos."

# Byte-compile attnviz first, as a regular (non-editable) pip install does: with
# PYTHONDONTWRITEBYTECODE set (as on this project's machines) every run would
# otherwise compile attnviz's sources again, about 0.1 s.
bench: install
	$(BIN)/python -m compileall -q attnviz
	$(BIN)/python benchmarks/bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist
