# Both targets are idempotent: the venv is made once, and pip re-checks the
# project on every run so a pulled change is always installed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-fast install mcp-thirdparty clean dashboard

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'

demo: install
	$(BIN)/agentsteps demo

# Regenerate the Grafana dashboard JSON from its builder (tests/deploy/test_dashboard_rules.py checks they match).
dashboard: $(BIN)/python
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
# test file stays on one process (its module fixtures are set up once).
TEST_WORKERS ?= 3
test: install mcp-thirdparty
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The inner loop: the pure tests marked `fast` (tests/README.md), in seconds.
test-fast: install
	$(BIN)/python -m pytest -q -m fast $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(THIRDPARTY) .agentsteps
