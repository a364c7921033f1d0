"""benchmarks/time/gpu_grpo.py, the prepared GPU check, tried where CI runs (no GPU): the embedded model's SFT
and GRPO steps are timed through the stages' own trainers and reported; a run that breaks leaves its
traceback as its result; the timed shape is Qwen3-0.6B's."""

import json
import runpy
import subprocess
import sys

import pytest

from tests.support import REPO

pytestmark = pytest.mark.slow
SCRIPT = REPO / "benchmarks" / "time" / "gpu_grpo.py"


def timed(tmp_path, *extra: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(SCRIPT), "time", "--shape", "embedded", "--profile", "", "--funds", "40"]
    return subprocess.run(
        [*command, "--out", str(tmp_path), *extra], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )


def test_sft_and_grpo_steps_are_timed_and_reported(tmp_path):
    batches = ("--generate-batches", "2", "--set", "generation.batch_size=4")
    done = timed(tmp_path, "--steps", "2", "--sft-steps", "2", *batches, "--label", "embedded-here")
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "embedded-here.json").read_text())
    assert len(record["sft"]["seconds"]) == 2 and len(record["grpo"]["seconds"]) == 2
    assert record["sft"]["steps"] == 2
    assert len(record["generate"]["seconds"]) == 2 and record["generate"]["batch_s"] > 0  # the answers' seconds
    assert len(record["grpo"]["logged"]["grad_norm"]) == 2 and len(record["grpo"]["logged"]["reward"]) == 2
    assert record["grpo"]["median_s"] > 0 and record["grpo"]["profile_minutes"] > 0
    assert record["parameters"] > 100_000 and record["device"].startswith("CPU")
    assert "grpo.use_vllm=false" in record["overrides"]

    gpu = runpy.run_path(str(SCRIPT))
    page = gpu["report"](tmp_path)
    [row] = [line for line in page.splitlines() if line.startswith("| embedded-here |")]
    assert f"| {record['grpo']['median_s']} |" in row and row.endswith("| ok |")
    grad_norms = sorted(record["grpo"]["logged"]["grad_norm"])
    assert f"| {(grad_norms[0] + grad_norms[1]) / 2:.3g} | ok |" in row
    assert f"| {record['generate']['batch_s']} ({record['generate']['batch_size']} × " in row


def test_a_run_that_breaks_leaves_its_traceback_as_the_result(tmp_path):
    done = timed(tmp_path, "--steps", "1", "--set", "grpo.loss_type=nonsense", "--label", "broken")
    assert done.returncode == 1
    record = json.loads((tmp_path / "broken.json").read_text())
    assert "Traceback" in record["error"] and "grpo.loss_type must be one of" in record["error"]
    gpu = runpy.run_path(str(SCRIPT))
    assert "| failed: " in gpu["report"](tmp_path)


def test_the_timed_shapes_are_qwen3_0_6b_and_smollm2_135m():
    gpu = runpy.run_path(str(SCRIPT))
    assert gpu["parameters_of"]("qwen3-0.6b") == 596_049_920  # Qwen3-0.6B's count, its embeddings tied
    assert gpu["parameters_of"]("smollm2-135m") == 134_515_008  # SmolLM2-135M's, as its GGUF converts
