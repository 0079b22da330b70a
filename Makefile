# `make demo` installs only the runtime; `make test` (and `make install`, the developer set-up)
# add the test extras. pip runs again only when pyproject.toml changes: the install is editable,
# so pulled code is live without it. The editable-install warning is silenced (the repository
# root is the package, on purpose: see pyproject.toml).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install --quiet --disable-pip-version-check
RUNTIME := $(VENV)/.installed-runtime
DEVELOP := $(VENV)/.installed-test

.PHONY: demo test install mcp-thirdparty clean dashboard

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip

$(RUNTIME): pyproject.toml | $(BIN)/python
	@echo "installing agentsteps into $(VENV) (the runtime only)"
	@$(PIP) -e .
	@touch $@

$(DEVELOP): pyproject.toml | $(BIN)/python
	@echo "installing agentsteps into $(VENV) with its test extras"
	@$(PIP) -e '.[test]'
	@touch $@ $(RUNTIME)

install: $(DEVELOP)

demo: $(RUNTIME)
	$(BIN)/agentsteps demo

# Regenerate the Grafana dashboard JSON from its builder (tests/test_dashboard_rules.py checks they match).
dashboard: $(BIN)/python
	$(BIN)/python deploy/grafana/build_dashboard.py

# Published MCP servers we did not write, for tests/test_mcp_thirdparty.py. Each
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

test: $(DEVELOP) mcp-thirdparty
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(THIRDPARTY) .agentsteps
