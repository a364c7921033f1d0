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
    >>> d = pd.DataFrame({"category": ["a", "a", "a", "b", None], "x": [1.0, 1.0, None, 5.0, 2.0]})
    >>> percentile_within(d, "x").tolist()  # ties share a rank; a missing value or group stays NaN
    [50.0, 50.0, nan, 50.0, nan]
    """
    values = df[column] if higher_is_better else -df[column]
    groups = values.groupby(df[group])
    # vectorised (no Python call per group: the API scores one fund against the whole universe)
    rank, n = groups.rank(method="average"), groups.transform("count")
    pct = ((rank - 1) / (n - 1) * 100.0).where(n > 1, 50.0)  # a group of one (or none) stands at the middle
    return pct.where(values.notna() & df[group].notna()).astype(float)


def category_medians(df: pd.DataFrame, columns: list[str], group: str = "category") -> pd.DataFrame:
    """Median of each column per category, aligned to the rows of `df`."""
    return df.groupby(group)[columns].transform("median")
