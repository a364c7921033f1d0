"""How far is the `digits` belief from the `score` belief? Both read from the same generation's key-value cache
(`belief.from_cache`), for the policy's greedy answers to the validation prompts: the largest and mean gap in grade
probabilities, and how many likeliest grades differ. Nothing is written.

Run in a workspace where `grpo` has run (e.g. one kept by `benchmarks/time/pipeline.py --keep`):

    python research/experiments/belief_digits/compare.py --funds 128 --dtype bfloat16
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--funds", type=int, default=128)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = ap.parse_args()
    from fundgrpo import io, threads
    from fundgrpo.methodology.compiler import load_compiled
    from fundgrpo.model import belief, inference, modelling
    from fundgrpo.params import load_params

    threads.configure()
    p = load_params(Path("params.yaml"))
    m, schema = load_compiled(Path(p.methodology.out_dir))
    rows = io.read_jsonl(Path(p.prepare.out_dir) / "validation.jsonl")[: args.funds]
    model, tokenizer = modelling.load(p.grpo.out_dir, args.dtype)
    read: dict[str, list] = {"score": [], "digits": []}
    inference.answer(model, tokenizer, rows, m, schema, p.generation.max_new_tokens, args.funds, "compare", cached=read)
    pairs = [(a.probs, b.probs) for a, b in zip(read["score"], read["digits"])
             if isinstance(a, belief.Belief) and isinstance(b, belief.Belief) and a.probs and b.probs]  # fmt: skip
    gaps = np.array([np.abs(np.subtract(a, b)).max() for a, b in pairs])
    changed = sum(int(np.argmax(a) != np.argmax(b)) for a, b in pairs)
    print(f"{p.grpo.out_dir}: {len(pairs)} answers read both ways; grade probabilities at most {gaps.max():.4f} apart "
          f"(mean {gaps.mean():.4f}); likeliest grade changed on {changed}")  # fmt: skip


if __name__ == "__main__":
    main()
