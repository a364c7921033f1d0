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

from fundgrpo.params import EvaluateParams


def review_reasons(evaluation: dict, rule: EvaluateParams, known: set[str] | frozenset = frozenset()) -> list[str]:
    """The reasons `evaluation` needs an analyst (empty: it does not).

    `known` is the share classes of the training universe; empty means "do not check".

    >>> e = {"share_class_id": "A", "grade": 4, "valid": True, "confidence": 0.3, "rule_grade": 2,
    ...      "evidence": {"gbm_grade": 4}, "flags": []}
    >>> review_reasons(e, EvaluateParams(review_below=0.5, disagree_by=2))
    ['confidence 0.30 below 0.50', '2 grades from the methodology (2)']
    >>> review_reasons({**e, "grade": None, "valid": False, "reason": "no JSON"}, EvaluateParams())[0]
    'invalid answer: no JSON'
    >>> review_reasons({**e, "confidence": 0.9, "rule_grade": 4}, EvaluateParams(), known={"B"})
    ['new to the universe']
    >>> unrated = {**e, "grade": None, "valid": False, "rated": False, "reason": "not rated: missing: Sharpe ratio"}
    >>> review_reasons(unrated, EvaluateParams())[0]
    'not rated: missing: Sharpe ratio'

    """
    out = []
    grade = evaluation.get("grade")
    if evaluation.get("rated") is False:
        out.append(evaluation.get("reason") or "not rated")
    elif grade is None or not evaluation.get("valid", True):
        out.append(f"invalid answer: {evaluation.get('reason') or 'no grade'}")
    confidence = evaluation.get("confidence")
    if grade is not None and (confidence is None or confidence < rule.review_below):
        # rounded down, so a confidence just below the threshold never reads as equal to it
        shown = "none" if confidence is None else f"{math.floor(confidence * 100) / 100:.2f}"
        out.append(f"confidence {shown} below {rule.review_below:.2f}")
    if grade is not None:
        for label, other in (
            ("the methodology", evaluation.get("rule_grade")),
            ("gradient boosting", _gbm(evaluation)),
        ):
            if other is not None and abs(grade - other) >= rule.disagree_by:
                out.append(f"{abs(grade - other)} grades from {label} ({other})")
    out += list(evaluation.get("flags") or [])
    if known and evaluation.get("share_class_id") not in known:
        out.append("new to the universe")
    return list(dict.fromkeys(out))  # the flags repeat an invalid answer's line


def _gbm(evaluation: dict):
    return (evaluation.get("evidence") or {}).get("gbm_grade", evaluation.get("gbm_grade"))


def priority(evaluation: dict) -> tuple:
    """The sort key of the documented order (smaller first).

    >>> a = {"share_class_id": "A", "grade": None}
    >>> b = {"share_class_id": "B", "grade": 3, "confidence": 0.2, "rule_grade": 3}
    >>> c = {"share_class_id": "C", "grade": 3, "confidence": 0.2, "rule_grade": 5}
    >>> [e["share_class_id"] for e in sorted([b, c, a], key=priority)]
    ['A', 'C', 'B']
    """
    grade = evaluation.get("grade")
    if grade is None:
        return (0, 0.0, 0, evaluation["share_class_id"])
    gaps = [abs(grade - o) for o in (evaluation.get("rule_grade"), _gbm(evaluation)) if o is not None]
    confidence = evaluation.get("confidence")
    return (1, 0.0 if confidence is None else confidence, -max(gaps, default=0), evaluation["share_class_id"])


def queue(evaluations: list[dict], rule: EvaluateParams, known: set[str] | frozenset = frozenset()) -> list[dict]:
    """The evaluations that need an analyst, each with its `review_reasons`, in the documented order.

    `evaluations` are the latest per share class not yet decided (the store gives them).

    >>> q = queue([{"share_class_id": "A", "grade": 3, "confidence": 0.9, "valid": True},
    ...            {"share_class_id": "B", "grade": 3, "confidence": 0.1, "valid": True}], EvaluateParams())
    >>> [(e["share_class_id"], e["why"]) for e in q]
    [('B', ['confidence 0.10 below 0.50'])]
    >>> decided = {"share_class_id": "B", "grade": 3, "confidence": 0.1, "valid": True, "model_version": "v1",
    ...            "decided_grade": 4, "decided_version": "v1"}
    >>> queue([decided], EvaluateParams())  # decided on v1, scored by v1 again: stays out
    []
    >>> queue([{**decided, "model_version": "v2"}], EvaluateParams())[0]["why"][0]
    'v2 grades it 3; an analyst decided 4 on v1'
    """
    out = []
    for e in evaluations:
        reasons = review_reasons(e, rule, known)
        if e.get("decided_grade") is not None:  # an analyst settled this share class
            if e.get("model_version") == e.get("decided_version") or e.get("grade") == e["decided_grade"]:
                continue  # the same model scored again, or a new one that agrees with the analyst
            reasons = [f"{e.get('model_version')} grades it {e.get('grade')}; an analyst decided "
                       f"{e['decided_grade']} on {e.get('decided_version')}", *reasons]  # fmt: skip
        if reasons:
            out.append({**e, "why": reasons})
    return sorted(out, key=priority)
