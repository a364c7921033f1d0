"""Which belief, and how pooled: the policy's grade probabilities on the validation funds of a kept run,
each way of turning them into a grade and a confidence, scored by cross-validation over the validation
funds (5 folds by fund_id, each option fitted on the other folds), as `calibrate` chooses (`fit_choice`).

    python research/experiments/belief_pooling/belief_pooling.py RUN [--model models/policy] [--out results.json]

RUN is a kept `benchmarks/time/pipeline.py --keep` run (its data/prepared, data/schema and model). Rows: gradient
boosting alone (its class probabilities); for each belief (`score`: read at the score and mapped through
the bands; `grade`: the grade token after the written score) the written grade with the belief as read,
temperature-scaled (by log-likelihood), the likeliest grade, the expected grade cut at QWK-optimal points,
and the belief pooled with gradient boosting's probabilities (p_lm^a p_gbm^b, a and b by log-likelihood),
its likeliest and its expected-cut grade. A fitted option's name shows its fit on every validation fund.
Exact, QWK, ECE, Brier and exact on the most confident 70 % of the validation funds. The test split is
not read: it is the backtest's alone.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from fundgrpo import io  # noqa: E402
from fundgrpo.evaluation import calibration  # noqa: E402
from fundgrpo.evaluation.agreement import filled, one_metric  # noqa: E402
from fundgrpo.methodology.answers import predictions_from_texts  # noqa: E402
from fundgrpo.methodology.compiler import load_compiled  # noqa: E402
from fundgrpo.training import (
    belief,  # noqa: E402
    modelling,  # noqa: E402
)

FOLDS = 5  # as `calibrate.folds`: cross-validation over the validation funds, by fund_id


def answers(run: Path, model_dir: Path, split: str, rubric: dict, schema: dict, max_new_tokens: int) -> dict:
    model, tokenizer = modelling.load(model_dir)
    rows = io.read_jsonl(run / "data/prepared" / f"{split}.jsonl")
    texts = modelling.generate(model, tokenizer, [r["prompt"] for r in rows], max_new_tokens, 32, desc=split)
    preds = predictions_from_texts(texts, schema)
    uniform = [1.0 / len(rubric["grades"])] * len(rubric["grades"])
    out = {
        "expert": np.array([r["expert_grade"] for r in rows]),
        "written": np.array([p["grade"] if p["grade"] is not None else 0 for p in preds]),
        "gbm": np.array([r["gbm_probs"] for r in rows]),
        "fund_id": [str(r["fund_id"]) for r in rows],
    }
    for method in ("score", "grade"):
        found = belief.beliefs(model, tokenizer, [r["prompt"] for r in rows], texts, rubric, method, split)
        out[method] = np.array([b.probs if b and b.probs else uniform for b in found])
    return out


def row(name: str, expert, grade, probs, grades: list[int]) -> dict:
    index = np.searchsorted(grades, grade)
    confidence = np.where(grade > 0, probs[np.arange(len(grade)), np.clip(index, 0, len(grades) - 1)], 0.0)
    correct = grade == expert
    return {
        "option": name,
        "exact": round(float(correct.mean()), 4),
        "qwk": round(one_metric(expert, filled(expert, [int(g) or None for g in grade], grades), grades, "qwk"), 4),
        "ece": round(calibration.ece(confidence, correct), 4),
        "brier": round(calibration.brier(probs, np.searchsorted(grades, expert)), 4),
        "exact_top70": calibration.selective(expert, [int(g) or None for g in grade], confidence, grades)[
            "exact_top70"
        ],
    }


def fitted(kind: str, p, val: dict, grades: list[int], fit, held) -> tuple[np.ndarray, np.ndarray]:
    """One option (`kind`: temperature, cut, pooled, pooled cut) fitted on the funds `fit` (a mask),
    its grades and probabilities on the funds `held`."""
    y = val["expert"]
    yi = np.searchsorted(grades, y)
    if kind == "temperature":
        t = calibration.fit_temperature(p[fit], yi[fit])
        return val["written"][held], calibration.temperature_probs(p[held], t)
    q = p
    if kind.startswith("pooled"):
        a, b = calibration.fit_pool(p[fit], val["gbm"][fit], yi[fit])
        q = calibration.pooled(p, val["gbm"], a, b)
    if kind.endswith("cut"):
        cuts = calibration.fit_cutpoints(calibration.expected_grade(q[fit], grades), y[fit], grades)
        return calibration.cut(calibration.expected_grade(q[held], grades), cuts, grades), q[held]
    return np.asarray(grades)[q[held].argmax(1)], q[held]


def cross_fitted(kind: str, p, val: dict, grades: list[int], fold: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold grades and probabilities: each fold's from the fit on the others (no fund scores
    a fit it was part of, so an option with more fitted parts gains no in-sample edge)."""
    grade, probs = np.zeros(len(fold), dtype=int), np.zeros(p.shape)
    for k in np.unique(fold):
        held = fold == k
        grade[held], probs[held] = fitted(kind, p, val, grades, ~held, held)
    return grade, probs


def options(val: dict, grades: list[int]) -> list[dict]:
    g, y = np.asarray(grades), val["expert"]
    yi = np.searchsorted(grades, y)
    fold = np.array(calibration.folds_of(val["fund_id"], FOLDS))
    # gradient boosting's probabilities on validation are out of fold already (stage evidence)
    out = [row("gradient boosting", y, g[val["gbm"].argmax(1)], val["gbm"], grades)]
    for method in ("score", "grade"):
        p = val[method]
        oof = {
            kind: cross_fitted(kind, p, val, grades, fold) for kind in ("temperature", "cut", "pooled", "pooled cut")
        }
        t, (a, b) = calibration.fit_temperature(p, yi), calibration.fit_pool(p, val["gbm"], yi)
        out.append(row(f"{method}: written grade, as read", y, val["written"], p, grades))
        out.append(row(f"{method}: written grade, temperature {t}", y, *oof["temperature"], grades))
        out.append(row(f"{method}: likeliest", y, g[p.argmax(1)], p, grades))
        out.append(row(f"{method}: expected, cut", y, *oof["cut"], grades))
        out.append(row(f"{method}: pooled (a {a}, b {b}), likeliest", y, *oof["pooled"], grades))
        out.append(row(f"{method}: pooled, expected, cut", y, *oof["pooled cut"], grades))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("--model", default="models/policy")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rubric, schema = load_compiled(args.run / "data/schema")
    grades = rubric["grades"]
    val = answers(args.run, args.run / args.model, "validation", rubric, schema, args.max_new_tokens)
    rows = options(val, grades)
    print(f"{len(val['expert'])} validation funds, {FOLDS}-fold cross-validation by fund_id")
    print("| option | exact | QWK | ECE | Brier | exact, top 70 % |\n|---|---|---|---|---|---|")
    for r in rows:
        cells = " | ".join(f"{r[k]:.3f}" for k in ("exact", "qwk", "ece", "brier", "exact_top70"))
        print(f"| {r['option']} | {cells} |")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
