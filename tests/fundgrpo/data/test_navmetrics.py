"""navmetrics on hand-computable series."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from fundgrpo.data import navmetrics as nm


def months(n: int, start: str = "2018-01") -> list[str]:
    return [str(p) for p in pd.period_range(start, periods=n, freq="M")]


def long_frame(series: dict[str, list[float]], column: str = "return") -> pd.DataFrame:
    """Long table, each series ending at the same last month."""
    n = max(len(v) for v in series.values())
    axis = months(n)
    rows = [
        {"share_class_id": sid, "month": axis[n - len(vals) + i], column: v}
        for sid, vals in series.items()
        for i, v in enumerate(vals)
    ]
    return pd.DataFrame(rows)


def test_constant_return_has_no_risk() -> None:
    m = nm.compute(pd.DataFrame({"a": [0.01] * 60})).loc["a"]
    expected = (1.01**12 - 1) * 100
    assert m["return_1y"] == pytest.approx(expected)
    assert m["return_3y"] == pytest.approx(expected)
    assert m["return_5y"] == pytest.approx(expected)
    assert m["volatility_3y"] == 0.0
    assert m["max_drawdown_3y"] == 0.0
    assert np.isnan(m["sharpe_3y"])  # excess return over zero risk is undefined
    assert np.isnan(m["sortino_3y"])  # no month below rf/12: no downside


def test_known_drawdown_and_total_return() -> None:
    # up 10 %, down 50 %, then back up 20 %: the worst fall is the 50 % month
    r = [0.0] * 33 + [0.10, -0.50, 0.20]
    m = nm.compute(pd.DataFrame({"a": r})).loc["a"]
    assert m["max_drawdown_3y"] == pytest.approx(-50.0)
    assert m["return_3y"] == pytest.approx(((1.1 * 0.5 * 1.2) ** (1 / 3) - 1) * 100)
    # a first-month loss is a drawdown from the starting wealth
    first = nm.compute(pd.DataFrame({"a": [-0.2] + [0.05] * 35})).loc["a"]
    assert first["max_drawdown_3y"] == pytest.approx(-20.0)


def test_volatility_sharpe_sortino_by_hand() -> None:
    r = np.array([0.02, -0.01] * 18)
    m = nm.compute(pd.DataFrame({"a": r}), risk_free_rate=0.024).loc["a"]
    vol = r.std(ddof=1) * np.sqrt(12)
    ann = np.prod(1 + r) ** (12 / 36) - 1
    downside = np.sqrt(np.mean(np.minimum(r - 0.002, 0) ** 2)) * np.sqrt(12)
    assert m["volatility_3y"] == pytest.approx(vol * 100)
    assert m["sharpe_3y"] == pytest.approx((ann - 0.024) / vol)
    assert m["sortino_3y"] == pytest.approx((ann - 0.024) / downside)


def test_tracking_error_and_information_ratio() -> None:
    bench = pd.DataFrame({"a": np.linspace(-0.03, 0.04, 36), "b": np.linspace(-0.03, 0.04, 36)})
    active = np.array([0.003, -0.001] * 18)
    fund = pd.DataFrame({"a": bench["a"] + active, "b": bench["b"] + 0.001})
    m = nm.compute(fund, bench)
    te = active.std(ddof=1) * np.sqrt(12)
    assert m.loc["a", "tracking_error_3y"] == pytest.approx(te * 100)
    assert m.loc["a", "information_ratio_3y"] == pytest.approx(active.mean() * 12 / te)
    assert m.loc["b", "tracking_error_3y"] == pytest.approx(0.0)
    assert np.isnan(m.loc["b", "information_ratio_3y"])
    assert nm.compute(fund)["tracking_error_3y"].isna().all()  # no benchmark, no TE


def test_short_history_gives_nan_not_error() -> None:
    df = long_frame({"old": [0.03, -0.01] * 35, "young": [0.01] * 20})
    m = nm.compute_long(df, benchmark_column=None)
    assert m.loc["old"].notna().sum() == 7  # all but TE/IR (no benchmark)
    assert m.loc["young", "return_1y"] == pytest.approx((1.01**12 - 1) * 100)
    assert m.loc["young", ["return_3y", "return_5y", "volatility_3y", "sharpe_3y"]].isna().all()
    assert list(m.columns) == list(nm.METRICS)


def test_gap_inside_window_gives_nan() -> None:
    df = long_frame({"a": [0.01] * 40})
    df = df[df["month"] != df["month"].iloc[-5]]  # one missing month near the end
    m = nm.compute_long(df, benchmark_column=None)
    assert np.isnan(m.loc["a", "return_1y"]) and np.isnan(m.loc["a", "return_3y"])


def test_nav_and_returns_agree() -> None:
    rng = np.random.default_rng(3)
    r = {"a": rng.normal(0.005, 0.04, 61), "b": rng.normal(0.002, 0.02, 40)}
    b = {"a": rng.normal(0.004, 0.03, 61), "b": rng.normal(0.004, 0.03, 40)}
    ret = long_frame({k: list(v) for k, v in r.items()})
    ret["benchmark_return"] = long_frame({k: list(v) for k, v in b.items()})["return"]
    # NAV needs one more (starting) level than there are returns
    nav = long_frame({k: list(100 * np.cumprod(np.r_[1.0, 1 + v])) for k, v in r.items()}, "nav")
    nav["bench_nav"] = long_frame({k: list(100 * np.cumprod(np.r_[1.0, 1 + v])) for k, v in b.items()}, "nav")["nav"]
    # returns start one month later than NAV levels
    ret["month"] = [str(pd.Period(m, "M") + 1) for m in ret["month"]]
    from_returns = nm.compute_long(ret)
    from_nav = nm.compute_long(nav, value_column="nav", benchmark_column="bench_nav", value_kind="nav")
    pd.testing.assert_frame_equal(from_returns, from_nav, check_exact=False, rtol=1e-9)
    assert from_returns.attrs["as_of"] == from_nav.attrs["as_of"]


def test_bad_value_kind() -> None:
    with pytest.raises(ValueError, match="value_kind"):
        nm.compute_long(long_frame({"a": [0.01]}), value_kind="price")


def test_vectorised_speed() -> None:
    rng = np.random.default_rng(0)
    n, t = 3000, 120
    df = pd.DataFrame(
        {
            "share_class_id": np.repeat([f"S{i}" for i in range(n)], t),
            "month": np.tile(months(t), n),
            "return": rng.normal(0.005, 0.04, n * t),
            "benchmark_return": rng.normal(0.005, 0.04, n * t),
        }
    )
    start = time.perf_counter()
    m = nm.compute_long(df)
    assert time.perf_counter() - start < 2.0
    assert m.shape == (n, len(nm.METRICS)) and m.notna().all().all()
