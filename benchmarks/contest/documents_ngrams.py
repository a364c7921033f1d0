"""How much of the synthetic universe's qualitative half an n-gram model reads: the realism check of
the documents generator, before any language model is tuned on it.

    python benchmarks/contest/documents_ngrams.py  # seeds 7 8 9 -> research/results/documents_ngrams.json
    python benchmarks/contest/documents_ngrams.py --seeds 7       # one seed

Per seed: the universe with documents (`profiles/documents.yaml`'s settings) is written and
ingested as the pipeline does; gradient boosting on the numbers alone, and the text baseline (the
numbers plus word and character n-gram TF-IDF of each fund's documents), are fitted on the
training split exactly as the `evidence` stage fits them; the rule scorer (numeric criteria of
methodology/documents.yaml) beside them. Reported on the test funds, with each evaluator's likeliest
grade: overall, on the funds a qualitative fact touched, on the funds whose documents use a phrasing
held out of training, on the Korean funds; and the share of the test funds' pillars the text model
could at best read (the fact is documented).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from fundgrpo.data import documents, ingestion, synthetic, synthetic_documents
from fundgrpo.evaluation import statistical
from fundgrpo.evaluation.agreement import grade_metrics
from fundgrpo.methodology import compiler
from fundgrpo.methodology.splits import split_of
from fundgrpo.params import BaselineParams, DocumentsSourceParams, EvidenceParams, IngestParams, Params
from fundgrpo.threads import small_data

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "research" / "results" / "documents_ngrams.json"


def universe(seed: int, folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(canonical funds, checked documents, hidden facts) for the documents universe of `seed`."""
    p = Params()
    params = replace(p.synthetic, seed=seed, documents=True, out_dir=str(folder))
    facts = synthetic.qualitative_facts(params)
    assert facts is not None
    extra = synthetic_documents.files(
        synthetic.universe(params), facts, params, lambda f: split_of(f, p.prepare) != "train"
    )
    facts = extra["qualitative.csv"]
    synthetic.write(params, extra=extra)
    funds, _ = ingestion.run(IngestParams(path=str(folder), batches_dir=""))
    checked = documents.read(DocumentsSourceParams(path=str(folder / "documents.csv")), funds)
    return funds, checked, facts


def measure(seed: int) -> dict:
    p = Params()
    methodology = compiler.load(ROOT / "methodology" / "documents.yaml")
    grades = methodology.grades
    with tempfile.TemporaryDirectory() as tmp:
        funds, docs, facts = universe(seed, Path(tmp) / "synthetic")
    found = documents.by_share_class(docs, funds, documents.as_of(DocumentsSourceParams(), funds))
    texts = documents.texts(found, funds["share_class_id"])
    baseline = BaselineParams()
    evaluators = {}
    seconds = {}
    for name, given in (("gbm_numbers", None), ("gbm_text", texts)):
        started = time.perf_counter()
        estimates, _, _ = statistical.estimate(funds, baseline, EvidenceParams(), p.prepare, grades, given)
        seconds[name] = round(time.perf_counter() - started, 1)
        evaluators[name] = estimates.set_index("share_class_id")["gbm_grade"]
    rule = compiler.rule_score(methodology, funds)["rule_grade"]
    evaluators["rule"] = pd.Series(rule.to_numpy(), index=funds["share_class_id"].astype(str))

    table = funds.assign(share_class_id=funds["share_class_id"].astype(str)).merge(facts, on="fund_id")
    table = table[table["expert_grade"].notna()]
    table = table[table["fund_id"].map(lambda f: split_of(str(f), p.prepare)) == "test"]
    pillars = list(synthetic_documents.PILLARS)
    subsets = {
        "all": np.ones(len(table), bool),
        "touched": (table[pillars] != 0).any(axis=1).to_numpy(),
        "untouched": (table[pillars] == 0).all(axis=1).to_numpy(),
        "heldout_phrasing": table["heldout"].to_numpy(),
        "korean": (table["category"] == "Korea Equity").to_numpy(),
    }
    out: dict = {"seed": seed, "documents": len(docs), "test_share_classes": len(table), "fit_seconds": seconds}
    for subset, mask in subsets.items():
        rows = table[mask]
        block: dict = {"n": int(len(rows))}
        for name, grade in evaluators.items():
            predicted = grade.reindex(rows["share_class_id"])
            ok = predicted.notna().to_numpy()
            found_metrics = grade_metrics(
                rows["expert_grade"].astype(int)[ok].tolist(), predicted[ok].astype(int).tolist(), grades
            )
            block[name] = {k: round(float(found_metrics[k]), 3) for k in ("exact", "qwk")}
        out[subset] = block
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[7, 8, 9])
    args = ap.parse_args()
    runs = []
    with small_data():
        for seed in args.seeds:
            run = measure(seed)
            runs.append(run)
            print(json.dumps(run))
    OUT.write_text(json.dumps({"runs": runs}, indent=2) + "\n", encoding="utf-8")
    for subset in ("all", "touched", "untouched", "heldout_phrasing", "korean"):
        line = [subset]
        for name in ("rule", "gbm_numbers", "gbm_text"):
            qwk = [r[subset][name]["qwk"] for r in runs]
            line.append(f"{name} qwk {np.mean(qwk):.3f}")
        print(" | ".join(line))
    print(f"-> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
