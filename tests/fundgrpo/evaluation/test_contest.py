"""The contest's choice on validation (fundgrpo/evaluation/contest.py `fit_choice`) and the
parts of a served evaluator (fundgrpo/evaluation/contest.py), on simulated grade probabilities."""

from __future__ import annotations

import numpy as np
import pytest

from fundgrpo.evaluation import contest
from fundgrpo.methodology.answers import Prediction
from fundgrpo.methodology.records import PromptRecord

GRADES = [1, 2, 3, 4, 5]


def beliefs(expert: np.ndarray, noise: float, rng) -> list[list[float]]:
    """Grade probabilities centred on the expert's grade moved by noise (0: sure and right)."""
    centre = expert[:, None] + rng.normal(0, noise, (len(expert), 1))
    p = np.exp(-((np.arange(1, 6)[None, :] - centre) ** 2))
    return (p / p.sum(axis=1, keepdims=True)).round(6).tolist()


@pytest.fixture
def funds():
    rng = np.random.default_rng(0)
    expert = rng.integers(1, 6, 240)
    return expert, rng, [f"F{i // 2}" for i in range(len(expert))]


def choose(expert, lm, gbm, groups, **kw):
    written = [int(np.argmax(p)) + 1 for p in lm]
    return contest.fit_choice(expert.tolist(), written, {"score": lm}, GRADES, gbm=gbm, groups=groups, **kw)


def test_gradient_boosting_is_served_when_the_language_model_knows_nothing(funds):
    expert, rng, groups = funds
    noise = [rng.dirichlet(np.ones(5)).tolist() for _ in expert]
    fit = choose(expert, noise, beliefs(expert, 0.5, rng), groups)
    assert fit.rule.serves == "gbm" and fit.rule.weights == {"language_model": 0.0, "gradient_boosting": 1.0}
    assert set(fit.by_source) == {"lm", "gbm", "stack"}
    assert fit.options[fit.rule.chosen]["qwk"] > fit.options["lm/score/likeliest"]["qwk"] + 0.3


def test_the_language_model_is_served_when_it_knows_better(funds):
    expert, rng, groups = funds
    fit = choose(expert, beliefs(expert, 0.2, rng), [rng.dirichlet(np.ones(5)).tolist() for _ in expert], groups)
    assert fit.rule.serves in ("lm", "stack") and fit.rule.weights["language_model"] > 0.5


def test_the_choice_weighs_contradicted_grades_and_keeps_to_the_settings(funds):
    expert, rng, groups = funds
    lm, gbm = beliefs(expert, 0.8, rng), beliefs(expert, 0.7, rng)
    for cost in (0.0, 0.5):
        fit = choose(expert, lm, gbm, groups, contradiction_cost=cost)
        for option in fit.options.values():  # scored out of fold; the objective as documented
            assert option["objective"] == pytest.approx(option["qwk"] - cost * option["contradicted"], abs=1e-4)
        # the best plain option, or a fitted one that beats it by more than its noise (the next test)
        plain = fit.options[fit.choice["plain"]]["objective"]
        assert fit.options[fit.rule.chosen]["objective"] >= plain
    # a high cost of contradicting the probabilities shown: a rule that never does is chosen
    assert fit.options[fit.rule.chosen]["contradicted"] == 0.0
    only = choose(expert, lm, gbm, groups, serve="stack", grade_from="expected")
    assert only.rule.chosen == "stack/score/expected" and only.rule.serves == "stack" and len(only.rule.cutpoints) == 4
    with pytest.raises(ValueError, match="serve 'best'"):
        choose(expert, lm, gbm, groups, serve="best")


def test_the_parts_of_a_served_evaluator_and_its_departures(funds):
    expert, rng, groups = funds
    lm, gbm = beliefs(expert, 0.6, rng), beliefs(expert, 0.6, rng)
    fit = choose(expert, lm, gbm, groups, serve="stack")
    rows = [PromptRecord.example(expert_grade=int(y), gbm_probs=list(g)) for y, g in zip(expert, gbm)]
    preds = [
        Prediction(grade=(g := int(np.argmax(p)) + 1), written_grade=g, valid=True, beliefs={"score": p}) for p in lm
    ]
    preds[0] = Prediction(grade=None, written_grade=None, valid=False)  # an invalid answer
    parts = contest.parts(rows, preds, fit, GRADES)
    assert set(parts) == {"alone", "stack", "gbm_rule"}
    assert parts["alone"][0].grade is None and parts["gbm_rule"][0].grade is not None  # GBM needs no answer
    rule = fit.rule
    served = contest.applied(rows, preds, rule, GRADES)
    s = contest.served(rows, served, parts["gbm_rule"], rule, GRADES)
    apart = [i for i in range(len(rows)) if served[i].grade not in (None, parts["gbm_rule"][i].grade)]
    assert s["departures"]["n"] == len(apart) > 0
    assert s["departures"]["right"] == sum(served[i].grade == expert[i] for i in apart)
    assert (
        s["serves"] == "stack" and s["weights"] == rule.weights == fit.rule.weights and s["chosen"] == fit.rule.chosen
    )


def test_a_model_with_no_valid_answer_still_gets_gradient_boostings_rule(funds):
    expert, rng, groups = funds
    gbm = beliefs(expert, 0.5, rng)
    fit = contest.fit_choice(expert.tolist(), [None] * len(expert), {}, GRADES, "gbm", gbm=gbm, groups=groups)
    assert set(fit.by_source) == {"gbm"}
    rows = [PromptRecord.example(expert_grade=int(y), gbm_probs=list(g)) for y, g in zip(expert, gbm)]
    graded = contest.parts(rows, [Prediction(grade=None, written_grade=None)] * len(rows), fit, GRADES)["gbm_rule"]
    assert all(p.grade in GRADES for p in graded)


def test_a_fitted_rule_is_served_only_when_it_beats_the_plain_grade_by_more_than_its_noise(funds):
    """A decision rule fitted on validation (cut-points, pooling) is chosen over the plain likeliest grade
    only when its edge over the folds exceeds one standard error: on test, a rule chosen on 65 funds
    by a hair once lost to gradient boosting's plain likeliest grade."""
    expert, rng, groups = funds
    noise = [rng.dirichlet(np.ones(5)).tolist() for _ in expert]
    # gradient boosting one grade too high everywhere: cut-points on its expected grade undo that
    high = beliefs(np.minimum(expert + 1, 6), 0.3, rng)
    fit = choose(expert, noise, high, groups, serve="gbm")
    assert fit.rule.chosen == "gbm/score/expected"
    weighed = fit.choice[fit.rule.chosen]
    assert fit.choice["plain"] == "gbm/score/likeliest" and weighed["edge"] > weighed["se"] > 0
    # an honest gradient boosting on a few funds: whatever cut-points gain is within their noise
    few = slice(0, 60)
    fit = choose(expert[few], noise[few], beliefs(expert, 0.6, rng)[few], groups[few], serve="gbm")
    assert fit.rule.chosen == "gbm/score/likeliest" and fit.rule.grade_from == "likeliest" and not fit.rule.cutpoints
    weighed = fit.choice["gbm/score/expected"]
    assert weighed["over"] == "gbm/score/likeliest" and not weighed["edge"] > weighed["se"]
