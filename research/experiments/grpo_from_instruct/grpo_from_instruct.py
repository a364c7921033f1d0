"""GRPO straight from the instruct model (no SFT): does its reward give GRPO anything to learn from?

    python research/experiments/grpo_from_instruct/grpo_from_instruct.py RUN_DIR --steps 10
    # RUN_DIR: a kept benchmarks/time/pipeline.py copy

Runs the `grpo` stage for `--steps` steps from RUN_DIR/models/base (the converted pretrained
model, what `sft.enabled: false` would hand to GRPO) with RUN_DIR's params, evaluation and
checkpoints off, in a scratch copy (`scratch_copy` of benchmarks/time/grpo_overhead.py). GRPO's
advantage is each completion's reward minus its group's mean: where every completion of a prompt
gets the same reward (all malformed JSON: 0), the gradient is zero and the policy cannot move.
Writes RUN_DIR/from_instruct.json: per step the mean reward, its spread within groups and the
valid-JSON share; `benchmarks/contest/pretrained_report.py collect` copies it and `report` states it
beside the table.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))  # benchmarks/ is a folder of scripts beside fundgrpo/, not an installed package

from benchmarks.time.grpo_overhead import scratch_copy  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    scratch = scratch_copy(args.run, start="base", max_steps=args.steps, eval_steps=0, save_steps=0, logging_steps=1)
    env = {**os.environ, "PYTHONPATH": str(scratch)}
    subprocess.run([sys.executable, "-m", "stages.grpo"], cwd=scratch, env=env, check=True)
    # what the stage writes (it was named `train`, and wrote train.json and train_rewards.json, when this ran)
    train = json.loads((scratch / "metrics" / "grpo.json").read_text())
    steps = json.loads((scratch / "plots" / "grpo_rewards.json").read_text())
    shutil.rmtree(scratch.parent, ignore_errors=True)
    result = {
        "steps": train["steps"],
        "seconds": train["seconds"],
        "per_step": [
            {k: r.get(k) for k in ("step", "reward", "reward_std", "json_reward", "grade_reward", "loss")}
            for r in steps
        ],
    }
    (args.run / "from_instruct.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
