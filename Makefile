# attnviz: two commands to start — `make install`, then `make test` (or `make demo`).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# torch is pinned here (not in pyproject) because on this machine pip finds the
# CPU wheel of exactly this release; an unpinned torch pulls a multi-GB CUDA build.
TORCH  ?= torch==2.13.0

.PHONY: install test test-fast lint demo bench fuzz clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

# What CI runs: lint, formatting, types and every test, the slow ones included; the
# 15 slowest tests are listed at the end. --verbosity=0 undoes the -q of pyproject's
# addopts, so each test file is named as it runs instead of a wall of dots.
test: install
	$(BIN)/ruff check attnviz tests benchmarks
	$(BIN)/ruff format --check attnviz tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest --verbosity=0 --durations=15

# For the edit-test loop: every test not marked `slow` (subprocesses, hypothesis,
# big or many image files, 512-token inputs, README examples), well under a minute.
# No lint, no mypy, no slow tests: run `make test` before you push. Mark a test
# that takes about a second or more @pytest.mark.slow (hypothesis tests are marked
# so automatically, in tests/conftest.py).
test-fast: install
	$(BIN)/python -m pytest -m "not slow"

# The long fuzz pass over hostile model folders (tests/test_fuzz.py): ATTNVIZ_FUZZ_EXAMPLES
# cases (default 150) for each of config.json, tokenizer.json and the safetensors header,
# each in a fresh process; about 15 minutes here. `make test` runs 6 of each.
fuzz: install
	ATTNVIZ_FUZZ=long $(BIN)/python -m pytest tests/test_fuzz.py --hypothesis-show-statistics

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
