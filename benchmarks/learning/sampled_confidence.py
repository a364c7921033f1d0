"""What the calibration reward calibrates to: GRPO scores sampled answers, the evaluator is read greedily.

For a workspace's model (the SFT start by default) and its validation prompts, the share of answers
whose grade is the expert's and the confidence they state, greedy and sampled at each temperature
(`grpo.temperature` is what GRPO samples at). A proper scoring rule on sampled answers pays the
confidence that matches the sampled answers' accuracy; where that is below the greedy answers', a
policy that cannot tell its sampled grades apart learns to understate its greedy confidence.
Prints a markdown table; nothing is written.

    python benchmarks/learning/sampled_confidence.py ROOT [--model sft|grpo|FOLDER]
        [--temperatures 1.0 0.7 0.5] [--samples 4]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def summary(preds: list, experts: list[int]) -> tuple:
    """Valid share, grade accuracy, mean stated confidence and its Brier score over valid answers
    that state one (the accuracy over all answers, an invalid one counting as wrong), and the stated
    confidence's 10th, 50th and 90th percentiles.

    >>> from fundgrpo.methodology.answers import Prediction
    >>> said = [Prediction(grade=g, written_grade=g, stated=c) for g, c in ((3, 0.8), (2, 0.6), (None, None))]
    >>> summary(said, [3, 3, 3])
    (0.667, 0.333, 0.7, 0.2, '0.62 / 0.70 / 0.78')
    """
    import numpy as np

    valid = [p for p in preds if p.grade is not None]
    right = [p.grade == e for p, e in zip(preds, experts)]
    stated = [(p.stated, p.grade == e) for p, e in zip(preds, experts) if p.stated is not None]
    conf = sum(c for c, _ in stated) / len(stated) if stated else float("nan")
    brier = sum((c - r) ** 2 for c, r in stated) / len(stated) if stated else float("nan")
    n = len(preds)
    spread = " / ".join(f"{q:.2f}" for q in np.percentile([c for c, _ in stated], [10, 50, 90])) if stated else ""
    return round(len(valid) / n, 3), round(sum(right) / n, 3), round(conf, 3), round(brier, 3), spread


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path)
    ap.add_argument("--model", default="sft", help="sft, grpo, or a model folder (a GRPO checkpoint)")
    ap.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 0.7, 0.5])
    ap.add_argument("--samples", type=int, default=4, help="sampled answers a prompt at each temperature")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sys.path.insert(0, str(HERE.parents[1]))
    import torch

    from fundgrpo.methodology.answers import predictions_from_texts
    from fundgrpo.methodology.compiler import load_compiled
    from fundgrpo.model import modelling
    from fundgrpo.params import load_params
    from fundgrpo.threads import configure

    configure()
    p = load_params(args.root / "params.yaml")
    _, schema = load_compiled(args.root / p.methodology.out_dir)
    named = {"sft": p.sft.out_dir, "grpo": p.grpo.out_dir}
    folder = args.root / named[args.model] if args.model in named else Path(args.model)
    model, tok = modelling.load(folder)
    model.eval()
    lines = (args.root / p.prepare.out_dir / "validation.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    experts = [r["expert_grade"] for r in rows]
    length = p.grpo.max_completion_length

    def answers(temperature: float | None) -> list[dict]:
        texts = [tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows]
        out: list[str] = []
        for start in range(0, len(texts), 64):
            batch = tok(texts[start : start + 64], return_tensors="pt", padding=True, add_special_tokens=False)
            # as TRL samples: the whole distribution (top_k 0, top_p 1)
            greedy = {"do_sample": False}
            sample = {"do_sample": True, "temperature": temperature, "top_k": 0} if temperature else greedy
            with torch.no_grad():
                ids = model.generate(**batch, **sample, max_new_tokens=length, pad_token_id=tok.pad_token_id)
            out += tok.batch_decode(ids[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
        return predictions_from_texts(out, schema)

    torch.manual_seed(args.seed)
    print(f"{folder} on {len(rows)} validation prompts ({args.samples} samples a prompt at each temperature)\n")
    print("| answers | valid | grade right | stated confidence (mean) | its Brier | its 10th / 50th / 90th pct. |")
    print("|---|---|---|---|---|---|")
    print("| greedy | " + " | ".join(str(x) for x in summary(answers(None), experts)) + " |")
    for t in args.temperatures:
        preds = [q for _ in range(args.samples) for q in answers(t)]
        print(f"| sampled at {t:g} | " + " | ".join(str(x) for x in summary(preds, experts * args.samples)) + " |")


if __name__ == "__main__":
    main()
