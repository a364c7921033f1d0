"""GRPO where references are scarce: the policy against its SFT start, from finished runs of
`profiles/documents.yaml` with `profiles/scarce-references.yaml` over it, one per training seed (the
universe and its split fixed). SFT learns from the training funds with a reference answer (15 %); GRPO
trains from that start on every graded fund with verifiable rewards (grade, verified citations, pillars
covered).

    python benchmarks/time/pipeline.py --seed 1 --profile documents scarce-references --keep   # one run per seed
    python benchmarks/contest/scarce_references.py --root RUN1 RUN2 RUN3 [--recompute]             # collect, page
    python benchmarks/contest/scarce_references.py                                  # the page from what was collected

Collects into `research/results/documents/scarce-references/seed-N/` each run's per-fund backtest
(`reports/backtest/predictions.jsonl`: both models' answers and grades) read against its test records
(`data/prepared/test.jsonl`: the documents shown and the analysts' pillars), and what GRPO kept
(`metrics/grpo.json`), so the page can be regenerated without the runs. Per model on the test funds:
pillar judgements in the analysts' direction, verified citations that are the analysts' sentence
(pertinent), citations verified, and QWK of the written grade and of the grade as served under each
model's own validation-chosen rule; GRPO − SFT with a 95 % interval resampling runs, and funds with their
share classes together (`documents_contest.interval`). `--recompute` first reruns each run's calibrate and
backtest stages with this checkout's code.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.contest.documents_contest import RESULTS, interval, load, scores  # noqa: E402
from benchmarks.contest.seeds import recompute  # noqa: E402
from fundgrpo.methodology import citations  # noqa: E402
from fundgrpo.methodology.records import PromptRecord  # noqa: E402

OUT = ROOT / "research" / "results" / "scarce_references.json"
PAGE = ROOT / "benchmarks" / "contest" / "scarce_references.md"
DATASET = RESULTS / "scarce-references"
MODELS = ("grpo", "sft")
PILLARS = ("people", "process", "parent")  # methodology/documents.yaml's qualitative criteria
# ratio figures: per fund a numerator and a denominator, summed over the funds and runs drawn
RATIOS = {
    "valid": "answers that parse with a whole-number grade",
    "agree": "pillars judged as the analysts did",
    "pertinent": "verified citations that are the analysts' sentence",
    "verified": "citations verified",
}
GRADES = {"written": "QWK, the grade the answer writes", "served": "QWK, served under its own validation-chosen rule"}


def answer(text: str | None) -> dict:
    try:
        found = json.loads(text or "")
    except json.JSONDecodeError:
        return {}
    return found if isinstance(found, dict) else {}


def counts(said: dict, row: dict, ids: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """One answer's (numerator, denominator) per ratio figure, as `citations.summary` counts them.

    >>> row = PromptRecord.example(documents='{"D1": "Calm. The lead manager resigned."}',
    ...        pillars='{"people": {"judgement": -1, "evidence": [{"document": 1, "sentence": 2}]}}')
    >>> cites = [{"document": 1, "sentence": 2}, {"document": 1, "sentence": 1}]
    >>> counts({"pillars": {"people": {"judgement": -1, "evidence": cites}}}, row, ("people",))
    {'agree': (1, 1), 'pertinent': (1, 2), 'verified': (2, 2)}
    """
    t = citations.tally(said.get("pillars"), row, ids)
    agree = (sum(t.agree.values()), len(t.agree))
    return {"agree": agree, "pertinent": (t.pertinent, t.cited), "verified": (t.checked.verified, t.checked.citations)}


def table(root: Path) -> pd.DataFrame:
    """One run's test funds: per model the ratio counts and the grades, and the expert's grade."""
    funds = pd.read_json(root / "reports/backtest/predictions.jsonl", lines=True).set_index("share_class_id")
    if "sft_text" not in funds:
        raise SystemExit(f"{root}: the per-fund backtest holds no SFT answers; rerun with --recompute")
    records = {r.share_class_id: r for r in PromptRecord.read(root / "data/prepared/test.jsonl")}
    out = []
    for sid, f in funds.sort_index().iterrows():
        row = {"share_class_id": sid, "fund_id": f["fund_id"], "expert": f["expert_grade"]}
        for name in MODELS:
            said = answer(f[f"{name}_text"])
            grade = said.get("grade")
            row[f"{name}_written"] = float(grade) if isinstance(grade, int) and not isinstance(grade, bool) else np.nan
            row[f"{name}_served"] = f["grpo_grade" if name == "grpo" else "sft_served_grade"]
            row[f"{name}_valid"], row[f"{name}_valid_of"] = int(not np.isnan(row[f"{name}_written"])), 1
            for key, (num, den) in counts(said, records[sid], PILLARS).items():
                row[f"{name}_{key}"], row[f"{name}_{key}_of"] = num, den
        out.append(row)
    return pd.DataFrame(out)


def figures(tables: list[pd.DataFrame]) -> dict:
    """Per figure: each model's value per run, and GRPO − SFT with its interval."""
    out: dict = {}
    for key in RATIOS:

        def share(name: str, funds: np.ndarray, runs: np.ndarray, key: str = key) -> float:
            num = sum(tables[r][f"{name}_{key}"].to_numpy()[funds].sum() for r in runs)
            den = sum(tables[r][f"{name}_{key}_of"].to_numpy()[funds].sum() for r in runs)
            return num / den if den else float("nan")

        out[key] = figure(tables, share)
    for key in GRADES:

        def qwk(name: str, funds: np.ndarray, runs: np.ndarray, key: str = key) -> float:
            e = tables[0]["expert"].to_numpy(float)[funds]
            return float(np.mean([scores(e, tables[r][f"{name}_{key}"].to_numpy(float)[funds])["qwk"] for r in runs]))

        out[key] = figure(tables, qwk)
    return out


def figure(tables: list[pd.DataFrame], stat: Callable[[str, np.ndarray, np.ndarray], float]) -> dict:
    every = np.arange(len(tables[0]))
    per_run = {n: [round(stat(n, every, np.array([r])), 4) for r in range(len(tables))] for n in MODELS}
    funds = tables[0]["fund_id"].to_numpy()
    gap = interval(lambda f, r: stat("grpo", f, r) - stat("sft", f, r), funds, len(tables), np.random.default_rng(0))
    return {**per_run, "grpo_minus_sft": gap}


def page(result: dict) -> str:
    """The figures as a Markdown page (generated: edit this script, not the page)."""
    lines = [
        "# GRPO where references are scarce",
        "",
        f"Generated by `python benchmarks/contest/scarce_references.py` from {result['runs']} runs of "
        "`profiles/documents.yaml` with `profiles/scarce-references.yaml` (training seeds "
        + ", ".join(map(str, result["seeds"]))
        + "): SFT on the 15 % of training funds with a reference answer, GRPO from there on every graded fund. "
        f"{result['funds']} test share classes; per run, then GRPO − SFT with a 95 % interval resampling runs, "
        "and funds with their share classes together.",
        "",
        "| figure | GRPO per run | SFT per run | GRPO − SFT [95 %] |",
        "|---|---|---|---|",
    ]
    for key, words in {**RATIOS, **GRADES}.items():
        f = result["figures"][key]
        g = f["grpo_minus_sft"]
        lines.append(
            f"| {words} | {' / '.join(map(str, f['grpo']))} | {' / '.join(map(str, f['sft']))} "
            f"| {g['mean']:+.4f} [{g['interval'][0]:+.4f}, {g['interval'][1]:+.4f}] |"
        )
    lines += ["", "What GRPO kept (validation QWK of the greedy answers at its start and at the step kept):", ""]
    for seed, k, v in zip(result["seeds"], result["kept"], result["served"]):
        lines.append(
            f"- seed {seed}: {k['kept']} of {k['steps']} ({k['start_value']} → {k['best_value']}); calibrate served "
            f"{v['grpo']} (SFT: {v['sft']})"
        )
    return "\n".join(lines) + "\n"


def collect(run: Path, recompute_first: bool = False) -> Path:
    """A kept run's per-fund counts and grades, what GRPO kept and what calibrate served, into DATASET."""
    if recompute_first:
        recompute(run)
    seed = json.loads((run / "bench.json").read_text()).get("seed")
    out = DATASET / f"seed-{seed}"
    out.mkdir(parents=True, exist_ok=True)
    grpo = json.loads((run / "metrics/grpo.json").read_text())
    fit = json.loads((run / "models/calibration.json").read_text())
    summary = {
        "seed": seed,
        "recomputed": recompute_first,
        "kept": {k: grpo.get(k) for k in ("kept", "steps", "start_value", "best_value")},
        "served": {"grpo": fit.get("chosen"), "sft": (fit.get("sft") or {}).get("chosen")},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    table(run).to_csv(out / "per_fund.csv", index=False)
    return out


def report() -> dict:
    """The figures of the collected runs (`documents_contest.load`: checked to be on the same test funds)."""
    summaries, tables = load(DATASET)
    return {
        "runs": len(tables),
        "funds": len(tables[0]),
        "seeds": [s["seed"] for s in summaries],
        "kept": [s["kept"] for s in summaries],
        "served": [s["served"] for s in summaries],
        "figures": figures(tables),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, nargs="*", default=[], help="finished runs to collect, one per seed")
    ap.add_argument("--recompute", action="store_true", help="rerun calibrate and backtest with this code first")
    args = ap.parse_args()
    if args.root:  # a new set of runs replaces what was collected before
        shutil.rmtree(DATASET, ignore_errors=True)
    for run in args.root:
        print(f"collected {collect(run, args.recompute).relative_to(ROOT)}")
    result = report()
    OUT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    PAGE.write_text(page(result), encoding="utf-8")
    print(PAGE.read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
