"""Compute-scaling fit (ScaleRL): reward against training compute, a saturating sigmoid.

    R(C) = R0 + (A - R0) / (1 + (C_mid / C) ** B)

A is the asymptote (the reward the recipe tends to with unlimited compute), B the
efficiency (how fast it gets there), C_mid the compute at half of the gain. Fit on the
early part of a run, predict the rest: a recipe is judged by A and B, not by one point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def sigmoid(c: np.ndarray, r0: float, a: float, b: float, c_mid: float) -> np.ndarray:
    """The curve; at C = C_mid it is half-way from R0 to A.

    >>> float(sigmoid(np.array([2.0]), 0.0, 1.0, 1.0, 2.0)[0])
    0.5
    """
    with np.errstate(divide="ignore"):  # C = 0 (the evaluation before training) gives R0
        return r0 + (a - r0) / (1.0 + (c_mid / np.asarray(c, dtype=float)) ** b)


@dataclass(frozen=True)
class Fit:
    r0: float
    a: float
    b: float
    c_mid: float
    a_sd: float
    b_sd: float
    c_mid_sd: float

    def predict(self, c) -> np.ndarray:
        return sigmoid(np.asarray(c, dtype=float), self.r0, self.a, self.b, self.c_mid)


def fit(compute: list[float], reward: list[float], r0: float | None = None) -> Fit:
    """Least-squares fit with bounds; uncertainty (1 sd) from the parameter covariance.

    R0 is fixed to the first observed reward unless given (it is the start, not a free shape).

    >>> c = np.linspace(1, 100, 40); r = sigmoid(c, 0.2, 0.9, 1.5, 20.0)
    >>> f = fit(list(c), list(r))
    >>> round(f.a, 2), round(f.b, 1), round(f.c_mid)
    (0.9, 1.5, 20)
    """
    from scipy.optimize import curve_fit

    c, r = np.asarray(compute, dtype=float), np.asarray(reward, dtype=float)
    if len(c) < 4:
        raise ValueError(f"need at least 4 points to fit 3 parameters, got {len(c)}")
    start = float(r[0]) if r0 is None else r0
    span = max(float(r.max() - start), 1e-3)
    p0 = [float(r.max()) + 0.1 * span, 1.0, float(np.median(c))]
    low, high = [start, 0.05, float(c.min()) * 1e-2], [start + 20 * span + 10, 10.0, float(c.max()) * 1e3]
    params, cov = curve_fit(
        lambda x, a, b, cm: sigmoid(x, start, a, b, cm), c, r, p0=p0, bounds=(low, high), maxfev=20000
    )
    sd = np.sqrt(np.clip(np.diag(cov), 0, None)) if np.all(np.isfinite(cov)) else np.full(3, np.nan)
    return Fit(
        start,
        float(params[0]),
        float(params[1]),
        float(params[2]),
        a_sd=float(sd[0]),
        b_sd=float(sd[1]),
        c_mid_sd=float(sd[2]),
    )
