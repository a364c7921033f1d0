"""A fair contest: every evaluator that gives grade probabilities gets the same decision rules,
chosen on validation, and the served evaluator is reported with its parts apart.

`fit_choice` chooses on validation what the product serves and how it decides a grade (each option's
`calibration.DecisionRule` fitted out of fold, the simplest kept unless a fitted one earns its place);
`fundgrpo.model.inference.fit_model` runs it for one language model (its validation answers, its grade
probabilities). `parts` applies a fit's best option of each source to test predictions (the language
model alone, gradient boosting with its rule, the stack); `served` says what the served grades are: how
often gradient boosting's, and where they depart, who was right.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from fundgrpo.evaluation import calibration
from fundgrpo.evaluation.agreement import filled, one_metric
from fundgrpo.methodology.answers import Prediction
from fundgrpo.methodology.records import PromptRecord, expert_grades
from fundgrpo.params import GRADE_FROM

# The calibrate record of a model with no valid answer on validation: nothing fitted, nothing chosen.
NO_FIT = calibration.CalibrationFit(calibration.DecisionRule(chosen="none: no valid answer on validation"))
# The backtest's names for the parts of a served evaluator (each with its own best rule).
PART_NAMES = {"lm": "alone", "gbm": "gbm_rule", "stack": "stack"}


def parts(
    rows: list[PromptRecord], preds: list[Prediction], fit: calibration.CalibrationFit, grades: list[int]
) -> dict[str, list[Prediction]]:
    """Each source's best validation-chosen option (`fit.by_source`) applied to a model's test
    predictions (which carry `beliefs`, as `inference.evaluate_model` reads them): "alone" (the language model's
    own belief), "stack" (pooled with gradient boosting) and "gbm_rule" (gradient boosting's
    probabilities under its rule, for every fund: it needs no answer).

    >>> gbm = calibration.DecisionRule("gbm", confidence="gbm", grade_from="likeliest")
    >>> fit = calibration.CalibrationFit(calibration.DecisionRule(), by_source={"gbm": gbm})
    >>> unanswered = [Prediction(grade=None, written_grade=None)]
    >>> out = parts([PromptRecord.example(gbm_probs=[0.2, 0.8])], unanswered, fit, [1, 2])
    >>> out["gbm_rule"][0].grade, out["gbm_rule"][0].valid
    (2, True)
    """
    out: dict[str, list[Prediction]] = {}
    for source, rule in fit.by_source.items():
        if source == "gbm":  # gradient boosting alone: its probabilities, whatever the model answered
            alone = replace(rule, confidence="temperature")
            decided = [calibration.decide(r.gbm_probs, None, alone, grades) for r in rows]
            # no answer to write: the grade under its rule is the grade it gives
            out[PART_NAMES[source]] = [
                Prediction(grade=d["grade"], written_grade=d["grade"], valid=True).decided(d) for d in decided
            ]
        else:
            out[PART_NAMES[source]] = applied(rows, preds, rule, grades)
    return out


def applied(
    rows: list[PromptRecord], preds: list[Prediction], rule: calibration.DecisionRule, grades: list[int]
) -> list[Prediction]:
    """A model's predictions decided under `rule` from the beliefs read with them (the grade it wrote
    stays its `written_grade`).

    >>> rule = calibration.DecisionRule(grade_from="likeliest")
    >>> wrote = Prediction(grade=1, written_grade=1, beliefs={"score": [0.3, 0.7]})
    >>> p = applied([PromptRecord.example()], [wrote], rule, [1, 2])[0]
    >>> p.grade, p.written_grade
    (2, 1)
    """
    return [
        p.decided(calibration.decide(p.beliefs.get(rule.method), p.written_grade, rule, grades, r.gbm_probs))
        for r, p in zip(rows, preds)
    ]


def methods_needed(fits: Iterable[calibration.CalibrationFit]) -> tuple[str, ...]:
    """The belief methods the fits (their SFT start's, and each source's rule) read.

    >>> lm = calibration.DecisionRule(method="grade")
    >>> methods_needed([calibration.CalibrationFit(calibration.DecisionRule(), by_source={"lm": lm})])
    ('score', 'grade')
    """
    found = []
    for fit in fits:
        for f in (fit, *([fit.sft] if fit.sft else [])):
            found += [f.rule.method] + [rule.method for rule in f.by_source.values()]
    return tuple(dict.fromkeys(m for m in found if m))


def served(
    rows: list[PromptRecord], preds: list[Prediction], gbm_rule: list[Prediction], rule: calibration.DecisionRule,
    grades: list[int],
) -> dict:  # fmt: skip
    """What the served grades are: the fit's choice and weights, the share equal to gradient
    boosting's under its own rule, and the departures (funds where they differ): how many, how
    many the served grade got right and how many gradient boosting did (`precision`: the share of
    departures that were right); and the share the served probabilities contradict.

    >>> rows = [PromptRecord.example(expert_grade=g) for g in (1, 2, 2, 1)]
    >>> mine = [Prediction(grade=g, written_grade=g) for g in (1, 2, 1, 1)]
    >>> theirs = [Prediction(grade=g, written_grade=g) for g in (1, 1, 2, 1)]
    >>> rule = calibration.DecisionRule("stack", confidence="pooled", pool=(1.0, 1.0), chosen="stack/score/expected")
    >>> s = served(rows, mine, theirs, rule, [1, 2])
    >>> s["equal_to_gbm_rule"], s["departures"]
    (0.5, {'n': 2, 'right': 1, 'gbm_right': 1, 'precision': 0.5})
    """
    experts = expert_grades(rows)
    same = [p.grade is not None and p.grade == q.grade for p, q in zip(preds, gbm_rule)]
    apart = [i for i, s in enumerate(same) if not s and preds[i].grade is not None]
    right = sum(preds[i].grade == experts[i] for i in apart)
    return {
        "serves": rule.serves,
        "chosen": rule.chosen,
        "weights": rule.weights,
        "equal_to_gbm_rule": round(sum(same) / len(same), 4) if same else None,
        "departures": {
            "n": len(apart),
            "right": int(right),
            "gbm_right": int(sum(gbm_rule[i].grade == experts[i] for i in apart)),
            "precision": round(right / len(apart), 4) if apart else None,
        },
        "contradicted": calibration.contradicted([p.grade for p in preds], [p.probs for p in preds], grades),
    }


def fit_option(
    source, method, grade_from, expert, written, lm, gbm, grades, rows: list[int]
) -> calibration.DecisionRule:
    """One option's rule fitted on the funds `rows` (indices): the belief's transform by log-likelihood
    (a temperature; for a stack the pooling exponents) and, for the expected grade, its cut-points."""
    index = [grades.index(int(expert[i])) for i in rows]
    rule = calibration.DecisionRule(source, method, calibration.KIND[source], grade_from=grade_from)
    if source == "lm":
        rule = replace(rule, temperature=calibration.fit_temperature([lm[i] for i in rows], index))
    elif source == "gbm":
        rule = replace(rule, temperature=calibration.fit_temperature([gbm[i] for i in rows], index))
    else:
        rule = replace(rule, pool=calibration.fit_pool([lm[i] for i in rows], [gbm[i] for i in rows], index))
    if grade_from == "expected":
        if source == "gbm":  # its probabilities exist where the language model gave no answer too
            probs = calibration.temperature_probs([gbm[i] for i in rows], rule.temperature)
        else:
            probs = np.asarray(
                [calibration.decide(lm[i], written[i], rule, grades, gbm[i] if gbm else None)["probs"] for i in rows]
            )
        found = calibration.fit_cutpoints(calibration.expected_grade(probs, grades), [expert[i] for i in rows], grades)
        rule = replace(rule, cutpoints=tuple(found))
    return rule


def folds_of(groups: list[str], k: int) -> list[int]:
    """A fold for each fund from a hash of its group (fund id): share classes of one fund together.

    >>> folds_of(["a", "b", "a"], 5)[0] == folds_of(["a", "b", "a"], 5)[2]
    True
    """
    return [int(hashlib.sha1(str(g).encode()).hexdigest(), 16) % k for g in groups]


def fit_choice(
    expert,
    written,
    beliefs: dict[str, list],
    grades: list[int],
    serve: str = "auto",
    grade_from: str = "auto",
    bins: int = 10,
    gbm: list | None = None,
    groups: list[str] | None = None,
    folds: int = 5,
    contradiction_cost: float = 0.1,
) -> calibration.CalibrationFit:
    """Choose on validation what the product serves and how it decides a grade. Options: each
    source (`calibration.SOURCES`: the language model's belief read by each method in `beliefs`, gradient
    boosting's probabilities `gbm`, or the two pooled) with each decision rule (`GRADE_FROM`: the
    written grade, the likeliest, the expected grade cut at fitted points). Each option is scored by
    cross-validation over the validation funds (`folds` by fund, `groups`): its transform and
    cut-points fitted on the other folds, so a rule with more fitted parts gains no in-sample edge.
    The objective is QWK - `contradiction_cost` x the share of grades the served probabilities
    contradict (`contradicted`); among the options `serve` and `grade_from` allow ("auto": all) the
    best plain one (no pooling, no cut-points) is served unless a fitted one beats it by more than one
    standard error over the folds (`simplest_within_noise`; `choice` records what was weighed). It and
    the option each source would serve (`by_source`, what the backtest reports apart) are then
    refitted on every validation fund. An invalid answer (None) keeps no grade under any option.

    >>> sure = {"score": [[0.99, 0.01], [0.01, 0.99], [0.99, 0.01], [0.99, 0.01]] * 3}
    >>> fit = fit_choice([1, 2, 2, 1] * 3, [1, 2, 1, 1] * 3, sure, [1, 2], grade_from="likeliest", folds=2)
    >>> fit.rule.serves, fit.rule.method, fit.rule.confidence, fit.rule.temperature > 1
    ('lm', 'score', 'temperature', True)
    """
    if serve not in ("auto", *calibration.SOURCES) or grade_from not in ("auto", *GRADE_FROM):
        raise ValueError(
            f"calibrate: serve {serve!r} / grade_from {grade_from!r} not among {('auto', *calibration.SOURCES)} / "
            f"{('auto', *GRADE_FROM)}"
        )
    n = len(expert)
    groups = list(groups) if groups is not None else [str(i) for i in range(n)]
    fold = folds_of(groups, max(2, folds))
    options: dict[str, dict] = {}
    for source, method in candidates_of(beliefs, written, gbm):
        lm = beliefs.get(method, [None] * n)
        # the funds a source's fit learns from: gradient boosting's probabilities exist for every fund
        seen = [i for i in range(n) if source == "gbm" or (lm[i] is not None and written[i] is not None)]
        for way in GRADE_FROM:
            if way == "greedy" and source == "gbm":
                continue  # the language model's written grade is not gradient boosting's
            options[f"{source}/{method}/{way}"] = cross_validated(
                (source, method, way), expert, written, lm, gbm=gbm, grades=grades, seen=seen, fold=fold, bins=bins,
                contradiction_cost=contradiction_cost,
            )  # fmt: skip

    def best(keys):  # on a tie, the option with fewer fitted parts (no pooling, no cut-points), then Brier
        return max(keys, key=lambda k: (options[k]["objective"], -fitted_parts(options[k]), -options[k]["brier"]))

    allowed = allowed_options(options, serve, grade_from)

    def refit(key: str) -> calibration.DecisionRule:  # the option fitted on every validation fund it can read
        o = options[key]
        lm = beliefs.get(o["method"], [None] * n)
        seen = [i for i in range(n) if o["serves"] == "gbm" or (written[i] is not None and lm[i] is not None)]
        rule = fit_option(
            o["serves"], o["method"], o["grade_from"], expert, written=written, lm=lm, gbm=gbm, grades=grades, rows=seen
        )
        return replace(rule, chosen=key)

    key, why = simplest_within_noise(options, allowed, best)
    by_source = {
        s: refit(simplest_within_noise(options, [k for k in options if options[k]["serves"] == s], best)[0])
        for s in calibration.SOURCES
        if any(options[k]["serves"] == s for k in options)
    }
    return calibration.CalibrationFit(
        refit(key), by_source=by_source, options=options, choice=why, folds=folds, contradiction_cost=contradiction_cost
    )


def allowed_options(options: dict[str, dict], serve: str, grade_from: str) -> list[str]:
    """The options `calibrate.serve` and `calibrate.grade_from` allow ("auto": all); none is an error."""
    allowed = [
        k for k, o in options.items() if serve in ("auto", o["serves"]) and grade_from in ("auto", o["grade_from"])
    ]
    if not allowed:
        raise ValueError(
            f"calibrate: no option with serve {serve!r} and grade_from {grade_from!r} (options: {sorted(options)})"
        )
    return allowed


def candidates_of(beliefs: dict[str, list], written, gbm: list | None) -> list[tuple[str, str]]:
    """(source, belief method) pairs to weigh: the language model's belief by each method that read any
    valid answer, pooled with gradient boosting's where given, and gradient boosting's alone."""
    candidates = []
    for method, rows in beliefs.items():
        if any(r is not None and written[i] is not None for i, r in enumerate(rows)):
            candidates += [("lm", method)] + ([("stack", method)] if gbm is not None else [])
    if gbm is not None:  # served beside the language model's evaluation: a grade where it answered
        candidates.append(("gbm", candidates[0][1] if candidates else next(iter(beliefs), "score")))
    if not candidates:
        raise ValueError("no valid answer with readable grade probabilities to calibrate on")
    return candidates


def cross_validated(
    option: tuple[str, str, str], expert, written, lm: list, gbm: list | None, grades: list[int], seen: list[int],
    fold: list[int], bins: int, contradiction_cost: float,
) -> dict[str, Any]:  # fmt: skip
    """One option (source, method, decision rule) scored out of fold: on each fold's funds, fitted on
    the other folds' `seen` funds; its agreement, contradictions, objective per fold and calibration."""
    source, method, way = option
    n = len(expert)
    predicted: list = [None] * n
    probs: list = [None] * n
    for k in sorted(set(fold)):
        train = [i for i in seen if fold[i] != k]
        held = [i for i in range(n) if fold[i] == k]
        if len(train) < 2 or not held:
            continue
        rule = fit_option(source, method, way, expert, written=written, lm=lm, gbm=gbm, grades=grades, rows=train)
        for i in held:
            d = calibration.decide(lm[i], written[i], rule, grades, gbm[i] if gbm is not None else None)
            predicted[i], probs[i] = d["grade"], d["probs"]
    exact, qwk = _agreement(expert, predicted, grades)
    conf = [p[grades.index(int(g))] if p is not None and g is not None else 0.0 for g, p in zip(predicted, probs)]
    against = calibration.contradicted(predicted, probs, grades)
    by_fold = [  # the objective on each fold's held-out funds: how much the option's edge varies
        _objective(expert, predicted, probs, grades, [i for i in range(n) if fold[i] == k], contradiction_cost)
        for k in sorted(set(fold))
    ]
    return {
        "serves": source, "method": method, "grade_from": way, "exact": exact, "qwk": qwk,
        "contradicted": against, "objective": round(qwk - contradiction_cost * against, 4),
        "fold_objective": by_fold, **calibration.summary(expert, predicted, probs, conf, grades, bins),
    }  # fmt: skip


def fitted_parts(option: dict[str, Any]) -> int:
    """How many parts of an option are fitted on validation beyond a temperature: the pooling weights
    of a stack, the cut-points of the expected grade (0: a plain likeliest or written grade).

    >>> fitted_parts({"serves": "stack", "grade_from": "expected"})
    2
    >>> fitted_parts({"serves": "gbm", "grade_from": "likeliest"})
    0
    """
    return int(option["serves"] == "stack") + int(option["grade_from"] == "expected")


def edge(better: list[float], base: list[float]) -> tuple[float, float]:
    """(mean, standard error) over folds of one option's objective less another's, paired by fold;
    the standard error is infinite with fewer than two folds to tell.

    >>> edge([0.8, 0.7, 0.9], [0.7, 0.7, 0.8])
    (0.0667, 0.0333)
    >>> edge([0.8], [0.7])
    (0.1, inf)
    """
    d = np.asarray(better, dtype=float) - np.asarray(base, dtype=float)
    d = d[np.isfinite(d)]
    if len(d) < 2:
        return (round(float(d.mean()), 4) if len(d) else 0.0), float("inf")
    return round(float(d.mean()), 4), round(float(d.std(ddof=1) / np.sqrt(len(d))), 4)


def simplest_within_noise(options: dict[str, dict], keys: list[str], best) -> tuple[str, dict[str, Any]]:
    """The option served among `keys`: the best with no fitted part (a plain likeliest or written grade),
    unless an option with more fitted parts (pooling, cut-points) beats it by more than one standard
    error over the folds (`edge`), level by level: a rule fitted on a few validation funds must earn its
    place by more than its own uncertainty. With what was weighed (`why`: the simpler option, the edge).

    >>> o = {"gbm/score/likeliest": {"serves": "gbm", "grade_from": "likeliest", "objective": 0.80,
    ...                               "fold_objective": [0.8, 0.7, 0.9]},
    ...      "gbm/score/expected": {"serves": "gbm", "grade_from": "expected", "objective": 0.81,
    ...                             "fold_objective": [0.9, 0.6, 0.93]}}
    >>> pick = lambda ks: max(ks, key=lambda k: o[k]["objective"])
    >>> simplest_within_noise(o, list(o), pick)[0]  # +0.01 on average, give or take 0.05: not earned
    'gbm/score/likeliest'
    >>> o["gbm/score/expected"]["fold_objective"] = [0.85, 0.75, 0.95]
    >>> simplest_within_noise(o, list(o), pick)[0]
    'gbm/score/expected'
    """
    levels = sorted({fitted_parts(options[k]) for k in keys})
    chosen = best([k for k in keys if fitted_parts(options[k]) == levels[0]])
    why: dict[str, Any] = {"rule": "one standard error over folds", "plain": chosen}
    for level in levels[1:]:
        earned = []
        for k in keys:
            if fitted_parts(options[k]) == level:
                mean, se = edge(options[k]["fold_objective"], options[chosen]["fold_objective"])
                why[k] = {"edge": mean, "se": se if np.isfinite(se) else None, "over": chosen}
                if mean > se:
                    earned.append(k)
        if earned:
            chosen = best(earned)
    why["chosen"] = chosen
    return chosen, why


def _objective(expert, predicted, probs, grades: list[int], rows: list[int], cost: float) -> float:
    """An option's objective (QWK less `cost` x the contradicted share) on the funds `rows`; NaN for none."""
    if not rows:
        return float("nan")
    _, qwk = _agreement([expert[i] for i in rows], [predicted[i] for i in rows], grades)
    return round(
        qwk - cost * calibration.contradicted([predicted[i] for i in rows], [probs[i] for i in rows], grades), 4
    )


def _agreement(expert, predicted, grades: list[int]) -> tuple[float, float]:
    """(exact, QWK) with an invalid answer (None) as a miss."""
    y = np.asarray(expert, dtype=int)
    p = filled(expert, predicted, grades)
    return round(one_metric(y, p, grades, "exact"), 4), round(one_metric(y, p, grades, "qwk"), 4)
