import numpy as np
import pytest

from fundgrpo.training.scaling import fit, sigmoid


def test_fit_on_the_first_half_predicts_the_end_of_a_noisy_run():
    rng = np.random.default_rng(0)
    c = np.linspace(5, 400, 60)
    r = sigmoid(c, 0.5, 2.0, 1.2, 80.0) + rng.normal(0, 0.02, c.size)
    f = fit(list(c[:30]), list(r[:30]))
    assert abs(f.predict([c[-1]])[0] - sigmoid(np.array([c[-1]]), 0.5, 2.0, 1.2, 80.0)[0]) < 0.1
    assert f.a_sd < 0.5


def test_too_few_points_is_an_error():
    with pytest.raises(ValueError, match="at least 4 points"):
        fit([1, 2, 3], [0.1, 0.2, 0.3])
