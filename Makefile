# Two commands do all the set-up (see README):
#   make run    set up, then run the whole pipeline on the embedded default (dvc repro)
#   make test   set up, then run the tests
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)
# Offline and quiet: no hub look-ups, no telemetry (README, "Offline").
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=true GX_ANALYTICS_ENABLED=false DVC_NO_ANALYTICS=1
export PREFECT_SERVER_ANALYTICS_ENABLED=false PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=120

.PHONY: setup run test bench
setup: $(VENV)/.installed

# torch first, pinned: on CPU machines it takes the CPU build; left to the resolver it
# would pull a newer torch with several GB of CUDA packages.
$(VENV)/.installed: pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e ".[dev]"
	touch $@

run: setup
	dvc repro

test: setup
	pytest -q

bench: setup
	bash benchmarks/run.sh
