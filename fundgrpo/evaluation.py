"""Agreement with the experts: the metrics every backtest reports."""

from __future__ import annotations

import numpy as np
import pandas as pd


def grade_metrics(expert: list[int], predicted: list[int], grades: list[int]) -> dict[str, float]:
    """Exact and within-one accuracy, quadratic weighted kappa, Spearman.

    >>> m = grade_metrics([1, 2, 3, 4], [1, 2, 4, 4], [1, 2, 3, 4, 5])
    >>> m["exact"], m["within_one"]
    (0.75, 1.0)
    """
    from scipy.stats import spearmanr
    from sklearn.metrics import cohen_kappa_score

    y, p = np.asarray(expert, dtype=int), np.asarray(predicted, dtype=int)
    if len(y) == 0:
        raise ValueError("no funds to evaluate")
    qwk = cohen_kappa_score(y, p, labels=grades, weights="quadratic")
    rho = spearmanr(y, p).statistic if len(set(p)) > 1 and len(set(y)) > 1 else 0.0
    return {
        "exact": float(np.mean(y == p)),
        "within_one": float(np.mean(np.abs(y - p) <= 1)),
        "qwk": 0.0 if np.isnan(qwk) else float(qwk),
        "spearman": 0.0 if np.isnan(rho) else float(rho),
    }


def confusion(expert: list[int], predicted: list[int], grades: list[int]) -> pd.DataFrame:
    """Counts, rows = expert grade, columns = predicted grade."""
    table = pd.crosstab(pd.Series(expert, name="expert"), pd.Series(predicted, name="predicted"))
    return table.reindex(index=grades, columns=grades, fill_value=0)
