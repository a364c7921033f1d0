"""Does the confidence a model states carry the estimate its prompt shows? For each collected seed of each
`benchmarks/contest/seeds.py` section whose models state a confidence: per model (SFT, GRPO), the spread of the stated
confidence over the test funds, its correlation with gradient boosting's probability of the grade the model
wrote (shown in the prompt), and the top-label Brier of both. Prints a markdown table; writes nothing.

    python benchmarks/learning/stated_vs_estimate.py TEST_JSONL [SECTION ...]

TEST_JSONL: `data/prepared/test.jsonl` of any kept run on the same test split (its `gbm_probs`: gradient
boosting's grade probabilities for each test fund), e.g. a Morningstar run of `benchmarks/time/pipeline.py --keep`.
Seeds whose funds it does not hold are skipped. SECTION: folders under research/results/seeds/ (default: all).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

SEEDS = Path(__file__).resolve().parents[2] / "research" / "results" / "seeds"


def figures(per_fund: list[dict], test: dict[str, dict], who: str) -> dict | None:
    """Spread, correlation with the shown estimate and Brier of `who`'s stated confidence; None without one.

    >>> test = {"a": {"gbm_probs": [0, 0, 0.8, 0.2, 0]}, "b": {"gbm_probs": [0, 0, 0.3, 0.7, 0]}}
    >>> rows = [{"share_class_id": "a", "expert_grade": 3, "m_written_grade": 3, "m_stated": 0.8},
    ...         {"share_class_id": "b", "expert_grade": 3, "m_written_grade": 4, "m_stated": 0.7}]
    >>> figures(rows, test, "m")
    {'n': 2, 'sd': 0.05, 'corr': 1.0, 'brier': 0.265, 'brier_estimate': 0.265}
    """
    stated, shown, right = [], [], []
    for r in per_fund:
        written, said = r.get(f"{who}_written_grade", r.get(f"{who}_grade")), r.get(f"{who}_stated")
        probs = (test.get(r["share_class_id"]) or {}).get("gbm_probs")
        if said is None or written is None or not probs:
            continue
        stated.append(said)
        shown.append(probs[str(written)] if isinstance(probs, dict) else probs[int(written) - 1])
        right.append(float(written == r["expert_grade"]))
    if len(stated) < 2:
        return None
    s, g, y = np.array(stated), np.array(shown), np.array(right)
    corr = float(np.corrcoef(s, g)[0, 1]) if s.std() > 0 and g.std() > 0 else float("nan")
    return {
        "n": len(s),
        "sd": round(float(s.std()), 3),
        "corr": round(corr, 2),
        "brier": round(float(np.mean((s - y) ** 2)), 3),
        "brier_estimate": round(float(np.mean((g - y) ** 2)), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("test_jsonl", type=Path)
    ap.add_argument("sections", nargs="*")
    args = ap.parse_args()
    lines = args.test_jsonl.read_text(encoding="utf-8").splitlines()
    test = {(r := json.loads(line))["share_class_id"]: r for line in lines}
    sections = args.sections or sorted(p.name for p in SEEDS.iterdir() if p.is_dir())
    print("| section | seed | model | funds | stated sd | corr with the estimate | Brier stated | Brier estimate |")
    print("|---|---|---|---|---|---|---|---|")
    for section in sections:
        for seed in sorted((SEEDS / section).glob("seed-*")):
            per_fund = [json.loads(line) for line in (seed / "per_fund.jsonl").read_text().splitlines()]
            if len([r for r in per_fund if r["share_class_id"] in test]) < len(per_fund) / 2:
                continue  # another test split
            for who in ("sft", "grpo"):
                f = figures(per_fund, test, who)
                if f:
                    print(
                        f"| {section} | {seed.name[5:]} | {who} | {f['n']} | {f['sd']} | {f['corr']:+.2f} "
                        f"| {f['brier']} | {f['brier_estimate']} |"
                    )


if __name__ == "__main__":
    main()
