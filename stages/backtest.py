"""Stage `backtest`: the trained policy, its SFT start, the untrained base, the rule scorer
and the gradient-boosting baseline (stage `baseline`, block "gbm") against the experts on
the held-out test funds.

Writes metrics/backtest.json (one block per evaluator), per-fund predictions, a
confusion matrix per evaluator for DVC plots, and a PNG of them under reports/.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from fundgrpo import io
from fundgrpo.cli import run_stage
from fundgrpo.evaluation.agreement import confusion
from fundgrpo.evaluation.backtesting import baseline_predictions, evaluate_model, metrics, rule_predictions
from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.params import BacktestParams, load_params
from fundgrpo.training.modelling import answer_fingerprint


def test_fingerprint(rows: list[dict]) -> str:
    """Identifies the test set (funds and labels), so registry comparisons are like for like."""
    key = json.dumps(sorted((r["share_class_id"], r["expert_grade"], r["expert_score"]) for r in rows))
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def run(
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
        results[name]["seconds"] = round(
            time.perf_counter() - started, 1
        )  # loading and greedy answers to every test fund
        if key:
            answered[key] = name
    predictions["rule"] = rule_predictions(rows)
    results["rule"] = metrics(rows, predictions["rule"], rubric["grades"])
    if baseline is not None:
        predictions["gbm"] = baseline_predictions(rows, baseline, rubric)
        results["gbm"] = metrics(rows, predictions["gbm"], rubric["grades"])
    return {
        "n_funds": len(rows),
        "test_fingerprint": test_fingerprint(rows),
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


def main() -> None:
    def body() -> None:
        p = load_params()
        rows = io.read_jsonl(Path(p.prepare.out_dir) / "test.jsonl")
        schema_dir = Path(p.methodology.out_dir)
        rubric, schema = load_compiled(schema_dir)
        models = {"grpo": Path(p.grpo.out_dir), "sft": Path(p.sft.out_dir), "base": Path(p.model.out_dir)}
        baseline = io.read_jsonl(p.baseline.predictions)  # the baseline stage's (a dvc dependency)
        result = run(p.backtest, rows, rubric, schema, models, baseline)
        rows, predictions = result.pop("rows"), result.pop("predictions")
        per_fund = [
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
        plots = Path(p.backtest.plots_dir)
        for name, preds in predictions.items():
            io.write_json(
                [{"expert": r["expert_grade"], "predicted": q["grade"]} for r, q in zip(rows, preds)],
                plots / f"confusion_{name}.json",
            )
        io.write_jsonl(per_fund, Path(p.backtest.report_dir) / "predictions.jsonl")
        plot_confusions(rows, predictions, rubric["grades"], Path(p.backtest.report_dir) / "confusion.png")
        io.write_json(result, p.backtest.metrics)
        for name, m in result["models"].items():
            print(f"backtest {name:5s}: " + ", ".join(f"{k}={v}" for k, v in m.items()))

    run_stage("backtest", body)


if __name__ == "__main__":
    main()
