# Two entry points: `make run` (set up, then run the main job on the embedded defaults) and
# `make test` (set up with the dev tools, then lint, type-check, check the import contracts and run
# the tests). Both create .venv on first use, from the lock in requirements/ (every package pinned
# with its hashes), so a fresh machine gets exactly what main was tested with.
VENV ?= .venv
PY := $(VENV)/bin/python
# The lock pins the CPU build of torch (torch==2.13.0+cpu). This project's machines have it on
# disk; elsewhere add PyTorch's CPU index:  make run TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
PIP := $(PY) -m pip install --quiet --disable-pip-version-check \
	$(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
PIP_VERSION := 26.3
# `make lock` resolves in a venv of its own, with these tools.
LOCK_VENV := .venv-lock
PIP_TOOLS := pip-tools==7.6.2
COMPILE = $(LOCK_VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
	--no-emit-index-url --no-emit-find-links $(LOCK_FLAGS)

.PHONY: run test check install install-dev bytecode lock lock-upgrade clean

# Carrier itself goes in last, editable and without dependencies: everything it needs is locked.
$(VENV)/.base: requirements/main.txt pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) pip==$(PIP_VERSION)
	$(PIP) --require-hashes -r requirements/main.txt
	$(PIP) --no-deps --no-build-isolation -e .
	touch $@

$(VENV)/.dev: $(VENV)/.base requirements/dev.txt
	$(PIP) --require-hashes -r requirements/dev.txt
	touch $@

install: $(VENV)/.base
install-dev: $(VENV)/.dev

# Carrier's own modules compiled ahead (only those changed since, after the first time). Where
# Python may not write bytecode as it imports (PYTHONDONTWRITEBYTECODE, as in many containers and
# CI machines) every start compiled them all again: ~0.2-0.4 s of `carrier run`'s start, and of
# every `carrier` process the tests start. An optimisation only: a tree it cannot write to runs.
bytecode: $(VENV)/.base
	-@$(PY) -m compileall -q carrier clients

run: $(VENV)/.base bytecode
	$(VENV)/bin/carrier run

check: $(VENV)/.dev
	$(VENV)/bin/ruff check carrier clients tests bench
	$(VENV)/bin/ruff format --check carrier clients tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: check bytecode
	$(VENV)/bin/pytest -q

# Re-resolve the lock after a change to pyproject.toml's dependencies, keeping every pin that
# still fits. `make lock-upgrade` moves everything to the newest releases that fit;
# `make lock LOCK_FLAGS='--upgrade-package litellm'` moves one. Either way: run `make test` and
# commit the lock on its own.
lock: $(LOCK_VENV)/.tools
	$(COMPILE) --extra discord --extra instagram -c requirements/constraints.in \
		-o requirements/main.txt pyproject.toml
	$(COMPILE) --extra dev --extra discord --extra instagram -c requirements/main.txt \
		-o requirements/dev.txt pyproject.toml

lock-upgrade:
	$(MAKE) lock LOCK_FLAGS=--upgrade

$(LOCK_VENV)/.tools:
	python3 -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet pip==$(PIP_VERSION) $(PIP_TOOLS)
	touch $@

clean:
	rm -rf $(VENV) $(LOCK_VENV) .pytest_cache .mypy_cache .ruff_cache
