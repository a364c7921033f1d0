"""MRAR(2) from annualised return and volatility: the closed form, and where ingest derives it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fundgrpo.data.riskadjusted import add_mrar, mrar


def test_closed_form_matches_morningstars_definition_on_lognormal_returns():
    """MRAR(γ) = [mean((1+R_t)^-γ)]^(-12/γ) - 1 on monthly returns, vs (1+g)·exp(-γσ²/2) - 1."""
    rng = np.random.default_rng(0)
    log_r = rng.normal(0.006, 0.05, 600_000)  # monthly log returns: ~7.5 % a year, ~17 % volatility
    exact = (np.mean(np.exp(log_r) ** -2.0) ** (-12 / 2.0) - 1) * 100
    g = (np.exp(12 * log_r.mean()) - 1) * 100  # annualised geometric return, %
    sigma = log_r.std() * np.sqrt(12) * 100  # annualised volatility, %
    assert mrar(g, sigma) == pytest.approx(exact, abs=0.05)
    assert mrar(g, sigma) < g  # variance is penalised


def test_more_volatility_lowers_mrar_and_gamma_zero_is_the_return():
    values = mrar(np.array([8.0, 8.0, 8.0]), np.array([5.0, 15.0, 30.0]))
    assert np.all(np.diff(values) < 0)
    assert mrar(8.0, 30.0, gamma=0.0) == pytest.approx(8.0)
    assert mrar(8.0, 20.0, gamma=4.0) < mrar(8.0, 20.0, gamma=2.0)


def test_add_mrar_only_where_inputs_exist_and_keeps_given_values():
    t = pd.DataFrame(
        {
            "return_3y": [10.0, np.nan, 4.0],
            "return_10y": [6.0, 5.0, np.nan],
            "volatility_3y": [20.0, 15.0, np.nan],
            "mrar_3y": [np.nan, 1.0, np.nan],  # a value the source gives is kept
        }
    )
    out = add_mrar(t)
    assert "mrar_5y" not in out  # no return_5y column
    assert out["mrar_3y"].tolist()[:2] == [pytest.approx(1.1 * np.exp(-0.04) * 100 - 100), 1.0]
    assert np.isnan(out.loc[2, "mrar_3y"]) and np.isnan(out.loc[2, "mrar_10y"])  # no volatility
    assert out.loc[1, "mrar_10y"] == pytest.approx(mrar(5.0, 15.0))  # 10y uses the 3-year volatility
    assert list(t.columns) == ["return_3y", "return_10y", "volatility_3y", "mrar_3y"]  # input untouched
    no_vol = add_mrar(t.drop(columns=["volatility_3y", "mrar_3y"]))
    assert not any(c.startswith("mrar") for c in no_vol)


def test_star_methodology_weights_periods_100_60_40_50_30_20_by_history(repo_root):
    import dataclasses

    from fundgrpo.methodology import compiler as meth

    m = meth.load(repo_root / "methodology/morningstar.yaml")
    assert m.scoring == "ranked" and [b.high - b.low for b in m.bands] == [10, 22.5, 35, 22.5, 10]
    weighted = dataclasses.replace(m, scoring="weighted")  # the composite before it is ranked
    funds = pd.DataFrame(
        {
            "category": ["c"] * 5,
            "mrar_3y": [1.0, 2.0, 3.0, 4.0, 5.0],
            "mrar_5y": [5.0, 4.0, 3.0, 2.0, np.nan],  # the last fund: 3 years only
            "mrar_10y": [1.0, 3.0, 2.0, np.nan, np.nan],  # the fourth: 3 and 5 years
        }
    )
    pct = meth.criterion_percentiles(m, funds)
    score = meth.rule_score(weighted, funds)["rule_score"]
    assert score[4] == pytest.approx(round(pct.at[4, "mrar_3y"], 1))
    assert score[3] == pytest.approx(round(0.6 * pct.at[3, "mrar_5y"] + 0.4 * pct.at[3, "mrar_3y"], 1))
    full = 0.5 * pct.at[0, "mrar_10y"] + 0.3 * pct.at[0, "mrar_5y"] + 0.2 * pct.at[0, "mrar_3y"]
    assert score[0] == pytest.approx(round(full, 1))
