"""The contest over seeds: one profile trained with several SFT and GRPO seeds (the data split and
the base model fixed), every evaluator measured the same way, each figure as the mean and range
over seeds, each difference with an interval that resamples both funds and seeds.

    # 1. runs: a fresh copy per seed, `dvc repro`, kept (each prints "running in DIR")
    python benchmarks/time/pipeline.py --seed 1 --keep                                  # embedded default
    python benchmarks/time/pipeline.py --seed 1 --profile morningstar evidence --keep   # Morningstar
    python benchmarks/time/pipeline.py --seed 1 --profile morningstar evidence stated-confidence --keep
        # ... evaluations
    # 2. each run's per-fund figures into research/results/seeds/<dataset>/seed-<n>/ (small, committed);
    #    --recompute first reruns its calibrate and backtest stages with this checkout's code (a run
    #    trained before them changed: training is the same code)
    python benchmarks/contest/seeds.py collect DIR --dataset morningstar [--recompute]
    # 3. the page, from every collected run
    python benchmarks/contest/seeds.py report

Evaluators (the backtest's names): `grpo` is the served evaluator (the calibrate stage's choice on
validation), `grpo_alone` the language model's own belief with its best rule, `grpo_written` the
grade it wrote, `grpo_stack` the stack, `gbm_rule` gradient boosting with its best rule, `gbm`
gradient boosting's likeliest grade, `sft` / `sft_served` the SFT start as written / under its own
choice, `rule` the methodology's scorer. Every rule was chosen on the validation funds.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import yaml

from fundgrpo import profiles
from fundgrpo.evaluation import calibration
from fundgrpo.evaluation.agreement import one_metric, weighted_metric

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESEARCH = HERE.parents[1] / "research"
RESULTS = RESEARCH / "results" / "seeds"
PAGE = RESEARCH / "seeds.md"
ROWS = {
    "grpo": "served (GRPO, validation-chosen)",
    "grpo_alone": "language model alone, its own belief (GRPO)",
    "grpo_written": "language model alone, its written grade (GRPO)",
    "grpo_stack": "stack: language model pooled with gradient boosting (GRPO)",
    "gbm_rule": "gradient boosting, validation-chosen rule",
    "gbm": "gradient boosting, likeliest grade",
    "sft_served": "served (SFT start, validation-chosen)",
    "sft": "SFT start, its written grade",
    "rule": "rule scorer (the methodology)",
}
# (A, B, label): each difference reported with its interval over funds and seeds
DIFFERENCES = (
    ("grpo", "gbm_rule", "served − gradient boosting with the rule"),
    ("grpo_alone", "gbm_rule", "language model alone − gradient boosting with the rule"),
    ("grpo_stack", "gbm_rule", "stack − gradient boosting with the rule"),
    ("grpo_written", "sft", "GRPO − SFT, written grades"),
    ("grpo", "sft_served", "GRPO − SFT, as served"),
)
# per-fund columns kept: each evaluator's grade (and the grade the prompt suggested), and what each
# language model's evaluation claims (the claims check) and the confidence it states
KEPT = ("_grade", "_claims", "_misstated", "_complete", "_stated")
# GRPO against its SFT start, on what each wrote (the targets: FAITHFUL_TARGETS)
FAITHFUL = {
    "exact": "exact",
    "qwk": "QWK",
    "misstated": "misstated claims (share of claims)",
    "complete": "complete (the weightiest criteria cited rightly)",
    "stated_brier": "stated confidence: Brier",
    "stated_ece": "stated confidence: ECE",
    # a confidence that is one number for every fund is calibrated in the large and says nothing of the fund
    "stated_spread": "stated confidence: spread over funds (standard deviation)",
    "departure_precision": "departures from the suggested grade: right share",
    "departures": "departures from the suggested grade: share of funds",
}
# confidence sources (summary key: label): each language model's at each belief method, and gradient boosting's
CONFIDENCE = {
    "grpo/stated": "GRPO, the confidence it states",
    "grpo/score": "GRPO, its belief read at the score",
    "grpo/grade": "GRPO, its belief read at the grade token",
    "sft/stated": "SFT start, the confidence it states",
    "sft/score": "SFT start, its belief read at the score",
    "sft/grade": "SFT start, its belief read at the grade token",
    "gbm": "gradient boosting, its class probability",
}
TITLES = {
    "embedded-default": "Embedded default (synthetic funds, embedded ~1M model; its tokenizer merges across words, "
    "`model.tokenizer_merges: phrases`, since 2026-11-29; every stage run anew at b707e04)",
    "embedded-default-word-tokens": "The same default with the tokenizer it had until 2026-11-29, merging within "
    "words only (`model.tokenizer_merges: words`, profile `word-tokens`): answers of about 44 tokens instead of 16, "
    "prompts of 160 instead of 77; every stage run anew at b707e04, on the same day as the section above",
    "embedded-default-shared-prompts": "Embedded default as of 2026-11-28 (answers as evaluations, criteria in pull "
    "order, no sampled validation), each GRPO prompt run once per group (`grpo.share_prompts`)"
    "; GRPO trained on garbled samples (padded prompts sampled from misplaced positions, fixed in a891d6d)",
    "embedded-default-sft-6epochs": "The same default with six SFT epochs instead of ten (profile `sft-6epochs`)"
    "; GRPO trained on garbled samples (padded prompts sampled from misplaced positions, fixed in a891d6d)",
    "embedded-default-compact": "The same default with compact prompts (each criterion's percentile, band and weight, "
    "no value or peer median: `prepare.prompt_style: compact`, the default since)"
    "; GRPO trained on garbled samples (padded prompts sampled from misplaced positions, fixed in a891d6d)",
    "morningstar": "Morningstar UK equity (real experts), embedded ~1M model, gradient boosting's estimate in prompt",
    "morningstar-evaluations": "Morningstar UK equity, the same, answers as evaluations (verdict, criteria with "
    "bands, the methodology's grade and what moved it) stating a confidence; rewards for claims and departures",
    "morningstar-select-reward": "The same, GRPO pushed harder and kept on its sampled validation reward "
    "(learning rate 1e-4, 100 steps, `grpo.best_metric: reward`)",
    "morningstar-grpo-evaluations": "The same, GRPO anchored to its start (KL β 0.04, learning rate 1e-4, 60 steps) "
    "and kept for its greedy validation evaluations (`grpo.best_metric: evaluation`, profile `grpo-evaluations`)",
    "morningstar-grpo-claims": "The same, GRPO's reward weighted towards the evaluation (claims reward 2.0, as the "
    "grade's; departure 1.0 at cost 1.5; profile `grpo-claims`); percentiles as the prompt shows them (whole numbers)",
    "morningstar-bands": "Morningstar as in the `grpo-claims` section, and each percentile in the prompt followed by "
    "its band in the methodology's wording "
    '("percentile 90 (top 10%)", `prepare.show_bands`, run as profile `bands` and the default since): the claim is '
    "copied, not computed",
    "morningstar-pull-order": "Morningstar as in the `bands` section, the criteria listed in the prompt as a "
    "reasoning cites them (weight × distance from 50, furthest first: `prepare.criteria_order: pull`) and a wrong "
    "departure costing 3 (profile `pull-order`)",
    "morningstar-explained": "Morningstar as in the `pull-order` section, the reference answers departing from the "
    "estimate shown only where the prompt explains it: the experts' grade when it is the estimate's or the "
    "methodology's, else the estimate's (`prepare.reference_grade: explained`, profile `explained`); GRPO's rewards "
    "still pay the experts' grade; no sampled validation (`grpo.eval_prompts: 0`), evaluations on their own "
    "random state",
    "morningstar-compact": "Morningstar as in the `explained` section with compact prompts (profile `compact-prompts`) "
    "and GRPO stopping after three evaluations that beat none (`grpo.early_stopping_patience`, the default since)"
    "; GRPO trained on garbled samples (padded prompts sampled from misplaced positions, fixed in a891d6d)",
    "embedded-default-fixed": "The embedded default as of a891d6d (compact prompts, GRPO stopping after three "
    "evaluations that beat none), GRPO's sampling fixed: every stage run anew",
    "morningstar-compact-fixed": "The `compact` Morningstar runs again from their SFT starts with GRPO's sampling "
    "fixed (a891d6d): GRPO, calibrate, backtest and register rerun, nothing else",
    "embedded-default-batch-256": "The embedded default as of a891d6d, GRPO on 32 prompts a step instead of 8 "
    "(256 completions; profile `grpo-batch-256`) from the same SFT starts: GRPO, calibrate, backtest and register "
    "rerun",
    "morningstar-batch-256": "The `compact` Morningstar runs with GRPO's sampling fixed, GRPO on 32 prompts a step "
    "instead of 8 (256 completions; profile `grpo-batch-256`) from the same SFT starts: GRPO, calibrate, backtest "
    "and register rerun",
    "embedded-default-phrase-tokens": "The embedded default as of a891d6d with a tokenizer that merges across words "
    "(`model.tokenizer_merges: phrases`, then profile `phrase-tokens`): answers of about 16 tokens instead of 44, "
    "prompts of 77 instead of 160; every stage run anew (the code at 2c322dc)",
    "morningstar-cold-start-256": "Morningstar with SFT as a cold start (two epochs instead of ten; profile "
    "`sft-cold-start`), then GRPO on 32 prompts a step (profile `grpo-batch-256`), no KL, up to 200 steps: "
    "GRPO − SFT here is what GRPO adds to a start that has not yet learnt to cite rightly",
    "morningstar-cold-start-150": "Morningstar's cold starts of the section \"Morningstar with SFT as a cold "
    'start ..." below, GRPO for 150 steps on every seed with no early stopping (`grpo.early_stopping_patience: '
    "0`): GRPO, calibrate, backtest and register rerun; seed 0 is that section's run (stopped at step 170, its "
    "evaluations to step 150 and kept step are those of a 150-step run)",
    "morningstar-cold-start-150-t07": "The same cold starts and 150 GRPO steps, sampling at temperature 0.7 "
    "instead of 1.0 (`grpo.temperature`; at 1.0 the cold start's sampled answers are 41 % valid JSON and 23 % "
    "right, at 0.7 97 % and 62 %, greedy 100 % and 67 %: `benchmarks/learning/sampled_confidence.py` on seed 0's "
    "validation funds): GRPO, calibrate, backtest and register rerun",
    "morningstar-cold-start-own-confidence": "The same cold starts, 150 GRPO steps at temperature 0.7, the stated "
    "confidence's tokens paid by the calibration reward alone and every other token by the other rewards "
    "(`grpo.confidence_advantage: own`): GRPO, calibrate, backtest and register rerun",
    "morningstar-own-confidence-replication": "The `own-confidence` design again from scratch (SFT cold start and "
    "GRPO) on three new seeds, 5-7, fixed before any of them ran: a replication, not pooled with seeds 0-4",
}


def recompute(run: Path) -> None:
    """Rerun a kept run's calibrate and backtest stages with this checkout's code (training is the same
    code and is not rerun), under this checkout's params with the run's profiles laid over them."""
    for folder in ("fundgrpo", "stages"):
        shutil.rmtree(run / folder)
        shutil.copytree(REPO / folder, run / folder, ignore=shutil.ignore_patterns("__pycache__"))
    # this checkout's params with the run's profiles laid over them (its own file may name old keys)
    bench = json.loads((run / "bench.json").read_text())
    names = [*bench["profiles"], *([f"seed-{bench['seed']}"] if bench.get("seed") is not None else [])]
    data = profiles.merged(names, REPO / "params.yaml", run / "profiles")
    (run / "params.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    env = {**os.environ, "PYTHONPATH": str(run)}
    for stage in ("calibrate", "backtest"):  # the stages alone: training is not rerun
        subprocess.run([sys.executable, "-m", f"stages.{stage}"], cwd=run, env=env, check=True)


def collect(run: Path, dataset: str, recompute_first: bool) -> Path:
    """A kept run's per-fund grades, its calibration choice and its backtest blocks, into RESULTS."""
    if recompute_first:
        recompute(run)
    params = yaml.safe_load((run / "params.yaml").read_text())
    seed = params["grpo"]["seed"]
    out = RESULTS / dataset / f"seed-{seed}"
    out.mkdir(parents=True, exist_ok=True)
    backtest = json.loads((run / "metrics/backtest.json").read_text())
    fit = json.loads((run / params["calibrate"]["out"]).read_text())
    bench = json.loads((run / "bench.json").read_text()) if (run / "bench.json").exists() else {}
    summary = {
        "seed": seed,
        "sft_seed": params["sft"]["seed"],
        "recomputed": recompute_first,
        "test_fingerprint": backtest["test_fingerprint"],
        "n_funds": backtest["n_funds"],
        "models": {k: {m: v.get(m) for m in ("exact", "qwk", "valid_json")} for k, v in backtest["models"].items()},
        "served": backtest["models"]["grpo"].get("served"),
        # how well each confidence is calibrated: each language model's, read at each belief method
        # (`stated`: the confidence its answers state) and gradient boosting's (its class probabilities)
        "confidence": {
            **{
                f"{name}/{method}": {k: c.get(k) for k in ("ece", "brier_top")}
                for name in ("grpo", "sft")
                for method, c in (backtest["models"].get(name, {}).get("calibration") or {}).items()
            },
            "gbm": {k: backtest["models"]["gbm"]["trust"].get(k) for k in ("ece", "brier_top")}
            if "trust" in backtest["models"].get("gbm", {})
            else None,
        },
        "departures": {k: v["departures"] for k, v in backtest["models"].items() if "departures" in v},
        "chosen": fit.get("chosen"),
        "sft_chosen": (fit.get("sft") or {}).get("chosen"),
        "kept": json.loads((run / "metrics/grpo.json").read_text()).get("kept"),
        "seconds": bench.get("total_seconds"),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    with (out / "per_fund.jsonl").open("w") as f:
        for line in (run / params["backtest"]["report_dir"] / "predictions.jsonl").read_text().splitlines():
            r = json.loads(line)
            keep = {k: r[k] for k in r if k.endswith(KEPT) and k != "grpo_expected_grade"}
            f.write(json.dumps({"share_class_id": r["share_class_id"], "fund_id": r["fund_id"], **keep}) + "\n")
    return out


def load(dataset: Path) -> list[dict]:
    """Each collected seed of a dataset: summary, per-fund grades by evaluator, all on the same funds."""
    runs = []
    for folder in sorted(dataset.glob("seed-*")):
        summary = json.loads((folder / "summary.json").read_text())
        funds = [json.loads(line) for line in (folder / "per_fund.jsonl").read_text().splitlines()]
        runs.append({"summary": summary, "funds": funds})
    prints = {r["summary"]["test_fingerprint"] for r in runs}
    if len(prints) > 1:
        raise SystemExit(f"{dataset}: seeds tested on different funds (fingerprints {sorted(prints)}): recollect")
    return runs


def grades_of(run: dict, name: str) -> np.ndarray | None:
    column = "grpo_written_grade" if name == "grpo_written" else f"{name}_grade"
    if column not in run["funds"][0]:
        return None
    return np.array([r[column] if r[column] is not None else -1 for r in run["funds"]])


def filled_array(y: np.ndarray, p: np.ndarray, grades: list[int]) -> np.ndarray:
    """`agreement.filled` on arrays, an invalid answer written -1: the grade farthest from the
    expert's (a full miss)."""
    far = np.where(np.abs(y - grades[0]) >= np.abs(y - grades[-1]), grades[0], grades[-1])
    return np.where(p < 0, far, p)


def figure(y: np.ndarray, p: np.ndarray, grades: list[int], metric: str) -> float:
    """Exact or QWK, an invalid answer a full miss."""
    return one_metric(y, filled_array(y, p, grades), grades, metric)


def weighted(y: np.ndarray, p: np.ndarray, grades: list[int], metric: str, weights: np.ndarray) -> np.ndarray:
    """`figure` on every draw of `resamples` at once."""
    return weighted_metric(y, filled_array(y, p, grades), grades, metric, weights)


def resamples(runs: list[dict], n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`n` bootstrap draws: (how often each fund row is drawn, funds resampled by fund: n x rows;
    the seeds drawn: n x seeds), drawn in the order the row-list bootstrap drew them, so the
    intervals are the same figures as when each draw was a list of rows. Read-only arrays, drawn once
    per section (every figure of a section resamples the same funds and seeds)."""
    return _resamples(tuple(r["fund_id"] for r in runs[0]["funds"]), len(runs), n, seed)


@functools.lru_cache(maxsize=8)
def _resamples(fund_ids: tuple, n_runs: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    groups = np.unique(fund_ids, return_inverse=True)[1]
    k = int(groups.max()) + 1
    rng = np.random.default_rng(seed)
    counts = np.empty((n, k))
    seed_draws = np.empty((n, n_runs), dtype=int)
    for i in range(n):
        counts[i] = np.bincount(rng.integers(0, k, k), minlength=k)
        seed_draws[i] = rng.integers(0, n_runs, n_runs)
    weights = counts[:, groups]
    weights.setflags(write=False)
    seed_draws.setflags(write=False)
    return weights, seed_draws


def over_seeds(runs, a: str, b: str | None, metric: str, grades, n: int = 2000, seed: int = 0) -> dict | None:
    """Mean over seeds of A's figure (minus B's), its range over seeds, and a 95 % interval from a
    two-level bootstrap: seeds resampled, and funds resampled by fund (the same draw for every seed,
    as they are the same funds)."""
    ys = [np.array([r["expert_grade"] for r in run["funds"]]) for run in runs]
    pa = [grades_of(run, a) for run in runs]
    pb = [grades_of(run, b) for run in runs] if b else [None] * len(runs)
    if any(p is None for p in pa) or (b and any(p is None for p in pb)):
        return None

    def value(s: int, rows: np.ndarray) -> float:
        v = figure(ys[s][rows], pa[s][rows], grades, metric)
        return v - figure(ys[s][rows], pb[s][rows], grades, metric) if b else v

    every = np.arange(len(ys[0]))
    per_seed = [value(s, every) for s in range(len(runs))]
    if n == 0:
        return {"mean": float(np.mean(per_seed)), "min": min(per_seed), "max": max(per_seed)}
    weights, seed_draws = resamples(runs, n, seed)
    # every seed's figure on every draw at once (weighted by how often each fund was drawn), then
    # each draw's mean over the seeds it drew
    by_seed = np.array([weighted(ys[s], pa[s], grades, metric, weights) for s in range(len(runs))])
    if b:
        by_seed -= np.array([weighted(ys[s], pb[s], grades, metric, weights) for s in range(len(runs))])
    draws = by_seed[seed_draws, np.arange(n)[:, None]].mean(axis=1)
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return {"mean": float(np.mean(per_seed)), "min": min(per_seed), "max": max(per_seed), "lo": lo, "hi": hi}


def columns(run: dict) -> dict[str, np.ndarray]:
    """The per-fund columns `written` reads, as arrays, built once per run (the bootstrap reads them
    thousands of times; from the rows of dicts each time it was most of the page's minute)."""
    if "_columns" not in run:
        funds = run["funds"]
        cols = {"y": np.array([r["expert_grade"] for r in funds])}
        for model, key in (("grpo", "grpo_written_grade"), ("sft", "sft_grade")):
            cols[f"{model}_p"] = np.array([r.get(key) or -1 for r in funds])
            cols[f"{model}_claims"] = np.array([r.get(f"{model}_claims") or 0 for r in funds])
            cols[f"{model}_misstated"] = np.array([r.get(f"{model}_misstated") or 0 for r in funds])
            cols[f"{model}_complete"] = np.array([bool(r.get(f"{model}_complete")) for r in funds])
            stated = [r.get(f"{model}_stated") for r in funds]
            cols[f"{model}_stated"] = np.array([np.nan if v is None else v for v in stated], dtype=float)
        cols["shown"] = np.array([r.get("shown_grade") if r.get("shown_grade") is not None else -1 for r in funds])
        run["_columns"] = cols
    return run["_columns"]


def written(run: dict, model: str, metric: str, rows: np.ndarray, grades: list[int]) -> float:
    """One of FAITHFUL's figures for a language model's written answers (`model` "grpo" or "sft") on
    `rows` (NaN where the run has no such column: answers that state no confidence)."""
    c = columns(run)
    y, p = c["y"][rows], c[f"{model}_p"][rows]
    if metric in ("exact", "qwk"):
        return figure(y, p, grades, metric)
    if metric == "misstated":
        made = int(c[f"{model}_claims"][rows].sum())
        return int(c[f"{model}_misstated"][rows].sum()) / made if made else float("nan")
    if metric == "complete":
        return float(np.mean(c[f"{model}_complete"][rows]))
    if metric.startswith("stated_"):
        stated = c[f"{model}_stated"][rows]
        said = ~np.isnan(stated)
        if not said.any():
            return float("nan")
        conf, right = stated[said], (p[said] == y[said]).astype(float)
        if metric == "stated_spread":
            return float(np.std(conf))
        return float(np.mean((conf - right) ** 2)) if metric == "stated_brier" else calibration.ece(conf, right)
    shown = c["shown"][rows]
    away = (p >= 0) & (shown >= 0) & (p != shown)
    if metric == "departures":
        return float(away.mean())
    return float((p[away] == y[away]).mean()) if away.any() else float("nan")


def written_resampled(run: dict, model: str, metric: str, weights: np.ndarray, grades: list[int]) -> np.ndarray:
    """`written` on every draw of `resamples` at once (row i of `weights` counts each fund row that many
    times): the same figures as on the rows listed out. NaN where a draw has nothing to measure."""
    c = columns(run)
    y, p = c["y"], c[f"{model}_p"]
    if metric in ("exact", "qwk"):
        return weighted(y, p, grades, metric, weights)

    def ratio(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
        num, den = weights @ top.astype(float), weights @ bottom.astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, num / den, np.nan)

    every = np.ones(len(y))
    if metric == "misstated":
        return ratio(c[f"{model}_misstated"], c[f"{model}_claims"])
    if metric == "complete":
        return ratio(c[f"{model}_complete"], every)
    if metric.startswith("stated_"):
        stated = c[f"{model}_stated"]
        said = ~np.isnan(stated)
        conf, right = np.where(said, stated, 0.0), (p == y).astype(float)
        if metric == "stated_brier":
            return ratio(said * (conf - right) ** 2, said)
        if metric == "stated_spread":
            return np.sqrt(np.maximum(ratio(said * conf**2, said) - ratio(said * conf, said) ** 2, 0.0))
        # calibration.ece over the answers that state one: each bin's |sum of (right - confidence)|
        which = np.minimum((conf * 10).astype(int), 9)
        gap = sum(np.abs(weights @ ((said & (which == b)) * (right - conf))) for b in range(10))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(weights @ said > 0, gap / (weights @ said), np.nan)
    shown = c["shown"]
    away = (p >= 0) & (shown >= 0) & (p != shown)
    if metric == "departures":
        return ratio(away, every)
    return ratio(away & (p == y), away)


def faithful_over_seeds(runs, metric: str, grades, n: int = 2000, seed: int = 0) -> dict | None:
    """GRPO's and SFT's figure (mean and range over seeds) and GRPO − SFT with the interval of
    `over_seeds` (seeds and funds resampled together); None where no run has the column."""
    if not all("grpo_written_grade" in run["funds"][0] for run in runs):
        return None
    every = np.arange(len(runs[0]["funds"]))
    per = {m: [written(run, m, metric, every, grades) for run in runs] for m in ("grpo", "sft")}
    if all(np.isnan(v) for v in per["grpo"]):
        return None
    weights, seed_draws = resamples(runs, n, seed)
    by_seed = np.array(
        [
            written_resampled(run, "grpo", metric, weights, grades)
            - written_resampled(run, "sft", metric, weights, grades)
            for run in runs
        ]
    )
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a draw whose seeds all have nothing to measure
        draws = np.nanmean(by_seed[seed_draws, np.arange(n)[:, None]], axis=1)
    lo, hi = np.nanpercentile(draws, [2.5, 97.5])
    diff = [a - b for a, b in zip(per["grpo"], per["sft"])]
    out = {
        m: {"mean": float(np.nanmean(v)), "min": float(np.nanmin(v)), "max": float(np.nanmax(v))}
        for m, v in per.items()
    }
    return {**out, "difference": {"mean": float(np.nanmean(diff)), "lo": float(lo), "hi": float(hi)}, "per_seed": diff}


def figures(runs: list[dict]) -> dict:
    """A dataset's figures over seeds: each evaluator's exact and QWK (mean, range), each difference
    (mean, interval over funds and seeds), what each seed served."""
    grades = sorted({r["expert_grade"] for run in runs for r in run["funds"]})
    out: dict = {
        "seeds": [run["summary"]["seed"] for run in runs],
        "n_funds": runs[0]["summary"]["n_funds"],
        "test_fingerprint": runs[0]["summary"]["test_fingerprint"],
        "evaluators": {},
        "differences": {},
        "served": [run["summary"] for run in runs],
    }
    for name in ROWS:
        found = {m: over_seeds(runs, name, None, m, grades, n=0) for m in ("exact", "qwk")}
        if found["exact"] is not None:
            out["evaluators"][name] = found
    for a, b, _ in DIFFERENCES:
        found = {m: over_seeds(runs, a, b, m, grades) for m in ("exact", "qwk")}
        if found["exact"] is not None:
            out["differences"][f"{a}-{b}"] = found
    if any(run["funds"][0].get("grpo_claims") is not None for run in runs):  # runs that carry the claims check
        out["faithful"] = {m: f for m in FAITHFUL if (f := faithful_over_seeds(runs, m, grades, n=500)) is not None}
    named = [k for k in ROWS if all(k in (run["summary"].get("departures") or {}) for run in runs)]
    out["departures"] = {}
    for k in named:
        d = [run["summary"]["departures"][k] for run in runs]
        right = [x["precision"] for x in d if x["precision"] is not None]
        out["departures"][k] = {
            "n": float(np.mean([x["n"] for x in d])),
            "shown_right": float(np.mean([x["shown_right"] for x in d])),
            "precision": f"{np.mean(right):.3f} [{min(right):.3f}, {max(right):.3f}]" if right else "–",
        }
    sources = [k for k in CONFIDENCE if all((run["summary"].get("confidence") or {}).get(k) for run in runs)]
    out["confidence"] = {
        k: {
            m: {"mean": float(np.mean(v)), "min": min(v), "max": max(v)}
            for m in ("ece", "brier_top")
            if (v := [run["summary"]["confidence"][k][m] for run in runs])
        }
        for k in sources
    }
    return out


def render(dataset: str, f: dict) -> list[str]:
    lines = [
        "",
        f"## {TITLES.get(dataset, dataset)}",
        "",
        f"{len(f['seeds'])} seed{'s' if len(f['seeds']) != 1 else ''} ({', '.join(map(str, f['seeds']))}); "
        f"{f['n_funds']} test share classes "
        f"(fingerprint `{f['test_fingerprint']}`).",
        "",
        "| evaluator | exact | QWK |",
        "|---|---|---|",
    ]
    for name, found in f["evaluators"].items():
        cells = [f"{x['mean']:.3f} [{x['min']:.3f}, {x['max']:.3f}]" for x in found.values()]
        lines.append(f"| {ROWS[name]} | {cells[0]} | {cells[1]} |")
    lines += ["", "| difference | exact | QWK |", "|---|---|---|"]
    for a, b, label in DIFFERENCES:
        found = f["differences"].get(f"{a}-{b}")
        if found:
            cells = [f"{x['mean']:+.3f} [{x['lo']:+.3f}, {x['hi']:+.3f}]" for x in found.values()]
            lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    lines += [
        "",
        "What each seed served (chosen on validation), and how often its grade was gradient boosting's:",
        "",
        "| seed | served | weights: language model / gradient boosting | same grade as gradient boosting "
        "with the rule | departures: n (served right / gradient boosting right) | SFT served | GRPO kept |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in f["served"]:
        served = s.get("served") or {}
        w = served.get("weights") or {}
        d = served.get("departures") or {}
        lines.append(
            f"| {s['seed']} | `{s['chosen']}` | {w.get('language_model', 0):.2f} / "
            f"{w.get('gradient_boosting', 0):.2f} | {served.get('equal_to_gbm_rule', float('nan')):.3f} | "
            f"{d.get('n', 0)} ({d.get('right', 0)} / {d.get('gbm_right', 0)}) | `{s.get('sft_chosen')}` | "
            f"{s.get('kept')} |"
        )
    lines += target_lines(f)
    if f.get("faithful"):
        lines += faithful_lines(f["faithful"])
    if f.get("departures"):
        lines += [
            "",
            "Departures from the grade the prompt suggested (the estimate shown, else the methodology's), per "
            "evaluator (mean over seeds): how many, how often the departure is the expert's grade, and how often "
            "the suggested grade was:",
            "",
            "| evaluator | departures | right | suggested grade right |",
            "|---|---|---|---|",
        ]
        for name, d in f["departures"].items():
            lines.append(f"| {ROWS.get(name, name)} | {d['n']:.1f} | {d['precision']} | {d['shown_right']:.1f} |")
    if f.get("confidence"):
        lines += [
            "",
            "How well each confidence is calibrated (the confidence in the grade given, before any decision rule; "
            "ECE and top-label Brier, mean [lowest, highest seed]):",
            "",
            "| confidence | ECE | Brier (top label) |",
            "|---|---|---|",
        ]
        for k, c in f["confidence"].items():
            cells = [f"{c[m]['mean']:.3f} [{c[m]['min']:.3f}, {c[m]['max']:.3f}]" for m in ("ece", "brier_top")]
            lines.append(f"| {CONFIDENCE[k]} | {cells[0]} | {cells[1]} |")
    return lines


def faithful_lines(found: dict) -> list[str]:
    """GRPO against its SFT start on what each wrote, and the targets of 'GRPO earns its place'."""
    lines = [
        "",
        "What each language model wrote (greedy answers, before any decision rule), GRPO against its SFT start:",
        "",
        "| figure | GRPO | SFT | GRPO − SFT [95 % interval] | GRPO − SFT, each seed |",
        "|---|---|---|---|---|",
    ]
    for metric, label in FAITHFUL.items():
        f = found.get(metric)
        if f:
            d = f["difference"]
            lines.append(
                f"| {label} | {f['grpo']['mean']:.3f} [{f['grpo']['min']:.3f}, {f['grpo']['max']:.3f}] | "
                f"{f['sft']['mean']:.3f} [{f['sft']['min']:.3f}, {f['sft']['max']:.3f}] | "
                f"{d['mean']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}] | {', '.join(f'{x:+.3f}' for x in f['per_seed'])} |"
            )
    targets = []

    def target(name: str, met: bool, figure: str) -> None:
        targets.append(f"- {name}: **{'met' if met else 'not met'}** ({figure})")

    if m := found.get("misstated"):
        d = m["difference"]
        target("misstated claims ≤ 2 % of GRPO's, and below SFT's with an interval clear of zero",
               m["grpo"]["mean"] <= 0.02 and d["hi"] < 0,
               f"{m['grpo']['mean']:.3f}; GRPO − SFT {d['mean']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]")  # fmt: skip
    if c := found.get("complete"):
        target("≥ 90 % of GRPO's answers complete", c["grpo"]["mean"] >= 0.9, f"{c['grpo']['mean']:.3f}")
    if (e := found.get("stated_ece")) and (b := found.get("stated_brier")):
        d = b["difference"]
        spread = (
            f", the stated confidence's spread over funds {sp['grpo']['mean']:.3f}"
            if (sp := found.get("stated_spread"))
            else ""
        )
        target("stated-confidence ECE ≤ 0.05, and GRPO's Brier below SFT's with an interval clear of zero",
               e["grpo"]["mean"] <= 0.05 and d["hi"] < 0,
               f"ECE {e['grpo']['mean']:.3f}{spread}; Brier GRPO − SFT {d['mean']:+.3f} "
               f"[{d['lo']:+.3f}, {d['hi']:+.3f}]")  # fmt: skip
    if p := found.get("departure_precision"):
        target("departure precision above 50 %", p["grpo"]["mean"] > 0.5, f"{p['grpo']['mean']:.3f}")
    for metric in ("exact", "qwk"):
        if x := found.get(metric):
            d = x["difference"]
            target(f"{FAITHFUL[metric]} no worse than the SFT start (interval's lower end above −0.01)",
                   d["lo"] > -0.01, f"GRPO − SFT {d['mean']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]")  # fmt: skip
    return lines + ["", "Targets (issue: GRPO earns its place):", "", *targets]


def target_lines(f: dict) -> list[str]:
    """The issue's target on the served evaluator against gradient boosting with the same rule, and
    one plain sentence where the language model adds nothing measurable."""
    qwk = (f["differences"].get("grpo-gbm_rule") or {}).get("qwk")
    if qwk is None:
        return []
    alone = (f["differences"].get("grpo_alone-gbm_rule") or {}).get("qwk")
    met = qwk["mean"] > 0 and qwk["lo"] > -0.01
    line = (
        "\n**Target** (served − gradient boosting with the rule, QWK mean above 0, interval's lower end "
        f"above −0.01): {'met' if met else 'not met'}: {qwk['mean']:+.3f} [{qwk['lo']:+.3f}, {qwk['hi']:+.3f}]"
    )
    if not met:
        line += f" (mean short by {max(0.0, -qwk['mean']):.3f}, lower end by {max(0.0, -0.01 - qwk['lo']):.3f})"
    line += "."
    if alone:
        line += f" The language model alone: {alone['mean']:+.3f} [{alone['lo']:+.3f}, {alone['hi']:+.3f}]."
    out = [line]
    if qwk["lo"] <= 0:
        out.append("\n" + plain(qwk))
    return out


def plain(qwk: dict) -> str:
    return (
        "In plain words: on these funds the language model adds nothing measurable to gradient boosting's grade "
        f"given the same decision rule (QWK {qwk['mean']:+.3f}, interval [{qwk['lo']:+.3f}, {qwk['hi']:+.3f}])."
    )


def report() -> tuple[str, dict]:
    lines = [
        "# The contest over seeds",
        "",
        "Generated by `python benchmarks/contest/seeds.py report` from the runs collected under "
        "`research/results/seeds/`",
        "(commands in the script's docstring). Each run trains SFT and GRPO with one seed (`sft.seed` = `grpo.seed`);",
        "the data split, the base model and gradient boosting are the same in every run. Every evaluator that gives",
        "grade probabilities was given the same decision rules, chosen on the validation funds by cross-validation",
        "(`calibrate`, `fundgrpo/evaluation/calibration.py`); the test funds were read once, by the backtest.",
        "Figures: the mean over seeds and [the lowest, the highest seed]. Differences: the mean over seeds and a 95 %",
        "interval from resampling funds (by fund) and seeds together. An invalid answer is a miss.",
    ]
    found = {}
    for dataset in sorted(p for p in RESULTS.iterdir() if p.is_dir()):
        runs = load(dataset)
        if runs:
            found[dataset.name] = figures(runs)
            lines += render(dataset.name, found[dataset.name])
    notes = RESEARCH / "notes" / "seeds_notes.md"
    if notes.exists():
        lines += ["", notes.read_text().rstrip()]
    return "\n".join(lines) + "\n", found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="a kept run's figures into research/results/seeds/<dataset>/seed-<n>/")
    c.add_argument("run", type=Path)
    c.add_argument("--dataset", required=True)
    c.add_argument("--recompute", action="store_true", help="rerun calibrate and backtest with this checkout's code")
    sub.add_parser("report", help="write research/seeds.md")
    args = ap.parse_args()
    if args.command == "collect":
        print(collect(args.run, args.dataset, args.recompute))
    else:
        page, found = report()
        PAGE.write_text(page)
        (RESULTS / "summary.json").write_text(json.dumps(found, indent=2) + "\n")  # the README's table reads it
        print(PAGE)


if __name__ == "__main__":
    main()
