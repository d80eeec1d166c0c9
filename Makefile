# Two commands do all the set-up on a fresh machine:
#   make demo   - install, then train the built-in `dates` model (`aiayn train`)
#   make test   - install, then lint and run the whole test suite (what CI runs)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test lint browser-deps clean

$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	# torch first, pinned to the local CPU wheel, so nothing pulls a CUDA build
	$(PY) -m pip install -q torch==2.13.0 -c constraints.txt
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(VENV)/bin/aiayn train

lint: install
	$(VENV)/bin/ruff check src tests benchmarks

test: lint
	$(VENV)/bin/pytest -q -m "not browser"

clean:
	rm -rf $(VENV) runs .pytest_cache
