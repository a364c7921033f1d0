"""Stage `grpo`: GRPO with TRL's `GRPOTrainer`, starting from the SFT model.

The stage reads params.yaml and calls `fundgrpo.training.grpo_trainer`; the logic, and its documentation, live there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from fundgrpo import io
from fundgrpo.cli import run_stage
from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.params import load_params
from fundgrpo.training.grpo_trainer import plot_curves, run
from fundgrpo.training.shared import train_into


def main() -> None:
    def body() -> None:
        p = load_params()
        rows = PromptRecord.read(Path(p.prepare.out_dir) / "train.jsonl")
        eval_rows = PromptRecord.read(Path(p.prepare.out_dir) / "validation.jsonl")
        m, schema = load_compiled(Path(p.methodology.out_dir))
        checkpoints = Path(p.grpo.checkpoint_dir)
        summary = train_into(
            p.grpo.out_dir,
            lambda out: run(p.grpo, p.model, Path(p.sft.out_dir), rows, m, schema, out, eval_rows, checkpoints),
        )
        if summary is None:  # another rank of `accelerate launch`
            return
        shutil.rmtree(checkpoints, ignore_errors=True)  # finished: nothing to resume
        curve_rows = summary.pop("curves")
        io.write_json(summary.pop("eval_curve"), p.grpo.eval_curves)
        flat = [{k.replace("rewards/", "").replace("/mean", ""): v for k, v in r.items()} for r in curve_rows]
        io.write_json(flat, p.grpo.reward_curves)
        plot_curves(curve_rows, Path(p.grpo.report_dir) / "rewards.png")
        io.write_json(summary, p.grpo.metrics)
        print(f"grpo: {summary}")

    run_stage("grpo", body)


if __name__ == "__main__":
    main()
