"""Morningstar risk-adjusted return, MRAR(2), from an annualised return and volatility.

Morningstar's MRAR(γ) is the certainty-equivalent annual return of an investor with
risk aversion γ, computed from monthly excess returns ER_t:

    MRAR(γ) = [ 1/T · Σ (1 + ER_t)^(−γ) ]^(−12/γ) − 1,   γ = 2 for the star rating.

A screener export has no monthly series, only summary figures. If monthly log
returns are normal with mean μ and variance s² (a log-normal price), the mean above
is exp(−γμ + γ²s²/2), and raising it to −12/γ gives

    MRAR(γ) = exp(12μ) · exp(−γσ²/2) − 1 = (1 + g) · exp(−γσ²/2) − 1,

with g the annualised (geometric) return and σ² = 12 s² the annualised variance, both
decimals; for γ = 2: MRAR(2) = (1 + g) · exp(−σ²) − 1. So MRAR is the return
penalised by variance. Two approximations, said plainly:

  * Morningstar uses returns in excess of the risk-free rate. Dividing (1 + g) by a
    common (1 + r_f) changes no ranking within a category, and the stars are ranks,
    so total returns are used and the values here are MRAR of total return.
  * σ is the reported standard deviation of returns, not of log returns, and the
    export has only the 3-year standard deviation: the 5- and 10-year MRAR use the
    3-year σ as a proxy for their own period's volatility. They are mostly the 5- and
    10-year return, ranked, with the recent volatility's penalty.

Units follow `fundgrpo.data.canonical`: returns and volatility in percent (15.4 = 15.4 %),
MRAR in percent too.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

GAMMA = 2.0  # the risk aversion of the Morningstar Rating
# Derived column -> (its annualised return column, the volatility column used for it).
MRAR_INPUTS: dict[str, tuple[str, str]] = {
    "mrar_3y": ("return_3y", "volatility_3y"),
    "mrar_5y": ("return_5y", "volatility_3y"),  # proxy: the file has only a 3-year σ
    "mrar_10y": ("return_10y", "volatility_3y"),  # proxy, as above
}


def _decimal(values):
    """Percent -> decimal; a Series keeps its index."""
    if isinstance(values, pd.Series):
        return values.astype(float) / 100.0
    return np.asarray(values, dtype=float) / 100.0


def mrar(annual_return_pct, volatility_pct, gamma: float = GAMMA):
    """MRAR(γ) in percent from an annualised return and volatility in percent.

    Works on numbers, arrays and Series; NaN in either input gives NaN.

    >>> round(mrar(10.0, 0.0), 6)  # no volatility: no penalty
    10.0
    >>> round(mrar(10.0, 20.0), 4)  # 1.1 * exp(-0.04) - 1
    5.6868
    >>> round(mrar(10.0, 20.0, gamma=0.0), 6)  # risk-neutral: the return itself
    10.0
    >>> mrar(pd.Series([8.0, None]), pd.Series([15.0, 15.0])).round(3).tolist()
    [5.597, nan]
    >>> round(mrar(-100.0, 30.0), 6)  # everything lost stays everything lost
    -100.0
    """
    g, s = _decimal(annual_return_pct), _decimal(volatility_pct)
    out = ((1.0 + g) * np.exp(-gamma * s**2 / 2.0) - 1.0) * 100.0
    return float(out) if np.ndim(out) == 0 else out


def add_mrar(table: pd.DataFrame, gamma: float = GAMMA) -> pd.DataFrame:
    """`table` with `mrar_3y`, `mrar_5y`, `mrar_10y` added where their inputs exist.

    A derived column is added only when both its input columns are present; a row
    missing either input (a young fund has no 10-year return) gets NaN. A value the
    source already gives for a derived column is kept; only its gaps are filled.

    >>> t = pd.DataFrame({"return_3y": [10.0, 5.0], "return_5y": [None, 4.0], "volatility_3y": [20.0, 10.0]})
    >>> out = add_mrar(t)
    >>> [c for c in out.columns if c.startswith("mrar")]  # no return_10y column, no mrar_10y
    ['mrar_3y', 'mrar_5y']
    >>> out["mrar_5y"].round(3).tolist()
    [nan, 2.965]
    """
    out = table.copy()
    for name, (ret, vol) in MRAR_INPUTS.items():
        if ret not in out.columns or vol not in out.columns:
            continue
        derived = mrar(out[ret], out[vol], gamma)
        out[name] = out[name].astype(float).fillna(derived) if name in out.columns else derived
    return out
