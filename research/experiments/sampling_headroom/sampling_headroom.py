"""Is there anything for GRPO to sharpen? Greedy answers against k sampled answers per prompt.

GRPO mostly moves a policy's single sample towards what its best samples already do. Where the
majority vote of k samples (maj@k) beats the greedy answer, sharpening has headroom; where greedy
is already ahead, GRPO can only add through new information in its reward (labels the start has
not fitted). Run in a checkout with a profile applied and `prepare` done (a copy made by
`benchmarks/time/pipeline.py --keep` holds research/experiments/ too):

    python research/experiments/sampling_headroom/sampling_headroom.py models/sft 8                 # MODEL K
    python research/experiments/sampling_headroom/sampling_headroom.py models/sft 8 --temperature 0.7 \\
        --splits validation --max-funds 96 --out headroom.json

Prints exact / within one / QWK / Spearman per split for greedy, one sample, maj@k and the mean
of the k grades rounded, plus pass@k (the expert's grade among the k samples) and the share of
prompts whose samples disagree; `--out` also writes them as JSON (`benchmarks/contest/pretrained_report.py
collect` copies a run's headroom.json, `report` shows it). Samples use the GRPO settings in params.yaml
(max_completion_length). The test split is refused: it is the backtest's alone, and whether GRPO has
headroom is a design question, answered on validation (or train). CPU minutes: not a test.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

import numpy as np

from fundgrpo import io
from fundgrpo.evaluation.agreement import grade_metrics
from fundgrpo.methodology.answers import predictions_from_texts
from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.model import modelling
from fundgrpo.params import load_params


class Sampling:
    """A model as `fundgrpo.model.modelling.generate` sees it, answering each prompt with `k`
    samples at `temperature` (top_k off) instead of one greedy answer: the library's batching,
    chat template, device placement and decoding, with the sampling settings laid over its call.
    Its answers come back prompt by prompt, the k samples of one prompt together."""

    def __init__(self, model, k: int, temperature: float):
        self.model, self.k, self.temperature = model, k, temperature

    @property
    def device(self):
        return self.model.device

    def generate(self, **kwargs):
        kwargs.update(do_sample=True, temperature=self.temperature, top_k=0, num_return_sequences=self.k)
        return self.model.generate(**kwargs)


def sampled_grades(
    model, tokenizer, rows, rubric, schema, k: int, temperature: float, max_new_tokens: int, batch_size: int = 8
) -> list[list[int]]:
    """The grades of `k` sampled answers to each row's prompt, one list per row."""
    texts = modelling.generate(
        Sampling(model, k, temperature),
        tokenizer,
        [r["prompt"] for r in rows],
        max_new_tokens,
        batch_size,
        desc=f"{k} samples",
    )
    grades = [a["grade"] for a in predictions_from_texts(texts, schema)]
    return [grades[i : i + k] for i in range(0, len(grades), k)]


def headroom(
    model_dir: Path,
    rows: list[dict],
    rubric: dict,
    schema: dict,
    k: int,
    temperature: float,
    max_new_tokens: int,
    seed: int = 0,
) -> dict:
    """Greedy / one sample / maj@k / mean@k agreement with the experts, pass@k and disagreement."""
    import torch

    model, tokenizer = modelling.load(model_dir)
    torch.manual_seed(seed)
    expert = [r["expert_grade"] for r in rows]
    samples = sampled_grades(model, tokenizer, rows, rubric, schema, k, temperature, max_new_tokens)
    greedy = [
        a["grade"]
        for a in predictions_from_texts(
            modelling.generate(model, tokenizer, [r["prompt"] for r in rows], max_new_tokens, 32), schema
        )
    ]
    decisions = {
        "greedy": greedy,
        "one sample": [s[0] for s in samples],
        f"maj@{k}": [collections.Counter(s).most_common(1)[0][0] for s in samples],
        f"mean@{k}": [int(round(np.mean(s))) for s in samples],
    }
    return {
        "n": len(rows),
        "k": k,
        "temperature": temperature,
        "decisions": {
            label: {m: round(v, 4) for m, v in grade_metrics(expert, pred, rubric["grades"]).items()}
            for label, pred in decisions.items()
        },
        "pass_at_k": round(float(np.mean([e in s for e, s in zip(expert, samples)])), 4),
        "disagree": round(float(np.mean([len(set(s)) > 1 for s in samples])), 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path)
    ap.add_argument("k", type=int)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--splits", nargs="+", default=["validation"], help="validation (default) or train; not test")
    ap.add_argument("--max-funds", type=int, default=0, help="the first N rows of each split (0: all)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if "test" in args.splits:
        ap.error("--splits test: only the backtest reads the test split; measure headroom on validation")
    p = load_params()
    rubric, schema = load_compiled(Path(p.methodology.out_dir))
    result = {}
    print(f"model {args.model}, k={args.k}, temperature={args.temperature}")
    print("| split | decision | exact | within one | QWK | Spearman |\n|---|---|---|---|---|---|")
    for name in args.splits:
        rows = io.read_jsonl(Path(p.prepare.out_dir) / f"{name}.jsonl")
        rows = rows[: args.max_funds] if args.max_funds else rows
        result[name] = found = headroom(
            args.model, rows, rubric, schema, args.k, args.temperature, p.grpo.max_completion_length, p.grpo.seed
        )
        for label, m in found["decisions"].items():
            print(
                f"| {name} | {label} | "
                + " | ".join(f"{m[k]:.3f}" for k in ("exact", "within_one", "qwk", "spearman"))
                + " |"
            )
        print(f"{name}: pass@{args.k} {found['pass_at_k']:.3f}, samples disagree on {found['disagree']:.3f} of prompts")
    if args.out:
        io.write_json(result, args.out)


if __name__ == "__main__":
    main()
