"""Score evaluators (a model or the rule scorer) against the experts on held-out funds.

A completion that is not valid JSON per the schema has no grade: it counts against the model in
`valid_json` and as a miss in every agreement figure, so every metric covers every test fund and
models are compared on the same funds (`neutral` keeps the earlier convention, which read an
invalid answer as the middle grade and so credited an untrained model with 0.389 exact).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from fundgrpo import io
from fundgrpo.evaluation import belief, calibration, contest
from fundgrpo.evaluation.agreement import bootstrap_diff, confusion, departures, grade_metrics, one_metric
from fundgrpo.methodology import claims
from fundgrpo.params import GRADE_FROM, BacktestParams, CalibrateParams, GenerationParams
from fundgrpo.training import modelling
from fundgrpo.training.modelling import answer_fingerprint
from fundgrpo.training.rewards import answer_problem, evidence_reward, parse_answer


def predictions_from_texts(texts: list[str], rubric: dict, schema: dict) -> list[dict]:
    """Parse completions. An invalid one carries no grade and no score (None) but the reason it is
    invalid, so no client can read a made-up middle grade as the model's.

    >>> from fundgrpo.methodology.compiler import parse, output_schema, rubric as rb
    >>> m = parse({"criteria": [{"metric": "sharpe_3y", "weight": 1}],
    ...            "grades": [{"grade": g, "min": 20 * (g - 1), "max": 20 * g} for g in range(1, 6)]})
    >>> p = predictions_from_texts(['{"grade": 5, "score": 95, "reasoning": "x"}', "oops"], rb(m), output_schema(m))
    >>> [(x["grade"], x["valid"], x["reason"]) for x in p]
    [(5, True, None), (None, False, 'not one JSON object')]
    """
    out = []
    for text in texts:
        problem = answer_problem(text, schema)
        if problem is not None:
            out.append(
                {"grade": None, "score": None, "reasoning": None, "valid": False, "reason": problem, "text": text}
            )
        else:
            answer = parse_answer(text)
            out.append(
                {
                    "grade": int(answer["grade"]),
                    "score": float(answer["score"]),
                    "reasoning": answer["reasoning"],
                    "valid": True,
                    "reason": None,
                    "text": text,
                    **({"stated": answer["confidence"] / 100.0} if "confidence" in answer else {}),
                }
            )
    return out


def metrics(rows: list[dict], predictions: list[dict], grades: list[int]) -> dict[str, Any]:
    """valid_json; exact, within_one, qwk, spearman with an invalid answer as a miss (the grade
    farthest from the expert's, so it counts fully against the model); score_mae over the valid
    answers; and `neutral`: the same four figures by the earlier convention, an invalid answer
    read as the middle grade (kept so that older results compare).

    >>> rows = [{"expert_grade": g, "expert_score": 50.0} for g in (1, 3, 5)]
    >>> m = metrics(rows, [{"grade": 1, "score": 10.0}, {"grade": None, "score": None, "valid": False},
    ...                    {"grade": 5, "score": 90.0}], [1, 2, 3, 4, 5])
    >>> m["valid_json"], m["exact"], m["neutral"]["exact"]
    (0.6667, 0.6667, 1.0)
    """
    expert = [r["expert_grade"] for r in rows]
    predicted = [p["grade"] for p in predictions]
    out: dict[str, Any] = {"valid_json": float(np.mean([p.get("valid", True) for p in predictions]))}
    out.update(grade_metrics(expert, calibration.filled(expert, predicted, grades).tolist(), grades))
    scored = [(p["score"], r["expert_score"]) for p, r in zip(predictions, rows) if p["score"] is not None]
    out["score_mae"] = float(np.mean([abs(a - b) for a, b in scored])) if scored else None
    out = {k: (round(v, 4) if v is not None else None) for k, v in out.items()}
    middle = grades[len(grades) // 2]
    neutral = grade_metrics(expert, [middle if g is None else g for g in predicted], grades)
    out["neutral"] = {k: round(v, 4) for k, v in neutral.items()}
    return out


def rule_predictions(rows: list[dict]) -> list[dict]:
    return [{"grade": r["rule_grade"], "score": r["rule_score"], "valid": True} for r in rows]


def gbm_predictions(rows: list[dict], rubric: dict) -> list[dict]:
    """The gradient-boosting baseline's grades, which `prepare` put in each record (the `evidence`
    stage's estimate from the training split's model); the score is the midpoint of the grade's
    band (the baseline predicts a grade only).

    >>> r = {"bands": [{"grade": 1, "min": 0, "max": 50}, {"grade": 2, "min": 50, "max": 100}]}
    >>> gbm_predictions([{"share_class_id": "a", "gbm_grade": 2, "gbm_probs": [0.3, 0.7]}], r)
    [{'grade': 2, 'score': 75.0, 'valid': True, 'probs': [0.3, 0.7]}]
    """
    missing = [r["share_class_id"] for r in rows if "gbm_grade" not in r]
    if missing:
        raise ValueError(
            f"backtest: {len(missing)} test share class(es) carry no gradient-boosting grade "
            f"(e.g. {missing[:3]}); rerun `dvc repro evidence prepare`"
        )
    midpoint = {b["grade"]: (b["min"] + b["max"]) / 2 for b in rubric["bands"]}
    return [
        {"grade": int(r["gbm_grade"]), "score": midpoint[int(r["gbm_grade"])], "valid": True, "probs": r["gbm_probs"]}
        for r in rows
    ]


def evaluate_model(
    path: str | Path,
    rows: list[dict],
    rubric: dict,
    schema: dict,
    max_new_tokens: int = 96,
    batch_size: int = 32,
    desc: str = "model",
    methods: tuple[str, ...] = (),
    fit: dict | None = None,
) -> tuple[dict[str, Any], list[dict]]:
    """Generate greedy answers for `rows` with the model at `path` and score them (`metrics`),
    with `evidence` (the mean evidence reward) and `unsupported` (the share of valid answers whose
    reasoning misstates a criterion: cited with no data in the prompt, or on the wrong side).

    `methods`: read the model's grade probabilities at each decision point (`belief.METHODS`) and
    report their calibration (block `calibration`, the confidence being the probability of the
    written grade). `fit`: the calibrate stage's choice; each prediction then carries the product's
    `probs`, `expected_grade` and `confidence` (and, with `grade_from: expected`, its grade), and
    block `trust` its calibration (`greedy` keeps the written grades' figures when they differ).
    """
    grades = rubric["grades"]
    model, tokenizer = modelling.load(path)
    preds = answer(model, tokenizer, rows, rubric, schema, max_new_tokens, batch_size, desc)
    result = metrics(rows, preds, grades)
    result.update(honesty(rows, preds, [p["text"] for p in preds], rubric, schema))
    expert = [r["expert_grade"] for r in rows]
    written = [p["grade"] for p in preds]
    read: dict[str, list] = {}
    wanted = [*methods, *contest.methods_needed({"fit": fit} if fit else {})]
    for method in dict.fromkeys(wanted if any(written_ is not None for written_ in written) else []):
        if method == "stated" and not any("stated" in p for p in preds):
            continue  # the answers state no confidence (prepare.stated_confidence is off)
        read[method], mass = read_beliefs(model, tokenizer, rows, preds, rubric, method, desc)
        confidence = [
            b[grades.index(w)] if b is not None and w is not None else 0.0 for b, w in zip(read[method], written)
        ]
        if method in methods:
            result.setdefault("calibration", {})[method] = {
                **calibration.summary(expert, written, read[method], confidence, grades),
                "mass": mass,
            }
        for p, b in zip(preds, read[method]):
            p.setdefault("beliefs", {})[method] = b
    if fit is not None:
        gbm = [r.get("gbm_probs") for r in rows]  # a pooled fit weighs the statistical estimate too
        beliefs = read.get(fit["method"], [None] * len(preds))  # none where no answer is valid
        decided = [calibration.decide(b, w, fit, grades, q) for b, w, q in zip(beliefs, written, gbm)]
        for p, d in zip(preds, decided):
            p.update(written_grade=p["grade"], **d)
        result["trust"] = calibration.summary(
            expert, [d["grade"] for d in decided], [d["probs"] for d in decided],
            [d["confidence"] or 0.0 for d in decided], grades,
        )  # fmt: skip
        result["trust"]["chosen"] = fit.get("chosen", f"{fit['method']}/{fit['confidence']}")
        result["trust"]["grade_from"] = fit.get("grade_from", "greedy")
        result["grade_from"] = {}  # the three ways to report a grade, on these funds
        for way in GRADE_FROM:
            chosen = [
                calibration.decide(b, w, {**fit, "grade_from": way}, grades, q)["grade"]
                for b, w, q in zip(beliefs, written, gbm)
            ]
            found = metrics(rows, [{**p, "grade": g} for p, g in zip(preds, chosen)], grades)
            result["grade_from"][way] = {k: found[k] for k in ("exact", "within_one", "qwk", "spearman")}
        if fit.get("grade_from", "greedy") != "greedy":
            result.update({k: v for k, v in metrics(rows, preds, grades).items() if k != "valid_json"})
    return result, preds


def fit_model(
    path: Path, rows: list[dict], rubric: dict, schema: dict, c: CalibrateParams, generation: GenerationParams
) -> tuple[dict[str, Any], list[dict]]:
    """The calibration fit of the model at `path` on the validation `rows` (`calibration.fit_choice`),
    with its validation figures; and its predictions there. A model with no valid answer gets
    `NO_FIT` (its evaluations carry no confidence); one whose answers carry no grade probability at
    all is an error (its confidence cannot be read)."""
    found, preds = evaluate_model(
        path,
        rows,
        rubric,
        schema,
        generation.max_new_tokens,
        generation.batch_size,
        f"calibrate {path}",
        tuple(c.beliefs),
    )
    readable = {m: [q["beliefs"].get(m) if q.get("beliefs") else None for q in preds] for m in c.beliefs}
    valid = sum(q["valid"] for q in preds)
    gbm = [r["gbm_probs"] for r in rows] if all("gbm_probs" in r for r in rows) else None
    groups = [str(r.get("fund_id", r["share_class_id"])) for r in rows]
    expert = [r["expert_grade"] for r in rows]
    if valid == 0:
        print(f"calibrate: warning: {path} gave no valid answer on the {len(rows)} validation funds")
        fit = {**contest.NO_FIT, "chosen": "none: no valid answer on validation", "options": {}, "by_source": {}}
        if gbm is not None:  # gradient boosting's rule is still fitted: the backtest measures it
            alone = calibration.fit_choice(
                expert, [None] * len(rows), {}, rubric["grades"], "gbm", c.grade_from, c.bins, gbm, groups,
                c.folds, c.contradiction_cost,
            )  # fmt: skip
            fit["by_source"] = alone["by_source"]
    elif not any(b is not None for column in readable.values() for b in column):
        raise ValueError(
            f"calibrate: {path} puts no probability on any grade at its answers' decision points "
            f"({valid} valid answers on {len(rows)} validation funds; calibrate.beliefs {list(c.beliefs)}): "
            "its confidence cannot be read"
        )
    else:
        fit = calibration.fit_choice(
            expert, [q["grade"] for q in preds], readable, rubric["grades"], c.serve, c.grade_from, c.bins, gbm,
            groups, c.folds, c.contradiction_cost,
        )  # fmt: skip
    return {**fit, "model": str(path), "validation_funds": len(rows), "validation": found}, preds


# The confidence a model gets when no calibration was fitted for it (a folder of weights, an older
# registered version): its belief at the score as read.
DEFAULT_FIT = {"method": "score", "confidence": "token", "temperature": 1.0, "grade_from": "greedy", "cutpoints": None}


def answer(
    model,
    tokenizer,
    rows: list[dict],
    rubric: dict,
    schema: dict,
    max_new_tokens: int,
    batch_size: int,
    desc: str,
    fit: dict | None = None,
    deadline: float | None = None,
) -> list[dict]:
    """The model's greedy evaluations of `rows`, parsed; each valid one's misstated criteria
    (`unsupported`, where the rows carry their evidence) and, with `fit`, its probabilities,
    expected grade and confidence (`calibration.decide`). `deadline`: see `modelling.generate`."""
    prompts = [r["prompt"] for r in rows]
    texts = modelling.generate(model, tokenizer, prompts, max_new_tokens, batch_size, desc=desc, deadline=deadline)
    preds = predictions_from_texts(texts, rubric, schema)
    for p, r in zip(preds, rows):
        if "evidence" in r:
            found = claims.check(
                p["reasoning"], claims.percentiles(r["evidence"]), rubric, p["grade"], r.get("rule_grade")
            )
            p["unsupported"] = [c["about"] for c in found if c["status"] in claims.MISSTATED]
            p["claims"] = len(found)
            p["complete"] = bool(p["reasoning"]) and claims.complete(p["reasoning"], r["evidence"], rubric)
    if fit is not None and any(p["valid"] for p in preds):
        read, _ = read_beliefs(model, tokenizer, rows, preds, rubric, fit["method"], desc)
        for p, b, r in zip(preds, read, rows):
            decided = calibration.decide(b, p["grade"], fit, rubric["grades"], r.get("gbm_probs"))
            p.update(written_grade=p["grade"], **decided)
    return preds


def read_beliefs(
    model, tokenizer, rows: list[dict], preds: list[dict], rubric: dict, method: str, desc: str
) -> tuple[list, float | None]:
    """The model's raw grade probabilities for each of its valid answers (None for the others), and
    the mean probability it puts on the candidates at all (`belief.read`'s mass). Method "stated":
    the confidence the answer states, as probabilities (`calibration.stated_probs`), no model call."""
    if method == "stated":
        grades = rubric["grades"]
        return [
            calibration.stated_probs(p["stated"], p["grade"], grades) if p.get("stated") is not None else None
            for p in preds
        ], None
    valid = [i for i, p in enumerate(preds) if p["valid"]]
    found = belief.beliefs(
        model, tokenizer, [rows[i]["prompt"] for i in valid], [preds[i]["text"] for i in valid], rubric, method, desc
    )
    out: list = [None] * len(preds)
    for i, b in zip(valid, found):
        out[i] = b["probs"] if b is not None else None
    masses = [b["mass"] for b in found if b is not None]
    return out, (round(float(np.mean(masses)), 4) if masses else None)


def honesty(rows: list[dict], preds: list[dict], texts: list[str], rubric: dict, schema: dict) -> dict[str, Any]:
    """`evidence`: the mean evidence reward (an invalid answer scores 0); `unsupported`: the share of
    valid answers whose reasoning misstates anything checkable (each prediction's `unsupported`,
    from `answer`); block `claims` (`claims.summary`: claims made, the share misstated, complete
    answers)."""
    if not all("evidence" in r for r in rows):
        return {}
    valid = [p for p in preds if p["valid"]]
    cites = evidence_reward(
        texts, [r["evidence"] for r in rows], [r.get("rule_grade") for r in rows], schema=schema, rubric=rubric
    )
    return {
        "evidence": round(float(np.mean(cites)), 4),
        "unsupported": round(float(np.mean([bool(p["unsupported"]) for p in valid])), 4) if valid else None,
        "claims": claims.summary(
            [p["reasoning"] if p["valid"] else None for p in preds],
            [r["evidence"] for r in rows],
            rubric,
            [p["grade"] for p in preds],
            [r.get("rule_grade") for r in rows],
        ),
    }


def fingerprint(rows: list[dict]) -> str:
    """Identifies the test set (funds and labels), so registry comparisons are like for like."""
    key = json.dumps(sorted((r["share_class_id"], r["expert_grade"], r["expert_score"]) for r in rows))
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def backtest(
    params: BacktestParams,
    rows: list[dict],
    rubric: dict,
    schema: dict,
    models: dict[str, Path],
    fits: dict[str, dict] | None = None,
    generation: GenerationParams = GenerationParams(),
) -> dict:
    """Metrics and predictions for each model in `models` (with the calibration of its grade
    probabilities read at each of `params.beliefs`, and `fits[name]`, a calibrate stage's fit, applied),
    the rule scorer and, when the records carry it, the gradient-boosting baseline (block "gbm",
    whose `trust` uses its class probabilities); `comparisons` holds paired bootstrap intervals."""
    if params.max_funds:
        rows = rows[: params.max_funds]
    if not rows:
        raise ValueError("backtest: the test split is empty")
    fits = fits or {}
    results: dict[str, dict] = {}
    predictions: dict[str, list[dict]] = {}
    answered: dict[str, str] = {}  # answer fingerprint -> the model that answered
    reused: dict[str, str] = {}  # model -> the model whose answers it shares
    for name, path in models.items():
        same = answered.get(key) if (key := answer_fingerprint(path)) else None
        if same:  # the same weights and configs answer alike: GRPO kept its SFT start
            predictions[name] = [as_written(p) for p in predictions[same]]
            results[name] = {
                **{k: v for k, v in results[same].items() if k not in ("trust", "greedy")},
                **metrics(rows, predictions[name], rubric["grades"]),
                "seconds": 0.0,
            }
            reused[name] = same
            print(f"backtest {name}: the same weights as {same}, its answers reused")
            continue
        started = time.perf_counter()
        methods = tuple(dict.fromkeys([*params.beliefs, *contest.methods_needed(fits)]))
        results[name], predictions[name] = evaluate_model(
            path, rows, rubric, schema, generation.max_new_tokens, generation.batch_size, name, methods, fits.get(name)
        )
        if set(methods) - set(params.beliefs):  # read for a fit's parts, not reported as the model's own
            for extra in set(methods) - set(params.beliefs):
                results[name].get("calibration", {}).pop(extra, None)
        # loading, greedy answers to every test fund and reading their probabilities
        results[name]["seconds"] = round(time.perf_counter() - started, 1)
        if key:
            answered[key] = name
    grades = rubric["grades"]
    predictions["rule"] = rule_predictions(rows)
    results["rule"] = metrics(rows, predictions["rule"], grades)
    if any("gbm_grade" in r for r in rows):
        predictions["gbm"] = gbm_predictions(rows, rubric)
        results["gbm"] = metrics(rows, predictions["gbm"], grades)
        results["gbm"]["trust"] = calibration.summary(
            [r["expert_grade"] for r in rows], [p["grade"] for p in predictions["gbm"]],
            [p["probs"] for p in predictions["gbm"]], [max(p["probs"]) for p in predictions["gbm"]], grades,
        )  # fmt: skip
    fit = fits.get("grpo")
    if fit and "grpo" in predictions and "gbm" in predictions:  # the served evaluator's parts, apart
        for part, preds in contest.parts(rows, predictions["grpo"], fit, grades).items():
            key = part if part == "gbm_rule" else f"grpo_{part}"
            predictions[key], results[key] = preds, scored(rows, preds, grades)
        if "gbm_rule" in predictions:
            results["grpo"]["served"] = contest.served(rows, predictions["grpo"], predictions["gbm_rule"], fit, grades)
        if fit.get("sft") and "sft" in predictions:  # SFT under its own validation-chosen rule
            predictions["sft_served"] = contest.applied(rows, predictions["sft"], fit["sft"], grades)
            results["sft_served"] = scored(rows, predictions["sft_served"], grades)
            results["sft_served"]["serves"] = fit["sft"].get("chosen")
    if any(r.get("shown_grade") is not None for r in rows):
        for name, preds in predictions.items():
            results[name]["departures"] = departures(rows, preds)
    return {
        "n_funds": len(rows),
        "test_fingerprint": fingerprint(rows),
        "peak_rss_mb": io.peak_rss_mb(),
        "models": results,
        "labels": by_label_source(rows, predictions, grades),
        "comparisons": comparisons(rows, predictions, grades, params.bootstrap),
        "answers_reused": reused,
        "predictions": predictions,
        "rows": rows,
    }


def scored(rows: list[dict], preds: list[dict], grades: list[int]) -> dict[str, Any]:
    """`metrics`, and (where the predictions carry probabilities) block `trust`: their calibration."""
    out = metrics(rows, preds, grades)
    if any(p.get("probs") is not None for p in preds):
        out["trust"] = calibration.summary(
            [r["expert_grade"] for r in rows], [p["grade"] for p in preds], [p.get("probs") for p in preds],
            [p.get("confidence") or 0.0 for p in preds], grades,
        )  # fmt: skip
    return out


def as_written(p: dict) -> dict:
    """A prediction without a calibration fit's fields: the grade the model wrote, its raw beliefs.

    >>> as_written({"grade": 3, "written_grade": 4, "probs": [1.0], "confidence": 0.9, "valid": True})
    {'grade': 4, 'valid': True}
    """
    out = {k: v for k, v in p.items() if k not in ("written_grade", "probs", "expected_grade", "confidence")}
    return {**out, "grade": p.get("written_grade", p["grade"])}


def confidence_of(preds: list[dict], grades: list[int], raw: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """(confidence, full probabilities) of an evaluator's predictions: the product's when a fit was
    applied (unless `raw`), else the first belief method's raw probability of the written grade, else
    the class probabilities (gradient boosting); None when it has none (the rule scorer). An invalid
    answer: confidence 0, uniform probabilities."""
    uniform = [1.0 / len(grades)] * len(grades)
    has_beliefs = any(p.get("beliefs") for p in preds)
    if raw and has_beliefs:
        preds = [as_written(p) for p in preds]
    if any(p.get("probs") is not None for p in preds):
        probs = [p["probs"] if p.get("probs") is not None else uniform for p in preds]
        conf = [
            (p["confidence"] if p.get("confidence") is not None else max(p["probs"]))
            if p.get("probs") is not None
            else 0.0
            for p in preds
        ]
        return np.asarray(conf, dtype=float), np.asarray(probs, dtype=float)
    methods = [m for p in preds for m in (p.get("beliefs") or {})]
    if not methods:
        return None
    first = methods[0]
    probs, conf = [], []
    for p in preds:
        b = (p.get("beliefs") or {}).get(first)
        probs.append(b if b is not None else uniform)
        conf.append(b[grades.index(p["grade"])] if b is not None and p["grade"] is not None else 0.0)
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


def comparisons(rows: list[dict], predictions: dict[str, list[dict]], grades: list[int], n: int) -> dict[str, dict]:
    """Paired bootstrap intervals (funds resampled by fund) of A - B for each pair in PAIRS present:
    exact and QWK; where both have confidence, exact on the most confident 50/70/90 % (exact_top50 ...) (each
    evaluator choosing its own funds), ECE and Brier. `n` 0: none."""
    if n <= 0:
        return {}
    y = np.asarray([r["expert_grade"] for r in rows], dtype=int)
    groups = [str(r.get("fund_id", r["share_class_id"])) for r in rows]
    index = np.asarray([grades.index(int(v)) for v in y])
    stats: dict[tuple[str, bool], dict] = {}
    for name, preds in predictions.items():
        for raw in (False, True):
            p = calibration.filled(y, [(as_written(q) if raw else q)["grade"] for q in preds], grades)
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


def plot_confusions(rows: list[dict], predictions: dict[str, list[dict]], grades: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(predictions)
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.4))
    expert = [r["expert_grade"] for r in rows]
    for ax, name in zip(axes, names):
        table = confusion(expert, [p["grade"] for p in predictions[name]], grades)
        ax.imshow(table.values, cmap="Blues")
        for i in range(len(grades)):
            for j in range(len(grades)):
                ax.text(j, i, int(table.values[i, j]), ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(grades)), grades)
        ax.set_yticks(range(len(grades)), grades)
        ax.set_title(name)
        ax.set_xlabel("predicted")
    axes[0].set_ylabel("expert")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def by_label_source(rows: list[dict], predictions: dict[str, list[dict]], grades: list[int]) -> dict[str, dict]:
    """Agreement with the analysts' decisions apart from the export's grades: each evaluator on the test
    funds whose label came from each source (`label_source`, set by prepare); QWK from 10 funds up.

    >>> rows = [{"expert_grade": 3, "expert_score": 50.0, "label_source": s} for s in ("export", "analyst")]
    >>> out = by_label_source(rows, {"rule": [{"grade": 3, "score": 50.0}, {"grade": 2, "score": 30.0}]}, [1, 2, 3])
    >>> out["analyst"]["n"], out["analyst"]["rule"]["exact"], out["export"]["rule"]["exact"]
    (1, 0.0, 1.0)
    """
    out: dict[str, dict] = {}
    for source in sorted({r.get("label_source", "export") for r in rows}):
        idx = [i for i, r in enumerate(rows) if r.get("label_source", "export") == source]
        keep = ("exact", "within_one", "qwk") if len(idx) >= 10 else ("exact", "within_one")
        out[source] = {"n": len(idx)}
        for name, preds in predictions.items():
            found = metrics([rows[i] for i in idx], [preds[i] for i in idx], grades)
            out[source][name] = {k: found[k] for k in keep}
    return out


def per_fund(rows: list[dict], predictions: dict[str, list[dict]]) -> list[dict]:
    """One row per test fund: the expert's grade, each evaluator's grade, validity and (where it has
    one) confidence, and the policy's answer, probabilities, reason when invalid, and misstated criteria."""
    extra = ("confidence", "probs", "expected_grade", "written_grade", "reason", "unsupported")
    return [
        {
            "share_class_id": r["share_class_id"],
            "fund_id": r["fund_id"],
            "category": r["category"],
            "expert_grade": r["expert_grade"],
            "label_source": r.get("label_source", "export"),
            **{f"{name}_grade": preds[i]["grade"] for name, preds in predictions.items()},
            **{f"{name}_valid": preds[i].get("valid", True) for name, preds in predictions.items()},
            **{
                f"{name}_confidence": preds[i]["confidence"]
                if preds[i].get("confidence") is not None
                else max(preds[i]["probs"])
                for name, preds in predictions.items()
                if preds[i].get("probs") is not None
            },
            **{f"grpo_{k}": predictions["grpo"][i][k] for k in extra if k in predictions["grpo"][i]},
            # what each language model's evaluation claims (the claims check) and the confidence it states
            **{k: v for name in ("grpo", "sft") if name in predictions for k, v in said(name, predictions[name][i])},
            "shown_grade": r.get("shown_grade"),
            "grpo_text": predictions["grpo"][i]["text"],
        }
        for i, r in enumerate(rows)
    ]


def said(name: str, p: dict) -> list[tuple[str, Any]]:
    """What one evaluation claims, for the per-fund file: claims made, misstated, complete, and the
    confidence it states (where the answer states one).

    >>> said("sft", {"claims": 3, "unsupported": ["verdict"], "complete": True, "stated": 0.7})
    [('sft_claims', 3), ('sft_misstated', 1), ('sft_complete', True), ('sft_stated', 0.7)]
    """
    out = [(f"{name}_claims", p["claims"])] if "claims" in p else []
    if "unsupported" in p:
        out.append((f"{name}_misstated", len(p["unsupported"])))
    out += [(f"{name}_{k}", p[k]) for k in ("complete", "stated") if k in p]
    return out


def reliability(rows: list[dict], preds: list[dict], grades: list[int], bins: int = 10) -> list[dict]:
    """An evaluator's reliability diagram (`dvc plots`): per confidence bin, mean confidence and accuracy."""
    found = confidence_of(preds, grades)
    if found is None:
        return []
    correct = [p["grade"] is not None and int(p["grade"]) == int(r["expert_grade"]) for r, p in zip(rows, preds)]
    return calibration.reliability(found[0], correct, bins)
