"""Stage `grpo`: GRPO with TRL's `GRPOTrainer`, starting from the SFT model.

The stage reads params.yaml and calls `fundgrpo.training.grpo_trainer`; the logic, and its documentation, live there.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from fundgrpo import io
from fundgrpo.cli import run_stage
from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.params import load_params
from fundgrpo.training.grpo_trainer import plot_curves, run
from fundgrpo.training.shared import is_main_process


def main() -> None:
    def body() -> None:
        p = load_params()
        rows = io.read_jsonl(Path(p.prepare.out_dir) / "train.jsonl")
        schema_dir = Path(p.methodology.out_dir)
        rubric, schema = load_compiled(schema_dir)
        eval_rows = io.read_jsonl(Path(p.prepare.out_dir) / "validation.jsonl")
        if not is_main_process():  # another rank of `accelerate launch`: trains alongside rank 0, writes nothing
            with tempfile.TemporaryDirectory() as scratch:
                run(
                    p.grpo,
                    p.model,
                    Path(p.sft.out_dir),
                    rows,
                    rubric,
                    schema,
                    Path(scratch),
                    eval_rows,
                    Path(p.grpo.checkpoint_dir),
                )
            return
        with io.atomic_path(p.grpo.out_dir) as tmp:
            summary = run(
                p.grpo, p.model, Path(p.sft.out_dir), rows, rubric, schema, tmp, eval_rows, Path(p.grpo.checkpoint_dir)
            )
        import shutil

        shutil.rmtree(p.grpo.checkpoint_dir, ignore_errors=True)  # finished: nothing to resume
        curve_rows = summary.pop("curves")
        io.write_json(summary.pop("eval_curve"), "plots/eval_rewards.json")
        flat = [{k.replace("rewards/", "").replace("/mean", ""): v for k, v in r.items()} for r in curve_rows]
        io.write_json(flat, "plots/grpo_rewards.json")
        plot_curves(curve_rows, Path("reports/grpo/rewards.png"))
        io.write_json(summary, "metrics/grpo.json")
        print(f"grpo: {summary}")

    run_stage("grpo", body)


if __name__ == "__main__":
    main()
