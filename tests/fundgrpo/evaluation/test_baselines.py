"""The gradient-boosting baseline: learns a rule from the features, never reads a leak or a label."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fundgrpo.evaluation import baselines
from fundgrpo.evaluation.agreement import grade_metrics
from fundgrpo.params import BaselineParams

FAST = BaselineParams(max_iter=60, learning_rate=(0.1,), max_leaf_nodes=(7,), min_samples_leaf=5)


def universe(n_funds: int = 150, seed: int = 0) -> pd.DataFrame:
    """Funds with 1-2 share classes; the grade is the within-category quintile of a score
    made from two metrics, and the leaking columns are random noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for f in range(n_funds):
        cat = ["a", "b", "c"][f % 3]
        ret, vol = rng.normal(6, 4), rng.uniform(5, 25)
        for s in range(1 + f % 2):
            rows.append(
                {
                    "share_class_id": f"S{f}-{s}",
                    "fund_id": f"F{f}",
                    "category": cat,
                    "return_3y": ret - 0.3 * s,
                    "volatility_3y": vol,
                    "ongoing_cost": rng.uniform(0.2, 1.5),
                    "QuantitativeRating": rng.integers(1, 6),
                    "MorningstarRiskM255": rng.integers(1, 6),
                    "SustainabilityRank": rng.integers(1, 6),
                }
            )
    df = pd.DataFrame(rows)
    df.loc[df.index % 7 == 0, "ongoing_cost"] = np.nan  # NaN is handled, not dropped
    latent = df["return_3y"] - 0.2 * df["volatility_3y"]
    pct = latent.groupby(df["category"]).rank(pct=True)
    df["expert_grade"] = np.ceil(pct * 5).clip(1, 5).astype(int)
    df["expert_score"] = pct * 100
    return df


def test_features_never_hold_leaking_columns_or_labels():
    df = universe(30)
    X = baselines.features(df)
    leaked = set(X.columns) & (set(baselines.LEAKING) | {"expert_grade", "expert_score"})
    assert not leaked
    assert not any(c.startswith(tuple(baselines.LEAKING)) or c.startswith("expert") for c in X.columns)
    assert set(X.columns) == {
        "return_3y",
        "volatility_3y",
        "ongoing_cost",
        "return_3y_pct",
        "volatility_3y_pct",
        "ongoing_cost_pct",
        "category",
    }
    for bad in (["QuantitativeRating"], ["expert_score"], ["return_3y", "MorningstarRiskM255"]):
        with pytest.raises(ValueError, match="labels or leaking"):
            baselines.features(df, bad)
    with pytest.raises(ValueError, match="canonical numeric"):
        baselines.features(df, ["Name"])


def test_features_from_a_methodology_use_its_metrics_and_peer_percentiles():
    from fundgrpo.methodology.compiler import parse

    df = universe(30)
    grades = [{"grade": 1, "min": 0, "max": 50}, {"grade": 2, "min": 50, "max": 100}]
    m = parse(
        {
            "criteria": [{"metric": "return_3y", "weight": 0.5}, {"metric": "return_10y", "weight": 0.5}],
            "grades": grades,
        }
    )
    X = baselines.features(df, m, category=False)
    assert list(X.columns) == ["return_3y", "return_3y_pct"]  # return_10y absent: skipped
    assert X.groupby(df["category"])["return_3y_pct"].max().eq(100).all()


@pytest.mark.parametrize("objective", ["classifier", "regressor"])
def test_gbm_beats_chance_on_a_learnable_grade(objective):
    df = universe(150)
    test = df["fund_id"].str[1:].astype(int) % 5 == 0  # fund-grouped: 20 % of the funds
    params = BaselineParams(**{**FAST.__dict__, "objective": objective})
    pred = baselines.fit_predict_gbm(df[~test], df[test], seed=0, params=params)
    assert len(pred) == test.sum() and set(pred) <= {1, 2, 3, 4, 5}
    m = grade_metrics(df.loc[test, "expert_grade"].tolist(), pred.tolist(), [1, 2, 3, 4, 5])
    chance = df.loc[test, "expert_grade"].value_counts(normalize=True).max()  # always the commonest grade
    assert m["exact"] > chance + 0.2, m
    assert m["within_one"] > 0.9 and m["spearman"] > 0.7, m


def test_tuning_picks_from_the_grid_and_one_class_predicts_it():
    df = universe(60)
    X = baselines.features(df)
    params = BaselineParams(max_iter=40, learning_rate=(0.05, 0.2), max_leaf_nodes=(3, 7), min_samples_leaf=5)
    chosen = baselines.tune(X, df["expert_grade"].to_numpy(), df["fund_id"].to_numpy(), params)
    assert chosen["learning_rate"] in (0.05, 0.2) and chosen["max_leaf_nodes"] in (3, 7)
    assert 1 <= chosen["max_iter"] <= 40 and chosen["inner_loss"] > 0
    pred, info = baselines.fit_predict(X, [4] * len(X), df["fund_id"], X.iloc[:3], params)
    assert pred.tolist() == [4, 4, 4] and info == {"constant": True}


def test_a_metric_no_fund_has_is_ignored_not_fatal():
    """The tiny profile's 48 months give no 5-year return: an all-NaN feature must not break the fit."""
    df = universe(60).assign(return_5y=np.nan, mrar_5y=np.nan)
    test = df["fund_id"].str[1:].astype(int) % 5 == 0
    pred = baselines.fit_predict_gbm(df[~test], df[test], seed=0, params=FAST)
    assert len(pred) == test.sum()
