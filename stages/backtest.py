"""Stage `backtest`: the trained policy, its SFT start, the untrained base, the rule scorer
and the gradient-boosting baseline (stage `baseline`, block "gbm") against the experts on
the held-out test funds.

Writes metrics/backtest.json (one block per evaluator), per-fund predictions, a
confusion matrix per evaluator for DVC plots, and a PNG of them under reports/.
"""

from __future__ import annotations

import json
from pathlib import Path

from fundgrpo import io
from fundgrpo.cli import run_stage
from fundgrpo.evaluation.backtesting import backtest, scored_funds
from fundgrpo.evaluation.report import per_fund, plot_confusions, reliability
from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.model.inference import evaluate_models
from fundgrpo.params import load_params

# The evaluators with a confusion matrix among DVC's plots (dvc.yaml); the served evaluator's parts
# (grpo_alone, grpo_stack, gbm_rule, sft_served) are in the metrics and the per-fund file.
PLOTTED = ("grpo", "sft", "base", "rule", "gbm")


def main() -> None:
    def body() -> None:
        p = load_params()
        rows = scored_funds(p.backtest, io.read_jsonl(Path(p.prepare.out_dir) / "test.jsonl"))
        methodology, schema = load_compiled(Path(p.methodology.out_dir))
        models = {"grpo": Path(p.grpo.out_dir), "sft": Path(p.sft.out_dir), "base": Path(p.model.out_dir)}
        fits = {"grpo": json.loads(Path(p.calibrate.out).read_text(encoding="utf-8"))}  # the policy's confidence
        answered, reused = evaluate_models(models, rows, methodology, schema, p.backtest.beliefs, fits, p.generation)
        apart = Path(p.prepare.out_dir) / "not_rated.jsonl"  # funds the methodology does not rate, counted apart
        not_rated = [r for r in io.read_jsonl(apart) if r["split"] == "test"] if apart.exists() else []
        result = backtest(p.backtest, rows, methodology, answered, fits, reused, not_rated)
        rows, predictions = result.pop("rows"), result.pop("predictions")
        plots = Path(p.backtest.plots_dir)
        for name, preds in predictions.items():
            if name not in PLOTTED:
                continue
            io.write_json(
                [{"expert": r["expert_grade"], "predicted": q.grade or "invalid"} for r, q in zip(rows, preds)],
                plots / f"confusion_{name}.json",
            )
        for name in ("grpo", "gbm"):  # reliability diagrams: the policy's confidence and gradient boosting's
            io.write_json(reliability(rows, predictions[name], methodology.grades), plots / f"reliability_{name}.json")
        io.write_jsonl(
            [f.as_dict() for f in per_fund(rows, predictions)], Path(p.backtest.report_dir) / "predictions.jsonl"
        )
        shown = {k: v for k, v in predictions.items() if k in PLOTTED}
        plot_confusions(rows, shown, methodology.grades, Path(p.backtest.report_dir) / "confusion.png")
        io.write_json(result, p.backtest.metrics)
        for name, m in result["models"].items():
            print(f"backtest {name:5s}: " + ", ".join(f"{k}={v}" for k, v in m.items()))

    run_stage("backtest", body)


if __name__ == "__main__":
    main()
