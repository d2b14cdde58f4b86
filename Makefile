# Everything goes through .venv, created and filled by `make venv` (idempotent).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed

export ADS_RANKING_HOME ?= $(CURDIR)/.ads_ranking
export DAGSTER_HOME     ?= $(CURDIR)/.dagster_home

.PHONY: venv run test ui bench clean instance

# The Dagster instance: run queue with per-GPU-pool limits from the pool catalog, run monitoring,
# telemetry off (ads_ranking_pipelines/config/dagster_instance.py; dagster.yaml in the repo is the
# same for the shipped catalog).
instance: venv
	$(VENV)/bin/ads-ranking instance dagster-yaml --out $(DAGSTER_HOME)/dagster.yaml

venv: $(STAMP)

# torch first (the CPU build; pip left free to choose pulls CUDA), then torchrec without
# its CUDA fbgemm-gpu dependency, then the project pinned by constraints.txt.
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c constraints.txt torch==2.13.0
	$(PIP) install -q --no-deps torchrec==1.8.0
	$(PIP) install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

run: instance
	$(VENV)/bin/ads-ranking pipeline run $(ARGS)

test: venv
	mkdir -p $(DAGSTER_HOME)
	$(PY) -m pytest $(PYTEST_ARGS)

ui: instance
	$(VENV)/bin/dagster dev -h 127.0.0.1 -p 3000 -w workspace.yaml

bench: venv
	$(PY) -m benchmarks.run_all

clean:
	rm -rf $(VENV) .pytest_cache
