"""A fair contest: every evaluator that gives grade probabilities gets the same decision rules,
chosen on validation, and the served evaluator is reported with its parts apart.

`fundgrpo.model.inference.fit_model` is the calibrate stage's work for one language model (its validation
answers, its grade probabilities, `calibration.fit_choice`); `parts` applies a fit's best option of each source
to test predictions (the language model alone, gradient boosting with its rule, the stack);
`served` says what the served grades are: how often gradient boosting's, and where they depart,
who was right.
"""

from __future__ import annotations

from dataclasses import replace

from fundgrpo.evaluation import calibration
from fundgrpo.methodology.answers import Prediction

# The calibrate record of a model with no valid answer on validation: nothing fitted, nothing chosen.
NO_FIT = {**calibration.DecisionRule().as_dict(), "chosen": "none: no valid answer on validation"}
# The backtest's names for the parts of a served evaluator (each with its own best rule).
PART_NAMES = {"lm": "alone", "gbm": "gbm_rule", "stack": "stack"}


def parts(rows: list[dict], preds: list[Prediction], fit: dict, grades: list[int]) -> dict[str, list[Prediction]]:
    """Each source's best validation-chosen option (`fit["by_source"]`) applied to a model's test
    predictions (which carry `beliefs`, as `inference.evaluate_model` reads them): "alone" (the language model's
    own belief), "stack" (pooled with gradient boosting) and "gbm_rule" (gradient boosting's
    probabilities under its rule, for every fund: it needs no answer).

    >>> gbm = calibration.DecisionRule("gbm", confidence="gbm", grade_from="likeliest")
    >>> fit = {"by_source": {"gbm": gbm.as_dict()}}
    >>> out = parts([{"gbm_probs": [0.2, 0.8]}], [{"grade": None, "beliefs": {}}], fit, [1, 2])
    >>> out["gbm_rule"][0]["grade"], out["gbm_rule"][0]["valid"]
    (2, True)
    """
    out: dict[str, list[Prediction]] = {}
    for source, part in fit.get("by_source", {}).items():
        rule = calibration.DecisionRule.of(part)
        if source == "gbm":  # gradient boosting alone: its probabilities, whatever the model answered
            alone = replace(rule, confidence="temperature")
            decided = [calibration.decide(r["gbm_probs"], None, alone, grades) for r in rows]
            # no answer to write: the grade under its rule is the grade it gives
            out[PART_NAMES[source]] = [
                Prediction(**d, written_grade=d["grade"], valid=True, score=None) for d in decided
            ]
        else:
            out[PART_NAMES[source]] = applied(rows, preds, rule, grades)
    return out


def applied(
    rows: list[dict], preds: list[Prediction], rule: calibration.DecisionRule, grades: list[int]
) -> list[Prediction]:
    """A model's predictions decided under `rule` from the beliefs read with them (the grade it wrote
    stays its `written_grade`).

    >>> rule = calibration.DecisionRule(grade_from="likeliest")
    >>> p = applied([{}], [{"grade": 1, "written_grade": 1, "beliefs": {"score": [0.3, 0.7]}}], rule, [1, 2])[0]
    >>> p["grade"], p["written_grade"]
    (2, 1)
    """
    out = []
    for r, p in zip(rows, preds):
        belief = (p.get("beliefs") or {}).get(rule.method)
        decided = calibration.decide(belief, p["written_grade"], rule, grades, r.get("gbm_probs"))
        out.append(Prediction(**{**p, **decided}))
    return out


def methods_needed(fits: dict[str, dict]) -> tuple[str, ...]:
    """The belief methods the fits (and their parts) read.

    >>> methods_needed({"grpo": {"method": "score", "by_source": {"lm": {"method": "grade"}}}})
    ('score', 'grade')
    """
    found = []
    for fit in fits.values():
        for f in (fit, fit.get("sft") or {}):  # the calibrate fit carries the SFT start's under `sft`
            found += [f.get("method")] + [part.get("method") for part in f.get("by_source", {}).values()]
    return tuple(dict.fromkeys(m for m in found if m))


def served(
    rows: list[dict], preds: list[Prediction], gbm_rule: list[Prediction], rule: calibration.DecisionRule,
    grades: list[int],
) -> dict:  # fmt: skip
    """What the served grades are: the fit's choice and weights, the share equal to gradient
    boosting's under its own rule, and the departures (funds where they differ): how many, how
    many the served grade got right and how many gradient boosting did (`precision`: the share of
    departures that were right); and the share the served probabilities contradict.

    >>> rows = [{"expert_grade": g} for g in (1, 2, 2, 1)]
    >>> mine = [{"grade": g, "probs": None} for g in (1, 2, 1, 1)]
    >>> theirs = [{"grade": g} for g in (1, 1, 2, 1)]
    >>> rule = calibration.DecisionRule("stack", confidence="pooled", pool=(1.0, 1.0), chosen="stack/score/expected")
    >>> s = served(rows, mine, theirs, rule, [1, 2])
    >>> s["equal_to_gbm_rule"], s["departures"]
    (0.5, {'n': 2, 'right': 1, 'gbm_right': 1, 'precision': 0.5})
    """
    same = [p["grade"] is not None and p["grade"] == q["grade"] for p, q in zip(preds, gbm_rule)]
    apart = [i for i, s in enumerate(same) if not s and preds[i]["grade"] is not None]
    right = sum(preds[i]["grade"] == rows[i]["expert_grade"] for i in apart)
    return {
        "serves": rule.serves,
        "chosen": rule.chosen,
        "weights": rule.weights,
        "equal_to_gbm_rule": round(sum(same) / len(same), 4) if same else None,
        "departures": {
            "n": len(apart),
            "right": int(right),
            "gbm_right": int(sum(gbm_rule[i]["grade"] == rows[i]["expert_grade"] for i in apart)),
            "precision": round(right / len(apart), 4) if apart else None,
        },
        "contradicted": calibration.contradicted([p["grade"] for p in preds], [p.get("probs") for p in preds], grades),
    }
