# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test test-fast lint demo bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check warpfix codemods tests bench
	$(BIN)/python -m pytest -n 2 --durations=15

test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check warpfix codemods tests bench

demo: $(STAMP)
	$(BIN)/python -m warpfix.demo

bench: $(STAMP)
	$(BIN)/python bench/check_speed.py

clean:
	rm -rf $(VENV) .pytest_cache
