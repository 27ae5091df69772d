# The two commands of the README: `make run` and `make test`.
#   make run [PORT=8080] [HOST=127.0.0.1] [DATA_DIR=~/.local/share/almanac] [EXTRAS=vertex]
#   make test [PYTEST_ARGS=...]
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# `make run` needs only the service's own dependencies (plus EXTRAS, e.g. vertex); `make test`
# installs everything (dev tools, every extra), which `make run` then reuses.
EXTRAS ?=
# The suite mostly waits on the processes it starts (load ≈ 1.4 on 2 cores when run serially), so
# two workers, each taking whole test files, finish it in about half the time. PYTEST_ARGS= runs serially.
PYTEST_ARGS ?= -n 2 --dist loadfile
comma := ,
RUN_STAMP := $(VENV)/.installed-run$(if $(EXTRAS),-$(subst $(comma),-,$(EXTRAS)))

.PHONY: run test lint typecheck check clean docs

$(STAMP): pyproject.toml setup.py
	@echo "make: setting up $(VENV) with everything the tests need (first time only; a few minutes)" >&2
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,vertex]'
	touch $(STAMP)

$(RUN_STAMP): pyproject.toml setup.py
	@if [ -f $(STAMP) ] && [ $(STAMP) -nt pyproject.toml ] && [ $(STAMP) -nt setup.py ]; then \
		touch $@; \
	else \
		echo "make run: installing Almanac and its runtime dependencies into $(VENV) (first time only, about a minute)" >&2; \
		$(PY) -m venv $(VENV) && \
		$(BIN)/python -m pip install --quiet --upgrade pip && \
		$(BIN)/python -m pip install --progress-bar on -e '.$(if $(EXTRAS),[$(EXTRAS)])' && \
		touch $@ && echo "make run: installed" >&2; \
	fi

run: $(RUN_STAMP)
	$(BIN)/almanac serve $(if $(HOST),--host '$(HOST)') $(if $(PORT),--port '$(PORT)') $(if $(DATA_DIR),--data-dir '$(DATA_DIR)')

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# docs/cli.md is generated from the CLI's --help (tests/test_cli_reference.py fails when it is stale)
docs: $(STAMP)
	$(BIN)/python -m gateway.cli.reference > docs/cli.md

test: $(STAMP)
	scripts/test-setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
