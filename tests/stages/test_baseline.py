"""Stage baseline: GBM on prepare's split, its predictions, and the backtest's "gbm" block."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from fundgrpo import io
from fundgrpo.evaluation.backtesting import backtest
from fundgrpo.evaluation.baselines import BaselineError, evaluate_split
from fundgrpo.params import BacktestParams, BaselineParams
from tests.support import REPO

FAST = BaselineParams(max_iter=40, learning_rate=(0.1,), max_leaf_nodes=(7,), min_samples_leaf=5)
RUBRIC = {
    "grades": [1, 2, 3, 4, 5],
    "bands": [
        {"grade": g, "min": lo, "max": hi}
        for g, lo, hi in [(1, 0, 10), (2, 10, 32.5), (3, 32.5, 67.5), (4, 67.5, 90), (5, 90, 100)]
    ],
}


def universe(n_funds: int) -> pd.DataFrame:
    """Funds of 1-2 share classes in two categories; the grade is the within-category quintile of return."""
    rng = np.random.default_rng(1)
    rows = [
        {
            "share_class_id": f"S{f}-{s}",
            "fund_id": f"F{f}",
            "category": "ab"[f % 2],
            "return_3y": r - 0.2 * s,
            "volatility_3y": rng.uniform(5, 25),
            "QuantitativeRating": rng.integers(1, 6),
        }
        for f, r in enumerate(rng.normal(6, 4, n_funds))
        for s in range(1 + f % 2)
    ]
    df = pd.DataFrame(rows)
    pct = df["return_3y"].groupby(df["category"]).rank(pct=True)
    return df.assign(expert_grade=np.ceil(pct * 5).clip(1, 5).astype(int), expert_score=pct * 100)


def split(df):
    test = df["fund_id"].str[1:].astype(int) % 5 == 0
    return df.loc[~test, "share_class_id"].tolist(), df.loc[test, "share_class_id"].tolist()


def test_run_fits_on_train_and_predicts_every_test_share_class():
    df = universe(80)
    df.loc[df.index[-2:], "expert_grade"] = None  # unlabelled rows stay in the peer universe
    df["expert_grade"] = df["expert_grade"].astype("Int64")
    train_ids, test_ids = split(df.iloc[:-2])
    metrics, preds = evaluate_split(FAST, df, train_ids, test_ids)
    assert [p["share_class_id"] for p in preds] == test_ids
    assert metrics["n_train"] == len(train_ids) and metrics["n_test"] == len(test_ids)
    assert {"exact", "within_one", "qwk", "spearman", "chosen", "features"} <= set(metrics)
    assert metrics["exact"] > 0.4 and metrics["within_one"] > 0.8
    assert not {
        "QuantitativeRating",
        "MorningstarRiskM255",
        "SustainabilityRank",
        "expert_grade",
        "expert_score",
    } & set(metrics["features"])
    json.dumps(metrics)  # written as metrics/baseline.json


def test_stale_split_is_named():
    df = universe(20)
    train_ids, test_ids = split(df)
    with pytest.raises(BaselineError, match="1 test share class"):
        evaluate_split(FAST, df, train_ids, test_ids + ["GONE"])


def test_backtest_reports_a_gbm_block_and_refuses_stale_predictions():
    rows = [
        {"share_class_id": f"S{i}", "expert_grade": g, "expert_score": 50.0, "rule_grade": 3, "rule_score": 50.0}
        for i, g in enumerate([1, 3, 5, 3])
    ]
    preds = [{"share_class_id": f"S{i}", "grade": g} for i, g in enumerate([1, 3, 4, 3])]
    result = backtest(BacktestParams(), rows, RUBRIC, {}, {}, preds)
    assert set(result["models"]) == {"rule", "gbm"}
    assert result["models"]["gbm"]["exact"] == 0.75 and result["models"]["gbm"]["within_one"] == 1.0
    assert set(backtest(BacktestParams(), rows, RUBRIC, {}, {})["models"]) == {"rule"}  # no baseline given
    with pytest.raises(ValueError, match="no prediction for 1 test share class"):
        backtest(BacktestParams(), rows, RUBRIC, {}, {}, preds[:3])


def test_main_writes_metrics_and_predictions(tmp_path):
    df = universe(40)
    train_ids, test_ids = split(df)
    io.write_parquet(df, tmp_path / "validated.parquet")
    io.write_jsonl([{"share_class_id": i} for i in train_ids], tmp_path / "prepared/train.jsonl")
    by_id = df.set_index("share_class_id")
    # the rule scorer is right on every test fund but the first, which it puts a grade off
    test_rows = [
        {
            "share_class_id": i,
            "expert_grade": int(by_id.loc[i, "expert_grade"]),
            "expert_score": float(by_id.loc[i, "expert_score"]),
            "rule_grade": int(by_id.loc[i, "expert_grade"]) % 5 + 1 if n == 0 else int(by_id.loc[i, "expert_grade"]),
            "rule_score": float(by_id.loc[i, "expert_score"]),
        }
        for n, i in enumerate(test_ids)
    ]
    io.write_jsonl(test_rows, tmp_path / "prepared/test.jsonl")
    io.write_json(RUBRIC, tmp_path / "schema/rubric.json")
    (tmp_path / "params.yaml").write_text(
        "validate: {out: validated.parquet}\nprepare: {out_dir: prepared}\nmethodology: {out_dir: schema}\n"
        "baseline: {max_iter: 30, learning_rate: [0.1], max_leaf_nodes: [7], min_samples_leaf: 5, "
        "metrics: out/baseline.json, predictions: out/predictions.jsonl}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "stages.baseline"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "baseline gbm:" in done.stdout and "baseline rule:" in done.stdout
    written = json.loads((tmp_path / "out/baseline.json").read_text())
    assert written["n_test"] == len(test_ids)
    assert written["rule"]["exact"] == round(1 - 1 / len(test_ids), 4)  # the rule-only evaluation
    assert len(io.read_jsonl(tmp_path / "out/predictions.jsonl")) == len(test_ids)
