"""Prompts and reference answers, in English or Korean (the methodology's language).

A prompt states the fund's metrics with their peer context: the category median
and the fund's percentile among its peers (0-100, 100 = best), which a small
model reads far more easily than raw decimals. A reference answer is the JSON
the analysts would write: grade, score, and a short reasoning that cites the
criteria that weigh most for this fund.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace  # noqa: F401 (replace: the doctests')
from typing import Any, Mapping

from fundgrpo.methodology.compiler import (
    Criterion,
    Methodology,
    example_methodology,  # noqa: F401 (the doctests')
)
from fundgrpo.methodology.estimates import Estimate
from fundgrpo.params import ANSWER_STYLES, CRITERIA_ORDERS, PROMPT_STYLES

TEXT = {
    "en": {
        "system": "You are a fund analyst. You rate funds by the house methodology and answer only with JSON.",
        "task": (
            'Rate this fund by "{name}". Answer with JSON: {{"grade": {grades}, "score": 0-100, "reasoning": "..."}}.'
        ),
        "fund": "Fund: {fund} | Category: {category} ({peers} peers)",
        "line": "- {label} ({tag}): {value} | peer median {median} | percentile {pct}",
        "weight": "weight {weight}%",
        "context": "context",
        "universe": " | all funds {pct}",
        "missing": "- {label} ({tag}): no data",
        "top": "top {n}%",
        "bottom": "bottom {n}%",
        "sep": "; ",
        "weighted": "weighted {pct}",
        # compact style: one short line per criterion, percentiles only
        "c_system": "You rate funds by the house methodology. Answer only with JSON.",
        "c_head": "{name}. Category: {category} ({peers} peers).\nPercentile among peers (100 = best), weight:",
        "c_line": "{label} {pct} ({tag})",
        "c_universe": ", all funds {pct}",
        "c_missing": "{label} n/a ({tag})",
        "c_answer": 'JSON: {{"reasoning": "...", "score": 0-100, "grade": {grades}}}',
        "c_answer_confidence": 'JSON: {{"reasoning": "...", "score": 0-100, "grade": {grades}, "confidence": 0-100}}',
        "task_confidence": (
            'Rate this fund by "{name}". Answer with JSON: '
            '{{"grade": {grades}, "score": 0-100, "reasoning": "...", "confidence": 0-100}}.'
        ),
        "rule": "Methodology score {score} (grade {grade})",
        "model": "Statistical model estimate: grade {grade} ({pct}%), next {next} ({pct_next}%)",
        # evaluation style: the methodology's grade, and what moved the grade away from it
        "methodology": "Methodology {grade}",
        "raised": "; raised by {why}",
        "lowered": "; lowered by {why}",
        "why_model": "statistical estimate {grade} ({pct}%)",
        "why_judgement": "the analysts' judgement",
        "end": ". ",
    },
    "ko": {
        "system": "당신은 펀드 애널리스트입니다. 사내 방법론으로 펀드를 평가하고 JSON으로만 답합니다.",
        "task": (
            '"{name}" 방법론으로 이 펀드를 평가하세요. '
            'JSON으로 답하세요: {{"grade": {grades}, "score": 0-100, "reasoning": "..."}}.'
        ),
        "fund": "펀드: {fund} | 유형: {category} (비교 펀드 {peers}개)",
        "line": "- {label} ({tag}): {value} | 유형 중앙값 {median} | 백분위 {pct}",
        "weight": "가중치 {weight}%",
        "context": "참고",
        "universe": " | 전체 백분위 {pct}",
        "missing": "- {label} ({tag}): 자료 없음",
        "top": "상위 {n}%",
        "bottom": "하위 {n}%",
        "sep": "; ",
        "weighted": "가중 백분위 {pct}",
        "c_system": "사내 방법론으로 펀드를 평가합니다. JSON으로만 답하세요.",
        "c_head": "{name}. 유형: {category} (비교 펀드 {peers}개).\n유형 내 백분위(100 = 최고), 가중치:",
        "c_line": "{label} {pct} ({tag})",
        "c_universe": ", 전체 {pct}",
        "c_missing": "{label} 자료 없음 ({tag})",
        "c_answer": 'JSON: {{"reasoning": "...", "score": 0-100, "grade": {grades}}}',
        "c_answer_confidence": 'JSON: {{"reasoning": "...", "score": 0-100, "grade": {grades}, "confidence": 0-100}}',
        "task_confidence": (
            '"{name}" 방법론으로 이 펀드를 평가하세요. '
            'JSON으로 답하세요: {{"grade": {grades}, "score": 0-100, "reasoning": "...", "confidence": 0-100}}.'
        ),
        "rule": "방법론 점수 {score} (등급 {grade})",
        "model": "통계 모델 추정: 등급 {grade} ({pct}%), 차선 {next} ({pct_next}%)",
        "methodology": "방법론 등급 {grade}",
        "raised": "; 상향 근거: {why}",
        "lowered": "; 하향 근거: {why}",
        "why_model": "통계 모델 추정 {grade} ({pct}%)",
        "why_judgement": "분석가 판단",
        "end": ". ",
    },
}
# Words a reasoning uses to place a fund among its peers, by language.
TOP_WORDS = {"en": "top", "ko": "상위"}
BOTTOM_WORDS = {"en": "bottom", "ko": "하위"}


@dataclass(frozen=True)
class FundHeading:
    """Who the prompt is about: the fund's name, its category and how many share classes it is among."""

    name: str
    category: str
    peers: int


@dataclass(frozen=True)
class CriterionEvidence:
    """One criterion's (or context metric's) figures for one fund, as its prompt shows them.

    >>> CriterionEvidence(71.0, 0.8, 0.5).known, CriterionEvidence(float("nan")).known
    (True, False)
    """

    pct: float  # percentile among the fund's category, as the prompt shows it (a whole number; NaN: no data)
    value: float | None = None  # the fund's figure
    median: float | None = None  # its category's median
    pct_all: float | None = None  # percentile among every fund (`prepare.universe_percentile`), else None

    @property
    def known(self) -> bool:
        return self.pct is not None and not math.isnan(self.pct)


def _fmt(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.2f}"


def build_messages(
    m: Methodology,
    fund: FundHeading,
    evidence: Mapping[str, CriterionEvidence],
    style: str = "full",
    rule: tuple[float, int] | None = None,
    model: Estimate | None = None,
    confidence: bool = False,
    bands: bool = False,
    order: str = "weight",
) -> list[dict]:
    """Chat messages for one fund.

    `style` "full" states each metric's value, peer median and percentile; "compact" states
    the percentiles and weights only, about half the tokens for a pretrained tokenizer (on
    CPU the prompt's prefill dominates generation time).

    `fund` names the fund, its category and its peers (count); `evidence` maps criterion (and context
    metric) id to its `CriterionEvidence` (the percentile among all funds, where given, shown after the peer one).
    `rule` (score, grade), when given, is the methodology's own verdict, stated after the
    fund line: the model then learns where the analysts depart from it. `model`, when given, is
    a statistical model's estimate (`fundgrpo.methodology.estimates.shown_estimate`),
    stated after the methodology's verdict with its probability, so a sure estimate reads
    differently from an unsure one. `confidence`: the answer asked for also states how sure of
    its grade the evaluator is (percent). `bands`: each peer percentile is followed by its band in
    the methodology's wording (`band`), the words a reasoning cites, so a claim is copied, not computed.
    `order` "pull" lists the criteria as a reasoning cites them (`by_pull`), not weightiest first.

    >>> r, fund = example_methodology(), FundHeading("F", "C", 9)
    >>> ev = {"sharpe_3y": CriterionEvidence(71.0, 0.8, 0.5, 40.2), "cost": CriterionEvidence(30.0, 1.1, 0.9),
    ...       "tenure": CriterionEvidence(float("nan"), 4, 6)}
    >>> print(*build_messages(r, fund, ev)[1]["content"].splitlines()[2:], sep=chr(10))
    - Sharpe ratio (weight 60%): 0.80 | peer median 0.50 | percentile 71 | all funds 40
    - ongoing cost (weight 40%): 1.10 | peer median 0.90 | percentile 30
    - manager tenure (context): no data
    >>> print(build_messages(r, fund, ev, style="compact")[1]["content"])
    example. Category: C (9 peers).
    Percentile among peers (100 = best), weight:
    Sharpe ratio 71, all funds 40 (60%)
    ongoing cost 30 (40%)
    manager tenure n/a (context)
    JSON: {"reasoning": "...", "score": 0-100, "grade": 1-5}
    >>> build_messages(r, fund, ev, bands=True)[1]["content"].splitlines()[3]
    '- ongoing cost (weight 40%): 1.10 | peer median 0.90 | percentile 30 (bottom 30%)'
    >>> build_messages(r, fund, ev, style="compact", bands=True)[1]["content"].splitlines()[2]
    'Sharpe ratio 71 (top 30%), all funds 40 (60%)'
    >>> build_messages(r, fund, ev, rule=(71.0, 2))[1]["content"].splitlines()[2]
    'Methodology score 71 (grade 2)'
    >>> cheap = {**ev, "cost": CriterionEvidence(95.0, 0.2, 0.9)}  # pulls 18 against Sharpe's 12.6
    >>> build_messages(r, fund, cheap, style="compact", order="pull")[1]["content"].splitlines()[1:3]
    ['Percentile among peers (100 = best), weight:', 'ongoing cost 95 (40%)']
    >>> shown = Estimate(grade=2, p=0.62, next_grade=3, p_next=0.301, probs=(0.07, 0.62, 0.301))
    >>> build_messages(r, fund, ev, model=shown)[1]["content"].splitlines()[2]
    'Statistical model estimate: grade 2 (62%), next 3 (30%)'
    """
    if style == "compact":
        return _compact_messages(m, fund, evidence, rule, model=model, confidence=confidence, bands=bands, order=order)
    if style != "full":
        raise ValueError(f"prepare.prompt_style must be one of {PROMPT_STYLES}, got {style!r}")
    return _full_messages(m, fund, evidence, rule, model=model, confidence=confidence, bands=bands, order=order)


def _full_messages(
    m: Methodology,
    fund: FundHeading,
    evidence: Mapping[str, CriterionEvidence],
    rule: tuple[float, int] | None,
    model: Estimate | None,
    confidence: bool,
    bands: bool,
    order: str,
) -> list[dict]:
    """`build_messages` in the full style: each criterion's value, peer median and percentile."""
    t = TEXT[m.language]
    grades = "|".join(str(g) for g in m.grades)
    lines = [
        t["task_confidence" if confidence else "task"].format(name=m.name, grades=grades),
        t["fund"].format(fund=fund.name, category=fund.category, peers=fund.peers),
    ]
    if rule is not None:
        lines.append(t["rule"].format(score=round(rule[0]), grade=rule[1]))
    if model is not None:
        lines.append(model_line(t, model))
    shown = [(c, t["weight"].format(weight=round(c.weight * 100))) for c in ordered(m, evidence, order)]
    shown += [(c, t["context"]) for c in m.context]  # shown, not weighted
    for c, tag in shown:
        e, label = evidence[c.id], m.label(c)
        if not e.known:
            lines.append(t["missing"].format(label=label, tag=tag))
        else:
            lines.append(
                t["line"].format(
                    label=label, tag=tag, value=_fmt(e.value), median=_fmt(e.median), pct=_pct(t, e.pct, bands)
                )
                + (t["universe"].format(pct=round(e.pct_all)) if e.pct_all is not None else "")
            )
    return [{"role": "system", "content": t["system"]}, {"role": "user", "content": "\n".join(lines)}]


def by_weight(m: Methodology) -> list[Criterion]:
    """The weighted criteria, weightiest first (as prompts list them by default)."""
    return sorted(m.criteria, key=lambda c: -c.weight)


def _pull(c: Criterion, evidence: Mapping[str, CriterionEvidence]) -> float | None:
    """How far a criterion pulls the score from the middle: weight x distance of its percentile from 50."""
    e = evidence[c.id]
    return abs(e.pct - 50) * c.weight if e.known else None


def by_pull(m: Methodology, evidence: Mapping[str, CriterionEvidence]) -> list[Criterion]:
    """The weighted criteria in the order a reasoning cites them (`cited_criteria`), those without
    data last, weightiest first.

    >>> ev = {"sharpe_3y": CriterionEvidence(55.0), "cost": CriterionEvidence(5.0)}
    >>> [c.id for c in by_pull(example_methodology(), ev)]
    ['cost', 'sharpe_3y']
    """
    pulls = {c.id: _pull(c, evidence) for c in m.criteria}
    present = sorted((p, c.id, c) for c in m.criteria if (p := pulls[c.id]) is not None)
    return [c for *_, c in reversed(present)] + [c for c in by_weight(m) if pulls[c.id] is None]


def ordered(m: Methodology, evidence: Mapping[str, CriterionEvidence], order: str) -> list[Criterion]:
    """The criteria in the prompt's order (`prepare.criteria_order`)."""
    if order not in CRITERIA_ORDERS:
        raise ValueError(f"prepare.criteria_order must be one of {CRITERIA_ORDERS}, got {order!r}")
    return by_pull(m, evidence) if order == "pull" else by_weight(m)


def _compact_messages(
    m: Methodology,
    fund: FundHeading,
    evidence: Mapping[str, CriterionEvidence],
    rule: tuple[float, int] | None = None,
    model: Estimate | None = None,
    confidence: bool = False,
    bands: bool = False,
    order: str = "weight",
) -> list[dict]:
    t = TEXT[m.language]
    grades = m.grades
    grade_range = (
        f"{grades[0]}-{grades[-1]}" if grades == list(range(grades[0], grades[-1] + 1)) else "|".join(map(str, grades))
    )
    lines = [t["c_head"].format(name=m.name, category=fund.category, peers=fund.peers)]
    shown = [(c, f"{round(c.weight * 100)}%") for c in ordered(m, evidence, order)]
    shown += [(c, t["context"]) for c in m.context]
    for c, tag in shown:
        e, label = evidence[c.id], m.label(c)
        if not e.known:
            lines.append(t["c_missing"].format(label=label, tag=tag))
        else:
            universe = t["c_universe"].format(pct=round(e.pct_all)) if e.pct_all is not None else ""
            lines.append(t["c_line"].format(label=label, pct=_pct(t, e.pct, bands) + universe, tag=tag))
    if rule is not None:
        lines.append(t["rule"].format(score=round(rule[0]), grade=rule[1]))
    if model is not None:
        lines.append(model_line(t, model))
    answer = t["c_answer_confidence" if confidence else "c_answer"].format(grades=grade_range)
    if m.qualitative:  # the pillars come first, judged from the documents (`fundgrpo.methodology.citations`)
        answer = answer.replace("JSON: {", 'JSON: {"pillars": {...}, ', 1)
    lines.append(answer)
    return [{"role": "system", "content": t["c_system"]}, {"role": "user", "content": "\n".join(lines)}]


def _pct(t: dict[str, str], pct: float, bands: bool) -> str:
    """A peer percentile as the prompt shows it: rounded, then (`bands`) the band of the number shown."""
    shown = round(pct)
    return f"{shown} ({band(t, shown)})" if bands else str(shown)


def model_line(t: dict[str, str], model: Estimate) -> str:
    """The statistical model's estimate as one prompt line (percentages rounded)."""
    return t["model"].format(
        grade=model.grade, pct=round(100 * model.p), next=model.next_grade, pct_next=round(100 * model.p_next)
    )


def cited_criteria(m: Methodology, evidence: Mapping[str, CriterionEvidence]) -> list[str]:
    """Criteria a good reasoning cites: the `cite_top` that pull the score furthest from the middle.

    >>> ev = {"sharpe_3y": CriterionEvidence(55.0), "cost": CriterionEvidence(5.0)}
    >>> cited_criteria(example_methodology(), ev)
    ['cost', 'sharpe_3y']
    >>> cited_criteria(replace(example_methodology(), cite_top=1), ev)
    ['cost']
    """
    return [c.id for c in by_pull(m, evidence) if _pull(c, evidence) is not None][: m.cite_top]


def weighted_percentile(m: Methodology, evidence: Mapping[str, CriterionEvidence]) -> float | None:
    """The criteria's weighted mean percentile, weights renormalised over the criteria with data
    (the rule scorer's composite, before any ranking), or None when no criterion has data.

    >>> r = example_methodology()
    >>> weighted_percentile(r, {"sharpe_3y": CriterionEvidence(80.0), "cost": CriterionEvidence(40.0)})
    64.0
    >>> weighted_percentile(r, {"sharpe_3y": CriterionEvidence(80.0), "cost": CriterionEvidence(float("nan"))})
    80.0
    """
    present = [(c.weight, evidence[c.id].pct) for c in m.criteria if evidence[c.id].known]
    total = sum(w for w, _ in present)
    return sum(w * p for w, p in present) / total if total else None


def band(t: dict[str, str], pct: float) -> str:
    """The methodology's band wording for a percentile: p is better than p % of peers, so "top (100-p)%"
    when p >= 50, else "bottom p%", rounded up to a multiple of 10 (true, and short).

    >>> band(TEXT["en"], 71.0), band(TEXT["en"], 50.0), band(TEXT["en"], 49.0), band(TEXT["ko"], 95.0)
    ('top 30%', 'top 50%', 'bottom 50%', '상위 10%')
    """
    if pct >= 50:
        return t["top"].format(n=max(10, math.ceil((100 - pct) / 10) * 10))
    return t["bottom"].format(n=max(10, math.ceil(pct / 10) * 10))


def _placed(t: dict[str, str], label: str, pct: float) -> str:
    """ "Sharpe ratio top 30%": the criterion's label, then its band."""
    return f"{label} {band(t, pct)}"


def reasoning_text(m: Methodology, evidence: Mapping[str, CriterionEvidence], style: str = "brief") -> str:
    """The reference reasoning: e.g. "Sharpe ratio top 10%; ongoing cost bottom 30%".

    Percentile p means better than p % of peers: "top (100-p)%" when p >= 50, else "bottom p%",
    rounded up to a multiple of 10 so that the claim is true and short. `style` "weighted" ends
    with the weighted mean percentile ("...; weighted 64"): the answer states the weighted
    evidence before the score and grade that follow from it.

    >>> r, ev = example_methodology(), {"sharpe_3y": CriterionEvidence(71.0), "cost": CriterionEvidence(22.0)}
    >>> reasoning_text(r, ev), reasoning_text(r, ev, "weighted")
    ('Sharpe ratio top 30%; ongoing cost bottom 30%', 'Sharpe ratio top 30%; ongoing cost bottom 30%; weighted 51')
    """
    if style not in ANSWER_STYLES:
        raise ValueError(f"prepare.answer_style must be one of {ANSWER_STYLES}, got {style!r}")
    t = TEXT[m.language]
    labels = {c.id: m.label(c) for c in m.criteria}
    parts = [_placed(t, labels[cid], evidence[cid].pct) for cid in cited_criteria(m, evidence)]
    weighted = weighted_percentile(m, evidence)
    if style == "weighted" and weighted is not None:
        parts.append(t["weighted"].format(pct=round(weighted)))
    return t["sep"].join(parts)


def verdict(m: Methodology, grade: int) -> str:
    """The grade's label in the methodology's language, as an evaluation opens with it.

    >>> verdict(example_methodology(), 4)
    'Above average'
    """
    label = m.verdicts()[int(grade)]
    return label[:1].upper() + label[1:]


def departure_reason(
    m: Methodology, evidence: Mapping[str, CriterionEvidence], up: bool, model: Estimate | None = None
) -> str:
    """What moved a grade above (`up`) or below the methodology's: the statistical estimate shown in
    the prompt when it points that way, else the context metric (outside the methodology) furthest
    from the middle on that side, else the analysts' judgement.

    >>> r = example_methodology()
    >>> low = {"tenure": CriterionEvidence(12.0)}
    >>> departure_reason(r, low, up=False), departure_reason(r, low, up=True)
    ('manager tenure bottom 20%', "the analysts' judgement")
    >>> departure_reason(r, low, True, Estimate(grade=4, p=0.62, next_grade=3, p_next=0.3, probs=(), moved=1))
    'statistical estimate 4 (62%)'
    """
    t = TEXT[m.language]
    if model is not None and model.moved * (1 if up else -1) > 0:
        return t["why_model"].format(grade=model.grade, pct=round(100 * model.p))
    side = []
    for c in m.context:
        e = evidence.get(c.id)
        if e is not None and e.known and (e.pct >= 60 if up else e.pct <= 40):
            side.append((abs(e.pct - 50), m.label(c), e.pct))
    if side:
        _, label, pct = max(side)
        return _placed(t, label, pct)
    return t["why_judgement"]


def evaluation_text(
    m: Methodology,
    evidence: Mapping[str, CriterionEvidence],
    grade: int,
    rule_grade: int | None = None,
    model: Estimate | None = None,
) -> str:
    """The reference evaluation (`prepare.answer_style: evaluation`): the verdict (the grade's label),
    the weightiest criteria where the fund stands out with their bands, and the methodology's grade
    with, where the grade departs from it, what moved it (`departure_reason`). `rule_grade` None:
    the prompt does not state the methodology's grade, so neither does the answer. The methodology
    file's `output.reasoning.max_chars` bounds it (160 in the shipped files; the JSON Schema holds).

    >>> r = replace(example_methodology(), cite_top=1)
    >>> ev = {"sharpe_3y": CriterionEvidence(71.0), "cost": CriterionEvidence(55.0), "tenure": CriterionEvidence(88.0)}
    >>> evaluation_text(r, ev, 4, 4)
    'Above average. Sharpe ratio top 30%. Methodology 4'
    >>> evaluation_text(r, ev, 4, 3)
    'Above average. Sharpe ratio top 30%. Methodology 3; raised by manager tenure top 20%'
    >>> ko = replace(r, language="ko", criteria=(replace(r.criteria[0], label={"ko": "샤프지수"}), r.criteria[1]),
    ...              context=())
    >>> evaluation_text(ko, ev, 3, 4)
    '보통. 샤프지수 상위 30%. 방법론 등급 4; 하향 근거: 분석가 판단'
    """
    t = TEXT[m.language]
    parts = [verdict(m, grade), reasoning_text(m, evidence)]
    if rule_grade is not None:
        said = t["methodology"].format(grade=rule_grade)
        if grade != rule_grade:
            up = grade > rule_grade
            said += t["raised" if up else "lowered"].format(why=departure_reason(m, evidence, up, model))
        parts.append(said)
    return t["end"].join(p for p in parts if p)


def answer_json(
    grade: int, score: float, reasoning: str, confidence: float | None = None, pillars: dict | None = None
) -> str:
    """The reference answer as JSON, evidence first: the reasoning, then the score it
    supports, then the grade that score falls in (a short chain of thought; key order
    does not matter to the schema), then, when given, how sure of that grade it is (percent).

    >>> answer_json(4, 71.04, "Sharpe ratio top 30%")
    '{"reasoning": "Sharpe ratio top 30%", "score": 71, "grade": 4}'
    >>> answer_json(4, 71.04, "Sharpe ratio top 30%", 0.634)
    '{"reasoning": "Sharpe ratio top 30%", "score": 71, "grade": 4, "confidence": 63}'
    """
    # the qualitative judgements first, when the methodology has any: the grade then rests on them
    answer: dict[str, Any] = {**({"pillars": pillars} if pillars is not None else {}), "reasoning": reasoning}
    answer.update(score=int(round(score)), grade=int(grade))
    if confidence is not None:
        answer["confidence"] = int(round(100 * confidence))
    return json.dumps(answer, ensure_ascii=False)
