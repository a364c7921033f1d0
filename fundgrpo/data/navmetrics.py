"""Performance and risk metrics from monthly return (or NAV) series.

Layout: a *wide* frame, one row per month (oldest first, a regular monthly
grid), one column per share class, values monthly returns as decimals
(0.01 = 1 %). Every metric uses the trailing window that ends at the last
month of the frame; a share class that lacks any month of a window gets NaN
for that window's metrics (too short a history is not an error).

Units follow `fundgrpo.data.canonical`: returns, volatility, drawdown and tracking
error in percent, annualised; ratios plain.

>>> r = wide_from_long(pd.DataFrame({
...     "id": ["a"] * 12, "month": [f"2020-{m:02d}" for m in range(1, 13)],
...     "r": [0.01] * 12}), "id", "month", "r")
>>> round(float(compute(r)["return_1y"]["a"]), 2)
12.68
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MONTHS_PER_YEAR = 12
_EPS = 1e-12  # below this a dispersion is zero (float rounding)

METRICS: tuple[str, ...] = (
    "return_1y",
    "return_3y",
    "return_5y",
    "volatility_3y",
    "sharpe_3y",
    "sortino_3y",
    "max_drawdown_3y",
    "tracking_error_3y",
    "information_ratio_3y",
)


# ----------------------------------------------------------------- reshaping


def to_month(values: pd.Series | pd.Index | list) -> pd.PeriodIndex:
    """Monthly periods from "YYYY-MM" text, dates or periods.

    >>> list(to_month(["2020-01", "2020-02-15"]).astype(str))
    ['2020-01', '2020-02']
    """
    return pd.PeriodIndex(pd.to_datetime(pd.Index(values).astype(str), format="mixed"), freq="M")


def wide_from_long(df: pd.DataFrame, id_column: str, date_column: str, value_column: str) -> pd.DataFrame:
    """Pivot a long series to months x ids on a complete monthly grid (gaps -> NaN).

    >>> long = pd.DataFrame({"id": ["a", "a", "b"], "m": ["2020-01", "2020-03", "2020-03"],
    ...                      "v": [1.0, 2.0, 3.0]})
    >>> wide_from_long(long, "id", "m", "v")
    id         a    b
    2020-01  1.0  NaN
    2020-02  NaN  NaN
    2020-03  2.0  3.0
    """
    months = to_month(df[date_column])
    frame = pd.DataFrame(
        {
            "id": df[id_column].astype(str).to_numpy(),
            "month": months,
            "value": pd.to_numeric(df[value_column]).to_numpy(),
        }
    )
    wide = frame.pivot_table(index="month", columns="id", values="value", aggfunc="last", dropna=False)
    # A full grid, so a missing month breaks a window instead of silently shortening it.
    grid = pd.period_range(wide.index.min(), wide.index.max(), freq="M")
    wide = wide.reindex(grid)
    wide.index = wide.index.astype(str)
    wide.columns.name = id_column
    return wide


def returns_from_nav(nav: pd.DataFrame) -> pd.DataFrame:
    """Monthly returns from NAV levels (first month of each series is NaN).

    >>> returns_from_nav(pd.DataFrame({"a": [100.0, 110.0, 99.0]})).round(4)["a"].tolist()
    [nan, 0.1, -0.1]
    """
    return nav.pct_change(fill_method=None)


# ------------------------------------------------------------------- windows


def _window(values: np.ndarray, months: int) -> np.ndarray:
    """Last `months` rows; columns with any gap in them become all-NaN."""
    if values.shape[0] < months:
        return np.full((months, values.shape[1]), np.nan)
    win = values[-months:].copy()
    win[:, np.isnan(win).any(axis=0)] = np.nan
    return win


def _annualised_return(win: np.ndarray) -> np.ndarray:
    """Geometric annualised return (decimal) of each column."""
    n = win.shape[0]
    growth = np.prod(1.0 + win, axis=0)
    with np.errstate(invalid="ignore"):
        return growth ** (MONTHS_PER_YEAR / n) - 1.0


def _annualised_std(win: np.ndarray) -> np.ndarray:
    """Sample std x sqrt(12); rounding noise on a constant series is snapped to 0."""
    std = np.std(win, axis=0, ddof=1) * np.sqrt(MONTHS_PER_YEAR)
    return np.where(std < _EPS, 0.0, std)


def _safe_divide(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den is zero (a ratio to zero risk is undefined)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > _EPS, num / den, np.nan)


def _max_drawdown(win: np.ndarray) -> np.ndarray:
    """Worst peak-to-trough fall (decimal, <= 0), starting from a wealth of 1."""
    wealth = np.cumprod(1.0 + win, axis=0)
    # The start (wealth 1) is a peak too: a loss in the first month is a drawdown.
    peaks = np.maximum.accumulate(np.vstack([np.ones((1, win.shape[1])), wealth]), axis=0)[1:]
    return np.min(wealth / peaks - 1.0, axis=0)


# ------------------------------------------------------------------- metrics


def compute(
    returns: pd.DataFrame,
    benchmark: pd.DataFrame | None = None,
    risk_free_rate: float = 0.02,
) -> pd.DataFrame:
    """Metrics (columns `METRICS`) per share class (rows) from wide monthly returns.

    `benchmark` has the same shape (each share class's own benchmark series);
    without it the tracking error and information ratio are NaN.
    `risk_free_rate` is annual, decimal.

    A constant 1 % a month: no volatility, no drawdown, Sharpe undefined:

    >>> r = pd.DataFrame({"a": [0.01] * 36})
    >>> m = compute(r).loc["a"]
    >>> [round(float(m[k]), 2) for k in ("return_3y", "volatility_3y", "max_drawdown_3y", "sharpe_3y")]
    [12.68, 0.0, 0.0, nan]
    >>> bool(pd.isna(m["return_5y"]))  # 36 months cannot give a 5-year return
    True

    A 10 % fall after a rise, recovered later: drawdown -10 %:

    >>> r = pd.DataFrame({"a": [0.05, -0.10] + [0.0] * 33 + [0.2]})
    >>> round(float(compute(r).loc["a", "max_drawdown_3y"]), 6)
    -10.0
    """
    values = returns.to_numpy(dtype=float)
    bench = None if benchmark is None else benchmark.reindex_like(returns).to_numpy(dtype=float)
    rf_month = risk_free_rate / MONTHS_PER_YEAR
    out: dict[str, np.ndarray] = {}

    for years in (1, 3, 5):
        out[f"return_{years}y"] = _annualised_return(_window(values, years * MONTHS_PER_YEAR)) * 100.0

    win = _window(values, 36)
    ann_return = _annualised_return(win)
    vol = _annualised_std(win)
    downside = np.minimum(win - rf_month, 0.0)
    downside_dev = np.sqrt(np.mean(downside**2, axis=0)) * np.sqrt(MONTHS_PER_YEAR)
    out["volatility_3y"] = vol * 100.0
    out["sharpe_3y"] = _safe_divide(ann_return - risk_free_rate, vol)
    out["sortino_3y"] = _safe_divide(ann_return - risk_free_rate, downside_dev)
    out["max_drawdown_3y"] = _max_drawdown(win) * 100.0

    if bench is None:
        out["tracking_error_3y"] = np.full(values.shape[1], np.nan)
        out["information_ratio_3y"] = np.full(values.shape[1], np.nan)
    else:
        active = _window(values - bench, 36)
        te = _annualised_std(active)
        # Arithmetic annualised active return, the usual ex-post IR convention.
        out["tracking_error_3y"] = te * 100.0
        out["information_ratio_3y"] = _safe_divide(np.mean(active, axis=0) * MONTHS_PER_YEAR, te)

    result = pd.DataFrame(out, index=returns.columns)[list(METRICS)]
    result.index.name = returns.columns.name
    return result


def compute_long(
    df: pd.DataFrame,
    id_column: str = "share_class_id",
    date_column: str = "month",
    value_column: str = "return",
    benchmark_column: str | None = "benchmark_return",
    value_kind: str = "return",
    risk_free_rate: float = 0.02,
) -> pd.DataFrame:
    """`compute` on a long table (one row per share class and month).

    `value_kind` "return" (decimal monthly returns) or "nav" (levels); the
    benchmark column, if any, is of the same kind. The result's index is the
    share class id (text); `as_of` (the last month) is in `result.attrs`.

    >>> long = pd.DataFrame({"share_class_id": ["a"] * 13,
    ...     "month": [str(p) for p in pd.period_range("2020-01", periods=13, freq="M")],
    ...     "nav": [100.0 * 1.01 ** i for i in range(13)]})
    >>> m = compute_long(long, value_column="nav", value_kind="nav", benchmark_column=None)
    >>> round(float(m.loc["a", "return_1y"]), 2), m.attrs["as_of"]
    (12.68, '2021-01')
    """
    if value_kind not in ("return", "nav"):
        raise ValueError(f"value_kind must be 'return' or 'nav', got {value_kind!r}")
    wide = wide_from_long(df, id_column, date_column, value_column)
    bench = None
    if benchmark_column:
        bench = wide_from_long(df, id_column, date_column, benchmark_column).reindex_like(wide)
    if value_kind == "nav":
        wide = returns_from_nav(wide)
        bench = None if bench is None else returns_from_nav(bench)
    result = compute(wide, bench, risk_free_rate)
    result.index.name = id_column
    result.attrs["as_of"] = str(wide.index[-1])
    return result
