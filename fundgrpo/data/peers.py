"""Peer context: where a fund stands within its category."""

from __future__ import annotations

import numpy as np
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
    return percentiles_within(df, {column: higher_is_better}, group)[column]


def percentiles_within(df: pd.DataFrame, columns: dict[str, bool], group: str = "category") -> pd.DataFrame:
    """`percentile_within` for several columns at once ({column: higher_is_better}), one frame out: two
    grouped passes over all columns instead of a dozen pandas calls per column (most of an API
    request's prompt records was those calls).

    >>> d = pd.DataFrame({"category": ["a", "a", "a", "b"], "x": [1.0, 2.0, 3.0, 5.0], "y": [3.0, 2.0, 1.0, 0.0]})
    >>> percentiles_within(d, {"x": True, "y": False}).to_dict("list")
    {'x': [0.0, 50.0, 100.0, 50.0], 'y': [0.0, 50.0, 100.0, 50.0]}
    """
    names = list(columns)
    if not names:
        return pd.DataFrame(index=df.index)
    sign = np.array([1.0 if columns[c] else -1.0 for c in names])
    values = df[names].astype(float) * sign
    # vectorised (no Python call per group: the API scores one fund against the whole universe)
    groups = values.groupby(df[group])
    rank, n = groups.rank(method="average").to_numpy(), groups.transform("count").to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        pct = np.where(n > 1, (rank - 1) / (n - 1) * 100.0, 50.0)  # a group of one (or none): the middle
    known = values.notna().to_numpy() & df[group].notna().to_numpy()[:, None]
    return pd.DataFrame(np.where(known, pct, np.nan), index=df.index, columns=names)


def category_medians(df: pd.DataFrame, columns: list[str], group: str = "category") -> pd.DataFrame:
    """Median of each column per category, aligned to the rows of `df`."""
    return df.groupby(group)[columns].transform("median")
