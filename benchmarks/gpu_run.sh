#!/usr/bin/env bash
# The GPU check in one command, for a borrowed GPU machine (developers' guide: one prepared script, about
# 15 minutes of device time all told). There, from the repo's root, with the wheels of
# benchmarks/time/gpu_wheels.txt carried in .whl/ (that file says how to fetch them):
#
#   bash benchmarks/gpu_run.sh          # results (JSON, one per check, a traceback where one broke) in $OUT
#   bash benchmarks/gpu_run.sh smollm2  # one check (embedded, qwen3, smollm2)
#
# Then here: copy the JSON files into research/results/gpu/ and run `python benchmarks/time/gpu_grpo.py report`.
# 1. the embedded model's whole SFT, then GRPO steps that learn, on CUDA in bf16 (the GPU path end to end, as the stages run it);
# 2. GRPO (and SFT) steps of a random model of Qwen3-0.6B's shape at the `gpu-qwen3` profile's settings;
# 3. the same for SmolLM2-135M's shape at the documents profile's lengths (research/profiles/documents-smollm2.yaml).
set -u -o pipefail
OUT=${OUT:-research/results/gpu}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$OUT/nvidia-smi.txt"
python3 -c "import torch, transformers, trl, datasets, peft; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__, 'trl', trl.__version__, 'datasets', datasets.__version__, 'peft', peft.__version__)" 2>&1 | tee "$OUT/versions.txt"
status=0
for check in ${*:-embedded qwen3 smollm2}; do
  case $check in
    embedded) timeout 150 python3 benchmarks/time/gpu_grpo.py time --shape embedded --profile '' \
      --set sft.bf16=true --set grpo.bf16=true --steps 6 --sft-steps all --funds 1500 --label embedded-bf16 --out "$OUT" ;;
    qwen3) timeout 200 python3 benchmarks/time/gpu_grpo.py time --shape qwen3-0.6b --profile gpu-qwen3 \
      --steps 4 --sft-steps 10 --label qwen3-0.6b-shape --out "$OUT" ;;
    smollm2) timeout 210 python3 benchmarks/time/gpu_grpo.py time --shape smollm2-135m --profile smollm2 \
      --set prepare.prompt_style=full --set sft.max_length=1024 --set grpo.max_completion_length=256 \
      --set sft.bf16=true --set grpo.bf16=true --set generation.max_new_tokens=256 --set generation.dtype=bfloat16 \
      --steps 4 --sft-steps 10 --generate-batches 3 --label smollm2-135m-documents-shape --out "$OUT" ;;
    *) echo "unknown check $check: embedded, qwen3 or smollm2"; exit 2 ;;
  esac 2>&1 | tail -40 || status=1
done
ls -la "$OUT"
exit $status
