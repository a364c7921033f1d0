"""benchmarks/learning/stated_vs_estimate.py: whether a stated confidence carries the estimate the prompt shows."""

import math
import runpy

from tests.support import REPO

FIGURES = runpy.run_path(str(REPO / "benchmarks" / "learning" / "stated_vs_estimate.py"))["figures"]
TEST = {f"s{i}": {"gbm_probs": [0.0, 0.1, p, 0.9 - p, 0.0]} for i, p in enumerate((0.2, 0.4, 0.6, 0.8))}


def rows(stated: list[float]) -> list[dict]:
    return [
        {"share_class_id": f"s{i}", "expert_grade": 3, "m_written_grade": 3, "m_stated": s}
        for i, s in enumerate(stated)
    ]


def test_a_confidence_that_copies_the_estimate_has_its_spread_and_brier():
    f = FIGURES(rows([0.2, 0.4, 0.6, 0.8]), TEST, "m")
    assert f["corr"] == 1.0 and f["brier"] == f["brier_estimate"] == 0.3 and f["sd"] == 0.224


def test_a_constant_confidence_is_calibrated_in_the_large_and_carries_nothing():
    f = FIGURES(rows([0.5] * 4), TEST, "m")  # the base rate here is 1.0: every written grade is right
    assert f["sd"] == 0.0 and math.isnan(f["corr"]) and f["brier"] == 0.25


def test_funds_without_a_stated_confidence_or_an_estimate_are_left_out():
    r = rows([0.2, 0.4, 0.6, 0.8])
    r[0]["m_stated"] = None
    assert FIGURES(r, {k: v for k, v in TEST.items() if k != "s3"}, "m")["n"] == 2
    assert FIGURES(r[:1], TEST, "m") is None
