"""Stage `baseline`: the bars the LLM must clear, on its own test split: the methodology's rule
scorer and a tuned gradient-boosting model. `dvc repro baseline` is the rule-only evaluation:
how a methodology agrees with the experts, in seconds, before any LLM is trained.

Trains on the share classes of `prepare`'s train split and predicts its test split, with
features from the validated table (`fundgrpo.evaluation.baselines`: the canonical numeric metrics,
their within-category percentiles over the whole universe, the category; never the labels
nor columns that leak the rating company's pipeline). Writes metrics/baseline.json and
per-fund predictions, which `backtest` reports as its "gbm" block beside the LLMs; the rule
scorer's figures are the "rule" block of metrics/baseline.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from fundgrpo import io
from fundgrpo.cli import run_stage
from fundgrpo.evaluation.backtesting import metrics as agreement
from fundgrpo.evaluation.backtesting import rule_predictions
from fundgrpo.evaluation.baselines import evaluate_split
from fundgrpo.params import load_params


def main() -> None:
    def body() -> None:
        p = load_params()
        funds = pd.read_parquet(p.validate.out)
        prepared = Path(p.prepare.out_dir)
        train_ids = [r["share_class_id"] for r in io.read_jsonl(prepared / "train.jsonl")]
        test_rows = io.read_jsonl(prepared / "test.jsonl")
        test_ids = [r["share_class_id"] for r in test_rows]
        rubric = json.loads((Path(p.methodology.out_dir) / "rubric.json").read_text(encoding="utf-8"))
        rule = agreement(test_rows, rule_predictions(test_rows), rubric["grades"])
        print(
            "baseline rule: "
            + ", ".join(f"{k}={rule[k]}" for k in ("exact", "within_one", "qwk", "spearman"))
            + f" on {len(test_rows)} test share classes"
        )
        metrics, predictions = evaluate_split(p.baseline, funds, train_ids, test_ids, rubric["grades"])
        io.write_jsonl(predictions, p.baseline.predictions)
        io.write_json({**metrics, "rule": rule}, p.baseline.metrics)
        shown = ("n_train", "n_test", "exact", "within_one", "qwk", "spearman", "seconds")
        print("baseline gbm: " + ", ".join(f"{k}={metrics[k]}" for k in shown) + f", chosen {metrics['chosen']}")

    run_stage("baseline", body)


if __name__ == "__main__":
    main()
