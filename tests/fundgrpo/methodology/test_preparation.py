"""Records for prompts and training: a fund with no data on any criterion gets no methodology grade
(no placeholder a reader or a reward could take for a verdict), in English and Korean."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from fundgrpo.data import synthetic
from fundgrpo.evaluation.agreement import rule_predictions
from fundgrpo.methodology import citations, claims
from fundgrpo.methodology import compiler as meth
from fundgrpo.methodology import preparation as prepare
from fundgrpo.methodology.answers import Prediction
from fundgrpo.params import ParamsError, PrepareParams, SyntheticParams
from tests.support import REPO


@pytest.mark.parametrize("methodology", ["default.yaml", "default_ko.yaml"])
def test_a_fund_without_criterion_data_has_no_methodology_grade(methodology):
    m = meth.load(REPO / "methodology" / methodology)
    methodology = m
    funds = synthetic.later_batch(SyntheticParams(n_funds=60, n_months=48), 3)
    blank = funds.index[0]
    funds.loc[blank, [c.metric for c in m.criteria]] = float("nan")
    rules = meth.rule_score(m, funds)
    rated = meth.not_rated(m, meth.criterion_percentiles(m, funds)).isna()
    assert rules.loc[blank].isna().all() and not rated[blank]
    # the young funds (no 3-year figures, only a fee: 20 % of the weight) are not rated either
    assert 0 < (~rated).sum() < len(funds) / 2
    assert rules[rated].notna().all().all() and rules[~rated].isna().all().all()

    params = replace(PrepareParams(), answer_style="evaluation")
    records = prepare.build_records(funds, methodology, params)
    first = next(r for r in records if r.share_class_id == str(funds.at[blank, "share_class_id"]))
    assert first.not_rated.startswith({"en": "not rated: data for 0%", "ko": "평가 제외"}[m.language])
    others = [r for r in records if r.not_rated is None]
    assert first.rule_grade is None and first.rule_score is None and first.shown_grade is None
    assert all(isinstance(r.rule_grade, int) for r in others)
    rule_line = {"en": "Methodology score", "ko": "방법론 점수"}[methodology.language]
    prompt = "\n".join(msg["content"] for msg in first.prompt)
    assert rule_line not in prompt  # the prompt states no methodology verdict it does not have
    assert all(rule_line in "\n".join(msg["content"] for msg in r.prompt) for r in others)
    answer = json.loads(first.reference)
    assert claims.misstated(answer["reasoning"], first.evidence, methodology, answer["grade"], None) == []
    # the rule scorer gives no grade for it: a miss in the backtest, not a made-up middle grade
    assert rule_predictions([first])[0] == Prediction(grade=None, written_grade=None, score=None, valid=False)


@pytest.mark.parametrize("methodology", ["default.yaml", "default_ko.yaml"])
def test_an_explained_reference_departs_from_the_shown_estimate_only_to_the_methodologys_grade(methodology):
    """prepare.reference_grade explained: a reference answer gives the experts' grade where the prompt
    explains it (the estimate shown or the methodology's grade), else the estimate's, with its score in
    that grade's band, its verdict, and the estimate's probability of it as the stated confidence; the
    experts' grade itself (what rewards and scores read) is kept. `expert` gives the experts' grade."""
    import numpy as np
    import pandas as pd

    from fundgrpo.methodology.estimates import prob_column

    m = meth.load(REPO / "methodology" / methodology)
    funds = synthetic.later_batch(SyntheticParams(n_funds=120, n_months=48), 3)
    rng = np.random.default_rng(0)  # estimates far from the experts: many references to explain
    probs = rng.dirichlet(np.ones(len(m.grades)), size=len(funds))
    estimates = pd.DataFrame(probs, columns=[prob_column(g) for g in m.grades])
    estimates.index = funds["share_class_id"].astype(str)
    shown = replace(PrepareParams(), show_model="gbm", stated_confidence=True)
    experts = prepare.build_records(funds, m, shown, estimates=estimates)
    explained = prepare.build_records(funds, m, replace(shown, reference_grade="explained"), estimates=estimates)

    changed = 0
    for e, x in zip(experts, explained, strict=True):
        assert e.expert_grade == x.expert_grade and e.prompt == x.prompt
        want = x.expert_grade if x.expert_grade in (x.shown_grade, x.rule_grade) else x.shown_grade
        answer, as_expert = json.loads(x.reference), json.loads(e.reference)
        assert as_expert["grade"] == e.expert_grade and answer["grade"] == want
        band = m.band(want)
        assert band.low <= answer["score"] <= band.high
        assert answer["confidence"] == round(100 * x.gbm_probs[m.grades.index(want)])
        assert claims.misstated(answer["reasoning"], x.evidence, m, want, x.rule_grade) == []
        changed += answer != as_expert
    assert changed == sum(json.loads(x.reference)["grade"] != x.expert_grade for x in explained) > 10

    with pytest.raises(ParamsError, match="show_model"):
        replace(PrepareParams(), reference_grade="explained")


def test_funds_the_methodology_does_not_rate_are_neither_trained_nor_tested_on_but_counted():
    m = meth.load(REPO / "methodology" / "default.yaml")
    funds = synthetic.later_batch(SyntheticParams(n_funds=120, n_months=48), 3)
    funds = funds.assign(expert_grade=funds["expert_grade"].fillna(3))  # every fund labelled
    rated = meth.not_rated(m, meth.criterion_percentiles(m, funds)).isna()
    datasets, summary = prepare.run(funds, m, PrepareParams())
    kept = [r for s in ("train", "validation", "test") for r in datasets[s]]
    assert len(kept) == int(rated.sum()) and all(r.not_rated is None for r in kept)
    apart = datasets["not_rated"]
    assert len(apart) == summary["not_rated_rows_excluded"] == int((~rated).sum()) > 0
    assert {r.split for r in apart} <= {"train", "validation", "test"}
    assert all(r.not_rated.startswith("not rated: ") and r.rule_grade is None for r in apart)


def test_scarce_references_keep_every_graded_fund_but_few_written_evaluations():
    """With `reference_share`, a seeded share of training funds keep their written reference (SFT's); the
    others keep the grade (GRPO's) and no pillar judgements; validation and test records are untouched."""
    funds = synthetic.generate(SyntheticParams(n_funds=300))[0]
    funds = funds.assign(**{c: 0.0 for c in ("sharpe_3y", "return_3y", "max_drawdown_3y", "information_ratio_3y")})
    m = meth.load(REPO / "methodology" / "documents.yaml")
    reading = citations.Reading({}, {}, budget_chars=700)
    few = replace(PrepareParams(), reference_share=0.2)
    datasets, summary = prepare.run(funds, m, few, reading=reading)
    everyone, _ = prepare.run(funds, m, PrepareParams(), reading=reading)
    train = datasets["train"]
    assert len(train) == len(everyone["train"])  # every graded training fund stays
    share = summary["referenced_train_rows"] / len(train)
    assert 0.1 < share < 0.3
    assert all(r.pillars is None for r in train if not r.referenced)
    assert all(r.pillars is not None for r in train if r.referenced)
    assert all(r.referenced for r in datasets["test"] + everyone["train"])  # every fund referenced by default
    by_fund = {}
    for r in train:
        by_fund.setdefault(r.fund_id, set()).add(r.referenced)
    assert all(len(v) == 1 for v in by_fund.values())  # share classes of a fund agree
    with pytest.raises(ParamsError, match="reference_share"):
        replace(PrepareParams(), reference_share=0.0)
