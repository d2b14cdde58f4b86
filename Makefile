# Everything goes through .venv, created and filled by `make venv` (idempotent).
# The interpreter .venv is made from (PYTHON=... to choose; an existing .venv keeps its own:
# rm -rf .venv to switch). Where the distribution's Python 3.11 is installed with venv support
# (Debian 12 / Ubuntu: /usr/bin/python3.11, package python3.11-venv) it is preferred over the
# first python3 on PATH: it is built with PGO and LTO into a statically linked interpreter, while
# pyenv's default build (the python3 on the dev machines) links a shared libpython without either.
# This project's processes are mostly Python starting and importing (Ray's daemons and workers,
# Dagster's, the CLI's): side by side on three end-to-end tests, 144 / 144 busy core-s with it vs
# 191 / 180 with pyenv's (-22 %; whole suite runs spread too much to show it alone; benchmarks/DESIGN_MEASUREMENTS.md).
DISTRO_PYTHON := /usr/bin/python3.11
PYTHON ?= $(if $(shell $(DISTRO_PYTHON) -c 'import ensurepip, venv' 2>/dev/null && echo ok),$(DISTRO_PYTHON),python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed

export ADS_RANKING_HOME ?= $(CURDIR)/.ads_ranking
export DAGSTER_HOME     ?= $(CURDIR)/.dagster_home

.PHONY: venv run test test-fast test-prereqs ui bench clean image push instance

# The Dagster instance: run queue with per-GPU-pool limits from the pool catalog, run monitoring,
# telemetry off (ads_ranking_pipelines/config/dagster_instance.py; dagster.yaml in the repo is the
# same for the shipped catalog).
instance: venv
	$(VENV)/bin/ads-ranking instance dagster-yaml --out $(DAGSTER_HOME)/dagster.yaml

venv: $(STAMP)

# The pinned install sequence (torch first, torchrec --no-deps, the project with constraints.txt)
# lives in scripts/install.sh, shared with the Dockerfile.
$(STAMP): pyproject.toml constraints.txt scripts/install.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	bash scripts/install.sh --variant cpu --editable --extras dev -- $(PIP)
	touch $(STAMP)

run: instance
	$(VENV)/bin/ads-ranking pipeline run $(ARGS)

# What the tests need beyond .venv (Debian's chromium for the X-Ray browser tests): installed
# where this user may, else one line saying what to install (scripts/test_prereqs.sh).
test-prereqs:
	bash scripts/test_prereqs.sh

# The suite runs in TEST_WORKERS pytest-xdist processes (worksteal: an idle process takes queued
# tests from a busy one, so the long end-to-end tests do not line up behind each other). Every
# test has its own homes, ports and Ray temp dirs. TEST_WORKERS=0 runs it in this process.
# Three on the 2-core dev machine: the suite is ~1,700 CPU-seconds; three kept the cores 94 % busy
# (15 min 5 s), two ~83 % (16 min 57 s): a test also waits on its Ray nodes, runs and processes.
TEST_WORKERS ?= 3
XDIST := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist worksteal)

# OpenMP threads that wait at a barrier sleep instead of spinning: the test processes share 2
# cores with each other and with Ray's, and a spinning waiter takes the core its peer needs (the
# XGBoost baseline test: 8.8 s with two busy loops beside it, 2.1 s with this).
test test-fast: export OMP_WAIT_POLICY ?= PASSIVE

test: venv test-prereqs
	mkdir -p $(DAGSTER_HOME)
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

# The inner loop (under 3 minutes here): every test but those marked ray, integration or slow
# (real Ray clusters, Dagster runs, CLI processes, torch ranks, browsers). `make test` runs them all.
test-fast: venv
	mkdir -p $(DAGSTER_HOME)
	$(PY) -m pytest $(XDIST) -m "not ray and not integration and not slow" $(PYTEST_ARGS)

ui: instance
	$(VENV)/bin/dagster dev -h 127.0.0.1 -p 3000 -w workspace.yaml

bench: venv
	$(PY) -m benchmarks.run_all $(BENCH_ARGS)

# The Ray image for KubeRay (Dockerfile): make image IMAGE=REGISTRY/ads-ranking-pipelines:TAG
# [VARIANT=gpu], then make push IMAGE=... . Needs a Docker engine (not on the dev machines).
IMAGE         ?=
VARIANT       ?= cpu
RAY_IMAGE_TAG ?= 2.60.0-py311
image: venv
	@test -n "$(IMAGE)" || { echo "usage: make image IMAGE=REGISTRY/ads-ranking-pipelines:TAG [VARIANT=cpu|gpu]" >&2; exit 2; }
	docker build \
	  --build-arg VARIANT=$(VARIANT) \
	  --build-arg BASE_IMAGE=rayproject/ray:$(RAY_IMAGE_TAG)-$(VARIANT) \
	  $(if $(filter gpu,$(VARIANT)),--build-arg TORCH_INDEX_URL=,) \
	  --build-arg GIT_COMMIT=$$(git rev-parse HEAD) \
	  --build-arg CODE_VERSION=$$($(PY) -m ads_ranking_pipelines.version) \
	  -t $(IMAGE) .

push:
	@test -n "$(IMAGE)" || { echo "usage: make push IMAGE=REGISTRY/ads-ranking-pipelines:TAG" >&2; exit 2; }
	docker push $(IMAGE)

clean:
	rm -rf $(VENV) .pytest_cache
