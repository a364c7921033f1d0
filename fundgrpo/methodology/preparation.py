"""Preparation (stage `prepare`): prompt/answer datasets, split by fund.

Peer context (category medians, within-category percentiles) is computed over the
whole validated universe, as an analyst sees the market, before the split. The
split is by `fund_id`, so share classes of one fund never straddle train and test.
Rows without an expert grade cannot be trained or tested on: they are counted in
metrics/prepare.json, not silently lost. Nor can funds the methodology does not rate (too little
of its criteria weight has data, `compiler.not_rated`): they go to `not_rated.jsonl` beside the
splits, where the backtest counts them apart.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Collection
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from fundgrpo.cli import StageError
from fundgrpo.methodology import citations, prompts
from fundgrpo.methodology import compiler as meth
from fundgrpo.methodology.compiler import Criterion, Methodology
from fundgrpo.methodology.estimates import Estimate, for_records, shown_estimate
from fundgrpo.methodology.prompts import CriterionEvidence
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.methodology.splits import SPLITS, split_funds, split_of
from fundgrpo.params import PrepareParams


def _clean(v: float | None) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), 4)


def build_records(
    funds: pd.DataFrame,
    methodology: Methodology,
    params: PrepareParams = PrepareParams(),
    only: Collection[str] | None = None,
    estimates: pd.DataFrame | None = None,
    reading: citations.Reading | None = None,
    labelled_only: bool = True,
) -> list[PromptRecord]:
    """One record per labelled share class: prompt, reference answer and the columns rewards read;
    with `labelled_only` False, one per share class (an unlabelled one has no reference, serving evaluates it).

    `reading` (with a methodology's qualitative criteria): the prompt shows the fund's documents
    within a budget, the reference answer judges each criterion citing them, and the record keeps the
    documents shown (`documents`) and the reference judgements (`pillars`) for the rewards and checks.

    `only` (share class ids) limits the records built; percentiles and medians still come from
    every row, so scoring one fund against a universe costs one prompt, not thousands.
    `estimates` (`fundgrpo.evaluation.statistical`, indexed by share_class_id) is the statistical
    evidence: each record carries the estimate (`gbm_grade`, `gbm_probs`), and with
    `params.show_model` "gbm" its prompt states it.

    `params` decides what the prompt shows (`universe_percentile`, `prompt_style`, `show_rule`,
    `show_bands`, `criteria_order`): monitoring re-scores new funds with the same params, so the champion sees prompts
    as it was trained.
    """
    m = methodology
    if params.show_model != "none" and estimates is None:
        raise StageError(f"prepare.show_model is {params.show_model!r} but no estimates were given (stage `evidence`)")
    peers = PeerContext.of(m, funds, params.universe_percentile)
    records = []
    rows = funds if only is None else funds[funds["share_class_id"].astype(str).isin({str(x) for x in only})]
    for i, row in rows.iterrows():
        evidence = peers.evidence(i, row)
        if labelled_only and pd.isna(row.get("expert_grade")):
            continue
        records.append(_record(m, params, row, evidence, at=peers.at(i), estimates=estimates, reading=reading))
    return records


@dataclass(frozen=True)
class Standing:
    """One fund among its peers: how many share classes its category holds (itself included), the rule
    scorer's score and grade (None: no criterion data) and why the methodology does not rate it (None: it does)."""

    peers: int
    rule_grade: int | None
    rule_score: float | None
    not_rated: str | None


@dataclass(frozen=True)
class PeerContext:
    """What a fund's prompt reads from its peers: each criterion's (and context metric's) percentile
    within the category (and, `universe_percentile`, among all funds), the category medians and sizes,
    and the rule scorer's verdict."""

    shown: tuple[Criterion, ...]  # criteria, then context metrics (shown, not scored)
    pct: pd.DataFrame
    pct_all: pd.DataFrame | None
    rules: pd.DataFrame
    unrated: pd.Series
    medians: pd.DataFrame
    peers: pd.Series

    @classmethod
    def of(cls, m: Methodology, funds: pd.DataFrame, universe_percentile: bool) -> PeerContext:
        shown = m.criteria + m.context
        pct = meth.criterion_percentiles(m, funds, with_context=True)
        pct_all = (
            meth.criterion_percentiles(m, funds, within_category=False, with_context=True)
            if universe_percentile
            else None
        )
        rules = meth.rule_score(m, funds, pct[[c.id for c in m.criteria]])
        unrated = meth.not_rated(m, pct[[c.id for c in m.criteria]])
        metrics = [c.metric for c in shown if c.metric in funds]
        medians = funds.groupby("category")[metrics].transform("median") if metrics else pd.DataFrame(index=funds.index)
        peers = funds.groupby("category")["share_class_id"].transform("count")
        return cls(shown, pct, pct_all, rules, unrated=unrated, medians=medians, peers=peers)

    def evidence(self, i, row: pd.Series) -> dict[str, CriterionEvidence]:
        """Row `i`'s value, category median and percentile per criterion and context metric."""
        pct, pct_all, medians = self.pct, self.pct_all, self.medians
        return {
            c.id: CriterionEvidence(
                # as the prompt shows it (whole numbers): the reference's bands and the claims
                # check then read what the model reads, never a 89.94 shown as "90"
                pct=float(round(pct.at[i, c.id])) if not math.isnan(pct.at[i, c.id]) else float("nan"),
                value=_clean(row.get(c.metric, np.nan)),
                median=_clean(medians.at[i, c.metric]) if c.metric in medians else None,
                pct_all=_clean(pct_all.at[i, c.id]) if pct_all is not None else None,
            )
            for c in self.shown
        }

    def at(self, i) -> Standing:
        """Row `i`'s peers (count), rule score and grade (None: no criterion data), and why unrated."""
        # a fund with no data on any criterion has no methodology grade (None), said as such everywhere
        rule_grade = None if pd.isna(self.rules.at[i, "rule_grade"]) else int(self.rules.at[i, "rule_grade"])
        rule_score = None if rule_grade is None else float(self.rules.at[i, "rule_score"])
        return Standing(int(self.peers.at[i]), rule_grade, rule_score, self.unrated.at[i])


def _estimate(row: pd.Series, estimates: pd.DataFrame | None, m: Methodology) -> Estimate | None:
    """The statistical estimate of the row's share class as a prompt shows it (None without estimates)."""
    if estimates is None:
        return None
    sid = str(row["share_class_id"])
    if sid not in estimates.index:
        raise StageError(f"prepare: no statistical estimate for share class {sid!r}; rerun `dvc repro evidence`")
    return shown_estimate(estimates.loc[sid], m.grades)


def _reference_score(m: Methodology, grade: int, row: pd.Series) -> float:
    """The reference score, agreeing with the grade: the analysts' score clipped into the grade's band as
    a whole number (answers write one: 32.5 would read 32, below a band starting at 32.5)."""
    band = m.band(grade)
    score = row.get("expert_score", np.nan)
    return band.midpoint if pd.isna(score) else min(max(float(score), math.ceil(band.low)), band.high - 0.5)


def _with_documents(m: Methodology, messages: list[dict], row: pd.Series, reading: citations.Reading):
    """The prompt with the fund's documents before the answer's format, and (pillars, documents shown)."""
    sid = str(row["share_class_id"])
    shown_docs, cut = citations.within_budget(reading.documents.get(sid, []), reading.budget_chars)
    user = messages[-1]["content"].rsplit("\n", 1)  # the documents go before the answer's format
    messages[-1]["content"] = "\n".join([user[0], citations.prompt_block(m, shown_docs, cut), user[-1]])
    readable = {d.document_id: d.text for d in shown_docs}
    return citations.reference(m, reading.judgements.get(str(row["fund_id"]), []), readable), shown_docs


def _record(
    m: Methodology,
    params: PrepareParams,
    row: pd.Series,
    evidence: dict[str, CriterionEvidence],
    at: Standing,
    estimates: pd.DataFrame | None,
    reading: citations.Reading | None,
) -> PromptRecord:
    """One share class's record: its prompt, reference answer (labelled) and the columns rewards read."""
    estimate = _estimate(row, estimates, m)
    rule_grade, rule_score = at.rule_grade, at.rule_score
    shown_model = estimate if params.show_model == "gbm" else None
    messages = prompts.build_messages(
        m,
        prompts.FundHeading(str(row.get("name", row["share_class_id"])), str(row["category"]), at.peers),
        evidence,
        params.prompt_style,
        rule=(rule_score, rule_grade)
        if params.show_rule and rule_score is not None and rule_grade is not None
        else None,
        model=shown_model,
        confidence=params.stated_confidence,
        bands=params.show_bands,
        order=params.criteria_order,
    )
    pillars, shown_docs = None, None
    if reading is not None and m.qualitative:
        pillars, shown_docs = _with_documents(m, messages, row, reading)
    grade = None if pd.isna(row.get("expert_grade")) else int(row["expert_grade"])
    score = None if grade is None else _reference_score(m, grade, row)
    analyst = row.get("label_source") == "analyst"
    return PromptRecord(
        share_class_id=str(row["share_class_id"]),
        fund_id=str(row["fund_id"]),
        category=str(row["category"]),
        split=split_of(str(row["fund_id"]), params),
        peers=at.peers,
        prompt=messages,
        reference=None
        if grade is None or score is None
        else _reference(m, params, evidence, graded=(grade, score), at=at, estimate=estimate, pillars=pillars),
        expert_grade=grade,
        expert_score=None if score is None else round(score, 2),
        label_source="analyst" if analyst else "export",
        label_decision_id=int(row["label_decision_id"]) if analyst else None,
        evidence=json.dumps({cid: _clean(e.pct) for cid, e in evidence.items()}),
        rule_grade=rule_grade,
        rule_score=rule_score,
        shown_grade=shown_model.grade if shown_model else (rule_grade if params.show_rule else None),
        not_rated=at.not_rated,
        gbm_grade=estimate.grade if estimate else None,
        gbm_probs=list(estimate.probs) if estimate else None,
        documents=citations.documents_column(shown_docs) if shown_docs is not None else None,
        pillars=json.dumps(pillars, ensure_ascii=False) if pillars is not None else None,
    )


def _reference(
    m: Methodology,
    params: PrepareParams,
    evidence: dict[str, CriterionEvidence],
    graded: tuple[int, float],
    at: Standing,
    estimate: Estimate | None,
    pillars: dict | None,
) -> str:
    """The reference answer to a labelled fund's prompt: the experts' grade (or, `reference_grade: explained`,
    the one the prompt explains), its score, the reasoning in `answer_style` and the pillars judged."""
    grade, score = graded
    rule_grade = at.rule_grade
    shown_model = estimate if params.show_model == "gbm" else None
    answered, answered_score = grade, score
    if params.reference_grade == "explained" and shown_model:
        answered = explained_grade(grade, shown_model.grade, rule_grade)
        answered_score = score if answered == grade else m.band(answered).midpoint
    stated = None
    if params.stated_confidence:
        if estimate is None:
            raise StageError("prepare.stated_confidence needs the evidence stage's estimates (rerun prepare)")
        # how likely the answer's grade is, out of fold (the expert's, unless explained above)
        stated = estimate.probs[m.grades.index(answered)]
    if params.answer_style == "evaluation":
        moved = (
            replace(shown_model, moved=shown_model.grade - rule_grade)
            if shown_model and rule_grade is not None
            else None
        )
        reasoning = prompts.evaluation_text(m, evidence, answered, rule_grade if params.show_rule else None, moved)
    else:
        reasoning = prompts.reasoning_text(m, evidence, params.answer_style)
    return prompts.answer_json(answered, answered_score, reasoning, stated, pillars)


def explained_grade(expert: int, shown: int, rule: int | None) -> int:
    """The grade a reference answer gives under `prepare.reference_grade: explained`: the experts'
    where the prompt explains it (the estimate shown, or the methodology's grade), else the estimate's.

    >>> explained_grade(4, 4, 3), explained_grade(3, 4, 3), explained_grade(5, 4, 3), explained_grade(2, 3, None)
    (4, 3, 4, 3)
    """
    return expert if expert in (shown, rule) else shown


def run(
    funds: pd.DataFrame,
    methodology: Methodology,
    params: PrepareParams,
    estimates: pd.DataFrame | None = None,
    reading: citations.Reading | None = None,
) -> tuple[dict[str, list[PromptRecord]], dict]:
    """Datasets by split, and a summary of what went where. `estimates`: the evidence stage's
    (checked: every labelled share class has one, computed with this split)."""
    funds = funds.reset_index(drop=True)
    labelled = funds["expert_grade"].notna()
    if labelled.sum() == 0:
        raise StageError("prepare: no row has an expert grade; nothing to train or test on")
    if problem := meth.uncovered_grades(funds["expert_grade"], methodology.grades):
        raise StageError(f"prepare: {problem}")
    if estimates is not None:
        ids = funds.loc[labelled, "share_class_id"].astype(str).tolist()
        splits = [split_of(str(f), params) for f in funds.loc[labelled, "fund_id"]]
        estimates = for_records(estimates, ids, splits, "prepare")
    records = build_records(funds, methodology, params, estimates=estimates, reading=reading)
    split_funds(pd.Series([r.fund_id for r in records]), params)  # every split gets a fund, or an error says so
    if params.reference_share < 1:  # scarce references: the rest of the training funds have the grade only
        records = [_referenced(r, params) if r.split == "train" else r for r in records]
    datasets = {s: [r for r in records if r.split == s and r.not_rated is None] for s in SPLITS}
    # counted apart, each with its split: the backtest reports the test split's
    datasets["not_rated"] = [r for r in records if r.not_rated is not None]
    summary = {
        "rows": int(len(funds)),
        "unlabelled_rows_excluded": int((~labelled).sum()),
        "not_rated_rows_excluded": len(datasets["not_rated"]),
        **{f"{s}_rows": len(datasets[s]) for s in SPLITS},
        **{f"{s}_funds": len({r.fund_id for r in datasets[s]}) for s in SPLITS},
        "analyst_labels": sum(r.label_source == "analyst" for r in records),
        **(
            {"referenced_train_rows": sum(r.referenced for r in datasets["train"])}
            if params.reference_share < 1
            else {}
        ),
    }
    return datasets, summary


def _referenced(record: PromptRecord, params: PrepareParams) -> PromptRecord:
    """A training record under scarce references: whether an analyst wrote its evaluation, and without one no
    judgements to learn from."""
    if referenced(record.fund_id, params):
        return record
    return replace(record, referenced=False, pillars=None)


def referenced(fund_id: str, params: PrepareParams) -> bool:
    """Whether a training fund has a written reference evaluation (`prepare.reference_share` of them, by a
    seeded hash of the fund, so share classes of a fund agree and the choice is stable as funds come).

    >>> from dataclasses import replace
    >>> few = replace(PrepareParams(), reference_share=0.15)
    >>> share = sum(referenced(f"F{i}", few) for i in range(2000)) / 2000
    >>> 0.13 < share < 0.17, referenced("F1", PrepareParams())
    (True, True)
    """
    u = int(hashlib.sha256(f"references:{params.seed}:{fund_id}".encode()).hexdigest()[:12], 16) / 16**12
    return u < params.reference_share


def lengths(rows: list[PromptRecord], tokenizer=None) -> dict:
    """Prompt and answer sizes: characters, and tokens of `tokenizer` (the prompt with its chat
    template and generation prompt, as the model reads it). On CPU, prefill of the prompt
    dominates generation time, so this is what a prompt costs.

    >>> lengths([PromptRecord.example(prompt=[{"role": "user", "content": "abc"}], reference="{}")])
    {'prompt_chars_mean': 3.0, 'prompt_chars_max': 3, 'answer_chars_mean': 2.0, 'answer_chars_max': 2}
    """
    prompt_chars = [sum(len(m["content"]) for m in r.prompt) for r in rows]
    answer_chars = [len(r.reference or "") for r in rows]
    out = {
        "prompt_chars_mean": round(float(np.mean(prompt_chars)), 1),
        "prompt_chars_max": int(max(prompt_chars)),
        "answer_chars_mean": round(float(np.mean(answer_chars)), 1),
        "answer_chars_max": int(max(answer_chars)),
    }
    if tokenizer is not None:
        texts = [tokenizer.apply_chat_template(r.prompt, tokenize=False, add_generation_prompt=True) for r in rows]
        prompt_tokens = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
        answer_tokens = [
            len(ids) for ids in tokenizer([r.reference or "" for r in rows], add_special_tokens=False)["input_ids"]
        ]
        out.update(
            prompt_tokens_mean=round(float(np.mean(prompt_tokens)), 1),
            prompt_tokens_p95=int(np.percentile(prompt_tokens, 95)),
            prompt_tokens_max=int(max(prompt_tokens)),
            answer_tokens_mean=round(float(np.mean(answer_tokens)), 1),
            answer_tokens_max=int(max(answer_tokens)),
        )
    return out
