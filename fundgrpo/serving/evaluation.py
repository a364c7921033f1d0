"""The served evaluation of one fund, defined once: batch scoring and the API build it here from the
fund's record and the model's prediction, and render it once each, as a row of the batch file
(`as_row`, flat) and as the API's JSON (`as_json`, the evidence nested). The grade served (the
calibrate stage's rule) and the grade the model wrote are separate fields from the start.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from fundgrpo.evaluation.calibration import DecisionRule
from fundgrpo.evaluation.story import written_note
from fundgrpo.methodology import claims
from fundgrpo.methodology.answers import Prediction
from fundgrpo.methodology.citations import NOT_FOUND, PillarJudgement, judged
from fundgrpo.methodology.compiler import Methodology
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.params import EvaluateParams
from fundgrpo.serving import review
from fundgrpo.serving.explain import ServedFrom, grade_note, refusal, served_from

GBM_ALONE = {
    "en": "the language model's answer is invalid ({reason}); the grade is gradient boosting's alone",
    "ko": "언어 모델의 답이 유효하지 않습니다({reason}). 등급은 그래디언트 부스팅의 등급입니다",
}


@dataclass(frozen=True)
class Evaluation:
    share_class_id: str
    fund_id: str
    name: str | None
    category: str
    # served: None for a fund not rated, or an invalid answer unless gradient boosting alone is served (`reason`)
    grade: int | None
    written_grade: int | None  # what the model wrote in its evaluation
    grade_note: str | None
    score: float | None
    reasoning: str | None
    valid: bool
    rated: bool  # False: the methodology does not rate the fund (too little data); no model was asked
    reason: str | None  # why there is no grade: what a fund not rated lacks, or why the answer is invalid
    probabilities: list[float] | None  # per grade of the methodology, in order
    expected_grade: float | None
    confidence: float | None
    served_from: ServedFrom  # whose probabilities, the weights, the decision rule
    rule_grade: int | None  # the methodology's: None where the fund has no criterion data
    rule_score: float | None
    gbm_grade: int | None
    gbm_probabilities: list[float] | None
    peers: int
    percentiles: dict[str, float | None]  # per criterion, among the category's share classes (100 = best)
    missing_criteria: str  # metrics the model weighs that the fund lacks, comma-separated
    unsupported: list[str] = field(default_factory=list)  # what its reasoning misstates
    flags: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)  # why an analyst should look (empty: no need)
    # the qualitative criteria, each judged with a verified citation or not assessed (none: the
    # methodology judges nothing from documents)
    pillars: tuple[PillarJudgement, ...] = ()

    @property
    def needs_analyst(self) -> bool:
        return bool(self.review)


def percentiles(evidence: str | dict, m: Methodology) -> dict[str, float | None]:
    """The fund's percentile per quantitative criterion (the methodology's order), from its record's
    evidence (None where it has no data).

    >>> from fundgrpo.methodology.compiler import example_methodology
    >>> percentiles('{"sharpe_3y": 85.0}', example_methodology())["sharpe_3y"]
    85.0
    """
    found = claims.percentiles(evidence)  # the record's column, JSON or already a dict
    return {c.id: (None if found.get(c.id) is None else round(float(found[c.id]), 1)) for c in m.criteria}


def flags(
    record: PromptRecord,
    lacking: str,
    prediction: Prediction,
    methodology: Methodology,
    pillars: tuple[PillarJudgement, ...] = (),
) -> list[str]:
    """What a reader of one evaluation must know before trusting it: an invalid answer (and why), a
    category with no peers (percentiles mean nothing), criteria with no data, a pillar judged on words
    no document holds (`pillars`, served as not assessed), misstated criteria.

    >>> r = PromptRecord.example(category="X", peers=1)
    >>> from fundgrpo.methodology.compiler import example_methodology
    >>> flags(r, "sharpe_3y", Prediction(grade=None, written_grade=None, reason="not one JSON object"),
    ...       example_methodology())
    ['invalid answer: not one JSON object', 'no peers: X has no other share class', 'no data: Sharpe ratio (sharpe_3y)']
    >>> from dataclasses import replace
    >>> flags(replace(r, not_rated="not rated: missing: Sharpe ratio"), "", Prediction(grade=None, written_grade=None),
    ...       example_methodology())[0]
    'not rated: missing: Sharpe ratio'
    """
    out = []
    if record.not_rated:
        out.append(record.not_rated)
    elif not prediction.valid:
        out.append(f"invalid answer: {prediction.reason}")
    if record.peers <= 1:
        out.append(f"no peers: {record.category} has no other share class")
    labels = {c.metric: methodology.label(c) for c in methodology.criteria}
    ids = {c.id: methodology.label(c) for c in methodology.named}
    for metric in [m for m in lacking.split(", ") if m]:
        out.append(f"no data: {labels.get(metric, metric)} ({metric})")
    pillar_names = {q.id: q.text(methodology.language) for q in methodology.qualitative}
    for j in pillars:
        if j.reason == NOT_FOUND:  # the model judged it, but on words no document of the fund holds
            out.append(f"unsupported: {pillar_names[j.criterion]} ({NOT_FOUND}; served as not assessed)")
    for cid in prediction.unsupported or ():
        if cid == "verdict":
            out.append("misstated: the verdict (its words are not the grade's label)")
        else:
            out.append(f"misstated: {ids.get(cid, cid)} (no data in the prompt, or the wrong side, band or number)")
    return out


def build(
    record: PromptRecord,
    prediction: Prediction,
    decision: DecisionRule,
    methodology: Methodology,
    name: str | None,
    lacking: str,
    rule: EvaluateParams,
    known: set[str] | frozenset = frozenset(),
) -> Evaluation:
    """One fund's served evaluation from its prompt record and the model's prediction (decided under
    `decision`), with its flags and the reasons it needs an analyst (`review.review_reasons`, by `rule`)."""
    p = prediction
    language = methodology.language
    said = served_from(decision, p, language)
    pillars = judged(p.pillars, json.loads(record.documents or "{}"), methodology)
    # one story: whose grade is served when the text was written for another, then why a grade its
    # own probabilities do not put first
    notes = [
        written_note(p.grade, said.written_grade, decision, language),
        grade_note(p.grade, p.probs, methodology.grades, p.expected_grade, decision, language),
    ]
    e = Evaluation(
        share_class_id=record.share_class_id,
        fund_id=record.fund_id,
        name=name,
        category=record.category,
        grade=p.grade,
        written_grade=said.written_grade,
        grade_note=" ".join(n for n in notes if n) or None,
        score=p.score,
        reasoning=p.reasoning,
        valid=p.valid,
        rated=not record.not_rated,
        reason=p.reason
        if p.valid or record.not_rated
        else GBM_ALONE[language].format(reason=p.reason)
        if p.grade is not None  # served gradient boosting alone: the answer's failure costs no grade
        else refusal(p.reason, lacking, methodology, record.rule_grade, record.gbm_grade),
        probabilities=p.probs,
        expected_grade=p.expected_grade,
        confidence=p.confidence,
        served_from=said,
        rule_grade=record.rule_grade,
        rule_score=None if record.rule_score is None else round(record.rule_score, 2),
        gbm_grade=record.gbm_grade,
        gbm_probabilities=record.gbm_probs,
        peers=record.peers,
        percentiles=percentiles(record.evidence, methodology),
        missing_criteria=lacking,
        unsupported=list(p.unsupported or ()),
        flags=flags(record, lacking, p, methodology, pillars),
        pillars=pillars,
    )
    case = review.Case(
        e.share_class_id, e.grade, valid=e.valid, rated=e.rated, reason=e.reason, confidence=e.confidence,
        rule_grade=e.rule_grade, gbm_grade=e.gbm_grade, flags=tuple(e.flags),
    )  # fmt: skip
    return dataclasses.replace(e, review=review.review_reasons(case, rule, known))


def as_json(e: Evaluation, grades: list[int], in_prompt: dict[str, bool], **extra: Any) -> dict[str, Any]:
    """The API's answer for one fund (`schemas.Evaluation`): the evidence beside the metrics nested,
    `in_prompt` saying which of it the model was shown; `extra` (the expert's label, the model version)."""
    return {
        "share_class_id": e.share_class_id,
        "fund_id": e.fund_id,
        "category": e.category,
        "name": e.name,
        "grade": e.grade,
        "grade_note": e.grade_note,
        "score": e.score,
        "reasoning": e.reasoning,
        "valid": e.valid,
        "rated": e.rated,
        "reason": e.reason,
        "probabilities": {str(g): q for g, q in zip(grades, e.probabilities)} if e.probabilities is not None else None,
        "expected_grade": e.expected_grade,
        "confidence": e.confidence,
        "served_from": e.served_from.as_dict(),
        "flags": e.flags,
        "pillars": [j.as_dict() for j in e.pillars],
        "evidence": {
            "in_prompt": in_prompt,
            "rule_grade": e.rule_grade,
            "rule_score": e.rule_score,
            "gbm_grade": e.gbm_grade,
            "gbm_probabilities": (
                {str(g): q for g, q in zip(grades, e.gbm_probabilities)} if e.gbm_probabilities is not None else None
            ),
            "peers": e.peers,
            "percentiles": e.percentiles,
        },
        "rule_grade": e.rule_grade,
        **extra,
        "needs_analyst": e.needs_analyst,
        "review": e.review,
    }


def as_row(e: Evaluation, grades: list[int], **extra: Any) -> dict[str, Any]:
    """The batch file's row for one fund (`batch.OUTPUT_COLUMNS`, then a probability per grade): lists
    joined, `extra` (the expert grade, the model, the dates) beside."""
    return {
        "share_class_id": e.share_class_id,
        "fund_id": e.fund_id,
        "name": e.name,
        "category": e.category,
        "grade": e.grade,
        "grade_note": e.grade_note,
        "serves": e.served_from.serves,
        "lm_weight": e.served_from.weights["language_model"],
        "written_grade": e.written_grade,
        "score": e.score,
        "reasoning": e.reasoning,
        "valid": e.valid,
        "rated": e.rated,
        "reason": e.reason,
        "confidence": e.confidence,
        "expected_grade": e.expected_grade,
        "needs_analyst": e.needs_analyst,
        "review": "; ".join(e.review),
        "flags": "; ".join(e.flags),
        "rule_grade": e.rule_grade,
        "rule_score": e.rule_score,
        "missing_criteria": e.missing_criteria,
        "peers": e.peers,
        "unsupported": ", ".join(e.unsupported),
        "pillars": json.dumps([j.as_dict() for j in e.pillars], ensure_ascii=False) if e.pillars else "",
        "gbm_grade": e.gbm_grade,
        "gbm_confidence": round(max(e.gbm_probabilities), 4) if e.gbm_probabilities else None,
        **extra,
        **{f"p_{g}": (e.probabilities[i] if e.probabilities is not None else None) for i, g in enumerate(grades)},
    }
