"""One story per evaluation: what the served grade is, in words, and a note wherever the evaluation's
text was written for another grade.

The grade served comes from the calibrate stage's choice (`contest.fit_choice`): the language
model's own probabilities, gradient boosting's, or the two pooled, each with a decision rule. The
text is always the language model's, written with the grade it wrote. Where the two grades differ,
a reader must be told whose grade it is and why before reading a text that argues for another
(`written_note`); the API, the batch file and the pages show that note, and the backtest counts the
evaluations whose text contradicts their grade without it (`untold`: 0 is the only good figure).
"""

from __future__ import annotations

from fundgrpo.evaluation.calibration import DecisionRule


def particle(n: int, batchim: str, plain: str) -> str:
    """A Korean particle after a number read aloud in Sino-Korean (일 이 삼 사 오 ...).

    >>> particle(1, "은", "는"), particle(2, "은", "는"), particle(3, "이", "가"), particle(5, "이", "가")
    ('1은', '2는', '3이', '5가')
    """
    return f"{n}{batchim if n % 10 in (0, 1, 3, 6, 7, 8) else plain}"


def with_ro(n: int) -> str:
    """A number with 으로/로 ("to", "as"): 로 after a vowel and after ㄹ (일, 칠, 팔).

    >>> with_ro(3), with_ro(1), with_ro(5)
    ('3으로', '1로', '5로')
    """
    return f"{n}{'으로' if n % 10 in (0, 3, 6) else '로'}"


def served_words(rule: DecisionRule, language: str = "en") -> str:
    """What a served grade is, plainly, for the model card, the API's `served_from`, the gate's reason
    and the pages' first line: above all whether it is the statistical model's alone.

    >>> served_words(DecisionRule("gbm", confidence="gbm"))
    "gradient boosting's grade alone (the language model's weight is 0: on validation funds it added nothing)"
    >>> served_words(DecisionRule("stack", confidence="pooled", pool=(0.2, 0.6)))
    "the language model's grade probabilities (25%) pooled with gradient boosting's (75%)"
    >>> served_words(DecisionRule(), "ko")
    '언어 모델의 등급'
    """
    source = rule.serves
    lm, gbm = rule.weights["language_model"], rule.weights["gradient_boosting"]
    if language == "ko":
        if source == "gbm":
            return "그래디언트 부스팅만의 등급 (언어 모델 비중 0: 검증 펀드에서 더한 것이 없음)"
        if source == "stack":
            return f"언어 모델의 등급 확률({lm:.0%})과 그래디언트 부스팅의 확률({gbm:.0%})을 합친 등급"
        return "언어 모델의 등급"
    if source == "gbm":
        return (
            "gradient boosting's grade alone (the language model's weight is 0: on validation funds it added nothing)"
        )
    if source == "stack":
        return f"the language model's grade probabilities ({lm:.0%}) pooled with gradient boosting's ({gbm:.0%})"
    return "the language model's own grade"


def written_note(served: int | None, written: int | None, rule: DecisionRule, language: str = "en") -> str | None:
    """Whose grade `served` is, and that the text was written for `written`, when the two differ;
    None when they agree (or either is missing: an invalid answer has no text to contradict).

    >>> print(written_note(3, 5, DecisionRule("gbm", confidence="gbm")))  # doctest: +NORMALIZE_WHITESPACE
    Grade 3 is gradient boosting's grade alone (the language model's weight is 0: on validation funds it added
    nothing), chosen on validation funds; the evaluation's text is the language model's, written for grade 5.
    >>> print(written_note(4, 3, DecisionRule(grade_from="expected"), "ko"))  # doctest: +NORMALIZE_WHITESPACE
    등급 4는 언어 모델의 등급입니다 (검증 펀드에서 고른 결정 규칙: 기대 등급).
    아래 평가 글은 언어 모델이 등급 3으로 쓴 것입니다.
    >>> written_note(3, 3, DecisionRule("gbm"), "en") is None, written_note(None, 3, DecisionRule()) is None
    (True, True)
    """
    if served is None or written is None or int(served) == int(written):
        return None
    what = served_words(rule, language)
    way = rule.grade_from
    if language == "ko":
        rules = {"expected": "기대 등급", "likeliest": "가장 높은 확률", "greedy": "쓴 등급"}
        how = f" (검증 펀드에서 고른 결정 규칙: {rules.get(way, way)})" if rule.serves == "lm" else ""
        return (
            f"등급 {particle(int(served), '은', '는')} {what}입니다{how}. "
            f"아래 평가 글은 언어 모델이 등급 {with_ro(int(written))} 쓴 것입니다."
        )
    rules = {"expected": "the expected grade", "likeliest": "the likeliest grade", "greedy": "the written grade"}
    how = f", read as {rules.get(way, way)}" if rule.serves == "lm" else ""
    return (
        f"Grade {served} is {what}{how}, chosen on validation funds; the evaluation's text is the language "
        f"model's, written for grade {written}."
    )


def untold(served: int | None, written: int | None, note: str | None) -> bool:
    """True when an evaluation's text contradicts its served grade and nothing says so: the text was
    written for another grade, and no note says whose grade is served. (A verdict that names another
    grade than the one written is a misstated claim, flagged where it stands: `claims`.)

    >>> untold(3, 5, None), untold(3, 5, "Grade 3 is ..."), untold(3, 3, None), untold(None, None, None)
    (True, False, False, False)
    """
    if served is None or written is None:
        return False
    return int(served) != int(written) and not note


def counted(served: list, written: list, notes: list, unsupported: list) -> dict[str, float | int]:
    """The backtest's figures of one served evaluator: how many texts were written for another grade
    than the one served, how many of those say so, and the share of evaluations whose text contradicts
    its grade without saying so (`untold`), and of those that misstate their verdict (flagged).

    >>> counted([3, 4, None], [5, 4, None], ["Grade 3 is ...", None, None], [[], ["verdict"], []])
    {'differ': 1, 'said': 1, 'verdict_flagged': 1, 'untold': 0.0}
    """
    rows = list(zip(served, written, notes))
    differ = [r for r in rows if r[0] is not None and r[1] is not None and int(r[0]) != int(r[1])]
    return {
        "differ": len(differ),
        "said": sum(bool(r[2]) for r in differ),
        "verdict_flagged": sum("verdict" in (u or []) for u in unsupported),
        "untold": round(sum(untold(*r) for r in rows) / max(len(rows), 1), 4),
    }
