#!/usr/bin/env bash
# Benchmarks (not tests): the main job's time per stage and its backtest.
set -euo pipefail
cd "$(dirname "$0")/../.."
python benchmarks/time/pipeline.py "$@"
