"""A bare TRL GRPO script, as a user would write it by hand: the yardstick for the `grpo`
stage's overhead (benchmarks/time/grpo_overhead.py). Same model, data, rewards and GRPO settings
as `python -m stages.grpo` in the same folder: the settings come from the library
(`grpo_trainer.grpo_config`, `shared.lora_config` with `lora.top_layers`, the rewards bound as
the stage binds them); what it leaves out is the stage's wrapper: no checkpoint management or
resume, no greedy evaluations or kept-start choice, no curves, plots or metrics files.

    python benchmarks/time/bare_grpo.py OUT_DIR      # in a repo folder after `dvc repro sft`
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.model import modelling
from fundgrpo.params import load_params
from fundgrpo.training import rewards
from fundgrpo.training.grpo_trainer import grpo_config, reward_names
from fundgrpo.training.judge import make_judge_reward
from fundgrpo.training.shared import lora_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="where the merged policy goes (TRL's scratch under OUT/checkpoints)")
    args = ap.parse_args()

    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    p = load_params("params.yaml")  # the typed values the stage reads, defaults included
    # bare: no evaluations and no checkpoints, whatever params.yaml says (grpo_overhead.py sets both
    # to 0 for the stage too)
    g = dataclasses.replace(p.grpo, eval_steps=0, save_steps=0)
    methodology, schema = load_compiled(Path(p.methodology.out_dir))
    funcs = rewards.bind(methodology, schema, g)
    if g.judge.enabled:
        funcs["judge"] = make_judge_reward(g.judge)
    columns = ("prompt", "expert_grade", "expert_score", "evidence")
    rows = PromptRecord.read(Path(p.prepare.out_dir) / "train.jsonl")
    dataset = Dataset.from_list([{k: getattr(r, k) for k in columns} for r in rows])
    source = modelling.resolve(p.sft.out_dir)
    tokenizer = AutoTokenizer.from_pretrained(source, padding_side="left")
    peft = lora_config(g.lora, source)
    trainer = GRPOTrainer(
        model=source,
        reward_funcs=[funcs[name] for name in reward_names(g)],
        args=grpo_config(g, p.model, args.out / "checkpoints"),
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft,
    )
    trainer.train()
    model = trainer.model.merge_and_unload() if peft else trainer.model
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)


if __name__ == "__main__":
    main()
