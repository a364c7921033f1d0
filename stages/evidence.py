"""Stage `evidence`: gradient boosting's grade probabilities for every share class, out of fold for
the training and validation funds, from the training split's model for the rest (saved for new funds).

The stage reads params.yaml and calls `fundgrpo.evaluation.statistical`; the logic, and its documentation, live there.
"""

from __future__ import annotations

import time

import pandas as pd

from fundgrpo.cli import run_stage
from fundgrpo.data import analyst_labels, documents
from fundgrpo.evaluation import statistical
from fundgrpo.methodology.compiler import load_methodology
from fundgrpo.params import load_params


def main() -> None:
    def body() -> None:
        started = time.perf_counter()
        p = load_params()
        methodology = load_methodology(p.methodology.out_dir)
        funds = analyst_labels.apply(
            pd.read_parquet(p.validate.out), analyst_labels.read(p.decisions.out), methodology.grades, p.decisions.out
        )
        texts = None
        if p.baseline.text:  # the text baseline: each share class's documents up to the as-of date
            docs = pd.read_parquet(p.ingest.documents_out)
            found = documents.by_share_class(docs, funds, documents.as_of(p.ingest.documents, funds))
            texts = documents.texts(found, funds["share_class_id"])
        estimates, estimator, summary = statistical.estimate(
            funds, p.baseline, p.evidence, p.prepare, methodology.grades, texts
        )
        statistical.write(p.evidence.out_dir, estimates, estimator, summary)
        shown = summary.get("out_of_fold")
        seconds = time.perf_counter() - started
        print(
            f"evidence: {summary['rows']} share classes, {summary['folds']} folds, out of fold {shown}, {seconds:.1f} s"
        )

    run_stage("evidence", body)


if __name__ == "__main__":
    main()
