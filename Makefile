# Two commands do all the set-up on a fresh machine:
#   make demo   - install, then train the built-in `dates` model (`aiayn train`)
#   make test   - install, then lint and run the whole test suite, browser test included (what CI runs)
#   make docs   - the documentation site, served locally (`mkdocs serve`)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test test-browser lint browser-deps docs vendor-katex clean

$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	# torch first, pinned to the local CPU wheel, so nothing pulls a CUDA build
	$(PY) -m pip install -q torch==2.13.0 -c constraints.txt
	$(PY) -m pip install -q -c constraints.txt -e '.[dev,serve,export,datasets,sentencepiece,tensorboard,wandb,completion]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(VENV)/bin/aiayn train --out runs/dates --overwrite

# The documentation site on http://127.0.0.1:8000/ (the tests build it with --strict).
docs: install
	$(VENV)/bin/mkdocs serve

# The site typesets the paper's equations with a copy of KaTeX in docs/assets/katex/ (committed, so
# the site needs no CDN and the build no download). This refreshes that copy from the npm registry.
KATEX_VERSION := 0.19.1
KATEX_DIR := docs/assets/katex

vendor-katex:
	rm -rf $(KATEX_DIR) && mkdir -p $(KATEX_DIR)/contrib $(KATEX_DIR)/fonts
	tmp=$$(mktemp -d) && cd $$tmp && npm pack -q katex@$(KATEX_VERSION) >/dev/null && tar xzf katex-$(KATEX_VERSION).tgz && \
	cd $(CURDIR) && cp $$tmp/package/LICENSE $$tmp/package/dist/katex.min.js $$tmp/package/dist/katex.min.css $(KATEX_DIR)/ && \
	cp $$tmp/package/dist/contrib/auto-render.min.js $(KATEX_DIR)/contrib/ && \
	cp $$tmp/package/dist/fonts/*.woff2 $(KATEX_DIR)/fonts/ && rm -rf $$tmp
	echo "KaTeX $(KATEX_VERSION) from the npm registry (make vendor-katex); fonts: woff2 only" > $(KATEX_DIR)/VERSION

lint: install
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/lint-imports

# One run of everything: the default selection (-m "not browser") and the browser test.
test: lint browser-deps
	$(VENV)/bin/pytest -q

# The browser test drives Debian's Chromium through Playwright's Python package; it skips
# when either is missing. (Never `playwright install`: it downloads a browser build.)
BROWSER_STAMP := $(VENV)/.browser-installed

$(BROWSER_STAMP): $(STAMP)
	$(PY) -m pip install -q -c constraints.txt -e '.[dev,browser,serve,export,datasets,sentencepiece,tensorboard,wandb,completion]'
	touch $(BROWSER_STAMP)

browser-deps: $(BROWSER_STAMP)
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
		else \
			echo "note: chromium is missing (apt-get install chromium chromium-driver); the browser test will skip"; \
		fi; \
	fi

test-browser: browser-deps
	$(VENV)/bin/pytest -q -m browser

clean:
	rm -rf $(VENV) runs .pytest_cache
