"""The contest on the synthetic universe with documents, from finished runs of `profiles/documents.yaml`,
one per training seed (the data split fixed, so every run has the same test funds).

    python benchmarks/time/pipeline.py --seed 1 --profile documents --keep           # one run per seed
    python benchmarks/contest/documents_contest.py --root RUN1 RUN2 RUN3 [--recompute]   # collect, then the page
    python benchmarks/contest/documents_contest.py --label ko --root ...   # runs with documents-ko: documents-ko.md
    python benchmarks/contest/documents_contest.py --label confirm --root ...   # the design in research/profiles/
    python benchmarks/contest/documents_contest.py --label smollm2 --root RUN   # documents-smollm2-cpu.yaml
    python benchmarks/contest/documents_contest.py [--label ko]   # the page again from what was collected

Collects each run's per-fund backtest (`reports/backtest/predictions.jsonl`), its pillar figures
(`metrics/backtest.json`) and the generator's hidden facts (`data/raw/synthetic/qualitative.csv`) into
`research/results/documents/<dataset>/seed-N/`, so the page can be regenerated, and its intervals redrawn,
without the runs; `--recompute` first reruns a run's calibrate and backtest stages with this checkout's code
(training is not rerun). Every evaluator's grade as the backtest served it: the language model as calibrate
chose (served), the language model alone, SFT under its own rule, the text baseline (gradient boosting on the
numbers and the documents' n-grams) with its rule, and the rule scorer. Reported on the test funds: all, those
a qualitative fact touched, those whose documents use a phrasing held out of training, the Korean funds; each
figure the mean and range over runs, served − text baseline QWK with a 95 % interval from a two-level
bootstrap: runs resampled, and funds resampled whole (a fund's share classes share its documents, team and
nearly always its grade, so they are drawn together, as on the seeds page).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.contest.seeds import recompute  # noqa: E402  # one way to rerun a kept run's calibrate and backtest
from fundgrpo.evaluation.agreement import one_metric  # noqa: E402

OUT = ROOT / "research" / "results" / "documents_contest.json"
RESULTS = ROOT / "research" / "results" / "documents"  # per dataset, per seed: what the page is computed from
PAGE = ROOT / "benchmarks" / "contest" / "documents.md"
EVALUATORS = {"served": "grpo", "lm_alone": "grpo_alone", "sft_served": "sft_served", "text_baseline": "gbm_rule",
              "rule": "rule"}  # fmt: skip
NAMES = {"served": "served (calibrate's choice)", "lm_alone": "language model alone (GRPO)",
         "sft_served": "SFT start, its own rule", "text_baseline": "text baseline (numbers + n-grams), its rule",
         "rule": "rule scorer"}  # fmt: skip
SUBSETS = {"all": "all test funds", "touched": "funds a qualitative fact touched",
           "heldout_phrasing": "funds whose documents use a phrasing held out of training",
           "korean": "Korean funds"}  # fmt: skip
GRADES = [1, 2, 3, 4, 5]
PILLARS = ("people", "process", "parent")


def as_missed(expert: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """An invalid answer (no grade) as the grade farthest from the expert's: a miss, as the backtest counts it."""
    farthest = np.where(expert >= (GRADES[0] + GRADES[-1]) / 2, GRADES[0], GRADES[-1])
    return np.where(np.isnan(predicted), farthest, predicted).astype(int)


def scores(expert: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """Exact and QWK, an invalid answer a miss (`agreement.one_metric`: the bootstrap calls it thousands of times)."""
    y, p = expert.astype(int), as_missed(expert, predicted)
    return {m: one_metric(y, p, GRADES, m) for m in ("exact", "qwk")}


def table(root: Path) -> pd.DataFrame:
    """One run's test funds: each evaluator's grade, the expert's, and the subsets' flags from the hidden facts."""
    rows = pd.read_json(root / "reports/backtest/predictions.jsonl", lines=True)
    facts = pd.read_csv(root / "data/raw/synthetic/qualitative.csv")
    t = rows.merge(facts, on="fund_id", how="left").sort_values("share_class_id").reset_index(drop=True)
    keep = ["share_class_id", "fund_id", "category", "expert_grade", *(f"{c}_grade" for c in EVALUATORS.values())]
    out = t[keep].copy()
    out["touched"] = (t[list(PILLARS)].fillna(0) != 0).any(axis=1)
    out["heldout_phrasing"] = t["heldout"].fillna(False).astype(bool)
    return out


def collect(run: Path, dataset: str, recompute_first: bool = False) -> Path:
    """A kept run's per-fund table and its summary (seed, served rule, pillar figures) into RESULTS/dataset."""
    if recompute_first:
        recompute(run)
    backtest = json.loads((run / "metrics/backtest.json").read_text(encoding="utf-8"))
    bench = json.loads((run / "bench.json").read_text()) if (run / "bench.json").exists() else {}
    seed = bench.get("seed")
    out = RESULTS / dataset / f"seed-{seed}"
    out.mkdir(parents=True, exist_ok=True)
    summary = {
        "seed": seed,
        "profiles": bench.get("profiles"),
        "recomputed": recompute_first,
        "test_fingerprint": backtest["test_fingerprint"],
        "served": backtest["models"]["grpo"].get("served", {}).get("chosen"),
        "pillars": {n: backtest["models"][n].get("pillars") for n in ("grpo", "sft")},
        "seconds": bench.get("total_seconds"),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    table(run).to_csv(out / "per_fund.csv", index=False)
    return out


def load(dataset: Path) -> tuple[list[dict], list[pd.DataFrame]]:
    """Each collected run of a dataset (summary, per-fund table), checked to be on the same test funds."""
    folders = sorted(dataset.glob("seed-*"), key=lambda f: int(f.name.removeprefix("seed-")))
    if not folders:
        raise SystemExit(f"{dataset}: no collected runs; collect some with --root RUN ...")
    summaries = [json.loads((f / "summary.json").read_text(encoding="utf-8")) for f in folders]
    tables = [pd.read_csv(f / "per_fund.csv", dtype={"share_class_id": str, "fund_id": str}) for f in folders]
    if len({s.get("test_fingerprint") for s in summaries}) > 1 or any(
        t["share_class_id"].tolist() != tables[0]["share_class_id"].tolist() for t in tables
    ):
        raise SystemExit(f"{dataset}: the runs' test funds differ: the contest compares runs of one universe and split")
    return summaries, tables


def subsets(t: pd.DataFrame) -> dict[str, np.ndarray]:
    return {
        "all": np.ones(len(t), bool),
        "touched": t["touched"].to_numpy(bool),
        "heldout_phrasing": t["heldout_phrasing"].to_numpy(bool),
        "korean": (t["category"] == "Korea Equity").to_numpy(),
    }


def figures(tables: list[pd.DataFrame], mask: np.ndarray, rng: np.random.Generator, draws: int = 1000) -> dict:
    """Every evaluator's exact and QWK (mean and range over runs) on the funds of `mask`, and served − text
    baseline QWK with an interval resampling the funds and the runs."""
    parts = [t[mask] for t in tables]
    expert = parts[0]["expert_grade"].to_numpy(float)
    out: dict = {"n": int(mask.sum()), "funds": int(parts[0]["fund_id"].nunique()), "runs": len(parts)}
    for name, column in EVALUATORS.items():
        each = [scores(expert, p[f"{column}_grade"].to_numpy(float)) for p in parts]
        out[name] = {
            k: {"mean": round(float(np.mean([e[k] for e in each])), 3),
                "range": [round(min(e[k] for e in each), 3), round(max(e[k] for e in each), 3)]}
            for k in ("exact", "qwk")
        }  # fmt: skip
    served = [p["grpo_grade"].to_numpy(float) for p in parts]
    text = [p["gbm_rule_grade"].to_numpy(float) for p in parts]

    def gap(rows: np.ndarray, runs: np.ndarray) -> float:
        e = expert[rows]
        return float(np.mean([scores(e, served[r][rows])["qwk"] - scores(e, text[r][rows])["qwk"] for r in runs]))

    funds = parts[0]["fund_id"].to_numpy()
    out["served_minus_text_qwk"] = interval(gap, funds, len(parts), rng, draws)
    out["spread"] = spread(gap, funds, len(parts), rng, draws)
    return out


def group_draw(groups, rng: np.random.Generator):
    """A function drawing as many groups as there are, with replacement, and returning their rows' indices."""
    index = np.unique(np.asarray(groups), return_inverse=True)[1]
    members = [np.flatnonzero(index == g) for g in range(int(index.max()) + 1)]
    return lambda: np.concatenate([members[g] for g in rng.integers(0, len(members), len(members))])


def spread(stat, groups, runs: int, rng: np.random.Generator, draws: int = 1000) -> dict:
    """Where the interval's width comes from, and what more funds or seeds would leave of it: `stat` on each
    run alone; the funds' part of its variance (a bootstrap of the funds, every run kept) and the seeds' (the
    variance of the per-run figures, over as many runs as there are: with three, a rough figure); and the
    95 % half-width those give with `k` times the funds and `s` seeds, 1.96 √(V_funds / k + s²_seeds / s).

    >>> hit = np.repeat([1.0, 0.0] * 10, 2)
    >>> def share(rows, runs):
    ...     return float(np.mean([hit[rows].mean() + 0.1 * r for r in runs]))
    >>> d = spread(share, np.repeat(np.arange(20), 2), 3, np.random.default_rng(0), draws=200)
    >>> d["per_run"], d["seeds_sd"]
    ([0.5, 0.6, 0.7], 0.1)
    >>> w = d["half_width"]
    >>> w["1x funds, 3 seeds"] > w["4x funds, 3 seeds"] > w["4x funds, 6 seeds"]
    True
    >>> one = spread(share, np.repeat(np.arange(20), 2), 1, np.random.default_rng(0), draws=200)
    >>> one["seeds_sd"], one["half_width"]  # one run: no seeds' spread to measure or project
    (None, {})
    """
    draw, every = group_draw(groups, rng), np.arange(len(groups))
    per_run = [round(stat(every, np.array([r])), 4) for r in range(runs)]
    drawn = [stat(draw(), np.arange(runs)) for _ in range(draws)]
    funds_var = float(np.nanvar(drawn))  # of the mean over these runs
    if runs < 2:  # one run measures no spread between seeds, so nothing to project
        return {"per_run": per_run, "funds_sd": round(float(np.sqrt(funds_var)), 4), "seeds_sd": None, "half_width": {}}
    seeds_var = float(np.var(per_run, ddof=1))
    return {
        "per_run": per_run,
        "funds_sd": round(float(np.sqrt(funds_var)), 4),
        "seeds_sd": round(float(np.sqrt(seeds_var)), 4),
        "half_width": {
            f"{times}x funds, {seeds} seeds": round(1.96 * float(np.sqrt(funds_var / times + seeds_var / seeds)), 4)
            for times in (1, 2, 4)
            for seeds in (runs, 2 * runs)
        },
    }


def interval(stat, groups, runs: int, rng: np.random.Generator, draws: int = 1000) -> dict:
    """`stat(rows, runs)` (index arrays) on every row and run, and its 95 % interval from a two-level bootstrap:
    the runs resampled, and the rows resampled by group (`groups`: each row's fund), a group's rows together.

    Two share classes per fund that always agree carry one fund's evidence, not two: drawn by fund, the
    interval is as wide as for the funds alone, where drawing share classes alone would narrow it.

    >>> hit = np.repeat([1.0, 0.0] * 10, 2)  # 20 funds, two identical share classes each
    >>> def share(rows, runs):
    ...     return float(hit[rows].mean())
    >>> by_fund = interval(share, np.repeat(np.arange(20), 2), 1, np.random.default_rng(0))
    >>> by_row = interval(share, np.arange(40), 1, np.random.default_rng(0))
    >>> by_fund["mean"], by_row["mean"]
    (0.5, 0.5)
    >>> width = lambda d: d["interval"][1] - d["interval"][0]
    >>> width(by_fund) > 1.2 * width(by_row)
    True
    """
    draw = group_draw(groups, rng)
    drawn = [stat(draw(), rng.integers(0, runs, runs)) for _ in range(draws)]
    return {
        "mean": round(stat(np.arange(len(groups)), np.arange(runs)), 4),
        "interval": [round(float(np.nanpercentile(drawn, 2.5)), 4), round(float(np.nanpercentile(drawn, 97.5)), 4)],
    }


def profile_file(name: str) -> str:
    """Where a profile lives: the product's `profiles/`, or the research record's (a trial, a pre-registered design).

    >>> profile_file("documents"), profile_file("documents-confirm")
    ('profiles/documents.yaml', 'research/profiles/documents-confirm.yaml')
    """
    product = Path("profiles") / f"{name}.yaml"
    return product.as_posix() if (ROOT / product).exists() else f"research/profiles/{name}.yaml"


def page(result: dict) -> str:
    """The figures as a Markdown page (generated: edit this script, not the page)."""
    lines = [
        "# The contest with documents",
        "",
        f"Generated by `python benchmarks/contest/documents_contest.py` from {result['runs']} runs of "
        + " + ".join(f"`{profile_file(p)}`" for p in result.get("profiles") or ["documents"])
        + " (training seeds "
        + ", ".join(str(s) for s in result["seeds"])
        + "; the "
        "universe and its split fixed). Test funds; each figure the mean over runs [min, max]; served − text "
        "baseline with a 95 % interval resampling runs, and funds with their share classes together. Served: "
        + ", ".join(result["served"])
        + ".",
        "",
    ]
    for key, block in result["subsets"].items():
        d = block["served_minus_text_qwk"]
        lines += [
            f"## {SUBSETS[key]} ({block['n']} share classes of {block['funds']} funds)",
            "",
            "| evaluator | exact | QWK |",
            "|---|---|---|",
        ]
        for name in EVALUATORS:
            e, q = block[name]["exact"], block[name]["qwk"]
            lines.append(
                f"| {NAMES[name]} | {e['mean']:.3f} [{e['range'][0]:.3f}, {e['range'][1]:.3f}]"
                f" | {q['mean']:.3f} [{q['range'][0]:.3f}, {q['range'][1]:.3f}] |"
            )
        w = block["spread"]
        widths = ", ".join(f"±{v:.3f} with {k}" for k, v in w["half_width"].items())
        where = (
            f"Its spread: {w['funds_sd']:.4f} from the funds (standard deviation), {w['seeds_sd']:.4f} from the seeds; "
            f"the 95 % interval these give is about {widths}."
            if w["seeds_sd"] is not None
            else f"One run: the interval resamples the funds alone ({w['funds_sd']:.4f}, standard deviation); "
            "the spread between seeds is not measured."
        )
        lines += [
            "",
            f"served − text baseline QWK: {d['mean']:+.4f} [{d['interval'][0]:+.4f}, {d['interval'][1]:+.4f}]; "
            f"per seed {', '.join(f'{g:+.4f}' for g in w['per_run'])}. {where}",
            "",
        ]
    lines += ["## Pillars (the policy's evaluations of the test funds)", "",
              "| run | citations verified | verified ones the analysts' sentence | pillars covered "
              "| judged as the analysts did | people | process | parent |",
              "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for seed, p in zip(result["seeds"], result["pillars"]):
        g = p.get("grpo") or {}
        by = g.get("by_criterion") or {}
        lines.append(
            f"| seed {seed} | {g.get('verified')} | {g.get('pertinent')} | {g.get('covered')} | {g.get('agree')} | "
            + " | ".join(str((by.get(c) or {}).get("agree")) for c in PILLARS)
            + " |"
        )
    return "\n".join(lines) + "\n"


def report(dataset: str, draws: int = 1000) -> dict:
    """The figures of a dataset's collected runs (`load`): every subset, and each run's pillar figures."""
    summaries, tables = load(RESULTS / dataset)
    rng = np.random.default_rng(0)
    return {
        "runs": len(tables),
        "seeds": [s["seed"] for s in summaries],
        "profiles": summaries[0]["profiles"],
        "served": [s["served"] for s in summaries],
        "subsets": {k: figures(tables, m, rng, draws) for k, m in subsets(tables[0]).items() if m.any()},
        "pillars": [s["pillars"] for s in summaries],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, nargs="*", default=[], help="finished runs to collect, one per seed")
    ap.add_argument("--recompute", action="store_true", help="rerun calibrate and backtest with this code first")
    ap.add_argument("--label", default="", help="runs of another profile: its own results and page (-LABEL)")
    args = ap.parse_args()
    dataset = f"documents-{args.label}" if args.label else "documents"
    out = OUT.with_name(f"documents_contest-{args.label}.json") if args.label else OUT
    written = PAGE.with_name(f"documents-{args.label}.md") if args.label else PAGE
    if args.root:  # a new set of runs replaces what was collected before
        shutil.rmtree(RESULTS / dataset, ignore_errors=True)
    for run in args.root:
        print(f"collected {collect(run, dataset, args.recompute).relative_to(ROOT)}")
    result = report(dataset)
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    written.write_text(page(result), encoding="utf-8")
    for name, block in result["subsets"].items():
        d = block["served_minus_text_qwk"]
        line = ", ".join(f"{k} {block[k]['qwk']['mean']}" for k in EVALUATORS)
        print(f"{name} (n={block['n']}): QWK {line}; served - text {d['mean']} {d['interval']}")
    print(f"-> {out.relative_to(ROOT)}, {written.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
