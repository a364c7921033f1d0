"""`accelerate launch` with two CPU processes (gloo) runs `sft` and `grpo` on the tiny profile:
each process trains its share of every batch, rank 0 alone writes the outputs, and they load.
The GPU and DeepSpeed files in accelerate/ are accelerate's own configs; they are parsed here by
accelerate itself (running them needs GPUs)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from tests.support import REPO, run

CONFIGS = sorted((REPO / "accelerate").glob("*.yaml"))


@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_accelerate_configs_are_accelerates_own(config: Path):
    from accelerate.commands.config.config_args import load_config_from_file

    loaded = load_config_from_file(str(config))
    assert loaded.num_processes >= 1 and loaded.num_machines == 1


def test_two_cpu_processes_train_sft_and_grpo(trained):
    root, _ = trained  # this module's copy: the base model and prepared data are there
    for out in ("models/sft", "models/policy", "metrics/sft.json", "metrics/grpo.json"):
        run(["rm", "-rf", out], root)  # what the two processes write, or nothing
    rows = sum(1 for _ in (root / "data/prepared/train.jsonl").open())
    launch = [
        str(Path(sys.executable).parent / "accelerate"),
        "launch",
        "--config_file",
        "accelerate/cpu-2proc.yaml",
        "--main_process_port",
        "0",
    ]
    env = {"FUNDGRPO_THREADS": ""}  # each process: CPUs / 2 threads

    sft = run([*launch, "-m", "stages.sft"], root, env=env)
    batch = 16  # tiny profile's sft.batch_size, per process
    metrics = json.loads((root / "metrics/sft.json").read_text())
    assert metrics["steps"] == math.ceil(rows / (2 * batch)), sft.stdout  # two processes share each epoch
    assert sft.stdout.count("sft: {") == 1  # rank 0 reports and writes; rank 1 only trains

    grpo = run([*launch, "-m", "stages.grpo"], root, env=env)
    assert grpo.stdout.count("grpo: {") == 1
    assert json.loads((root / "metrics/grpo.json").read_text())["steps"] == 2

    from fundgrpo.model import modelling

    for folder in ("models/sft", "models/policy"):
        model, tokenizer = modelling.load(root / folder)
        assert model.num_parameters() > 0 and tokenizer("fund").input_ids
    leftovers = [p.name for p in (root / "models").iterdir() if ".tmp-" in p.name or ".old-" in p.name]
    assert leftovers == []  # no second writer's temporary folder left behind
