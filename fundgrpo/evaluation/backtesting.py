"""Score evaluators (a model or the rule scorer) against the experts on held-out funds.

A completion that is not valid JSON per the schema counts against the model in
`valid_json` and is scored as the neutral answer (the middle grade, score 50), so
every metric covers every test fund and models are compared on the same funds.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np

from fundgrpo import io
from fundgrpo.evaluation.agreement import confusion, grade_metrics
from fundgrpo.params import BacktestParams
from fundgrpo.training import modelling
from fundgrpo.training.modelling import answer_fingerprint
from fundgrpo.training.rewards import evidence_reward, valid_answer


def predictions_from_texts(texts: list[str], rubric: dict, schema: dict) -> list[dict]:
    """Parse completions; invalid ones become the neutral answer, flagged `valid: False`.

    >>> from fundgrpo.methodology.compiler import parse, output_schema, rubric as rb
    >>> m = parse({"criteria": [{"metric": "sharpe_3y", "weight": 1}],
    ...            "grades": [{"grade": g, "min": 20 * (g - 1), "max": 20 * g} for g in range(1, 6)]})
    >>> p = predictions_from_texts(['{"grade": 5, "score": 95, "reasoning": "x"}', "oops"], rb(m), output_schema(m))
    >>> [(x["grade"], x["valid"]) for x in p]
    [(5, True), (3, False)]
    """
    grades = rubric["grades"]
    neutral = grades[len(grades) // 2]
    out = []
    for text in texts:
        answer = valid_answer(text, schema)
        if answer is None:
            out.append({"grade": neutral, "score": 50.0, "reasoning": "", "valid": False, "text": text})
        else:
            out.append(
                {
                    "grade": int(answer["grade"]),
                    "score": float(answer["score"]),
                    "reasoning": answer["reasoning"],
                    "valid": True,
                    "text": text,
                }
            )
    return out


def metrics(rows: list[dict], predictions: list[dict], grades: list[int]) -> dict[str, float]:
    """valid_json, exact, within_one, qwk, spearman, score_mae over all rows."""
    expert = [r["expert_grade"] for r in rows]
    out = {"valid_json": float(np.mean([p.get("valid", True) for p in predictions]))}
    out.update(grade_metrics(expert, [p["grade"] for p in predictions], grades))
    out["score_mae"] = float(np.mean([abs(p["score"] - r["expert_score"]) for p, r in zip(predictions, rows)]))
    return {k: round(v, 4) for k, v in out.items()}


def rule_predictions(rows: list[dict]) -> list[dict]:
    return [{"grade": r["rule_grade"], "score": r["rule_score"], "valid": True} for r in rows]


def baseline_predictions(rows: list[dict], predicted: list[dict], rubric: dict) -> list[dict]:
    """The `baseline` stage's per-fund grades, in the order of `rows`; the score is the
    midpoint of the predicted grade's band (the baseline predicts a grade only).

    >>> r = {"bands": [{"grade": 1, "min": 0, "max": 50}, {"grade": 2, "min": 50, "max": 100}]}
    >>> baseline_predictions([{"share_class_id": "a"}], [{"share_class_id": "a", "grade": 2}], r)
    [{'grade': 2, 'score': 75.0, 'valid': True}]
    """
    grade_of = {str(p["share_class_id"]): int(p["grade"]) for p in predicted}
    missing = [r["share_class_id"] for r in rows if str(r["share_class_id"]) not in grade_of]
    if missing:
        raise ValueError(
            f"backtest: the baseline has no prediction for {len(missing)} test share class(es) "
            f"(e.g. {missing[:3]}); rerun the baseline stage"
        )
    midpoint = {b["grade"]: (b["min"] + b["max"]) / 2 for b in rubric["bands"]}
    return [
        {
            "grade": grade_of[str(r["share_class_id"])],
            "score": midpoint[grade_of[str(r["share_class_id"])]],
            "valid": True,
        }
        for r in rows
    ]


def evaluate_model(
    path: str | Path,
    rows: list[dict],
    rubric: dict,
    schema: dict,
    max_new_tokens: int = 96,
    batch_size: int = 32,
    desc: str = "model",
) -> tuple[dict[str, float], list[dict]]:
    """Generate greedy answers for `rows` with the model at `path` and score them.

    Besides `metrics`, `evidence`: the mean evidence reward (does the reasoning cite the
    weightiest criteria on the right side; an invalid answer scores 0).
    """

    model, tokenizer = modelling.load(path)
    texts = modelling.generate(model, tokenizer, [r["prompt"] for r in rows], max_new_tokens, batch_size, desc=desc)
    preds = predictions_from_texts(texts, rubric, schema)
    result = metrics(rows, preds, rubric["grades"])
    if all("evidence" in r for r in rows):
        cites = evidence_reward(texts, [r["evidence"] for r in rows], schema=schema, rubric=rubric)
        result["evidence"] = round(float(np.mean(cites)), 4)
    return result, preds


def fingerprint(rows: list[dict]) -> str:
    """Identifies the test set (funds and labels), so registry comparisons are like for like."""
    key = json.dumps(sorted((r["share_class_id"], r["expert_grade"], r["expert_score"]) for r in rows))
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def backtest(
    params: BacktestParams,
    rows: list[dict],
    rubric: dict,
    schema: dict,
    models: dict[str, Path],
    baseline: list[dict] | None = None,
) -> dict:
    """Metrics and predictions for each model in `models`, the rule scorer and, when given,
    the baseline stage's per-fund predictions (block "gbm")."""
    if params.max_funds:
        rows = rows[: params.max_funds]
    if not rows:
        raise ValueError("backtest: the test split is empty")
    results: dict[str, dict] = {}
    predictions: dict[str, list[dict]] = {}
    answered: dict[str, str] = {}  # answer fingerprint -> the model that answered
    reused: dict[str, str] = {}  # model -> the model whose answers it shares
    for name, path in models.items():
        same = answered.get(key) if (key := answer_fingerprint(path)) else None
        if same:  # the same weights and configs answer alike: GRPO kept its SFT start
            results[name], predictions[name], reused[name] = {**results[same], "seconds": 0.0}, predictions[same], same
            print(f"backtest {name}: the same weights as {same}, its answers reused")
            continue
        started = time.perf_counter()
        results[name], predictions[name] = evaluate_model(
            path, rows, rubric, schema, params.max_new_tokens, params.batch_size, desc=name
        )
        # loading and greedy answers to every test fund
        results[name]["seconds"] = round(time.perf_counter() - started, 1)
        if key:
            answered[key] = name
    predictions["rule"] = rule_predictions(rows)
    results["rule"] = metrics(rows, predictions["rule"], rubric["grades"])
    if baseline is not None:
        predictions["gbm"] = baseline_predictions(rows, baseline, rubric)
        results["gbm"] = metrics(rows, predictions["gbm"], rubric["grades"])
    return {
        "n_funds": len(rows),
        "test_fingerprint": fingerprint(rows),
        "peak_rss_mb": io.peak_rss_mb(),
        "models": results,
        "answers_reused": reused,
        "predictions": predictions,
        "rows": rows,
    }


def plot_confusions(rows: list[dict], predictions: dict[str, list[dict]], grades: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(predictions)
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.4))
    expert = [r["expert_grade"] for r in rows]
    for ax, name in zip(axes, names):
        table = confusion(expert, [p["grade"] for p in predictions[name]], grades)
        ax.imshow(table.values, cmap="Blues")
        for i in range(len(grades)):
            for j in range(len(grades)):
                ax.text(j, i, int(table.values[i, j]), ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(grades)), grades)
        ax.set_yticks(range(len(grades)), grades)
        ax.set_title(name)
        ax.set_xlabel("predicted")
    axes[0].set_ylabel("expert")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def per_fund(rows: list[dict], predictions: dict[str, list[dict]]) -> list[dict]:
    """One row per test fund: the expert's grade, each evaluator's grade and validity, the GRPO answer."""
    return [
        {
            "share_class_id": r["share_class_id"],
            "fund_id": r["fund_id"],
            "category": r["category"],
            "expert_grade": r["expert_grade"],
            **{f"{name}_grade": preds[i]["grade"] for name, preds in predictions.items()},
            **{f"{name}_valid": preds[i].get("valid", True) for name, preds in predictions.items()},
            "grpo_text": predictions["grpo"][i]["text"],
        }
        for i, r in enumerate(rows)
    ]
