# Set-up and tasks. Every target builds the local virtual environment first,
# so a clean clone needs nothing but Python 3.10+.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# scikit-learn's array-API dispatch (used by the array_api_strict tests) needs it.
export SCIPY_ARRAY_API := 1

.PHONY: demo test test-fast docs bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,plot,docs,distributed]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/nwensemble demo

test: $(STAMP)
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

docs: $(STAMP)
	$(BIN)/python -m sphinx -W --keep-going -b html docs docs/_build/html

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_single_head.py

clean:
	rm -rf $(VENV) docs/_build docs/generated docs/auto_examples *.egg-info
