"""Which belief, and how pooled: the policy's grade probabilities on the validation and test funds of a
kept run, each way of turning them into a grade and a confidence, fitted on validation, scored on test.

    python experiments/belief_pooling/belief_pooling.py RUN [--model models/policy] [--out results.json]

RUN is a kept `benchmarks/pipeline.py --keep` run (its data/prepared, data/schema and model). Rows: gradient
boosting alone (its class probabilities); for each belief (`score`: read at the score and mapped through
the bands; `grade`: the grade token after the written score) the written grade with the belief as read,
temperature-scaled (by validation log-likelihood), the likeliest grade, the expected grade cut at
QWK-optimal points, and the belief pooled with gradient boosting's probabilities (p_lm^a p_gbm^b, a and b
by validation log-likelihood), its likeliest and its expected-cut grade. Exact, QWK, ECE, Brier and exact
on the most confident 70 % of the test funds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fundgrpo import io  # noqa: E402
from fundgrpo.evaluation import belief, calibration  # noqa: E402
from fundgrpo.evaluation.agreement import one_metric  # noqa: E402
from fundgrpo.evaluation.backtesting import predictions_from_texts  # noqa: E402
from fundgrpo.methodology.compiler import load_compiled  # noqa: E402
from fundgrpo.training import modelling  # noqa: E402


def answers(run: Path, model_dir: Path, split: str, rubric: dict, schema: dict, max_new_tokens: int) -> dict:
    model, tokenizer = modelling.load(model_dir)
    rows = io.read_jsonl(run / "data/prepared" / f"{split}.jsonl")
    texts = modelling.generate(model, tokenizer, [r["prompt"] for r in rows], max_new_tokens, 32, desc=split)
    preds = predictions_from_texts(texts, rubric, schema)
    uniform = [1.0 / len(rubric["grades"])] * len(rubric["grades"])
    out = {
        "expert": np.array([r["expert_grade"] for r in rows]),
        "written": np.array([p["grade"] if p["grade"] is not None else 0 for p in preds]),
        "gbm": np.array([r["gbm_probs"] for r in rows]),
    }
    for method in ("score", "grade"):
        found = belief.beliefs(model, tokenizer, [r["prompt"] for r in rows], texts, rubric, method, split)
        out[method] = np.array([b["probs"] if b and b["probs"] else uniform for b in found])
    return out


def row(name: str, expert, grade, probs, grades: list[int]) -> dict:
    index = np.searchsorted(grades, grade)
    confidence = np.where(grade > 0, probs[np.arange(len(grade)), np.clip(index, 0, len(grades) - 1)], 0.0)
    correct = grade == expert
    return {
        "option": name,
        "exact": round(float(correct.mean()), 4),
        "qwk": round(
            one_metric(expert, calibration.filled(expert, [int(g) or None for g in grade], grades), grades, "qwk"), 4
        ),
        "ece": round(calibration.ece(confidence, correct), 4),
        "brier": round(calibration.brier(probs, np.searchsorted(grades, expert)), 4),
        "exact_top70": calibration.selective(expert, [int(g) or None for g in grade], confidence, grades)[
            "exact_top70"
        ],
    }


def options(val: dict, test: dict, grades: list[int]) -> list[dict]:
    g = np.asarray(grades)
    out = [row("gradient boosting", test["expert"], g[test["gbm"].argmax(1)], test["gbm"], grades)]
    yv = np.searchsorted(grades, val["expert"])
    for method in ("score", "grade"):
        pv, pt = val[method], test[method]
        out.append(row(f"{method}: written grade, as read", test["expert"], test["written"], pt, grades))
        t = calibration.fit_temperature(pv, yv)
        out.append(row(f"{method}: written grade, temperature {t}", test["expert"], test["written"],
                       calibration.temperature_probs(pt, t), grades))  # fmt: skip
        out.append(row(f"{method}: likeliest", test["expert"], g[pt.argmax(1)], pt, grades))
        cuts = calibration.fit_cutpoints(calibration.expected_grade(pv, grades), val["expert"], grades)
        out.append(row(f"{method}: expected, cut", test["expert"],
                       calibration.cut(calibration.expected_grade(pt, grades), cuts, grades), pt, grades))  # fmt: skip
        a, b = calibration.fit_pool(pv, val["gbm"], yv)
        qv, qt = calibration.pooled(pv, val["gbm"], a, b), calibration.pooled(pt, test["gbm"], a, b)
        out.append(row(f"{method}: pooled (a {a}, b {b}), likeliest", test["expert"], g[qt.argmax(1)], qt, grades))
        cuts = calibration.fit_cutpoints(calibration.expected_grade(qv, grades), val["expert"], grades)
        out.append(row(f"{method}: pooled, expected, cut", test["expert"],
                       calibration.cut(calibration.expected_grade(qt, grades), cuts, grades), qt, grades))  # fmt: skip
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
    val, test = (
        answers(args.run, args.run / args.model, s, rubric, schema, args.max_new_tokens) for s in ("validation", "test")
    )
    rows = options(val, test, grades)
    print(f"{len(test['expert'])} test funds, fitted on {len(val['expert'])} validation funds")
    print("| option | exact | QWK | ECE | Brier | exact, top 70 % |\n|---|---|---|---|---|---|")
    for r in rows:
        cells = " | ".join(f"{r[k]:.3f}" for k in ("exact", "qwk", "ece", "brier", "exact_top70"))
        print(f"| {r['option']} | {cells} |")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
