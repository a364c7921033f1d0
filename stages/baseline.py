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
import time
from pathlib import Path

import pandas as pd

from fundgrpo import io
from fundgrpo.cli import StageError, run_stage
from fundgrpo.evaluation import baselines
from fundgrpo.evaluation.agreement import grade_metrics
from fundgrpo.evaluation.backtesting import metrics as agreement
from fundgrpo.evaluation.backtesting import rule_predictions
from fundgrpo.params import BaselineParams, load_params


def run(
    params: BaselineParams,
    funds: pd.DataFrame,
    train_ids: list[str],
    test_ids: list[str],
    grades: list[int] | tuple[int, ...] = (1, 2, 3, 4, 5),
) -> tuple[dict, list[dict]]:
    """(metrics, per-fund test predictions) for a GBM fitted on `train_ids`, predicting `test_ids`.

    `funds` is the whole validated universe: peer percentiles are taken over all of it.
    """
    start = time.perf_counter()
    funds = funds.reset_index(drop=True)
    ids = funds["share_class_id"].astype(str)
    row_of = pd.Series(range(len(funds)), index=ids)
    for name, wanted in (("train", train_ids), ("test", test_ids)):
        missing = sorted(set(map(str, wanted)) - set(ids))
        if missing:
            raise StageError(
                f"baseline: {len(missing)} {name} share class(es) are not in the validated table "
                f"(e.g. {missing[:3]}); rerun prepare"
            )
    if not len(train_ids) or not len(test_ids):
        raise StageError(f"baseline: empty split ({len(train_ids)} train, {len(test_ids)} test share classes)")
    train_rows = row_of.loc[[str(i) for i in train_ids]].to_numpy()
    test_rows = row_of.loc[[str(i) for i in test_ids]].to_numpy()
    train = funds.iloc[train_rows]
    unlabelled = int(train["expert_grade"].isna().sum())
    if unlabelled:  # prepare writes only labelled rows; a mismatch means stale inputs
        raise StageError(f"baseline: {unlabelled} train share class(es) have no expert grade; rerun prepare")

    X = baselines.features(funds, params.features or None, category=params.category)
    predicted, chosen = baselines.fit_predict(
        X.iloc[train_rows], train["expert_grade"], train["fund_id"], X.iloc[test_rows], params, list(grades)
    )
    test = funds.iloc[test_rows]
    expert = test["expert_grade"].astype(int).tolist()
    scores = grade_metrics(expert, predicted.tolist(), list(grades))
    metrics = {
        "model": f"HistGradientBoosting{params.objective.capitalize()}",
        "n_train": int(len(train_rows)),
        "n_train_funds": int(train["fund_id"].nunique()),
        "n_test": int(len(test_rows)),
        "features": [c for c in X.columns],
        "chosen": chosen,
        **{k: round(v, 4) for k, v in scores.items()},
        "seconds": round(time.perf_counter() - start, 1),
    }
    predictions = [
        {
            "share_class_id": str(r["share_class_id"]),
            "fund_id": str(r["fund_id"]),
            "category": str(r["category"]),
            "expert_grade": int(r["expert_grade"]),
            "grade": int(g),
        }
        for (_, r), g in zip(test.iterrows(), predicted)
    ]
    return metrics, predictions


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
        metrics, predictions = run(p.baseline, funds, train_ids, test_ids, rubric["grades"])
        io.write_jsonl(predictions, p.baseline.predictions)
        io.write_json({**metrics, "rule": rule}, p.baseline.metrics)
        shown = ("n_train", "n_test", "exact", "within_one", "qwk", "spearman", "seconds")
        print("baseline gbm: " + ", ".join(f"{k}={metrics[k]}" for k in shown) + f", chosen {metrics['chosen']}")

    run_stage("baseline", body)


if __name__ == "__main__":
    main()
