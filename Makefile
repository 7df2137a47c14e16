# attnviz: two commands to start — `make install`, then `make test` (or `make demo`).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# torch is pinned here (not in pyproject) because on this machine pip finds the
# CPU wheel of exactly this release; an unpinned torch pulls a multi-GB CUDA build.
TORCH  ?= torch==2.13.0

.PHONY: install browser test test-fast lint docs demo bench fuzz clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[dev,gemma,dask]"
	@$(MAKE) --no-print-directory browser
	touch $@

# The browser tests drive Debian's Chromium (Playwright's own browser download cannot work
# on these machines). Installed when we are root on Debian; otherwise they are skipped with
# a line that says so (CI sets ATTNVIZ_REQUIRE_BROWSER=1, so there they fail instead).
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's chromium for the browser tests"; \
		(apt-get update -q && apt-get install -y -q chromium) >/dev/null 2>&1 \
			|| echo "note: could not install chromium; the browser tests will be skipped"; \
	else echo "note: no chromium (apt-get install chromium); the browser tests will be skipped"; fi

# What CI runs: lint, formatting, types and every test, the slow ones included; the
# 15 slowest tests are listed at the end. --verbosity=0 undoes the -q of pyproject's
# addopts. Two workers (pytest-xdist), a test file each at a time (its module fixtures
# built once): on this 2-core machine the suite took 458 s so, against 816 s in one
# process. `--dist loadgroup` is loadfile plus xdist groups (tests/conftest.py): the tests
# that compare with transformers' Gemma 3 (the `gemma_reference` fixture, about 70 CPU
# seconds to load) run on one worker, which loads it once instead of each worker loading it.
# Each worker has its own attention cache (tests/conftest.py).
test: install
	$(BIN)/ruff check attnviz tests benchmarks
	$(BIN)/ruff format --check attnviz tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest -n 2 --dist loadgroup --verbosity=0 --durations=15
	@$(MAKE) --no-print-directory docs

# For the edit-test loop: every test not marked `slow` (subprocesses, hypothesis,
# big or many image files, 512-token inputs, README examples), in two workers as
# `make test` (each collects the suite, but the tests split in two). No lint, no mypy,
# no slow tests: run `make test` before you push. Mark a test that takes about a second
# or more @pytest.mark.slow, with its reason (hypothesis tests are marked so
# automatically, in tests/conftest.py); `--durations=10` lists the ones to look at.
test-fast: install
	$(BIN)/python -m pytest -n 2 --dist loadgroup -m "not slow" --durations=10

# The long fuzz pass: hostile model folders (tests/safety/test_fuzz_model_folders.py:
# ATTNVIZ_FUZZ_EXAMPLES cases, default 150, for each of config.json, tokenizer.json and the safetensors header, each in a
# fresh process; about 15 minutes here), terminal escapes through every renderer and command
# (tests/safety/test_fuzz_terminal.py) and hostile cache folders (tests/safety/test_fuzz_cache.py).
# `make test` runs a short derandomised profile of each.
fuzz: install
	ATTNVIZ_FUZZ=long $(BIN)/python -m pytest tests/safety/test_fuzz_model_folders.py \
		tests/safety/test_fuzz_terminal.py tests/safety/test_fuzz_cache.py tests/safety/test_fuzz_gguf.py --hypothesis-show-statistics

# The documentation site (mkdocs.yml, docs/): built offline into site/, every warning an
# error (a broken link, an anchor that is not there, a page left out of the nav).
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

lint: install
	$(BIN)/ruff check attnviz tests benchmarks
	$(BIN)/ruff format --check attnviz tests benchmarks
	$(BIN)/mypy

# The default sentence is English, as the default model is: layer 3 head 7 links "he"
# to "John". The Portuguese lesson sentence needs a Portuguese model; on this one,
# find prints a note on stderr saying how badly it fits the vocabulary.
demo: install
	$(BIN)/attnviz show --layer 3 --head 7
	$(BIN)/attnviz find --from he --to John --top 5
	$(BIN)/attnviz find "João pensou: O trem estava cheio, mas ele conseguiu uma cadeira livre." --from ele --to João --top 3

# Byte-compile attnviz first, as a regular (non-editable) pip install does: with
# PYTHONDONTWRITEBYTECODE set (as on this project's machines) every run would
# otherwise compile attnviz's sources again, about 0.1 s.
bench: install
	$(BIN)/python -m compileall -q attnviz
	$(BIN)/python benchmarks/bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist site
