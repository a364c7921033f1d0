"""Does a GRPO step move each completion's probability the way its advantage says? One step of the
`grpo` stage's trainer (`grpo_trainer.run`, ROOT's params and SFT model) keeps the step's completions
and advantages; each completion's log-probability is then read under the start and under the stepped
model. Prints the change for positive and negative advantages and its correlation with the advantage.

    python benchmarks/learning/grpo_direction.py ROOT [--learning-rate 3e-4] [--share-prompts true|false]

ROOT is a workspace where `dvc repro` has run; nothing in it is written (the step trains into a
temporary folder).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path)
    ap.add_argument("--learning-rate", type=float, default=3e-4)
    ap.add_argument("--share-prompts", choices=("true", "false"), default="true")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE.parents[1]))
    import torch
    import trl

    from fundgrpo.methodology.compiler import load_compiled
    from fundgrpo.methodology.records import PromptRecord
    from fundgrpo.model import modelling
    from fundgrpo.params import load_params
    from fundgrpo.threads import configure
    from fundgrpo.training import grpo_trainer

    configure()
    root = args.root.resolve()
    p = load_params(root / "params.yaml")
    step = dataclasses.replace(
        p.grpo, max_steps=1, warmup_steps=0, learning_rate=args.learning_rate, logging_steps=1, eval_steps=0,
        save_steps=0, early_stopping_patience=0, share_prompts=args.share_prompts == "true",
    )  # fmt: skip
    rows = PromptRecord.read(root / p.prepare.out_dir / "train.jsonl")
    methodology, schema = load_compiled(root / p.methodology.out_dir)
    kept: list[dict] = []
    scored = trl.GRPOTrainer._generate_and_score_completions

    def keeping(self, inputs):
        out = scored(self, inputs)
        kept.append({k: v.detach().clone() for k, v in out.items() if torch.is_tensor(v)})
        return out

    def logp(model, b) -> torch.Tensor:
        ids = torch.cat([b["prompt_ids"], b["completion_ids"]], dim=1)
        mask = torch.cat([b["prompt_mask"], b["completion_mask"]], dim=1)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits[:, b["prompt_ids"].size(1) - 1 : -1]
        per_token = torch.log_softmax(logits.float() / p.grpo.temperature, -1)
        per_token = per_token.gather(-1, b["completion_ids"][..., None])[..., 0]
        return (per_token * b["completion_mask"]).sum(dim=1)

    trl.GRPOTrainer._generate_and_score_completions = keeping
    try:
        with tempfile.TemporaryDirectory() as scratch:
            out = Path(scratch) / "policy"
            grpo_trainer.run(
                step, p.model, root / p.sft.out_dir, rows, methodology, schema, out, None, out.parent / "ck"
            )
            start, _ = modelling.load(root / p.sft.out_dir)
            stepped, _ = modelling.load(out)
            for b in kept:
                a, change = b["advantages"].float(), logp(stepped, b) - logp(start, b)
                pos, neg = a > 0, a < 0
                corr = torch.corrcoef(torch.stack([a, change]))[0, 1]
                print(
                    f"{len(a)} completions: {int(pos.sum())} with a positive advantage, change of log-probability "
                    f"{change[pos].mean():+.3f}; {int(neg.sum())} negative, {change[neg].mean():+.3f}; "
                    f"correlation with the advantage {corr:+.3f}"
                )
    finally:
        trl.GRPOTrainer._generate_and_score_completions = scored


if __name__ == "__main__":
    main()
