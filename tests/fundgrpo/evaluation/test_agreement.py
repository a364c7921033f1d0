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
