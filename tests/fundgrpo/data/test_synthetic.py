"""The synthetic universe: deterministic, plausible, graded by the hidden rule."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from fundgrpo.data import navmetrics, synthetic
from fundgrpo.params import SyntheticParams

SMALL = SyntheticParams(n_funds=60, n_months=72)


@pytest.fixture(scope="module")
def universe() -> tuple[pd.DataFrame, pd.DataFrame]:
    return synthetic.generate(SMALL)


def test_deterministic_for_a_seed() -> None:
    a_funds, a_returns = synthetic.generate(SMALL)
    b_funds, b_returns = synthetic.generate(SMALL)
    pd.testing.assert_frame_equal(a_funds, b_funds)
    pd.testing.assert_frame_equal(a_returns, b_returns)
    _, other = synthetic.generate(dataclasses.replace(SMALL, seed=SMALL.seed + 1))
    assert not np.allclose(a_returns["return"].to_numpy()[:100], other["return"].to_numpy()[:100])


def test_default_universe_is_graded() -> None:
    funds, returns = synthetic.generate(SyntheticParams())
    assert funds["fund_id"].nunique() == 1000
    assert set(funds["expert_grade"].dropna()) == {1, 2, 3, 4, 5}
    assert funds["expert_score"].dropna().between(0, 100).all()
    assert funds["expert_grade"].dtype == "Int64"
    # most are rated; the few younger than 3 years are not (no 3-year metrics)
    assert 0.9 < funds["expert_grade"].notna().mean() < 1.0


def test_columns_and_months(universe: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    funds, returns = universe
    assert list(funds.columns) == list(synthetic.PUBLIC_COLUMNS)
    assert list(returns.columns) == ["share_class_id", "month", "return", "benchmark_return"]
    assert returns["month"].min() == SMALL.start
    assert returns["month"].str.fullmatch(r"\d{4}-\d{2}").all()
    assert returns["month"].nunique() == SMALL.n_months
    assert funds["share_class_id"].is_unique
    assert set(returns["share_class_id"]) == set(funds["share_class_id"])


def test_korean_names_only_for_korea_equity(universe: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    funds, _ = universe
    hangul = funds["name"].str.contains(r"[\uac00-\ud7a3]")
    assert hangul.any()
    assert (funds.loc[hangul, "category"] == "Korea Equity").all()
    assert funds.loc[funds["category"] == "Korea Equity", "name"].str.contains("코리아").all()


def test_share_classes_differ_only_by_fee(universe: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    funds, returns = universe
    multi = funds.groupby("fund_id").filter(lambda g: len(g) > 1)
    assert len(multi) > 0
    per_fund = multi.groupby("fund_id")
    assert (per_fund[["category", "fund_size", "manager", "launch_month"]].nunique() == 1).all().all()
    # gross = net + fee/12 is the same for every class of a fund, month by month
    r = returns.merge(funds[["share_class_id", "fund_id", "ongoing_cost"]], on="share_class_id")
    r["gross"] = r["return"] + r["ongoing_cost"] / 100 / 12
    spread = r.groupby(["fund_id", "month"])["gross"].agg(lambda g: g.max() - g.min())
    assert spread.max() < 1e-7  # rounding to 8 decimals only


def test_history_lengths_and_bond_risk(universe: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    funds, returns = universe
    metrics = navmetrics.compute_long(returns).join(funds.set_index("share_class_id")["category"])
    assert metrics["return_5y"].isna().any()  # late launches
    assert metrics["return_5y"].notna().any()
    vol = metrics.groupby("category")["volatility_3y"].median()
    assert vol["Bond Aggregate"] < vol.drop("Bond Aggregate").min()


def test_hidden_rule_without_noise() -> None:
    params = dataclasses.replace(SMALL, analyst_noise=0.0)
    funds, _ = synthetic.generate(params)
    rated = funds["expert_score"].notna()
    expected = synthetic.grade_from_score(funds.loc[rated, "expert_score"])
    # a score rounded to 0.1 could only change the grade right at a cut-off
    assert (funds.loc[rated, "expert_grade"] == expected).mean() > 0.97
    noisy, _ = synthetic.generate(dataclasses.replace(SMALL, analyst_noise=1.0))
    moved = (noisy["expert_grade"] - funds["expert_grade"]).abs().dropna()
    assert moved.max() == 1 and moved.mean() > 0.5  # everyone moved a notch (unless clipped)


def test_longer_horizon_keeps_history_and_regime_shifts() -> None:
    params = SyntheticParams(n_funds=20, n_months=48)
    base = synthetic.simulate(params)
    longer = synthetic.simulate(params, n_months=60)
    head = longer[longer["month"] <= base["month"].max()].reset_index(drop=True)
    pd.testing.assert_frame_equal(base, head)

    regime = synthetic.Regime(start=48, vol_multiplier=3.0, category_shock={"Korea Equity": -0.05}, fee_cut=0.5)
    shocked = synthetic.simulate(params, n_months=60, regime=regime)
    before = shocked[shocked["month"] <= base["month"].max()].reset_index(drop=True)
    pd.testing.assert_frame_equal(base, before)
    after = (shocked["month"] > base["month"].max()).to_numpy()

    # the same draws, scaled: deviations from the benchmark are 3x (plus the fee change)
    def active(frame: pd.DataFrame) -> np.ndarray:
        return (frame["return"] - frame["benchmark_return"]).to_numpy()[after]

    assert np.std(active(shocked)) > 2.5 * np.std(active(longer))

    collapse = synthetic.Regime(start=48, category_shock={"Korea Equity": -0.05})
    crashed = synthetic.simulate(params, n_months=60, regime=collapse)
    cats = synthetic.universe(params).set_index("share_class_id")["category"]
    korea = crashed["share_class_id"].map(cats).eq("Korea Equity").to_numpy()
    shift = crashed["benchmark_return"] - longer["benchmark_return"]
    assert np.allclose(shift[after & korea], -0.05) and np.allclose(shift[~(after & korea)], 0.0)
    funds, _ = synthetic.generate(params, n_months=60, regime=regime)
    assert funds["ongoing_cost"].sum() < synthetic.universe(params)["ongoing_cost"].sum() * 0.6


def test_write_utf8_csvs(tmp_path) -> None:
    params = dataclasses.replace(SMALL, out_dir="raw/synthetic")
    out = synthetic.write(params, root=tmp_path)
    assert sorted(p.name for p in out.iterdir()) == ["funds.csv", "returns.csv"]
    funds = pd.read_csv(out / "funds.csv", encoding="utf-8")
    assert funds["name"].str.contains("코리아").any()
    assert len(pd.read_csv(out / "returns.csv")) > 0
    synthetic.write(params, root=tmp_path)  # rewriting replaces the directory cleanly
    assert sorted(p.name for p in tmp_path.joinpath("raw").iterdir()) == ["synthetic"]


def test_generate_small_universe() -> None:
    funds, returns = synthetic.generate(SyntheticParams(n_funds=12, n_months=40))
    assert len(returns) > 0 and funds["fund_id"].nunique() == 12


def test_the_published_rule_only_approximates_the_analysts() -> None:
    """The experts also weigh manager tenure, which the methodology shows but does not score."""
    from fundgrpo.data import navmetrics
    from fundgrpo.methodology import compiler as meth
    from tests.support import REPO

    params = dataclasses.replace(SMALL, n_funds=200, analyst_noise=0.0)
    funds, returns = synthetic.generate(params)
    table = funds.join(navmetrics.compute_long(returns, risk_free_rate=synthetic.RISK_FREE_RATE), on="share_class_id")
    rated = table[table["expert_grade"].notna()].reset_index(drop=True)
    methodology = meth.load(REPO / "methodology/default.yaml")
    rule = meth.rule_score(methodology, rated)["rule_grade"].astype(int)
    agreement = (rule == rated["expert_grade"].astype(int)).mean()
    assert 0.3 < agreement < 0.8  # an approximation, not the rule itself
    assert "manager_tenure" in {c.metric for c in methodology.context}  # what the model can see and the rule ignores
    assert rated["expert_score"].corr(rated["manager_tenure"], method="spearman") > 0.2
