# Two entry points: `make run` (set up, then run the main job on the embedded defaults) and
# `make test` (set up with the dev tools, then lint, type-check, check the import contracts and run
# the tests). Both create .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch. On this project's machines torch==2.13.0 lies on disk; elsewhere set
# TORCH_INDEX=https://download.pytorch.org/whl/cpu to get a CPU build instead of a multi-GB CUDA one.
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
PIP := $(PY) -m pip install --quiet --disable-pip-version-check

.PHONY: run test check install install-dev clean

$(VENV)/.base: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH)"
	$(PIP) -e .
	touch $@

$(VENV)/.dev: $(VENV)/.base
	$(PIP) -e '.[dev]'
	touch $@

install: $(VENV)/.base
install-dev: $(VENV)/.dev

run: $(VENV)/.base
	$(VENV)/bin/carrier run

check: $(VENV)/.dev
	$(VENV)/bin/ruff check carrier clients tests bench
	$(VENV)/bin/ruff format --check carrier clients tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: check
	$(VENV)/bin/pytest -q

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
