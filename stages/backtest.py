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
from fundgrpo.evaluation.calibration import CalibrationFit
from fundgrpo.evaluation.report import write_files
from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.model.inference import evaluate_models
from fundgrpo.params import load_params


def main() -> None:
    def body() -> None:
        p = load_params()
        rows = scored_funds(p.backtest, PromptRecord.read(Path(p.prepare.out_dir) / "test.jsonl"))
        methodology, schema = load_compiled(Path(p.methodology.out_dir))
        models = {"grpo": Path(p.grpo.out_dir), "sft": Path(p.sft.out_dir), "base": Path(p.model.out_dir)}
        fits = {"grpo": CalibrationFit.of(json.loads(Path(p.calibrate.out).read_text(encoding="utf-8")))}
        answered, reused = evaluate_models(models, rows, methodology, schema, p.backtest.beliefs, fits, p.generation)
        apart = Path(p.prepare.out_dir) / "not_rated.jsonl"  # funds the methodology does not rate, counted apart
        not_rated = [r for r in PromptRecord.read(apart) if r.split == "test"] if apart.exists() else []
        result = backtest(p.backtest, rows, methodology, answered, fits, reused, not_rated)
        rows, predictions = result.pop("rows"), result.pop("predictions")
        write_files(rows, predictions, methodology.grades, Path(p.backtest.plots_dir), Path(p.backtest.report_dir))
        io.write_json(result, p.backtest.metrics)
        for name, m in result["models"].items():
            print(f"backtest {name:5s}: " + ", ".join(f"{k}={v}" for k, v in m.items()))

    run_stage("backtest", body)


if __name__ == "__main__":
    main()
