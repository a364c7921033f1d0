"""Stage baseline: the rule scorer and the evidence stage's gradient-boosting grades on prepare's
validation split, and the backtest's "gbm" block (on the test split)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from fundgrpo import io
from fundgrpo.evaluation import statistical
from fundgrpo.evaluation.backtesting import backtest
from fundgrpo.evaluation.baselines import BaselineError, gbm_metrics
from fundgrpo.methodology import compiler as meth
from fundgrpo.methodology import records
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.params import BacktestParams, BaselineParams, EvidenceParams, PrepareParams
from tests.support import REPO

FAST = BaselineParams(max_iter=40, learning_rate=(0.1,), max_leaf_nodes=(7,), min_samples_leaf=5)
METHODOLOGY = meth.parse(
    {
        "criteria": [{"metric": "sharpe_3y", "weight": 1}],
        "grades": [
            {"grade": g, "min": lo, "max": hi}
            for g, lo, hi in [(1, 0, 10), (2, 10, 32.5), (3, 32.5, 67.5), (4, 67.5, 90), (5, 90, 100)]
        ],
    }
)


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


def test_the_gbm_block_is_the_evidence_stages_test_estimates():
    df = universe(80)
    df["expert_grade"] = df["expert_grade"].astype("Int64")
    table, _, summary = statistical.estimate(df, FAST, EvidenceParams(), PrepareParams(), [1, 2, 3, 4, 5])
    test = table[table["split"] == "test"]
    rows = [
        PromptRecord.example(expert_grade=int(df.set_index("share_class_id").loc[i, "expert_grade"]), gbm_grade=int(g))
        for i, g in zip(test["share_class_id"], test["gbm_grade"])
    ]
    metrics = gbm_metrics(rows, summary, FAST, [1, 2, 3, 4, 5], "test")
    assert metrics["n"] == len(rows) and metrics["n_train"] == summary["train_rows"]
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


def test_records_without_an_estimate_are_named():
    with pytest.raises(BaselineError, match="1 validation record.*rerun prepare"):
        gbm_metrics(
            [PromptRecord.example(expert_grade=3)],
            {"train_rows": 1, "features": [], "chosen": {}},
            FAST,
            [1, 2, 3],
            "validation",
        )


def test_backtest_reports_a_gbm_block_and_refuses_stale_records():
    rows = [
        PromptRecord.example(share_class_id=f"S{i}", expert_grade=g, gbm_grade=p, gbm_probs=[0.2] * 5)
        for i, (g, p) in enumerate([(1, 1), (3, 3), (5, 4), (3, 3)])
    ]
    result = backtest(BacktestParams(bootstrap=0), rows, METHODOLOGY, {}, {})
    assert set(result["models"]) == {"rule", "gbm"}
    assert result["models"]["gbm"]["exact"] == 0.75 and result["models"]["gbm"]["within_one"] == 1.0
    assert result["models"]["gbm"]["trust"]["confidence_mean"] == 0.2
    plain = [replace(r, gbm_grade=None, gbm_probs=None) for r in rows]
    assert set(backtest(BacktestParams(bootstrap=0), plain, METHODOLOGY, {}, {})["models"]) == {"rule"}  # no estimates
    with pytest.raises(ValueError, match="1 test share class.*carry no gradient-boosting grade"):
        backtest(BacktestParams(bootstrap=0), rows[:3] + plain[3:], METHODOLOGY, {}, {})


def test_main_writes_the_rule_and_gbm_figures(tmp_path):
    df = universe(40)
    df["expert_grade"] = df["expert_grade"].astype("Int64")
    table, estimator, summary = statistical.estimate(df, FAST, EvidenceParams(), PrepareParams(), [1, 2, 3, 4, 5])
    statistical.write(tmp_path / "ev", table, estimator, summary)
    by_id = df.set_index("share_class_id")
    held = table[table["split"] == "validation"]  # the stage reads validation; the test split is the backtest's
    # the rule scorer is right on every validation fund but the first, which it puts a grade off
    rows = [
        PromptRecord.example(
            share_class_id=i,
            expert_grade=int(by_id.loc[i, "expert_grade"]),
            expert_score=float(by_id.loc[i, "expert_score"]),
            rule_grade=int(by_id.loc[i, "expert_grade"]) % 5 + 1 if n == 0 else int(by_id.loc[i, "expert_grade"]),
            rule_score=float(by_id.loc[i, "expert_score"]),
            gbm_grade=int(g),
        )
        for n, (i, g) in enumerate(zip(held["share_class_id"], held["gbm_grade"]))
    ]
    records.write(rows, tmp_path / "prepared/validation.jsonl")
    io.write_json(meth.rubric(METHODOLOGY), tmp_path / "schema/rubric.json")
    (tmp_path / "params.yaml").write_text(
        "prepare: {out_dir: prepared}\nmethodology: {out_dir: schema}\nevidence: {out_dir: ev}\n"
        "baseline: {max_iter: 30, learning_rate: [0.1], max_leaf_nodes: [7], min_samples_leaf: 5, "
        "metrics: out/baseline.json}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "stages.baseline"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "baseline gbm:" in done.stdout and "baseline rule:" in done.stdout
    written = json.loads((tmp_path / "out/baseline.json").read_text())
    assert written["n"] == len(rows) and written["split"] == "validation"
    assert written["rule"]["exact"] == round(1 - 1 / len(rows), 4)  # the rule-only evaluation
    assert written["exact"] == round(float(np.mean([r.gbm_grade == r.expert_grade for r in rows])), 4)
