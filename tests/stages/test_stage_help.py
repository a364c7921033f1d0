"""Every stage answers `--help` with what it reads and writes, and runs nothing."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STAGES = ["generate", "ingest", "validate", "schema", "prepare", "baseline", "base", "sft", "train", "backtest", "register"]


@pytest.mark.parametrize("name", STAGES)
def test_help_prints_reads_and_writes_and_runs_nothing(name, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", f"stages.{name}", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"python -m stages.{name}")
    assert "reads: " in done.stdout and ("writes: " in done.stdout or "metrics: " in done.stdout)
    assert list(tmp_path.iterdir()) == []  # nothing ran: no params read, no output written
