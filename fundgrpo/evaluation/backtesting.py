"""Score evaluators (a model or the rule scorer) against the experts on held-out funds.

A completion that is not valid JSON per the schema has no grade: it counts against the model in
`valid_json` and as a miss in every agreement figure, so every metric covers every test fund and
models are compared on the same funds (`neutral` keeps the earlier convention, which read an
invalid answer as the middle grade and so credited an untrained model with 0.389 exact).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from fundgrpo import io
from fundgrpo.evaluation import calibration, contest, story
from fundgrpo.evaluation.agreement import (
    bootstrap_diff,
    departures,
    filled,
    metrics,
    one_metric,
    rule_predictions,
)
from fundgrpo.methodology import citations, claims
from fundgrpo.methodology.answers import Prediction
from fundgrpo.methodology.compiler import Methodology
from fundgrpo.methodology.records import PromptRecord, expert_grades
from fundgrpo.params import BacktestParams

# The evaluators that write evaluations (the policy and its SFT start): their claims and pillars are checked.
LANGUAGE_MODELS = ("grpo", "sft")


def gbm_predictions(rows: list[PromptRecord], methodology: Methodology) -> list[Prediction]:
    """The gradient-boosting baseline's grades, which `prepare` put in each record (the `evidence`
    stage's estimate from the training split's model); the score is the midpoint of the grade's
    band (the baseline predicts a grade only).

    >>> from fundgrpo.methodology.compiler import example_methodology
    >>> rows = [PromptRecord.example(share_class_id="a", gbm_grade=2, gbm_probs=[0.3, 0.7])]
    >>> p = gbm_predictions(rows, example_methodology())[0]
    >>> p.grade, p.written_grade, p.score, p.valid, p.probs
    (2, 2, 30.0, True, [0.3, 0.7])
    """
    missing = [r.share_class_id for r in rows if r.gbm_grade is None]
    if missing:
        raise ValueError(
            f"backtest: {len(missing)} test share class(es) carry no gradient-boosting grade "
            f"(e.g. {missing[:3]}); rerun `dvc repro evidence prepare`"
        )
    midpoint = {b.grade: b.midpoint for b in methodology.bands}
    return [
        Prediction(grade=(g := r.gbm_grade), written_grade=g, score=midpoint[g], valid=True, probs=r.gbm_probs)
        for r in rows
        if r.gbm_grade is not None  # checked above: every record has one
    ]


def claims_figures(rows: list[PromptRecord], preds: list[Prediction], methodology: Methodology) -> dict[str, Any]:
    """`evidence`: the mean evidence reward (an invalid answer scores 0); `unsupported`: the share of
    valid answers whose reasoning misstates anything checkable (each prediction's `unsupported`,
    from `methodology.answers.annotated`); block `claims` (`claims.summary`: claims made, the share misstated, complete
    answers)."""
    valid = [p for p in preds if p.valid]
    cites = [
        claims.score(p.reasoning or "", r.evidence, methodology, p.grade, r.rule_grade) if p.valid else 0.0
        for p, r in zip(preds, rows)
    ]
    return {
        "evidence": round(float(np.mean(cites)), 4),
        "unsupported": round(float(np.mean([bool(p.unsupported) for p in valid])), 4) if valid else None,
        "claims": claims.summary(
            [p.reasoning if p.valid else None for p in preds],
            [r.evidence for r in rows],
            methodology,
            [p.grade for p in preds],
            [r.rule_grade for r in rows],
        ),
    }


def fingerprint(rows: list[PromptRecord]) -> str:
    """Identifies the test set (funds and labels), so registry comparisons are like for like."""
    key = json.dumps(sorted((r.share_class_id, r.expert_grade, r.expert_score) for r in rows))
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def scored_funds(params: BacktestParams, rows: list[PromptRecord]) -> list[PromptRecord]:
    """The funds the backtest scores: the test split, or its first `backtest.max_funds`."""
    if params.max_funds:
        rows = rows[: params.max_funds]
    if not rows:
        raise ValueError("backtest: the test split is empty")
    return rows


def backtest(
    params: BacktestParams,
    rows: list[PromptRecord],
    methodology: Methodology,
    answered: dict[str, tuple[dict, list[Prediction]]],
    fits: dict[str, calibration.CalibrationFit] | None = None,
    reused: dict[str, str] | None = None,
    not_rated: list[PromptRecord] | None = None,
) -> dict:
    """Every evaluator scored on the test `rows`: each model's figures and predictions as its
    inference gave them (`answered`: name -> (figures, predictions), `fundgrpo.model.inference`),
    the rule scorer and, when the records carry it, the gradient-boosting baseline (block "gbm",
    whose `trust` uses its class probabilities); with `fits["grpo"]`, the served evaluator's parts
    apart; `comparisons` holds paired bootstrap intervals. `not_rated`: the test funds the
    methodology does not rate (prepare's `not_rated.jsonl`), counted apart (`apart`)."""
    fits = fits or {}
    results = {name: found for name, (found, _) in answered.items()}
    predictions = {name: preds for name, (_, preds) in answered.items()}
    grades = methodology.grades
    predictions["rule"] = rule_predictions(rows)
    results["rule"] = metrics(rows, predictions["rule"], grades)
    if any(r.gbm_grade is not None for r in rows):
        predictions["gbm"] = gbm_predictions(rows, methodology)
        results["gbm"] = metrics(rows, predictions["gbm"], grades)
        gbm = predictions["gbm"]
        results["gbm"]["trust"] = calibration.summary(
            expert_grades(rows), [p.grade for p in gbm],
            [p.probs for p in gbm], [max(p.probs or [0.0]) for p in gbm], grades,
        )  # fmt: skip
    fit = fits.get("grpo")
    if fit and "grpo" in predictions and "gbm" in predictions:  # the served evaluator's parts, apart
        rule = fit.rule
        for part, preds in contest.parts(rows, predictions["grpo"], fit, grades).items():
            key = part if part == "gbm_rule" else f"grpo_{part}"
            predictions[key], results[key] = preds, scored(rows, preds, grades)
        if "gbm_rule" in predictions:
            results["grpo"]["served"] = contest.served(rows, predictions["grpo"], predictions["gbm_rule"], rule, grades)
        results["grpo"]["story"] = text_against_grade(predictions["grpo"], rule, methodology.language)
        if fit.sft and "sft" in predictions:  # SFT under its own validation-chosen rule
            predictions["sft_served"] = contest.applied(rows, predictions["sft"], fit.sft.rule, grades)
            results["sft_served"] = scored(rows, predictions["sft_served"], grades)
            results["sft_served"]["serves"] = fit.sft.rule.chosen
    if methodology.qualitative and all(r.documents is not None for r in rows):  # the judgements from documents
        for name in LANGUAGE_MODELS:
            if name in predictions:
                results[name]["pillars"] = citations.summary(rows, predictions[name], methodology)
    if any(r.shown_grade is not None for r in rows):
        for name, preds in predictions.items():
            results[name]["departures"] = departures(rows, preds)
    return {
        "n_funds": len(rows),
        "not_rated": apart(not_rated or [], grades),
        "test_fingerprint": fingerprint(rows),
        "peak_rss_mb": io.peak_rss_mb(),
        "models": results,
        "labels": by_label_source(rows, predictions, grades),
        "comparisons": comparisons(rows, predictions, grades, params.bootstrap),
        "answers_reused": reused or {},
        "predictions": predictions,
        "rows": rows,
    }


def text_against_grade(preds: list[Prediction], rule: calibration.DecisionRule, language: str) -> dict[str, Any]:
    """Text against grade for a served evaluator (`story.counted`): the evaluations whose text was written
    for another grade than the one served, how many say so in their note, and the share whose text
    contradicts the grade without saying so (`untold`, the serving note being `story.written_note`)."""
    served = [p.grade for p in preds]
    written = [p.written_grade for p in preds]
    notes = [story.written_note(g, w, rule, language) for g, w in zip(served, written)]
    return story.counted(served, written, notes, [list(p.unsupported or ()) for p in preds])


def apart(records: list[PromptRecord], grades: list[int]) -> dict[str, Any]:
    """The labelled test funds the methodology does not rate (too little data): how many, and the
    grades the experts gave them. No evaluator is scored on them: none rates them.

    >>> apart([PromptRecord.example(expert_grade=g) for g in (3, 5, 3)], [1, 2, 3, 4, 5])
    {'n': 3, 'expert_grades': {'1': 0, '2': 0, '3': 2, '4': 0, '5': 1}}
    """
    counts = {str(g): sum(e == g for e in expert_grades(records)) for g in grades}
    return {"n": len(records), "expert_grades": counts}


def scored(rows: list[PromptRecord], preds: list[Prediction], grades: list[int]) -> dict[str, Any]:
    """`metrics`, and (where the predictions carry probabilities) block `trust`: their calibration."""
    out = metrics(rows, preds, grades)
    if any(p.probs is not None for p in preds):
        out["trust"] = calibration.summary(
            expert_grades(rows), [p.grade for p in preds], [p.probs for p in preds],
            [p.confidence or 0.0 for p in preds], grades,
        )  # fmt: skip
    return out


def confidence_of(
    preds: list[Prediction], grades: list[int], raw: bool = False
) -> tuple[np.ndarray, np.ndarray] | None:
    """(confidence, full probabilities) of an evaluator's predictions: the product's when a fit was
    applied (unless `raw`), else the first belief method's raw probability of the written grade, else
    the class probabilities (gradient boosting); None when it has none (the rule scorer). An invalid
    answer: confidence 0, uniform probabilities."""
    uniform = [1.0 / len(grades)] * len(grades)
    if raw and any(p.beliefs for p in preds):
        preds = [p.as_written() for p in preds]
    if any(p.probs is not None for p in preds):
        probs = [p.probs if p.probs is not None else uniform for p in preds]
        conf = [p.surest if p.surest is not None else 0.0 for p in preds]
        return np.asarray(conf, dtype=float), np.asarray(probs, dtype=float)
    methods = [m for p in preds for m in p.beliefs]
    if not methods:
        return None
    first = methods[0]
    probs, conf = [], []
    for p in preds:
        b = p.beliefs.get(first)
        probs.append(b if b is not None else uniform)
        conf.append(b[grades.index(p.grade)] if b is not None and p.grade is not None else 0.0)
    return np.asarray(conf, dtype=float), np.asarray(probs, dtype=float)


# (A, B, compare raw beliefs): GRPO against its SFT start on what training changed (the beliefs as
# read, no calibration fit); against gradient boosting with the product's confidence.
# Against gradient boosting with the same validation-chosen rule: the served evaluator, the language
# model alone and the stack; GRPO against SFT as served.
PAIRS = (
    ("grpo", "gbm", False),
    ("grpo", "sft", True),
    ("grpo", "rule", False),
    ("sft", "gbm", False),
    ("grpo", "gbm_rule", False),
    ("grpo_alone", "gbm_rule", False),
    ("grpo_stack", "gbm_rule", False),
    ("grpo", "sft_served", False),
)


def comparisons(
    rows: list[PromptRecord], predictions: dict[str, list[Prediction]], grades: list[int], n: int
) -> dict[str, dict]:
    """Paired bootstrap intervals (funds resampled by fund) of A - B for each pair in PAIRS present:
    exact and QWK; where both have confidence, exact on the most confident 50/70/90 % (exact_top50 ...) (each
    evaluator choosing its own funds), ECE and Brier. `n` 0: none."""
    if n <= 0:
        return {}
    y = np.asarray(expert_grades(rows), dtype=int)
    groups = [str(r.fund_id) for r in rows]
    index = np.asarray([grades.index(int(v)) for v in y])
    stats: dict[tuple[str, bool], dict] = {}
    for name, preds in predictions.items():
        for raw in (False, True):
            p = filled(y, [(q.as_written() if raw else q).grade for q in preds], grades)
            entry: dict[str, Any] = {"p": p}
            found = confidence_of(preds, grades, raw)
            if found is not None:
                conf, probs = found
                onehot = np.zeros_like(probs)
                onehot[np.arange(len(y)), index] = 1.0
                entry.update(conf=conf, brier=((probs - onehot) ** 2).sum(axis=1), correct=(p == y).astype(float))
            stats[(name, raw)] = entry

    def figure(name: str, raw: bool, what: str):
        e = stats[(name, raw)]
        if what in ("exact", "qwk"):
            return lambda rows: one_metric(y[rows], e["p"][rows], grades, what)
        if what.startswith("exact_top"):
            cov = int(what.removeprefix("exact_top")) / 100

            def selective(rows: np.ndarray) -> float:
                keep = rows[calibration.most_confident(e["conf"][rows], cov)]
                return float(np.mean(y[keep] == e["p"][keep]))

            return selective
        if what == "brier":
            return lambda rows: float(e["brier"][rows].mean())
        return lambda rows: calibration.ece(e["conf"][rows], e["correct"][rows])

    out = {}
    for a, b, raw in PAIRS:
        if a not in predictions or b not in predictions:
            continue
        whats = ["exact", "qwk"]
        if "conf" in stats[(a, raw)] and "conf" in stats[(b, raw)]:
            whats += [f"exact_top{round(c * 100)}" for c in calibration.COVERAGES] + ["ece", "brier"]
        key = f"{a}-{b}" + (" (raw beliefs)" if raw else "")
        out[key] = {w: bootstrap_diff(figure(a, raw, w), figure(b, raw, w), groups, n) for w in whats}
    return out


def by_label_source(
    rows: list[PromptRecord], predictions: dict[str, list[Prediction]], grades: list[int]
) -> dict[str, dict]:
    """Agreement with the analysts' decisions apart from the export's grades: each evaluator on the test
    funds whose label came from each source (`label_source`, set by prepare); QWK from 10 funds up.

    >>> rows = [PromptRecord.example(expert_grade=3, expert_score=50.0, label_source=s) for s in ("export", "analyst")]
    >>> rule = [Prediction(grade=g, written_grade=g, score=s, valid=True) for g, s in ((3, 50.0), (2, 30.0))]
    >>> out = by_label_source(rows, {"rule": rule}, [1, 2, 3])
    >>> out["analyst"]["n"], out["analyst"]["rule"]["exact"], out["export"]["rule"]["exact"]
    (1, 0.0, 1.0)
    """
    out: dict[str, dict] = {}
    for source in sorted({r.label_source for r in rows}):
        idx = [i for i, r in enumerate(rows) if r.label_source == source]
        keep = ("exact", "within_one", "qwk") if len(idx) >= 10 else ("exact", "within_one")
        out[source] = {"n": len(idx)}
        for name, preds in predictions.items():
            found = metrics([rows[i] for i in idx], [preds[i] for i in idx], grades)
            out[source][name] = {k: found[k] for k in keep}
    return out
