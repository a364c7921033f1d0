"""SFT, answering all validation prompts greedily after every epoch (and saving each epoch's model).
The test split is not read: it is the backtest's alone, and the epoch count is a design choice.

Run in a checkout with a profile applied and `prepare` and `model` done
(research/experiments/real_experts/real_experts.md, "SFT epoch by epoch"):

    python research/experiments/sft_epoch_curve/sft_epoch_curve.py /tmp/sft 10                    # OUT EPOCHS
    python research/experiments/sft_epoch_curve/sft_epoch_curve.py /tmp/sft256 10 /tmp/base256     # ... from another base

One row per epoch goes to OUT.jsonl; OUT/epochN holds that epoch's model (a GRPO start to compare).
CPU minutes: not a test.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from fundgrpo import io
from fundgrpo.evaluation.agreement import metrics
from fundgrpo.methodology.answers import predictions_from_texts
from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.model import modelling
from fundgrpo.params import load_params
from fundgrpo.training import sft_trainer

KEYS = ("valid_json", "exact", "within_one", "qwk", "spearman")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="OUT/epochN: each epoch's model; OUT.jsonl: one row per epoch")
    ap.add_argument("epochs", type=int)
    ap.add_argument("base", type=Path, nargs="?", help="the base model (default: params' model.out_dir)")
    args = ap.parse_args()

    from transformers import TrainerCallback

    p = load_params()
    out = args.out
    base = args.base or Path(p.model.out_dir)
    rubric, schema = load_compiled(Path(p.methodology.out_dir))
    splits = {name: io.read_jsonl(Path(p.prepare.out_dir) / f"{name}.jsonl") for name in ("train", "validation")}
    log = open(out.with_suffix(".jsonl"), "a")

    class GreedyEachEpoch(TrainerCallback):
        def on_epoch_end(self, args, state, control, model=None, processing_class=None, **kwargs):
            model.eval()
            row = {"epoch": round(state.epoch)}
            for name in ("validation",):
                rows = splits[name]
                texts = modelling.generate(model, processing_class, [r["prompt"] for r in rows], 96, 64, desc=name)
                m = metrics(rows, predictions_from_texts(texts, schema), rubric["grades"])
                row.update({f"{name}_{k}": round(m[k], 3) for k in KEYS})
            model.save_pretrained(out / f"epoch{row['epoch']}")
            processing_class.save_pretrained(out / f"epoch{row['epoch']}")
            model.train()
            print(row, flush=True)
            log.write(json.dumps(row) + "\n")
            log.flush()

    print(
        sft_trainer.run(
            dataclasses.replace(p.sft, epochs=args.epochs),
            p.model,
            base,
            splits["train"],
            out,
            callbacks=[GreedyEachEpoch()],
        )
    )


if __name__ == "__main__":
    main()
