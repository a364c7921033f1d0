"""How far an evaluator's confidence can be trusted: calibration error, Brier score, reliability,
selective accuracy; the fits that improve them on validation (temperature, pooling, cut-points); and
the decision rule that serves a grade from them (`DecisionRule`, `decide`; `contest.fit_choice`
chooses one).

Conventions: `probs` is (funds, grades), one column per methodology grade in order; `confidence`
is the probability an evaluator gives to the grade it reports; an invalid answer (no grade, no
probabilities) has confidence 0 and counts as wrong. Everything here is plain numpy: the
bootstrap calls these functions thousands of times.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, TypedDict

import numpy as np

from fundgrpo.evaluation.agreement import filled, one_metric

COVERAGES = (0.5, 0.7, 0.9)


def ece(confidence, correct, bins: int = 10) -> float:
    """Expected calibration error: the funds-weighted mean |accuracy - confidence| over equal-width bins.

    >>> ece([0.9, 0.9, 0.9, 0.9], [1, 1, 1, 0])
    0.15
    >>> ece([1.0, 0.0], [1, 0])
    0.0
    """
    c, y = np.asarray(confidence, dtype=float), np.asarray(correct, dtype=float)
    which = np.minimum((c * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        inside = which == b
        if inside.any():
            total += inside.sum() * abs(y[inside].mean() - c[inside].mean())
    return round(float(total / len(c)), 6)


def brier(probs, expert_index) -> float:
    """Multi-class Brier score: mean over funds of the squared distance between the probabilities
    and the one-hot expert grade (0 perfect, 2 worst). A proper scoring rule: it cannot be improved
    by reporting other than what one believes.

    >>> brier([[1.0, 0.0], [0.5, 0.5]], [0, 1])
    0.25
    """
    p = np.asarray(probs, dtype=float)
    onehot = np.zeros_like(p)
    onehot[np.arange(len(p)), np.asarray(expert_index, dtype=int)] = 1.0
    return round(float(((p - onehot) ** 2).sum(axis=1).mean()), 6)


def reliability(confidence, correct, bins: int = 10) -> list[dict[str, Any]]:
    """One row per non-empty bin: its range, mean confidence, accuracy and count (`dvc plots`).

    >>> for row in reliability([0.95, 0.91, 0.15], [1, 0, 0], bins=5): print(row)
    {'bin': '0.0-0.2', 'confidence': 0.15, 'accuracy': 0.0, 'funds': 1}
    {'bin': '0.8-1.0', 'confidence': 0.93, 'accuracy': 0.5, 'funds': 2}
    """
    c, y = np.asarray(confidence, dtype=float), np.asarray(correct, dtype=float)
    which = np.minimum((c * bins).astype(int), bins - 1)
    rows = []
    for b in range(bins):
        inside = which == b
        if inside.any():
            rows.append(
                {
                    "bin": f"{b / bins:.1f}-{(b + 1) / bins:.1f}",
                    "confidence": round(float(c[inside].mean()), 4),
                    "accuracy": round(float(y[inside].mean()), 4),
                    "funds": int(inside.sum()),
                }
            )
    return rows


def most_confident(confidence, coverage: float) -> np.ndarray:
    """Indices of the `coverage` share of funds with the highest confidence (ties broken by order).

    >>> most_confident([0.2, 0.9, 0.5, 0.7], 0.5).tolist()
    [1, 3]
    """
    c = np.asarray(confidence, dtype=float)
    keep = max(1, int(round(coverage * len(c))))
    return np.sort(np.argsort(-c, kind="stable")[:keep])


def selective(expert, predicted, confidence, grades: list[int], coverages=COVERAGES) -> dict[str, float]:
    """Exact and QWK on the most confident share of funds, for each coverage; an invalid answer
    (predicted None) is wrong and least confident.

    >>> s = selective([1, 2, 3, 3], [1, 2, 3, 1], [0.9, 0.8, 0.7, 0.1], [1, 2, 3], coverages=(0.75, 1.0))
    >>> s["exact_top75"], s["exact_top100"]
    (1.0, 0.75)
    """
    y = np.asarray(expert, dtype=int)
    p = filled(expert, predicted, grades)
    out = {}
    for cov in coverages:
        rows = most_confident(confidence, cov)
        tag = round(cov * 100)
        out[f"exact_top{tag}"] = round(one_metric(y[rows], p[rows], grades, "exact"), 4)
        out[f"qwk_top{tag}"] = round(one_metric(y[rows], p[rows], grades, "qwk"), 4)
    return out


def temperature_probs(probs, temperature: float) -> np.ndarray:
    """Probabilities sharpened (T < 1) or softened (T > 1): p_g^(1/T), renormalised.

    >>> temperature_probs([[0.8, 0.2]], 1.0).round(3).tolist(), temperature_probs([[0.8, 0.2]], 2.0).round(3).tolist()
    ([[0.8, 0.2]], [[0.667, 0.333]])
    """
    p = np.clip(np.asarray(probs, dtype=float), 1e-12, 1.0)
    logits = np.log(p) / temperature
    logits -= logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    return e / e.sum(axis=1, keepdims=True)


TEMPERATURES = np.exp(np.linspace(np.log(0.05), np.log(20.0), 121))


def fit_temperature(probs, expert_index) -> float:
    """The temperature (on a log grid, 0.05-20) with the lowest negative log-likelihood of the
    experts' grades: plain temperature scaling, fitted on validation.

    >>> p = [[0.99, 0.01]] * 6 + [[0.01, 0.99]] * 4   # over-sure: right on 7 of 10
    >>> fit_temperature(p, [0] * 5 + [1] + [1] * 3 + [0]) > 1.5
    True
    """
    p = np.asarray(probs, dtype=float)
    y = np.asarray(expert_index, dtype=int)
    best, best_nll = 1.0, np.inf
    for t in TEMPERATURES:
        q = temperature_probs(p, t)
        nll = -np.mean(np.log(np.clip(q[np.arange(len(y)), y], 1e-12, 1.0)))
        if nll < best_nll - 1e-12:
            best, best_nll = float(t), nll
    return round(best, 4)


def expected_grade(probs, grades: list[int]) -> np.ndarray:
    """Probability-weighted mean grade.

    >>> expected_grade([[0.5, 0.5, 0.0]], [1, 2, 3]).tolist()
    [1.5]
    """
    return np.asarray(probs, dtype=float) @ np.asarray(grades, dtype=float)


def cut_expected(expected, cutpoints: list[float], grades: list[int]) -> np.ndarray:
    """The grade of each expected value: grades[i] between cutpoints[i-1] and cutpoints[i].

    >>> cut_expected([1.2, 1.6, 2.9], [1.5, 2.5], [1, 2, 3]).tolist()
    [1, 2, 3]
    """
    return np.asarray(grades)[np.searchsorted(np.asarray(cutpoints), np.asarray(expected, dtype=float), side="right")]


def fit_cutpoints(expected, expert, grades: list[int], rounds: int = 3) -> list[float]:
    """Cut-points on the expected grade that maximise QWK with the experts (coordinate search from
    the midpoints between grades, each point on a grid between its neighbours): the QWK-optimal
    rescaling of an expected grade, fitted on validation.

    >>> e = np.array([1.1, 1.2, 1.45, 1.9, 2.2, 2.4, 2.8, 2.9])
    >>> fit_cutpoints(e, [1, 1, 2, 2, 2, 3, 3, 3], [1, 2, 3])[0] < 1.45
    True
    """
    x = np.asarray(expected, dtype=float)
    y = np.asarray(expert, dtype=int)
    points = [(a + b) / 2 for a, b in zip(grades[:-1], grades[1:])]

    def score(ps: list[float]) -> float:
        return one_metric(y, cut_expected(x, ps, grades), grades, "qwk")

    best = score(points)
    for _ in range(rounds):
        for i in range(len(points)):
            low = points[i - 1] if i > 0 else grades[0]
            high = points[i + 1] if i + 1 < len(points) else grades[-1]
            for value in np.linspace(low, high, 41)[1:-1]:
                trial = points[:i] + [float(value)] + points[i + 1 :]
                s = score(trial)
                if s > best + 1e-12:
                    best, points = s, trial
    return [round(p, 4) for p in points]


def summary(expert, predicted, probs, confidence, grades: list[int], bins: int = 10) -> dict[str, float]:
    """ECE and top-label Brier of the confidence, multi-class Brier of the probabilities (an invalid
    answer: uniform probabilities, confidence 0), and the selective figures.

    >>> s = summary([1, 2], [1, None], [[0.9, 0.1], None], [0.9, 0.0], [1, 2])
    >>> s["ece"], s["brier"]
    (0.05, 0.26)
    """
    g = len(grades)
    correct = [p is not None and int(p) == int(y) for y, p in zip(expert, predicted)]
    full = np.array([row if row is not None else [1.0 / g] * g for row in probs], dtype=float)
    conf = np.asarray(confidence, dtype=float)
    out = {
        "ece": round(ece(conf, correct, bins), 4),
        "brier": round(brier(full, [grades.index(int(y)) for y in expert]), 4),
        "brier_top": round(float(np.mean((conf - np.asarray(correct, dtype=float)) ** 2)), 4),
        "confidence_mean": round(float(conf.mean()), 4),
    }
    out.update(selective(expert, predicted, conf, grades))
    return out


# ------------------------------------------------------------------ the product's confidence


def stated_probs(confidence: float, grade: int, grades: list[int]) -> list[float]:
    """A stated confidence as grade probabilities: the confidence on the stated grade, the rest
    shared evenly (all a single number says).

    >>> stated_probs(0.7, 2, [1, 2, 3])
    [0.15, 0.7, 0.15]
    """
    rest = (1.0 - confidence) / (len(grades) - 1) if len(grades) > 1 else 0.0
    return [round(confidence if g == grade else rest, 6) for g in grades]


def pooled(probs, gbm, a: float, b: float) -> np.ndarray:
    """Logarithmic pooling of the language model's belief with the statistical estimate's class
    probabilities: p proportional to p_lm^a x p_gbm^b (a = 1, b = 0: the belief as it is).

    >>> pooled([[0.5, 0.5]], [[0.9, 0.1]], 1.0, 1.0).round(3).tolist()
    [[0.9, 0.1]]
    """
    lp = a * np.log(np.clip(np.asarray(probs, dtype=float), 1e-12, 1.0))
    lp = lp + b * np.log(np.clip(np.asarray(gbm, dtype=float), 1e-12, 1.0))
    lp -= lp.max(axis=1, keepdims=True)
    e = np.exp(lp)
    return e / e.sum(axis=1, keepdims=True)


POOL_GRID = np.round(np.linspace(0.0, 2.0, 11), 2)


def fit_pool(probs, gbm, expert_index) -> tuple[float, float]:
    """(a, b) on a 0-2 grid with the lowest negative log-likelihood of the experts' grades under
    `pooled`, fitted on validation (with the statistical estimates out of fold there, as for tests).

    >>> lm, gbm = [[0.6, 0.4], [0.6, 0.4], [0.4, 0.6]], [[0.9, 0.1], [0.8, 0.2], [0.2, 0.8]]
    >>> a, b = fit_pool(lm, gbm, [0, 0, 1])
    >>> b > 0
    True
    """
    y = np.asarray(expert_index, dtype=int)
    best, best_nll = (1.0, 0.0), np.inf
    for a in POOL_GRID:
        for b in POOL_GRID:
            if a == 0 and b == 0:
                continue
            q = pooled(probs, gbm, a, b)
            nll = -np.mean(np.log(np.clip(q[np.arange(len(y)), y], 1e-12, 1.0)))
            if nll < best_nll - 1e-12:
                best, best_nll = (float(a), float(b)), nll
    return best


class GradeDecided(TypedDict):
    """What a decision rule sets on a prediction (`methodology.answers.Prediction`'s served fields)."""

    grade: int | None
    probs: list[float] | None
    expected_grade: float | None
    confidence: float | None


# What the product can serve (`calibrate.serve`): the language model's own belief, gradient
# boosting's probabilities, or the two pooled (a stack). Each with its decision rule.
SOURCES = ("lm", "gbm", "stack")
KIND = {"lm": "temperature", "gbm": "gbm", "stack": "pooled"}  # `decide`'s transform for each


@dataclass(frozen=True)
class DecisionRule:
    """A fitted decision rule: whose grade probabilities an evaluation serves and how its grade is decided
    from them (`decide`). `fit_option` fits one on validation funds; the calibrate stage's record
    (`contest.fit_choice`, models/calibration.json) holds the one it chose at its top and each source's under
    `by_source`; a registered model carries it in its metadata. The default is the belief as read at
    the score, the written grade kept: what an evaluator gets where nothing was fitted.

    >>> rule = DecisionRule("stack", confidence="pooled", pool=(0.2, 0.6), grade_from="expected", cutpoints=(1.5,))
    >>> DecisionRule.of(rule.as_dict()) == rule, rule.weights
    (True, {'language_model': 0.25, 'gradient_boosting': 0.75})
    >>> DecisionRule.of({"confidence": "pooled", "pool": [1, 1], "options": {}}).serves  # an older record
    'stack'
    """

    serves: str = "lm"  # SOURCES: "lm" the language model's belief, "gbm" gradient boosting's, "stack" pooled
    method: str = "score"  # where the language model's belief is read (`fundgrpo.model.belief.METHODS`, "stated")
    confidence: str = "token"  # the belief's transform: "token" (as read), "temperature", "pooled", "gbm"
    temperature: float = 1.0  # above 1 softens the probabilities, below 1 sharpens them
    pool: tuple[float, float] | None = None  # a stack's pooling exponents (language model, gradient boosting)
    grade_from: str = "greedy"  # GRADE_FROM: the written grade, the likeliest, the expected grade cut
    cutpoints: tuple[float, ...] | None = None  # where the expected grade is cut between grades ("expected")
    chosen: str | None = None  # the option's name on validation ("stack/score/expected"); None: not chosen

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> DecisionRule:
        """The rule a JSON object holds at its top: the calibrate stage's, a registered model's, `as_dict`'s. Other
        keys are the object's own; one written before `serves` was named says it by its transform."""
        kind = data.get("confidence", "token")
        serves = data.get("serves") or {"pooled": "stack", "gbm": "gbm"}.get(kind, "lm")
        pool, cut = data.get("pool"), data.get("cutpoints")
        return cls(
            serves=serves, method=data.get("method", "score"), confidence=kind,
            temperature=float(data.get("temperature", 1.0)), pool=(float(pool[0]), float(pool[1])) if pool else None,
            grade_from=data.get("grade_from", "greedy"), cutpoints=tuple(map(float, cut)) if cut else None,
            chosen=data.get("chosen"),
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        """The rule as a record stores it (JSON), with its `weights` for a reader of the file."""
        return {
            "serves": self.serves, "method": self.method, "confidence": self.confidence,
            "temperature": self.temperature, "pool": list(self.pool) if self.pool else None,
            "grade_from": self.grade_from, "cutpoints": list(self.cutpoints) if self.cutpoints else None,
            "chosen": self.chosen, "weights": self.weights,
        }  # fmt: skip

    @property
    def weights(self) -> dict[str, float]:
        """How much of the served belief is the language model's and how much gradient boosting's: the
        pooling exponents' shares (1/0 for the language model alone, 0/1 for gradient boosting)."""
        if self.confidence == "pooled" and self.pool:
            a, b = self.pool
            return {"language_model": round(a / (a + b), 4), "gradient_boosting": round(b / (a + b), 4)}
        share = 0.0 if self.confidence == "gbm" else 1.0
        return {"language_model": share, "gradient_boosting": round(1.0 - share, 4)}


@dataclass(frozen=True)
class CalibrationFit:
    """What `calibrate` chose on validation for one model (`contest.fit_choice`): the decision rule it serves,
    the rule each source would serve (`by_source`: what the backtest reports apart), every option weighed with
    its cross-validated figures and why the served one won, and the model's validation figures; the policy's
    carries its SFT start's (`sft`, without its options). `as_dict` is models/calibration.json, the served
    rule's fields at its top (so `DecisionRule.of` reads the file as it is); `of` reads it back.

    >>> fit = CalibrationFit(DecisionRule(chosen="lm/score/greedy"), by_source={"gbm": DecisionRule("gbm")})
    >>> CalibrationFit.of(fit.as_dict()) == fit, CalibrationFit.of(DecisionRule().as_dict()).by_source
    (True, {})
    """

    rule: DecisionRule  # the rule served
    by_source: Mapping[str, DecisionRule] = field(default_factory=dict)  # SOURCES -> the rule it would serve
    options: Mapping[str, dict[str, Any]] = field(default_factory=dict)  # option -> its cross-validated figures
    choice: Mapping[str, Any] = field(default_factory=dict)  # why the served option won (`simplest_within_noise`)
    folds: int | None = None  # the folds by fund the options were scored over
    contradiction_cost: float | None = None  # the objective's price of a contradicted grade
    model: str | None = None  # the model folder it was fitted for
    validation_funds: int | None = None
    validation: Mapping[str, Any] = field(default_factory=dict)  # the model's validation figures
    sft: CalibrationFit | None = None  # the SFT start's fit, beside the policy's

    def as_dict(self) -> dict[str, Any]:
        """The fit as JSON: the served rule's fields, then every field of the fit, always."""
        return {
            **self.rule.as_dict(), "by_source": {k: r.as_dict() for k, r in self.by_source.items()},
            "options": dict(self.options), "choice": dict(self.choice), "folds": self.folds,
            "contradiction_cost": self.contradiction_cost, "model": self.model,
            "validation_funds": self.validation_funds, "validation": dict(self.validation),
            "sft": self.sft.as_dict() if self.sft is not None else None,
        }  # fmt: skip

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> CalibrationFit:
        """The fit `as_dict` wrote; a bare rule (a registered model's metadata) reads as a fit of that rule alone."""
        return cls(
            rule=DecisionRule.of(data),
            by_source={k: DecisionRule.of(v) for k, v in (data.get("by_source") or {}).items()},
            options=data.get("options") or {}, choice=data.get("choice") or {}, folds=data.get("folds"),
            contradiction_cost=data.get("contradiction_cost"), model=data.get("model"),
            validation_funds=data.get("validation_funds"), validation=data.get("validation") or {},
            sft=cls.of(data["sft"]) if data.get("sft") else None,
        )  # fmt: skip


def decide(probs, written: int | None, rule: DecisionRule, grades: list[int], gbm=None) -> GradeDecided:
    """One evaluation's probabilities, grade, expected grade and confidence under a decision `rule`:
    `probs` are the raw belief (None for an invalid answer, which keeps no grade and no confidence),
    `written` the grade the model wrote, `gbm` the statistical estimate's probabilities (needed by a
    `pooled` or `gbm` rule: the product serves gradient boosting's probabilities, and the language
    model's evaluation beside them).

    >>> rule = DecisionRule(confidence="temperature", temperature=2.0, cutpoints=(1.5,))
    >>> d = decide([0.8, 0.2], 1, rule, [1, 2])
    >>> d["grade"], round(d["confidence"], 3), round(d["expected_grade"], 3)
    (1, 0.667, 1.333)
    >>> decide(None, None, rule, [1, 2])["grade"] is None
    True
    >>> pool = DecisionRule("stack", confidence="pooled", pool=(1.0, 1.0), grade_from="likeliest")
    >>> decide([0.6, 0.4], 1, pool, [1, 2], gbm=[0.1, 0.9])["grade"]
    2
    >>> gbm = DecisionRule("gbm", confidence="gbm", grade_from="likeliest")
    >>> decide([0.9, 0.1], 1, gbm, [1, 2], [0.3, 0.7])["grade"]
    2

    Served gradient boosting alone, the grade does not depend on the language model's answer: an
    invalid one (no belief) keeps gradient boosting's grade.

    >>> decide(None, None, gbm, [1, 2], [0.3, 0.7])["grade"]
    2
    """
    kind = rule.confidence
    if probs is None and not (kind == "gbm" and gbm is not None):
        return GradeDecided(grade=written, probs=None, expected_grade=None, confidence=None)
    p = np.asarray(probs if probs is not None else gbm, dtype=float)[None, :]
    if kind in ("pooled", "gbm") and gbm is None:
        raise ValueError(f"a {kind} calibration needs the statistical estimate's probabilities (stage evidence)")
    if kind == "temperature":
        p = temperature_probs(p, rule.temperature)
    elif kind == "pooled":
        p = pooled(p, [gbm], *(rule.pool or (1.0, 0.0)))
    elif kind == "gbm":
        p = temperature_probs([gbm], rule.temperature)
    expected = float(expected_grade(p, grades)[0])
    grade = written
    if rule.grade_from == "expected" and rule.cutpoints:
        grade = int(cut_expected([expected], list(rule.cutpoints), grades)[0])
    elif rule.grade_from == "likeliest":
        grade = int(grades[int(np.argmax(p[0]))])
    return GradeDecided(
        grade=grade,
        probs=[round(float(x), 4) for x in p[0]],
        expected_grade=round(expected, 4),
        confidence=round(float(p[0, grades.index(int(grade))]), 4) if grade is not None else None,
    )


def contradicted(grades_served, probs, grades: list[int]) -> float:
    """The share of answered funds whose served grade is not the likeliest under the probabilities
    served beside it: a grade the reader sees contradicted (an expected-grade rule can do this).

    >>> contradicted([1, 2, None], [[0.6, 0.4], [0.7, 0.3], None], [1, 2])
    0.5
    """
    seen = [(g, p) for g, p in zip(grades_served, probs) if g is not None and p is not None]
    if not seen:
        return 0.0
    return round(float(np.mean([p[grades.index(int(g))] < max(p) - 1e-9 for g, p in seen])), 4)
