"""Agreement with the experts: the metrics every backtest reports."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from fundgrpo.methodology.answers import Prediction
from fundgrpo.methodology.records import PromptRecord, expert_grades


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


INVALID = "invalid"  # the column of answers with no grade: counted, as the metrics count them (wrong)


def confusion(expert: list[int], predicted: list[int | None], grades: list[int]) -> pd.DataFrame:
    """Counts, rows = expert grade, columns = predicted grade, then `INVALID` for answers with no grade
    (the backtest's convention everywhere: an invalid answer is a miss, never left out); a value that is
    not one of `grades` keeps its own row or column after them, never dropped.

    >>> confusion([1, 2, 2], [1, None, 1], [1, 2]).to_dict("index")
    {1: {1: 1, 2: 0, 'invalid': 0}, 2: {1: 1, 2: 0, 'invalid': 1}}
    >>> list(confusion([1, 7], [1, 1], [1, 2]).index)
    [1, 2, 7]
    """
    said = [INVALID if p is None else int(p) for p in predicted]
    table = pd.crosstab(pd.Series([int(e) for e in expert], name="expert"), pd.Series(said, name="predicted"))
    rows = [*grades, *sorted(set(table.index) - set(grades))]
    columns = [*grades, *sorted(set(table.columns) - {*grades, INVALID}), INVALID]
    return table.reindex(index=rows, columns=columns, fill_value=0)


def one_metric(y: np.ndarray, p: np.ndarray, grades: list[int], metric: str) -> float:
    """One of `grade_metrics`' figures in plain numpy: the bootstrap calls it thousands of
    times, and scikit-learn's and SciPy's checks made that the slow part (110 s a page).

    >>> y, p = np.array([1, 2, 3, 4, 5, 3]), np.array([1, 2, 4, 4, 3, 3])
    >>> all(abs(one_metric(y, p, [1, 2, 3, 4, 5], m) - v) < 1e-12
    ...     for m, v in grade_metrics(y, p, [1, 2, 3, 4, 5]).items())
    True
    """
    if metric == "exact":
        return float(np.mean(y == p))
    if metric == "within_one":
        return float(np.mean(np.abs(y - p) <= 1))
    if metric == "qwk":  # as sklearn's cohen_kappa_score(weights="quadratic", labels=grades)
        k = len(grades)
        lookup = {g: i for i, g in enumerate(grades)}
        iy, ip = np.array([lookup[v] for v in y.tolist()]), np.array([lookup[v] for v in p.tolist()])
        observed = np.bincount(iy * k + ip, minlength=k * k).reshape(k, k).astype(float)
        expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
        weights = (np.arange(k)[:, None] - np.arange(k)[None, :]) ** 2
        denominator = float((weights * expected).sum())
        return 0.0 if denominator == 0 else 1.0 - float((weights * observed).sum()) / denominator
    if metric == "spearman":
        from scipy.stats import rankdata

        if len(set(p.tolist())) < 2 or len(set(y.tolist())) < 2:
            return 0.0
        return float(np.corrcoef(rankdata(y), rankdata(p))[0, 1])
    raise ValueError(f"unknown metric {metric!r}: exact, within_one, qwk or spearman")


def paired_bootstrap(
    expert: list[int],
    a: list[int],
    b: list[int],
    groups: list[str],
    grades: list[int],
    metric: str = "exact",
    n: int = 2000,
    seed: int = 0,
) -> dict[str, float]:
    """metric(a) - metric(b) on the same funds, with a 95 % percentile interval from resampling
    whole groups (funds: share classes of one fund are not independent) with replacement.

    >>> e = [1, 2, 3, 4, 5] * 8
    >>> r = paired_bootstrap(e, e, [3] * 40, [str(i // 2) for i in range(40)], [1, 2, 3, 4, 5])
    >>> r["diff"], r["lo"] > 0.6, r["hi"] <= 1.0
    (0.8, True, True)
    """
    y, pa, pb = (np.asarray(v, dtype=int) for v in (expert, a, b))
    if metric in WEIGHTED:  # every draw at once: the same draws and figures as `bootstrap_diff`'s
        w = group_weights(groups, n, seed)
        draws = weighted_metric(y, pa, grades, metric, w) - weighted_metric(y, pb, grades, metric, w)
        lo, hi = np.percentile(draws, [2.5, 97.5])
        whole = one_metric(y, pa, grades, metric) - one_metric(y, pb, grades, metric)
        return {"diff": round(float(whole), 4), "lo": round(float(lo), 4), "hi": round(float(hi), 4),
                "n_groups": len(np.unique(np.asarray(groups))), "n": n}  # fmt: skip
    return bootstrap_diff(
        lambda rows: one_metric(y[rows], pa[rows], grades, metric),
        lambda rows: one_metric(y[rows], pb[rows], grades, metric),
        groups,
        n,
        seed,
    )


WEIGHTED = ("exact", "within_one", "qwk", "spearman")


def group_weights(groups: list[str], n: int, seed: int = 0) -> np.ndarray:
    """`n` resamples of whole groups with replacement, as `bootstrap_diff` draws them: how often
    each row is drawn (n x rows)."""
    index = np.unique(np.asarray(groups), return_inverse=True)[1]
    k = int(index.max()) + 1 if len(index) else 0
    rng = np.random.default_rng(seed)
    return np.array([np.bincount(rng.integers(0, k, k), minlength=k) for _ in range(n)], dtype=float)[:, index]


def weighted_metric(y: np.ndarray, p: np.ndarray, grades: list[int], metric: str, weights: np.ndarray) -> np.ndarray:
    """`one_metric` on every resample at once: row i of `weights` counts each fund row that many
    times (`group_weights`). The same figures as `one_metric` on the rows listed out, in a
    thousandth of the time.

    >>> y, p = np.array([1, 2, 3, 4, 5, 3]), np.array([1, 2, 4, 4, 3, 3])
    >>> w = np.array([[1, 1, 1, 1, 1, 1], [2, 0, 1, 3, 0, 1]], dtype=float)
    >>> rows = [np.arange(6), np.array([0, 0, 2, 3, 3, 3, 5])]
    >>> all(np.allclose(weighted_metric(y, p, [1, 2, 3, 4, 5], m, w), [one_metric(y[r], p[r], [1, 2, 3, 4, 5], m)
    ...     for r in rows], rtol=0, atol=1e-12) for m in WEIGHTED)
    True
    """
    if metric == "exact":
        return (weights @ (y == p).astype(float)) / weights.sum(axis=1)
    if metric == "within_one":
        return (weights @ (np.abs(y - p) <= 1).astype(float)) / weights.sum(axis=1)
    if metric == "spearman":
        return _weighted_spearman(y, p, weights)
    if metric != "qwk":
        raise ValueError(f"unknown metric {metric!r}: one of {WEIGHTED}")
    k, n = len(grades), len(weights)
    iy, ip = np.searchsorted(grades, y), np.searchsorted(grades, p)
    if not (np.isin(y, grades).all() and np.isin(p, grades).all()):
        raise ValueError(f"grades outside {grades}")
    observed = (weights @ np.eye(k * k)[iy * k + ip]).reshape(n, k, k)  # per resample, as one_metric's
    rows, cols, total = observed.sum(axis=2), observed.sum(axis=1), observed.sum(axis=(1, 2))
    expected = rows[:, :, None] * cols[:, None, :] / total[:, None, None]
    cost = ((np.arange(k)[:, None] - np.arange(k)[None, :]) ** 2).reshape(-1)
    denominator = (cost * expected.reshape(n, -1)).sum(axis=1)
    numerator = (cost * observed.reshape(n, -1)).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator == 0, 0.0, 1.0 - numerator / denominator)


def _weighted_spearman(y: np.ndarray, p: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Spearman's rho per resample: grades take few values, so each value's mid-rank follows from
    the weighted counts below it, and rho is the weighted Pearson correlation of the mid-ranks
    (0 where either side drew a single value, as `one_metric`)."""
    values = np.unique(np.concatenate([y, p]))
    iy, ip = np.searchsorted(values, y), np.searchsorted(values, p)
    eye = np.eye(len(values))

    def ranks(index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        counts = weights @ eye[index]  # per resample, rows drawn with each value
        mid = np.cumsum(counts, axis=1) - counts + (counts + 1) / 2
        return np.take_along_axis(mid, np.broadcast_to(index, weights.shape), axis=1), (counts > 0).sum(axis=1)

    (ry, ny), (rp, npred) = ranks(iy), ranks(ip)
    total = weights.sum(axis=1, keepdims=True)
    dy = ry - (weights * ry).sum(axis=1, keepdims=True) / total
    dp = rp - (weights * rp).sum(axis=1, keepdims=True) / total
    cov = (weights * dy * dp).sum(axis=1)
    spread = np.sqrt((weights * dy**2).sum(axis=1) * (weights * dp**2).sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((ny < 2) | (npred < 2) | (spread == 0), 0.0, cov / spread)


def bootstrap_diff(stat_a, stat_b, groups: list[str], n: int = 2000, seed: int = 0) -> dict[str, float]:
    """stat_a - stat_b on the same funds, with a 95 % percentile interval from resampling whole
    groups with replacement; each stat maps an array of row indices to a number.

    >>> x = np.arange(10.0)
    >>> r = bootstrap_diff(lambda rows: x[rows].mean(), lambda rows: 0.0, [str(i) for i in range(10)], n=200)
    >>> r["diff"], r["lo"] < 4.5 < r["hi"]
    (4.5, True)
    """
    codes, index = np.unique(np.asarray(groups), return_inverse=True)
    members = [np.flatnonzero(index == g) for g in range(len(codes))]

    def diff(rows: np.ndarray) -> float:
        return stat_a(rows) - stat_b(rows)

    rng = np.random.default_rng(seed)
    draws = [diff(np.concatenate([members[g] for g in rng.integers(0, len(members), len(members))])) for _ in range(n)]
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return {
        "diff": round(float(diff(np.arange(len(index)))), 4),
        "lo": round(float(lo), 4),
        "hi": round(float(hi), 4),
        "n_groups": len(members),
        "n": n,
    }


def departures(rows: list[PromptRecord], preds: Sequence[Prediction]) -> dict[str, Any]:
    """How often an evaluator's grade departs from the grade its prompt suggested (`shown_grade`:
    the statistical estimate shown, else the methodology's), and how often such a departure is the
    expert's grade (`precision`; None with no departure). Invalid answers do not depart.

    >>> rows = [PromptRecord.example(expert_grade=e, shown_grade=3) for e in (3, 4, 2, 3)]
    >>> departures(rows, [Prediction(grade=g, written_grade=g) for g in (3, 4, 4, None)])
    {'n': 2, 'right': 1, 'precision': 0.5, 'shown_right': 0}
    """
    n = right = shown_right = 0
    for r, expert, p in zip(rows, expert_grades(rows), preds):
        shown, grade = r.shown_grade, p.grade
        if shown is None or grade is None or int(grade) == int(shown):
            continue
        n += 1
        right += int(grade) == expert
        shown_right += int(shown) == expert
    return {"n": n, "right": right, "precision": round(right / n, 4) if n else None, "shown_right": shown_right}


def filled(expert, predicted, grades: list[int]) -> np.ndarray:
    """Predicted grades with each missing one (an invalid answer) replaced by the grade farthest
    from the expert's: a miss that counts fully against the evaluator in every metric.

    >>> filled([1, 4], [2, None], [1, 2, 3, 4, 5]).tolist()
    [2, 1]
    """
    g = np.asarray(grades)
    return np.array(
        [int(p) if p is not None else int(g[np.argmax(np.abs(g - int(y)))]) for y, p in zip(expert, predicted)],
        dtype=int,
    )


def metrics(rows: list[PromptRecord], predictions: Sequence[Prediction], grades: list[int]) -> dict[str, Any]:
    """valid_json; exact, within_one, qwk, spearman with an invalid answer as a miss (the grade
    farthest from the expert's, so it counts fully against the model); score_mae over the valid
    answers; and `neutral`: the same four figures by the earlier convention, an invalid answer
    read as the middle grade (kept so that older results compare).

    >>> rows = [PromptRecord.example(expert_grade=g, expert_score=50.0) for g in (1, 3, 5)]
    >>> said = [Prediction(grade=g, written_grade=g, score=s, valid=g is not None)
    ...         for g, s in ((1, 10.0), (None, None), (5, 90.0))]
    >>> m = metrics(rows, said, [1, 2, 3, 4, 5])
    >>> m["valid_json"], m["exact"], m["neutral"]["exact"]
    (0.6667, 0.6667, 1.0)
    """
    expert = expert_grades(rows)
    predicted = [p.grade for p in predictions]
    out: dict[str, Any] = {"valid_json": float(np.mean([p.valid for p in predictions]))}
    out.update(grade_metrics(expert, filled(expert, predicted, grades).tolist(), grades))
    scored = [
        (p.score, r.expert_score)
        for p, r in zip(predictions, rows)
        if p.score is not None and r.expert_score is not None
    ]
    out["score_mae"] = float(np.mean([abs(a - b) for a, b in scored])) if scored else None
    out = {k: (round(v, 4) if v is not None else None) for k, v in out.items()}
    middle = grades[len(grades) // 2]
    neutral = grade_metrics(expert, [middle if g is None else g for g in predicted], grades)
    out["neutral"] = {k: round(v, 4) for k, v in neutral.items()}
    return out


def rule_predictions(rows: list[PromptRecord]) -> list[Prediction]:
    """The methodology's grades as predictions: no decision rule applies to them, so the grade written
    is the grade."""
    return [
        Prediction(
            grade=r.rule_grade,
            written_grade=r.rule_grade,
            score=r.rule_score,
            valid=r.rule_grade is not None,
        )
        for r in rows
    ]
