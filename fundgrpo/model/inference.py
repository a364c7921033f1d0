"""A trained model's answers: load it, answer funds greedily, parse the answers and check their
claims, read its grade probabilities, and apply the calibrate stage's fit. The backtest, the
calibrate stage, registration and serving get a model's evaluations here; scoring them against
the experts is `fundgrpo.evaluation` (which needs no model code).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from fundgrpo.evaluation import calibration, contest
from fundgrpo.evaluation.agreement import metrics
from fundgrpo.evaluation.backtesting import claims_figures
from fundgrpo.methodology import answers, citations
from fundgrpo.methodology.answers import Prediction
from fundgrpo.methodology.compiler import Methodology
from fundgrpo.methodology.records import PromptRecord, expert_grades
from fundgrpo.model import belief, modelling
from fundgrpo.model.modelling import answer_fingerprint
from fundgrpo.params import GRADE_FROM, CalibrateParams, GenerationParams


def evaluate_model(
    path: str | Path,
    rows: list[PromptRecord],
    methodology: Methodology,
    schema: dict,
    max_new_tokens: int = 96,
    batch_size: int = 32,
    desc: str = "model",
    methods: tuple[str, ...] = (),
    fit: calibration.CalibrationFit | None = None,
    dtype: str = "float32",
) -> tuple[dict[str, Any], list[Prediction]]:
    """Generate greedy answers for `rows` with the model at `path` and score them (`metrics`),
    with `evidence` (the mean evidence reward) and `unsupported` (the share of valid answers whose
    reasoning misstates a criterion: cited with no data in the prompt, or on the wrong side).

    `methods`: read the model's grade probabilities at each decision point (`belief.METHODS`) and
    report their calibration (block `calibration`, the confidence being the probability of the
    written grade). `fit`: the calibrate stage's choice; each prediction then carries the product's
    `probs`, `expected_grade` and `confidence` (and, with `grade_from: expected`, its grade), and
    block `trust` its calibration (`greedy` keeps the written grades' figures when they differ).
    """
    grades = methodology.grades
    model, tokenizer = modelling.load(path, dtype)
    wanted = [*methods, *contest.methods_needed([fit] if fit else [])]
    cached: dict[str, list] = {m: [] for m in wanted if m in belief.METHODS}  # read as the answers are generated
    preds = answer(
        model, tokenizer, rows, methodology, schema=schema, max_new_tokens=max_new_tokens, batch_size=batch_size,
        desc=desc, cached=cached,
    )  # fmt: skip
    result = metrics(rows, preds, grades)
    result.update(claims_figures(rows, preds, methodology))
    expert = expert_grades(rows)
    written = [p.grade for p in preds]
    read: dict[str, list] = {}
    for method in dict.fromkeys(wanted if any(written_ is not None for written_ in written) else []):
        if method == "stated" and not any(p.stated is not None for p in preds):
            continue  # the answers state no confidence (prepare.stated_confidence is off)
        read[method], mass = read_beliefs(
            model, tokenizer, rows, preds, methodology=methodology, method=method, desc=desc, batch_size=batch_size,
            cached=cached.get(method),
        )  # fmt: skip
        confidence = [
            b[grades.index(w)] if b is not None and w is not None else 0.0 for b, w in zip(read[method], written)
        ]
        if method in methods:
            result.setdefault("calibration", {})[method] = {
                **calibration.summary(expert, written, read[method], confidence, grades),
                "mass": mass,
            }
        preds = [p.believed(method, b) for p, b in zip(preds, read[method])]
    if fit is not None:
        rule = fit.rule
        gbm = [r.gbm_probs for r in rows]  # a pooled fit weighs the statistical estimate too
        beliefs = read.get(rule.method, [None] * len(preds))  # none where no answer is valid
        decided = [calibration.decide(b, w, rule, grades, q) for b, w, q in zip(beliefs, written, gbm)]
        preds = [p.decided(d) for p, d in zip(preds, decided)]
        result["trust"] = calibration.summary(
            expert, [d["grade"] for d in decided], [d["probs"] for d in decided],
            [d["confidence"] or 0.0 for d in decided], grades,
        )  # fmt: skip
        result["trust"]["chosen"] = rule.chosen or f"{rule.method}/{rule.confidence}"
        result["trust"]["grade_from"] = rule.grade_from
        result["grade_from"] = {}  # the three ways to report a grade, on these funds
        for way in GRADE_FROM:
            chosen = [
                calibration.decide(b, w, replace(rule, grade_from=way), grades, q)["grade"]
                for b, w, q in zip(beliefs, written, gbm)
            ]
            found = metrics(rows, [replace(p, grade=g) for p, g in zip(preds, chosen)], grades)
            result["grade_from"][way] = {k: found[k] for k in ("exact", "within_one", "qwk", "spearman")}
        if rule.grade_from != "greedy":
            result.update({k: v for k, v in metrics(rows, preds, grades).items() if k != "valid_json"})
    return result, preds


def fit_model(
    path: Path,
    rows: list[PromptRecord],
    methodology: Methodology,
    schema: dict,
    c: CalibrateParams,
    generation: GenerationParams,
) -> tuple[calibration.CalibrationFit, list[Prediction]]:
    """The calibration fit of the model at `path` on the validation `rows` (`contest.fit_choice`),
    with its validation figures; and its predictions there. A model with no valid answer gets
    `NO_FIT` (its evaluations carry no confidence); one whose answers carry no grade probability at
    all is an error (its confidence cannot be read)."""
    found, preds = evaluate_model(
        path,
        rows,
        methodology,
        schema,
        max_new_tokens=generation.max_new_tokens,
        batch_size=generation.batch_size,
        desc=f"calibrate {path}",
        methods=tuple(c.beliefs),
        dtype=generation.dtype,
    )
    readable = {m: [q.beliefs.get(m) for q in preds] for m in c.beliefs}
    valid = sum(q.valid for q in preds)
    gbm = [r.gbm_probs for r in rows] if all(r.gbm_probs is not None for r in rows) else None
    groups = [str(r.fund_id) for r in rows]
    expert = expert_grades(rows)
    if valid == 0:
        print(f"calibrate: warning: {path} gave no valid answer on the {len(rows)} validation funds")
        fit = contest.NO_FIT
        if gbm is not None:  # gradient boosting's rule is still fitted: the backtest measures it
            alone = contest.fit_choice(
                expert,
                [None] * len(rows),
                {},
                methodology.grades,
                serve="gbm",
                grade_from=c.grade_from,
                bins=c.bins,
                gbm=gbm,
                groups=groups,
                folds=c.folds,
                contradiction_cost=c.contradiction_cost,
            )
            fit = replace(fit, by_source=alone.by_source)
    elif not any(b is not None for column in readable.values() for b in column):
        raise ValueError(
            f"calibrate: {path} puts no probability on any grade at its answers' decision points "
            f"({valid} valid answers on {len(rows)} validation funds; calibrate.beliefs {list(c.beliefs)}): "
            "its confidence cannot be read"
        )
    else:
        fit = contest.fit_choice(
            expert,
            [q.grade for q in preds],
            readable,
            methodology.grades,
            serve=c.serve,
            grade_from=c.grade_from,
            bins=c.bins,
            gbm=gbm,
            groups=groups,
            folds=c.folds,
            contradiction_cost=c.contradiction_cost,
        )
    return replace(fit, model=str(path), validation_funds=len(rows), validation=found), preds


def answer(
    model,
    tokenizer,
    rows: list[PromptRecord],
    methodology: Methodology,
    schema: dict,
    max_new_tokens: int,
    batch_size: int,
    desc: str,
    rule: calibration.DecisionRule | None = None,
    deadline: float | None = None,
    cached: dict[str, list] | None = None,
) -> list[Prediction]:
    """The model's greedy evaluations of `rows`, parsed; each valid one's misstated criteria
    (`unsupported`, where the rows carry their evidence) and, with a decision `rule`, its probabilities,
    expected grade and confidence (`calibration.decide`). `deadline`: see `modelling.generate`.

    Beliefs are read from each batch's key-value cache as it is generated (`belief.from_cache`): the
    rule's method, and each method `cached` names (its list is filled, one entry per row, for the caller).
    A row the methodology does not rate (`not_rated`, from serving's records) is not generated for: its
    answer says why (`answers.not_rated`), and its beliefs are None."""
    cached = {} if cached is None else cached
    if any(r.not_rated for r in rows):
        keep = [i for i, r in enumerate(rows) if not r.not_rated]
        inner: dict[str, list] = {method: [] for method in cached}
        got = answer(
            model, tokenizer, [rows[i] for i in keep], methodology, schema=schema, max_new_tokens=max_new_tokens,
            batch_size=batch_size, desc=desc, rule=rule, deadline=deadline, cached=inner,
        ) if keep else []  # fmt: skip
        got_by = dict(zip(keep, got))
        out = [got_by[i] if i in got_by else answers.not_rated(str(r.not_rated)) for i, r in enumerate(rows)]
        for method, column in inner.items():
            filled: list = [None] * len(rows)
            for i, value in zip(keep, column):
                filled[i] = value
            cached.setdefault(method, [])[:] = filled  # in place: the caller holds the list
        return out
    if rule is not None and rule.method in belief.METHODS:
        cached.setdefault(rule.method, [])
    for column in cached.values():
        column[:] = [belief.UNREAD] * len(rows)

    def read_here(start, sequences, prompt_mask, cache, texts):
        found = belief.from_cache(
            model, tokenizer, sequences, prompt_mask, cache=cache, answers=texts, methodology=methodology,
            methods=tuple(cached),
        )  # fmt: skip
        for method, values in found.items():
            cached[method][start : start + len(values)] = values

    prompts = [r.prompt for r in rows]
    texts = modelling.generate(
        model, tokenizer, prompts, max_new_tokens, batch_size, desc=desc, deadline=deadline,
        on_batch=read_here if cached else None, shown=shown_documents(rows),
    )  # fmt: skip
    preds = answers.predictions_from_texts(texts, schema)
    preds = answers.annotated(preds, rows, methodology)
    if rule is not None:  # every answer, valid or not: served gradient boosting alone, an invalid one keeps its grade
        read: list = [None] * len(preds)
        if any(p.valid for p in preds):
            read, _ = read_beliefs(
                model, tokenizer, rows, preds, methodology=methodology, method=rule.method, desc=desc,
                batch_size=batch_size, cached=cached.get(rule.method),
            )  # fmt: skip
        preds = [
            p.decided(calibration.decide(b, p.grade, rule, methodology.grades, r.gbm_probs))
            for p, b, r in zip(preds, read, rows)
        ]
    return preds


def shown_documents(rows: list[PromptRecord]) -> list[tuple[int, ...]] | None:
    """What each row's answer may cite (`citations.sentence_counts`), or None where no row carries documents."""
    return [citations.sentence_counts(r) for r in rows] if any(r.documents for r in rows) else None


def read_beliefs(
    model,
    tokenizer,
    rows: list[PromptRecord],
    preds: list[Prediction],
    methodology: Methodology,
    method: str,
    desc: str,
    batch_size: int = 16,
    cached: list | None = None,
) -> tuple[list, float | None]:
    """The model's raw grade probabilities for each of its valid answers (None for the others), and
    the mean probability it puts on the candidates at all (`belief.read`'s mass), `batch_size` answers
    a forward pass; `cached`: those already read during generation (`belief.UNREAD` where not). Method
    "stated": the confidence the answer states, as probabilities (`calibration.stated_probs`), no model call."""
    if method == "stated":
        grades = methodology.grades
        return [
            calibration.stated_probs(p.stated, p.written_grade, grades)
            if p.stated is not None and p.written_grade is not None
            else None
            for p in preds
        ], None
    valid = [i for i, p in enumerate(preds) if p.valid]
    todo = [i for i in valid if not cached or cached[i] is belief.UNREAD]
    got = (
        dict(
            zip(
                todo,
                belief.beliefs(
                    model,
                    tokenizer,
                    [rows[i].prompt for i in todo],
                    [preds[i].text for i in todo],
                    methodology=methodology,
                    method=method,
                    desc=desc,
                    batch_size=batch_size,
                ),
            )
        )
        if todo
        else {}
    )
    got.update({i: cached[i] for i in valid if i not in got and cached})
    out: list = [None] * len(preds)
    for i, b in got.items():
        out[i] = b.probs if b is not None else None
    masses = [b.mass for b in got.values() if b is not None]
    return out, (round(float(np.mean(masses)), 4) if masses else None)


def fit_models(
    models: dict[str, Path],
    rows: list[PromptRecord],
    methodology: Methodology,
    schema: dict,
    c: CalibrateParams,
    generation: GenerationParams,
) -> tuple[calibration.CalibrationFit, dict[str, calibration.CalibrationFit]]:
    """The calibrate stage's choice for the policy (`models["grpo"]`), with the SFT start's own choice
    under key `sft` (none when the SFT folder holds no weights; the policy's when GRPO kept its start),
    so the backtest compares like with like; and each model's fit with all its options."""
    fits: dict[str, calibration.CalibrationFit] = {}
    for name in ("grpo", "sft"):
        key = answer_fingerprint(models[name])
        if name == "sft" and key is None:
            print(f"calibrate: {models[name]} holds no weights: no SFT start to compare with")
            continue
        if name == "sft" and key == answer_fingerprint(models["grpo"]):
            fits["sft"] = replace(fits["grpo"], model=str(models[name]))  # GRPO kept its SFT start
            continue
        fits[name], _ = fit_model(models[name], rows, methodology, schema, c, generation)
    written = replace(fits["grpo"], sft=replace(fits["sft"], options={}) if "sft" in fits else None)
    return written, fits


def evaluate_models(
    models: dict[str, Path],
    rows: list[PromptRecord],
    methodology: Methodology,
    schema: dict,
    beliefs: tuple[str, ...] | list[str],
    fits: dict[str, calibration.CalibrationFit] | None = None,
    generation: GenerationParams = GenerationParams(),
) -> tuple[dict[str, tuple[dict, list[Prediction]]], dict[str, str]]:
    """Each model's figures and predictions on `rows` (`evaluate_model`, its grade probabilities read
    at each of `beliefs` and `fits[name]` applied), and which models share another's answers (the
    same weights and configs answer alike: GRPO kept its SFT start)."""
    fits = fits or {}
    answered: dict[str, tuple[dict, list[Prediction]]] = {}
    by_key: dict[str, str] = {}  # answer fingerprint -> the model that answered
    reused: dict[str, str] = {}  # model -> the model whose answers it shares
    for name, path in models.items():
        same = by_key.get(key) if (key := answer_fingerprint(path)) else None
        if same:
            found, preds = answered[same]
            preds = [p.as_written() for p in preds]
            found = {
                **{k: v for k, v in found.items() if k not in ("trust", "greedy")},
                **metrics(rows, preds, methodology.grades),
                "seconds": 0.0,
            }
            answered[name], reused[name] = (found, preds), same
            print(f"backtest {name}: the same weights as {same}, its answers reused")
            continue
        started = time.perf_counter()
        methods = tuple(dict.fromkeys([*beliefs, *contest.methods_needed(fits.values())]))
        found, preds = evaluate_model(
            path,
            rows,
            methodology,
            schema,
            max_new_tokens=generation.max_new_tokens,
            batch_size=generation.batch_size,
            desc=name,
            methods=methods,
            fit=fits.get(name),
            dtype=generation.dtype,
        )
        for extra in set(methods) - set(beliefs):  # read for a fit's parts, not reported as the model's own
            found.get("calibration", {}).pop(extra, None)
        found["seconds"] = round(time.perf_counter() - started, 1)  # loading, answering, reading probabilities
        answered[name] = (found, preds)
        if key:
            by_key[key] = name
    return answered, reused
