"""fundgrpo/evaluation/agreement.py: the bootstrap's fast metric is grade_metrics' figure, whatever the grades."""

import numpy as np
import pytest

from fundgrpo.evaluation.agreement import grade_metrics, one_metric


@pytest.mark.parametrize("seed", range(20))
def test_one_metric_agrees_with_grade_metrics(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    grades = [1, 2, 3, 4, 5] if seed % 2 else [1, 2, 3]
    y = rng.choice(grades, n)
    # some draws constant or perfectly right, where kappa and Spearman have edge cases
    p = np.full(n, grades[0]) if seed % 5 == 0 else y.copy() if seed % 7 == 0 else rng.choice(grades, n)
    for metric, expected in grade_metrics(y, p, grades).items():
        assert one_metric(y, p, grades, metric) == pytest.approx(expected, abs=1e-12), metric


def test_an_unknown_metric_is_named():
    with pytest.raises(ValueError, match="unknown metric 'f1'"):
        one_metric(np.array([1]), np.array([1]), [1, 2], "f1")


def test_every_resample_at_once_gives_the_figures_of_the_rows_listed_out():
    """`paired_bootstrap` scores all its resamples at once (`weighted_metric`); each figure, and so the
    interval, is the one `one_metric` gives on that resample's rows written out, for every metric,
    with ties, a missing grade and funds of several share classes."""
    from fundgrpo.evaluation.agreement import (
        WEIGHTED,
        bootstrap_diff,
        group_weights,
        one_metric,
        paired_bootstrap,
        weighted_metric,
    )

    rng = np.random.default_rng(3)
    grades = [1, 2, 3, 4, 5]
    y = rng.integers(1, 6, 90)
    a = np.clip(y + rng.integers(-1, 2, 90), 1, 4)  # never a 5: a grade nobody answered
    b = rng.integers(1, 6, 90)
    groups = [str(i // 3) for i in range(90)]
    w = group_weights(groups, 50, seed=7)
    index = np.unique(groups, return_inverse=True)[1]
    draw = np.random.default_rng(7)
    for i in range(50):  # the resamples `bootstrap_diff` draws, in its order
        picked = draw.integers(0, 30, 30)
        rows = np.concatenate([np.flatnonzero(index == g) for g in picked])
        assert np.array_equal(np.bincount(rows, minlength=90), w[i])
        for metric in WEIGHTED:
            at_once = weighted_metric(y, a, grades, metric, w)[i]
            assert abs(at_once - one_metric(y[rows], a[rows], grades, metric)) < 1e-12
    for metric in WEIGHTED:
        listed = bootstrap_diff(
            lambda r: one_metric(y[r], a[r], grades, metric),
            lambda r: one_metric(y[r], b[r], grades, metric),
            groups,
            200,
            1,
        )
        assert paired_bootstrap(y.tolist(), a.tolist(), b.tolist(), groups, grades, metric, 200, 1) == listed
