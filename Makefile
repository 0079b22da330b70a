# Both targets are idempotent: the venv is made once, and pip re-checks the
# project on every run so a pulled change is always installed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'

demo: install
	$(BIN)/agentsteps demo

test: install
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .agentsteps
