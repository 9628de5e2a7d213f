# One entry point. `make lab` runs the lab on the local default; `make test` runs every test.
# Both create .venv and install the pinned dependencies first, once: the stamp file is
# rebuilt only when pyproject.toml changes, so a warm machine skips straight to the work.
# The stamp also registers the '$(KERNEL)' Jupyter kernel inside .venv (the one the notebooks
# name); papermill, nbval and `labkit lab` ask for the running Python's own kernel instead.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The edition `make lab` runs: en (notebooks/) or zh-CN (notebooks/zh-CN/): make lab EDITION=zh-CN
# (not LANG=, which would also set the locale of every process make starts).
EDITION ?= en
# The Jupyter kernel: the same name as environment.yml's conda env (tests/test_setup_checks.py).
KERNEL := cassava-mwms

.PHONY: help venv browser lab train test test-fast bench jupyter lint format clean

help:
	@echo "make lab      run the whole lab (notebooks 00-05) locally and print where results are"
	@echo "              make lab EDITION=zh-CN runs the Simplified Chinese edition (notebooks/zh-CN/)"
	@echo "make test     run every test (unit, multi-process, local Vertex AI service, notebooks)"
	@echo "make train    only the 2-worker training on the sample, through labkit cluster (EDITION=zh-CN: its lines in Chinese)"
	@echo "make bench    benchmarks against the codelab's own code (bench/results/latest.json)"
	@echo "make jupyter  JupyterLab on notebooks/ with the '$(KERNEL)' kernel (EDITION=zh-CN: in Chinese)"
	@echo "make test-fast  the tests not marked slow (no training, no multi-process cluster; < 3 min)"
	@echo "make lint     ruff on code and notebooks, nbqa ruff, nbstripout --verify, labkit.course.nbcheck"

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python ($(KERNEL))"
	touch $(STAMP)

# Debian's chromium for the console page's browser tests and screenshots (apt-get, once).
browser:
	.ci/install-browser

lab: $(STAMP) browser
	$(BIN)/python -m labkit lab --lang $(EDITION)

train: $(STAMP)
	$(BIN)/python -m labkit lab --train-only --lang $(EDITION)

test: $(STAMP) browser
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

bench: $(STAMP)
	$(BIN)/python -m bench

# JupyterLab on the edition's folder, its menus in the edition's language, the news prompt off
# (labkit/course/jupyterlab.py); the notebooks open in the '$(KERNEL)' kernel the stamp registers.
jupyter: $(STAMP)
	$(BIN)/python -m labkit jupyter --lang $(EDITION)

# ruff lints the code and, cell by cell, the notebooks' code cells; nbqa runs ruff on each
# notebook as one script (its options: pyproject.toml [tool.nbqa.addopts]). Then nbstripout:
# no outputs but the nbval references (tagged keep_output); labkit.course.nbcheck: references, the
# parameters cell and the template's sections.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/nbqa ruff notebooks
	$(BIN)/nbstripout --verify --keep-count --keep-id notebooks/*.ipynb notebooks/zh-CN/*.ipynb
	$(BIN)/python -m labkit.course.nbcheck

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf .lab runs outputs .pytest_cache .ruff_cache
