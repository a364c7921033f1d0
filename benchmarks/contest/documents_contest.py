"""The contest on the synthetic universe with documents, from finished runs of `profiles/documents.yaml`,
one per training seed (the data split fixed, so every run has the same test funds).

    python benchmarks/time/pipeline.py --seed 1 --profile documents --keep           # one run per seed
    python benchmarks/contest/documents_contest.py --root RUN1 RUN2 RUN3 [--recompute]   # -> results/, documents.md
    python benchmarks/contest/documents_contest.py --label ko --root ...   # runs with documents-ko: documents-ko.md

Reads each run's per-fund backtest (`reports/backtest/predictions.jsonl`), its pillar figures
(`metrics/backtest.json`) and the generator's hidden facts (`data/raw/synthetic/qualitative.csv`);
`--recompute` first reruns a run's calibrate and backtest stages with this checkout's code (training
is not rerun). Every evaluator's grade as the backtest served it: the language model as calibrate chose
(served), the language model alone, SFT under its own rule, the text baseline (gradient boosting on the
numbers and the documents' n-grams) with its rule, and the rule scorer. Reported on the test funds: all,
those a qualitative fact touched, those whose documents use a phrasing held out of training, the Korean
funds; each figure the mean and range over runs, served − text baseline QWK with a 95 % interval that
resamples funds and runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.contest.seeds import recompute  # noqa: E402  # one way to rerun a kept run's calibrate and backtest
from fundgrpo.evaluation.agreement import grade_metrics  # noqa: E402

OUT = ROOT / "research" / "results" / "documents_contest.json"
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
    found = grade_metrics(expert.astype(int).tolist(), as_missed(expert, predicted).tolist(), GRADES)
    return {"exact": float(found["exact"]), "qwk": float(found["qwk"])}


def table(root: Path) -> pd.DataFrame:
    """One run's test funds: each evaluator's grade, the expert's, and the hidden facts."""
    rows = pd.read_json(root / "reports/backtest/predictions.jsonl", lines=True)
    facts = pd.read_csv(root / "data/raw/synthetic/qualitative.csv")
    return rows.merge(facts, on="fund_id", how="left").sort_values("share_class_id").reset_index(drop=True)


def subsets(t: pd.DataFrame) -> dict[str, np.ndarray]:
    return {
        "all": np.ones(len(t), bool),
        "touched": (t[list(PILLARS)] != 0).any(axis=1).to_numpy(),
        "heldout_phrasing": t["heldout"].fillna(False).astype(bool).to_numpy(),
        "korean": (t["category"] == "Korea Equity").to_numpy(),
    }


def figures(tables: list[pd.DataFrame], mask: np.ndarray, rng: np.random.Generator, draws: int = 1000) -> dict:
    """Every evaluator's exact and QWK (mean and range over runs) on the funds of `mask`, and served − text
    baseline QWK with an interval resampling the funds and the runs."""
    parts = [t[mask] for t in tables]
    expert = parts[0]["expert_grade"].to_numpy(float)
    out: dict = {"n": int(mask.sum()), "runs": len(parts)}
    for name, column in EVALUATORS.items():
        each = [scores(expert, p[f"{column}_grade"].to_numpy(float)) for p in parts]
        out[name] = {
            k: {"mean": round(float(np.mean([e[k] for e in each])), 3),
                "range": [round(min(e[k] for e in each), 3), round(max(e[k] for e in each), 3)]}
            for k in ("exact", "qwk")
        }  # fmt: skip
    served = [p["grpo_grade"].to_numpy(float) for p in parts]
    text = [p["gbm_rule_grade"].to_numpy(float) for p in parts]

    def gap(funds: np.ndarray, runs: np.ndarray) -> float:
        e = expert[funds]
        return float(np.mean([scores(e, served[r][funds])["qwk"] - scores(e, text[r][funds])["qwk"] for r in runs]))

    out["served_minus_text_qwk"] = interval(gap, len(expert), len(parts), rng, draws)
    return out


def interval(stat, funds: int, runs: int, rng: np.random.Generator, draws: int = 1000) -> dict:
    """`stat(funds, runs)` (index arrays) on every fund and run, and its 95 % interval resampling funds and runs."""
    drawn = [stat(rng.integers(0, funds, funds), rng.integers(0, runs, runs)) for _ in range(draws)]
    return {
        "mean": round(stat(np.arange(funds), np.arange(runs)), 4),
        "interval": [round(float(np.nanpercentile(drawn, 2.5)), 4), round(float(np.nanpercentile(drawn, 97.5)), 4)],
    }


def page(result: dict) -> str:
    """The figures as a Markdown page (generated: edit this script, not the page)."""
    lines = [
        "# The contest with documents",
        "",
        f"Generated by `python benchmarks/contest/documents_contest.py` from {result['runs']} runs of "
        + " + ".join(f"`profiles/{p}.yaml`" for p in result.get("profiles") or ["documents"])
        + " (training seeds "
        + ", ".join(str(s) for s in result["seeds"])
        + "; the "
        "universe and its split fixed). Test funds; each figure the mean over runs [min, max]; served − text "
        "baseline with a 95 % interval resampling funds and runs. Served: " + ", ".join(result["served"]) + ".",
        "",
    ]
    for key, block in result["subsets"].items():
        d = block["served_minus_text_qwk"]
        lines += [f"## {SUBSETS[key]} ({block['n']} share classes)", "", "| evaluator | exact | QWK |", "|---|---|---|"]
        for name in EVALUATORS:
            e, q = block[name]["exact"], block[name]["qwk"]
            lines.append(
                f"| {NAMES[name]} | {e['mean']:.3f} [{e['range'][0]:.3f}, {e['range'][1]:.3f}]"
                f" | {q['mean']:.3f} [{q['range'][0]:.3f}, {q['range'][1]:.3f}] |"
            )
        lines += [
            "",
            f"served − text baseline QWK: {d['mean']:+.4f} [{d['interval'][0]:+.4f}, {d['interval'][1]:+.4f}]",
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, nargs="+", default=[Path(".")], help="finished runs, one per seed")
    ap.add_argument("--recompute", action="store_true", help="rerun calibrate and backtest with this code first")
    ap.add_argument("--label", default="", help="runs of another profile: its own results and page (-LABEL)")
    args = ap.parse_args()
    out, written = OUT, PAGE
    if args.label:
        out = OUT.with_name(f"documents_contest-{args.label}.json")
        written = PAGE.with_name(f"documents-{args.label}.md")
    if args.recompute:
        for run in args.root:
            recompute(run)
    tables = [table(r) for r in args.root]
    ids = tables[0]["share_class_id"].tolist()
    if any(t["share_class_id"].tolist() != ids for t in tables):
        raise SystemExit("the runs' test funds differ: the contest compares runs of one universe and split")
    backtests = [json.loads((r / "metrics/backtest.json").read_text(encoding="utf-8")) for r in args.root]
    params = [json.loads((r / "bench.json").read_text()) if (r / "bench.json").exists() else {} for r in args.root]
    rng = np.random.default_rng(0)
    result = {
        "runs": len(tables),
        "seeds": [p.get("seed") for p in params],
        "profiles": params[0].get("profiles"),
        "served": [b["models"]["grpo"].get("served", {}).get("chosen") for b in backtests],
        "subsets": {k: figures(tables, m, rng) for k, m in subsets(tables[0]).items() if m.any()},
        "pillars": [{n: b["models"][n].get("pillars") for n in ("grpo", "sft")} for b in backtests],
    }
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    written.write_text(page(result), encoding="utf-8")
    for name, block in result["subsets"].items():
        d = block["served_minus_text_qwk"]
        line = ", ".join(f"{k} {block[k]['qwk']['mean']}" for k in EVALUATORS)
        print(f"{name} (n={block['n']}): QWK {line}; served - text {d['mean']} {d['interval']}")
    print(f"-> {out.relative_to(ROOT)}, {written.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
