"""Agreement with Morningstar's stars on the real export: the rule scorer and the GBM baseline.

    .venv/bin/python research/experiments/real_experts/real_experts.py            # prints the tables, writes real_experts.md
    .venv/bin/python research/experiments/real_experts/real_experts.py --no-write

Reads the export where profiles/morningstar.yaml points (../shared/data/, never copied
into the repo), through the same code as the pipeline: ingest with the profile's mapping
(MRAR derived there), the profile's methodology (methodology/morningstar.yaml) for the rule
scorer, `fundgrpo.evaluation.baselines` for gradient boosting. Nothing is written but the Markdown.

Only the pipeline's training and validation funds (params `prepare`) are scored: its test split is
the backtest's alone, and these tables inform design choices (the rule's variants, the GBM's inputs).

  * Rule scorer on the training and validation funds (it learns nothing, so every such row is held out).
  * Fund-grouped 80/20 splits of the training and validation funds over seeds 0..4
    (`stages.prepare.split_of` with train_share 0.8: share classes of one fund are never on both
    sides): the rule scorer and GBMs trained on the 80 %, mean ± sd over the seeds.
  * The pipeline's own split: trained on its train split, scored on its validation split, as the
    LLM's validation figures are.
Peer percentiles are taken over the whole file in every case, as `prepare` does (they use no label).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO))

from fundgrpo import profiles  # noqa: E402
from fundgrpo.data import ingestion as ingest  # noqa: E402
from fundgrpo.evaluation import baselines  # noqa: E402
from fundgrpo.evaluation.agreement import grade_metrics  # noqa: E402
from fundgrpo.methodology import compiler as meth  # noqa: E402
from fundgrpo.methodology.splits import split_of  # noqa: E402
from fundgrpo.params import PrepareParams  # noqa: E402

METRICS = ("exact", "within_one", "qwk", "spearman")
COMMAND = ".venv/bin/python research/experiments/real_experts/real_experts.py"


def load(csv: str | None):
    """(params, canonical table, methodology) with the morningstar profile over params.yaml."""
    p = profiles.load("morningstar", REPO / "params.yaml", REPO / "profiles")
    ing = dataclasses.replace(p.ingest, batches_dir="")  # synthetic monitoring batches must not be laid over
    if csv:
        ing = dataclasses.replace(ing, path=str(Path(csv).resolve()))
    table = ingest.run(ing, REPO)[0]
    return p, table, meth.load(REPO / p.methodology.path)


def score(y: np.ndarray, pred: np.ndarray, grades: list[int]) -> dict[str, float]:
    return grade_metrics(y.tolist(), np.asarray(pred).astype(int).tolist(), grades)


# GBM variants: short name -> label, BaselineParams overrides, inputs (None: every numeric metric).
SPECS = {
    "gbm": {"label": "GBM classifier (the `baseline` stage's default)", "params": {}, "inputs": None},
    "gbm_rubric": {
        "label": "GBM classifier, rubric inputs only (MRAR 3/5/10y)",
        "params": {},
        "inputs": ["mrar_3y", "mrar_5y", "mrar_10y"],
    },
    "gbm_regressor": {
        "label": "GBM regressor, rounded (`baseline.objective: regressor`)",
        "params": {"objective": "regressor"},
        "inputs": None,
    },
}


def rule_variants(m, table: pd.DataFrame) -> dict[str, np.ndarray]:
    """The rule scorer with other risk aversions, and with Morningstar's own aggregation
    (stars per period from within-category percentiles, then the weighted mean of the stars)."""
    from fundgrpo.data.peers import percentile_within
    from fundgrpo.data.riskadjusted import MRAR_INPUTS, mrar

    out = {}
    for gamma in (0.0, 2.0, 4.0):
        t = table.copy()
        for col, (ret, vol) in MRAR_INPUTS.items():
            if ret in t:
                t[col] = mrar(t[ret], t[vol], gamma)
        out[f"MRAR(γ={gamma:g})" + (" = raw return" if gamma == 0 else "")] = meth.rule_score(m, t)[
            "rule_grade"
        ].to_numpy()
    weights = pd.Series({c.metric: c.weight for c in m.criteria})
    stars = pd.DataFrame(
        {c: percentile_within(table, c).map(lambda v: np.nan if np.isnan(v) else m.grade_for(v)) for c in weights.index}
    )
    mean = (stars.fillna(0) * weights).sum(axis=1) / (stars.notna() * weights).sum(axis=1)
    out["stars per period, weighted, rounded"] = (
        mean.round().fillna(m.grades[len(m.grades) // 2]).astype(int).to_numpy()
    )
    return out


def gbm(p, table: pd.DataFrame, train: np.ndarray, held: np.ndarray, X: dict, spec: dict, seed: int, grades):
    bp = dataclasses.replace(p.baseline, seed=seed, **spec["params"])
    key = (tuple(spec["inputs"] or ()), bp.category)
    labelled = train & table["expert_grade"].notna().to_numpy()
    pred, chosen = baselines.fit_predict(
        X[key][labelled], table["expert_grade"][labelled], table["fund_id"][labelled], X[key][held], bp, grades
    )
    return pred, chosen


def fmt(values: list[float]) -> str:
    return f"{np.mean(values):.3f} ± {np.std(values, ddof=1):.3f}" if len(values) > 1 else f"{values[0]:.3f}"


def table_md(rows: list[tuple[str, dict[str, list[float]], str]]) -> str:
    head = "| evaluator | exact | within one | QWK | Spearman | note |\n|---|---|---|---|---|---|\n"
    return head + "".join(
        f"| {name} | " + " | ".join(fmt(m[k]) for k in METRICS) + f" | {note} |\n" for name, m, note in rows
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", default=None, help="the export (default: the profile's ingest.path)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--test-share", type=float, default=0.2, help="held out of the training and validation funds")
    ap.add_argument("--out", default=str(HERE / "real_experts.md"))
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    p, table, m = load(args.csv)
    grades = m.grades
    # the pipeline's test funds are the backtest's alone: every table here scores train + validation funds
    split = table["fund_id"].map(lambda f: split_of(str(f), p.prepare))
    kept = split.isin(["train", "validation"]).to_numpy()
    labelled = table["expert_grade"].notna().to_numpy() & kept
    y = table["expert_grade"].astype("Int64").to_numpy(dtype=float, na_value=np.nan)
    rule = meth.rule_score(m, table)["rule_grade"].to_numpy()  # percentiles over the whole file
    specs = SPECS
    X = {}
    for spec in specs.values():
        key = (tuple(spec["inputs"] or ()), p.baseline.category)
        if key not in X:
            X[key] = baselines.features(table, spec["inputs"], category=p.baseline.category)

    counts = (
        f"{len(table)} share classes, {table['fund_id'].nunique()} funds, {table['category'].nunique()} categories, "
        f"{int(labelled.sum())} rated in the train and validation splits; "
        f"missing 5-year history {int(table['return_5y'].isna().sum())}, "
        f"10-year {int(table['return_10y'].isna().sum())}"
    )
    print(counts)

    whole = {k: [v] for k, v in score(y[labelled].astype(int), rule[labelled], grades).items()}
    variants = [
        (f"Rule variant: {n}", {k: [v] for k, v in score(y[labelled].astype(int), g[labelled], grades).items()}, "")
        for n, g in rule_variants(m, table).items()
    ]

    # Fund-grouped 80/20 over seeds.
    results: dict[str, dict[str, list[float]]] = {
        "rule": {k: [] for k in METRICS},
        **{n: {k: [] for k in METRICS} for n in specs},
    }
    seconds: dict[str, list[float]] = {n: [] for n in specs}
    chosen_by: dict[str, list] = {n: [] for n in specs}
    sizes = []
    for seed in range(args.seeds):
        pp = PrepareParams(seed=seed, train_share=1 - args.test_share, validation_share=0.0)
        held = table["fund_id"].map(lambda f: split_of(str(f), pp)).ne("train").to_numpy()
        train = ~held & kept
        held = held & labelled
        sizes.append((int(held.sum()), int(table.loc[held, "fund_id"].nunique())))
        for k, v in score(y[held].astype(int), rule[held], grades).items():
            results["rule"][k].append(v)
        for name, spec in specs.items():
            start = time.perf_counter()
            pred, chosen = gbm(p, table, train, held, X, spec, seed, grades)
            seconds[name].append(time.perf_counter() - start)
            chosen_by[name].append(chosen)
            for k, v in score(y[held].astype(int), pred, grades).items():
                results[name][k].append(v)
        print(
            f"seed {seed}: {sizes[-1][0]} held-out share classes ({sizes[-1][1]} funds); "
            + ", ".join(f"{n} exact {results[n]['exact'][-1]:.3f}" for n in ["rule", *specs]),
            flush=True,
        )

    # The pipeline's own split (prepare params): train split -> validation split (the test split is the backtest's).
    pval = (split == "validation").to_numpy() & labelled
    ptrain = (split == "train").to_numpy() & labelled
    pipeline_rows = [("Rule scorer", {k: [v] for k, v in score(y[pval].astype(int), rule[pval], grades).items()}, "")]
    pred, chosen0 = gbm(p, table, ptrain, pval, X, specs["gbm"], p.baseline.seed, grades)
    pipeline_rows.append(
        (
            specs["gbm"]["label"],
            {k: [v] for k, v in score(y[pval].astype(int), pred, grades).items()},
            f"chosen: {chosen0}",
        )
    )

    llm = [
        ("**LLM: SFT** (placeholder, lead fills in)", "_TBD_"),
        ("**LLM: GRPO** (placeholder, lead fills in)", "_TBD_"),
    ]
    llm_rows = "".join(f"| {n} | " + " | ".join([v] * 4) + " | validation figures |\n" for n, v in llm)

    split_rows = [("Rule scorer (methodology/morningstar.yaml)", results["rule"], "")]
    for name in specs:
        split_rows.append(
            (specs[name]["label"], results[name], f"{np.mean(seconds[name]):.1f} s per fit (tuning included)")
        )
    md_split = table_md(split_rows)
    md_pipe = table_md(pipeline_rows) + llm_rows
    md_whole = table_md(
        [
            (
                "Rule scorer (methodology/morningstar.yaml)",
                whole,
                f"{int(labelled.sum())} rated train/validation classes",
            ),
            *variants,
        ]
    )
    n_test = ", ".join(f"{a} ({b} funds)" for a, b in sizes)
    print("\n" + md_whole + "\n" + md_split + "\n" + md_pipe)

    if args.no_write:
        return
    chosen_lines = "\n".join(f"- {specs[n]['label']}: " + "; ".join(str(c) for c in chosen_by[n]) for n in specs)
    pipeline_head = (
        f"## The pipeline's own validation split (`prepare`: seed {p.prepare.seed}, "
        f"{p.prepare.train_share:g} / {p.prepare.validation_share:g} / rest)"
    )
    doc = f"""# Real expert ratings: Morningstar stars

Measured with

```bash
{COMMAND}
```

(on `{Path(p.ingest.path).name}` via `profiles/morningstar.yaml`; 2-core CPU shared with other work,
so the seconds are indicative). Data: {counts}. Every row is kept: missing 5/10-year figures stay
missing (the rule scorer renormalises its weights, the GBM reads NaN), and no share class lacks a star.

Ground truth: `StarRatingM255` (the Morningstar Rating, 1-5 stars). Inputs never include
`QuantitativeRating`, `MorningstarRiskM255` or `SustainabilityRank` (dropped in ingest, refused by
`fundgrpo.evaluation.baselines`). Metrics: `fundgrpo.evaluation.agreement.grade_metrics` (exact, within one star,
quadratic weighted kappa, Spearman).

## Rule scorer on the training and validation funds

The methodology's scorer, then variants of it (not in the pipeline) to show what the choices buy:
the risk penalty γ of MRAR, and Morningstar's own aggregation of per-period stars.

{md_whole}
## Fund-grouped 80/20 split, seeds 0-{args.seeds - 1} (mean ± sd)

Split by `stages.prepare.split_of` (seeded hash of `fund_id`, train_share {1 - args.test_share:g}):
share classes of one fund are never on both sides; only the pipeline's training and validation funds are
split (its test funds are the backtest's). Held-out rows per seed: {n_test}.
The GBMs are tuned on an inner fund-grouped split of the training funds (`params.yaml` `baseline:`);
inputs are every canonical numeric metric, its within-category percentile and the category,
unless said otherwise.

{md_split}
Settings the inner split chose, per seed:
{chosen_lines}

{pipeline_head}

The rule scorer and the GBM trained on the train split only, scored on the validation split (the test
split is read by the backtest alone). {int(pval.sum())} validation share classes. The LLM rows are
placeholders until the lead's GPU run.

{md_pipe}
## Notes

- MRAR(2) is derived from annualised return and the 3-year standard deviation
  (`fundgrpo/data/riskadjusted.py`, log-normal approximation); the 5- and 10-year MRAR use the 3-year
  volatility as a proxy, since the export has no 5- or 10-year standard deviation.
- The rule scorer weights within-category percentiles (0.5 / 0.3 / 0.2, renormalised over the periods
  a fund has) and ranks that; Morningstar gives stars per period and weights the stars, and ranks
  against its whole category universe, of which this export is a slice.
"""
    Path(args.out).write_text(doc, encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
