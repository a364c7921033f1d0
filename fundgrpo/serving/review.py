"""The review queue: which evaluations an analyst should look at, and in what order.

An evaluation needs an analyst when any of these holds (each gives a line of `review_reasons`):
  - the methodology does not rate the fund (too little data: its `reason` says what it lacks);
  - the answer is invalid (no grade);
  - its confidence is below `evaluate.review_below`;
  - its grade is `evaluate.disagree_by` grades or more from the methodology's (rule) grade,
    or from gradient boosting's;
  - it is flagged (no peers, criteria without data, misstated criteria);
  - its share class is new to the universe (not in the training reference).
An evaluation already decided by an analyst (a decision made after it) leaves the queue, and a share
class an analyst decided stays out when it is scored again: it comes back only when another model
version grades it differently from the analyst (one more line of `review_reasons` says so).

The order, surest problems first: invalid answers, then by confidence from the lowest, then by the
largest disagreement, then by share class id (so the order is total and stable).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from fundgrpo.params import EvaluateParams


@dataclass(frozen=True)
class Case:
    """What the review rule reads of one evaluation, whoever built it: the served evaluation
    (`serving.evaluation`), one the API stored (`Case.stored`), a backtest's per-fund row (the book)."""

    share_class_id: str
    grade: int | None  # the grade served (None: invalid answer, or not rated)
    valid: bool = True
    rated: bool = True  # False: the methodology does not rate the fund; `reason` says what it lacks
    reason: str | None = None
    confidence: float | None = None
    rule_grade: int | None = None  # the methodology's
    gbm_grade: int | None = None  # gradient boosting's
    flags: tuple[str, ...] = ()

    @classmethod
    def stored(cls, e: Mapping) -> Case:
        """From the API's stored evaluation (`evaluation.as_json`: gradient boosting's grade under `evidence`).

        >>> Case.stored({"share_class_id": "A", "grade": 3, "valid": True, "rated": True, "reason": None,
        ...              "confidence": 0.4, "rule_grade": 2, "evidence": {"gbm_grade": 3}, "flags": []}).gbm_grade
        3
        """
        return cls(
            share_class_id=e["share_class_id"],
            grade=e["grade"],
            valid=e["valid"],
            rated=e.get("rated", True),  # stored before funds could go unrated: every one was rated
            reason=e["reason"],
            confidence=e["confidence"],
            rule_grade=e["rule_grade"],
            gbm_grade=e["evidence"]["gbm_grade"],
            flags=tuple(e["flags"]),
        )


def review_reasons(case: Case, rule: EvaluateParams, known: set[str] | frozenset = frozenset()) -> list[str]:
    """The reasons `case` needs an analyst (empty: it does not).

    `known` is the share classes of the training universe; empty means "do not check".

    >>> from dataclasses import replace
    >>> e = Case("A", grade=4, confidence=0.3, rule_grade=2, gbm_grade=4)
    >>> review_reasons(e, EvaluateParams(review_below=0.5, disagree_by=2))
    ['confidence 0.30 below 0.50', '2 grades from the methodology (2)']
    >>> review_reasons(replace(e, grade=None, valid=False, reason="no JSON"), EvaluateParams())[0]
    'invalid answer: no JSON'
    >>> review_reasons(replace(e, confidence=0.9, rule_grade=4), EvaluateParams(), known={"B"})
    ['new to the universe']
    >>> unrated = replace(e, grade=None, valid=False, rated=False, reason="not rated: missing: Sharpe ratio")
    >>> review_reasons(unrated, EvaluateParams())[0]
    'not rated: missing: Sharpe ratio'

    """
    out = []
    grade = case.grade
    if not case.rated:
        out.append(case.reason or "not rated")
    elif grade is None or not case.valid:
        out.append(f"invalid answer: {case.reason or 'no grade'}")
    confidence = case.confidence
    if grade is not None and (confidence is None or confidence < rule.review_below):
        # rounded down, so a confidence just below the threshold never reads as equal to it
        shown = "none" if confidence is None else f"{math.floor(confidence * 100) / 100:.2f}"
        out.append(f"confidence {shown} below {rule.review_below:.2f}")
    if grade is not None:
        for label, other in (("the methodology", case.rule_grade), ("gradient boosting", case.gbm_grade)):
            if other is not None and abs(grade - other) >= rule.disagree_by:
                out.append(f"{abs(grade - other)} grades from {label} ({other})")
    out += list(case.flags)
    if known and case.share_class_id not in known:
        out.append("new to the universe")
    return list(dict.fromkeys(out))  # the flags repeat an invalid answer's line


def priority(case: Case) -> tuple:
    """The sort key of the documented order (smaller first).

    >>> a, b = Case("A", None), Case("B", 3, confidence=0.2, rule_grade=3)
    >>> c = Case("C", 3, confidence=0.2, rule_grade=5)
    >>> [e.share_class_id for e in sorted([b, c, a], key=priority)]
    ['A', 'C', 'B']
    """
    if case.grade is None:
        return (0, 0.0, 0, case.share_class_id)
    gaps = [abs(case.grade - o) for o in (case.rule_grade, case.gbm_grade) if o is not None]
    confidence = case.confidence
    return (1, 0.0 if confidence is None else confidence, -max(gaps, default=0), case.share_class_id)


def queue(evaluations: list[dict], rule: EvaluateParams, known: set[str] | frozenset = frozenset()) -> list[dict]:
    """The stored evaluations (the API's JSON) that need an analyst, each with its `review_reasons`
    (`why`), in the documented order.

    `evaluations` are the latest per share class not yet decided (the store gives them).

    >>> def stored(scid, confidence, **more):
    ...     return {"share_class_id": scid, "grade": 3, "valid": True, "rated": True, "reason": None, "flags": [],
    ...             "confidence": confidence, "rule_grade": None, "evidence": {"gbm_grade": None}, **more}
    >>> [(e["share_class_id"], e["why"]) for e in queue([stored("A", 0.9), stored("B", 0.1)], EvaluateParams())]
    [('B', ['confidence 0.10 below 0.50'])]
    >>> decided = stored("B", 0.1, model_version="v1", decided_grade=4, decided_version="v1")
    >>> queue([decided], EvaluateParams())  # decided on v1, scored by v1 again: stays out
    []
    >>> queue([{**decided, "model_version": "v2"}], EvaluateParams())[0]["why"][0]
    'v2 grades it 3; an analyst decided 4 on v1'
    """
    out = []
    for e in evaluations:
        case = Case.stored(e)
        reasons = review_reasons(case, rule, known)
        if e.get("decided_grade") is not None:  # an analyst settled this share class
            if e.get("model_version") == e.get("decided_version") or case.grade == e["decided_grade"]:
                continue  # the same model scored again, or a new one that agrees with the analyst
            reasons = [f"{e.get('model_version')} grades it {case.grade}; an analyst decided "
                       f"{e['decided_grade']} on {e.get('decided_version')}", *reasons]  # fmt: skip
        if reasons:
            out.append((priority(case), {**e, "why": reasons}))
    return [e for _, e in sorted(out, key=lambda found: found[0])]
