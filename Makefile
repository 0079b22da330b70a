# `make demo` installs only the runtime; `make test` (and `make install`, the developer set-up)
# add the test extras. pip runs again only when pyproject.toml changes: the install is editable,
# so pulled code is live without it. The editable-install warning is silenced (the repository
# root is the package, on purpose: see pyproject.toml).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Every install takes the tested set (constraints.txt); pyproject.toml only declares ranges.
PIP := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt
RUNTIME := $(VENV)/.installed-runtime
DEVELOP := $(VENV)/.installed-test

.PHONY: demo test test-fast lint typecheck test-first-hour dist install mcp-thirdparty clean dashboard constraints

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip

$(RUNTIME): pyproject.toml constraints.txt | $(BIN)/python
	@echo "installing agentsteps into $(VENV) (the runtime only)"
	@$(PIP) -e .
	@touch $@

$(DEVELOP): pyproject.toml constraints.txt | $(BIN)/python
	@echo "installing agentsteps into $(VENV) with its test extras"
	@$(PIP) -e '.[test]'
	@touch $@ $(RUNTIME)

install: $(DEVELOP)

# Re-resolve the tested set after a dependency changed in pyproject.toml: the newest versions within its
# ranges, in a scratch venv, frozen into constraints.txt (its comment header is kept).
constraints:
	rm -rf .venv-constraints && $(PYTHON) -m venv .venv-constraints
	.venv-constraints/bin/pip install --quiet --disable-pip-version-check '.[test,s3,otlp]'
	{ grep '^#' constraints.txt; .venv-constraints/bin/pip freeze --exclude-editable | grep -v '^agentsteps'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt && rm -rf .venv-constraints

demo: $(RUNTIME)
	$(BIN)/agentsteps demo

# Regenerate the Grafana dashboard JSON from its builder (tests/deploy/test_dashboard_rules.py checks they match).
dashboard: install
	$(BIN)/python deploy/grafana/build_dashboard.py

# Published MCP servers we did not write, for tests/activities/test_mcp_thirdparty.py. Each
# gets its own venv (their MCP SDK pins must never touch the project's); the
# stamp is the pinned requirements file, so a changed pin reinstalls.
THIRDPARTY := .venv-mcp-thirdparty
THIRDPARTY_SERVERS := $(patsubst tests/mcp_thirdparty/%.txt,$(THIRDPARTY)/%/installed.txt,$(wildcard tests/mcp_thirdparty/*.txt))

$(THIRDPARTY)/%/installed.txt: tests/mcp_thirdparty/%.txt
	@echo "installing third-party MCP server $* (pinned in $<)"
	@rm -rf $(THIRDPARTY)/$*
	@$(PYTHON) -m venv $(THIRDPARTY)/$*
	@$(THIRDPARTY)/$*/bin/pip install --quiet --disable-pip-version-check --no-deps -r $<
	@cp $< $@

mcp-thirdparty: $(THIRDPARTY_SERVERS)

# The suite on TEST_WORKERS processes, each with its own Temporal dev server; a
# test file stays on one process (its module fixtures are set up once). The
# newcomer's first hour (a fresh clone, its own venv and stack: minutes on its
# own) is a lane of its own, which .ci/run runs after the suite.
# Bytecode is cached even where PYTHONDONTWRITEBYTECODE is set (container images often set it): the
# suite starts hundreds of Python processes (workers, CLI commands), and without the cache each one
# compiles the package again and each test process re-rewrites every test module (about 0.3 s and
# 6 s of CPU). The caches are __pycache__ folders, which git ignores.
# Four processes on two cores: 6:33 in a fresh clone against 7:00-7:39 on 3 (docs/benchmarks.md); a
# test process spends much of its time waiting on servers and child processes.
TEST_WORKERS ?= 4
test: $(DEVELOP) mcp-thirdparty
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not first_hour and not typecheck" $(PYTEST_ARGS)

# The formatter and the linter, as configured in pyproject.toml ([tool.ruff]); `ruff format .` fixes the first.
lint: $(DEVELOP)
	$(BIN)/ruff format --check --quiet .
	$(BIN)/ruff check --quiet .

# mypy --strict over the package and the dashboard builder (tests/repo/test_public_types.py): a static check
# beside the lint, not in the suite, where a cold cache took up to a minute of one test process; a warm one re-checks
# only what changed. .ci/run runs it between the lint and the suite.
typecheck: $(DEVELOP)
	$(BIN)/python -m pytest -q -m typecheck tests/repo/test_public_types.py $(PYTEST_ARGS)

# The inner loop: the lint, then the pure tests marked `fast` (tests/README.md), in seconds.
test-fast: lint
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -m fast $(PYTEST_ARGS)

# The sdist and the wheel, as a release publishes them (dist/).
dist: install
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

# The README's first hour on a fresh clone with no API key, and every code block of the README and docs/.
test-first-hour: $(DEVELOP)
	$(BIN)/python -m pytest -q -m first_hour $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(THIRDPARTY) .agentsteps build dist
