"""Peer context: where a fund stands within its category."""

from __future__ import annotations

import pandas as pd


def percentile_within(
    df: pd.DataFrame, column: str, higher_is_better: bool = True, group: str = "category"
) -> pd.Series:
    """Percentile (0-100, 100 = best) of `column` within each `group`; NaN stays NaN.

    >>> d = pd.DataFrame({"category": ["a", "a", "a", "b"], "x": [1.0, 2.0, 3.0, 5.0]})
    >>> percentile_within(d, "x").tolist()
    [0.0, 50.0, 100.0, 50.0]
    >>> percentile_within(d, "x", higher_is_better=False).tolist()
    [100.0, 50.0, 0.0, 50.0]
    """
    values = df[column] if higher_is_better else -df[column]

    def pct(s: pd.Series) -> pd.Series:
        n = s.notna().sum()
        if n <= 1:
            return s.where(s.isna(), 50.0)
        return (s.rank(method="average") - 1) / (n - 1) * 100.0

    return values.groupby(df[group], group_keys=False).transform(pct).astype(float)


def category_medians(df: pd.DataFrame, columns: list[str], group: str = "category") -> pd.DataFrame:
    """Median of each column per category, aligned to the rows of `df`."""
    return df.groupby(group)[columns].transform("median")
