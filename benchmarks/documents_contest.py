"""The contest on the synthetic universe with documents, from a finished run of `profiles/documents.yaml`.

    python -m fundgrpo.profiles apply documents && dvc repro   # in a workspace of its own
    python benchmarks/documents_contest.py --root <workspace>  # -> benchmarks/results/documents_contest.json

Reads the run's per-fund backtest (`reports/backtest/predictions.jsonl`), its pillar figures
(`metrics/backtest.json`) and the generator's hidden facts (`data/raw/synthetic/qualitative.csv`).
Every evaluator's grade as the backtest served it: the language model as calibrate chose (served), the
language model alone, SFT under its own rule, the text baseline (gradient boosting on the numbers and
the documents' n-grams) with its rule, and the rule scorer. Reported on the test funds: all, those a
qualitative fact touched, those whose documents use a phrasing held out of training, the Korean funds;
with served − text baseline QWK and a 95 % bootstrap interval over funds (one run: no seed spread).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from fundgrpo.evaluation.agreement import grade_metrics

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "documents_contest.json"
EVALUATORS = {"served": "grpo", "lm_alone": "grpo_alone", "sft_served": "sft_served", "text_baseline": "gbm_rule",
              "rule": "rule"}  # fmt: skip
GRADES = [1, 2, 3, 4, 5]
PILLARS = ("people", "process", "parent")


def as_missed(expert: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """An invalid answer (no grade) as the grade farthest from the expert's: a miss, as the backtest counts it."""
    farthest = np.where(expert >= (GRADES[0] + GRADES[-1]) / 2, GRADES[0], GRADES[-1])
    return np.where(np.isnan(predicted), farthest, predicted).astype(int)


def qwk(expert: np.ndarray, predicted: np.ndarray) -> float:
    return grade_metrics(expert.astype(int).tolist(), as_missed(expert, predicted).tolist(), GRADES)["qwk"]


def figures(frame: pd.DataFrame, rng: np.random.Generator, draws: int = 1000) -> dict:
    expert = frame["expert_grade"].to_numpy(float)
    out: dict = {"n": int(len(frame))}
    for name, column in EVALUATORS.items():
        predicted = frame[f"{column}_grade"].to_numpy(float)
        found = grade_metrics(expert.astype(int).tolist(), as_missed(expert, predicted).tolist(), GRADES)
        out[name] = {"exact": round(float(found["exact"]), 3), "qwk": round(qwk(expert, predicted), 3)}
    served, text = frame["grpo_grade"].to_numpy(float), frame["gbm_rule_grade"].to_numpy(float)
    diffs = []
    for _ in range(draws):
        i = rng.integers(0, len(frame), len(frame))
        diffs.append(qwk(expert[i], served[i]) - qwk(expert[i], text[i]))
    out["served_minus_text_qwk"] = {
        "mean": round(qwk(expert, served) - qwk(expert, text), 4),
        "interval": [round(float(np.percentile(diffs, 2.5)), 4), round(float(np.percentile(diffs, 97.5)), 4)],
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path("."))
    args = ap.parse_args()
    root = args.root
    rows = pd.read_json(root / "reports/backtest/predictions.jsonl", lines=True)
    facts = pd.read_csv(root / "data/raw/synthetic/qualitative.csv")
    table = rows.merge(facts, on="fund_id", how="left")
    subsets = {
        "all": np.ones(len(table), bool),
        "touched": (table[list(PILLARS)] != 0).any(axis=1).to_numpy(),
        "heldout_phrasing": table["heldout"].fillna(False).astype(bool).to_numpy(),
        "korean": (table["category"] == "Korea Equity").to_numpy(),
    }
    rng = np.random.default_rng(0)
    backtest = json.loads((root / "metrics/backtest.json").read_text(encoding="utf-8"))
    result = {
        "subsets": {name: figures(table[mask], rng) for name, mask in subsets.items() if mask.any()},
        "pillars": {name: backtest["models"][name].get("pillars") for name in ("grpo", "sft")},
        "served": backtest["models"]["grpo"].get("served", {}).get("chosen"),
    }
    OUT.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for name, block in result["subsets"].items():
        line = ", ".join(f"{k} {block[k]['qwk']}" for k in EVALUATORS)
        d = block["served_minus_text_qwk"]
        print(f"{name} (n={block['n']}): QWK {line}; served - text {d['mean']} {d['interval']}")
    print(json.dumps(result["pillars"], ensure_ascii=False))
    print(f"-> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
