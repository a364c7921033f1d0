"""Words for a served grade that its own probabilities do not put first.

The decision rule may serve a grade other than the likeliest: with `calibrate.grade_from: expected`
the grade is read from the expected grade through cut-points fitted on validation funds, and with
`greedy` it is the grade the model wrote. A reader who sees the grade beside its probabilities must
be told why, in words; the API, the batch command and the dashboard show this note.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from fundgrpo.evaluation.calibration import DecisionRule
from fundgrpo.evaluation.story import particle, served_words
from fundgrpo.methodology.answers import Prediction
from fundgrpo.methodology.compiler import Methodology


def _range(i: int, cutpoints: Sequence[float], language: str) -> str:
    """Where grade number `i` (0-based) lies among the cut-points, in words.

    >>> _range(0, [1.5, 2.5], "en"), _range(1, [1.5, 2.5], "en"), _range(2, [1.5, 2.5], "ko")
    ('below the cut-point 1.50', 'between the cut-points 1.50 and 2.50', '기준점 2.50 이상')
    """
    low = cutpoints[i - 1] if i > 0 else None
    high = cutpoints[i] if i < len(cutpoints) else None
    if language == "ko":
        if low is None:
            return f"기준점 {high:.2f} 미만"
        return f"기준점 {low:.2f} 이상" if high is None else f"기준점 {low:.2f}~{high:.2f} 사이"
    if low is None:
        return f"below the cut-point {high:.2f}"
    return f"above the cut-point {low:.2f}" if high is None else f"between the cut-points {low:.2f} and {high:.2f}"


def grade_note(
    grade: int | None,
    probabilities: Sequence[float] | None,
    grades: Sequence[int],
    expected: float | None,
    rule: DecisionRule,
    language: str = "en",
) -> str | None:
    """Why `grade` is served although its probabilities put another grade first; None when they
    put it first (or there is no grade or no probabilities).

    >>> rule = DecisionRule(grade_from="expected", cutpoints=(2.05, 2.67, 3.44, 4.01))
    >>> note = grade_note(1, [0.3, 0.63, 0.05, 0.01, 0.01], [1, 2, 3, 4, 5], 2.03, rule)
    >>> print(note)  # doctest: +NORMALIZE_WHITESPACE
    Grade 1, though grade 2 is the likeliest (63%, grade 1 30%): the grade is read from the expected
    grade 2.03, below the cut-point 2.05 (cut-points fitted on validation funds to match the experts).
    >>> grade_note(2, [0.3, 0.63, 0.05, 0.01, 0.01], [1, 2, 3, 4, 5], 2.03, rule) is None
    True
    >>> print(grade_note(3, [0.1, 0.6, 0.3], [1, 2, 3], 2.2, DecisionRule(), "ko"))
    등급 3은 모델이 쓴 등급입니다. 확률로는 등급 2가 가장 높습니다 (60%, 등급 3은 30%).
    """
    if grade is None or probabilities is None or grade not in grades:
        return None
    probs = list(probabilities)
    top_i = max(range(len(probs)), key=probs.__getitem__)
    mine = probs[list(grades).index(grade)]
    if mine >= probs[top_i] - 1e-9:  # the served grade is (one of) the likeliest
        return None
    top, p_top = grades[top_i], probs[top_i]
    way, cutpoints = rule.grade_from, rule.cutpoints or ()
    if way == "expected" and cutpoints and expected is not None:
        where = _range(list(grades).index(grade), cutpoints, language)
        if language == "ko":
            return (
                f"등급 {grade}: 확률로는 등급 {particle(top, '이', '가')} 가장 높지만 "
                f"({p_top:.0%}, 등급 {particle(grade, '은', '는')} {mine:.0%}), 등급은 기대 등급 {expected:.2f}에서 "
                f"정해집니다 ({where}; 기준점은 검증 펀드에서 전문가 등급에 맞춘 값)."
            )
        return (
            f"Grade {grade}, though grade {top} is the likeliest ({p_top:.0%}, grade {grade} {mine:.0%}): the grade "
            f"is read from the expected grade {expected:.2f}, {where} (cut-points fitted on validation funds to "
            "match the experts)."
        )
    if language == "ko":
        return (
            f"등급 {particle(grade, '은', '는')} 모델이 쓴 등급입니다. "
            f"확률로는 등급 {particle(top, '이', '가')} 가장 높습니다 "
            f"({p_top:.0%}, 등급 {particle(grade, '은', '는')} {mine:.0%})."
        )
    return (
        f"Grade {grade} is the grade the model wrote; its probabilities put grade {top} first "
        f"({p_top:.0%}, grade {grade} {mine:.0%})."
    )


def refusal(reason: str | None, lacking: str, methodology: Methodology, rule_grade, gbm_grade) -> str | None:
    """The reason an invalid answer gives a reader: for a fund that lacks criterion data, a refusal
    that names what is missing and what the other evaluators say; else the parser's reason as it is.

    >>> from fundgrpo.methodology.compiler import example_methodology
    >>> methodology = example_methodology()
    >>> print(refusal("not one JSON object", "sharpe_3y", methodology, 3, 4))  # doctest: +NORMALIZE_WHITESPACE
    not graded: the fund lacks Sharpe ratio (sharpe_3y), which the model weighs; the methodology
    grades it 3 on the criteria it has, gradient boosting 4 (the model's own answer: not one JSON object)
    >>> refusal("not one JSON object", "", methodology, 3, 4)
    'not one JSON object'
    """
    if not lacking:
        return reason
    labels = {c.metric: methodology.label(c) for c in methodology.criteria}
    missing = ", ".join(f"{labels.get(m, m)} ({m})" for m in lacking.split(", ") if m)
    if methodology.language == "ko":
        rule = (
            f"있는 기준으로 방법론 등급은 {rule_grade}"
            if rule_grade is not None
            else "방법론 등급은 없습니다(기준 데이터 없음)"
        )
        return (
            f"평가하지 않음: 모델이 보는 {missing} 데이터가 없습니다. {rule}, "
            f"그래디언트 부스팅은 {gbm_grade}입니다 (모델의 답: {reason})"
        )
    rule = (
        f"the methodology grades it {rule_grade} on the criteria it has"
        if rule_grade is not None
        else "the methodology has no grade for it (no criterion data)"
    )
    return f"not graded: the fund lacks {missing}, which the model weighs; {rule}, gradient boosting {gbm_grade} " + (
        f"(the model's own answer: {reason})"
    )


@dataclass(frozen=True)
class ServedFrom:
    """What an answer's grade is: the decision rule's source (`serves`), weights and name (`rule`), in
    words (`summary`), and the grade the model wrote (the API's `served_from`, `schemas.ServedFrom`)."""

    serves: str  # lm, gbm or stack: whose probabilities
    weights: dict[str, float]  # language_model, gradient_boosting
    summary: str
    written_grade: int | None
    rule: str | None  # the option chosen on validation ("stack/score/expected")

    def as_dict(self) -> dict:
        return asdict(self)


def served_from(rule: DecisionRule, prediction: Prediction, language: str = "en") -> ServedFrom:
    """What an answer's grade is, by the decision rule that served it.

    >>> rule = DecisionRule("stack", confidence="pooled", pool=(0.2, 0.6), chosen="stack/score/expected")
    >>> said = served_from(rule, Prediction(grade=4, written_grade=3))
    >>> said.weights, said.summary
    ({'language_model': 0.25, 'gradient_boosting': 0.75}, "the language model's grade probabilities (25%) pooled \
with gradient boosting's (75%)")
    """
    return ServedFrom(
        serves=rule.serves,
        weights=rule.weights,
        summary=served_words(rule, language),
        written_grade=prediction.written_grade,
        rule=rule.chosen,
    )
