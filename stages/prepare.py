"""Stage `prepare`: prompt/answer datasets, split by fund.

The stage reads params.yaml and calls `fundgrpo.methodology.preparation`; the logic, and its documentation, live there.
"""

from __future__ import annotations

import pandas as pd

from fundgrpo import io
from fundgrpo.cli import run_stage
from fundgrpo.data import analyst_labels, documents
from fundgrpo.evaluation import statistical
from fundgrpo.methodology import citations, records
from fundgrpo.methodology.compiler import load_methodology
from fundgrpo.methodology.preparation import lengths, run
from fundgrpo.model.pretrained import configured_tokenizer
from fundgrpo.params import load_params


def main() -> None:
    def body() -> None:
        p = load_params()
        methodology = load_methodology(p.methodology.out_dir)
        decided = analyst_labels.read(p.decisions.out)
        funds = analyst_labels.apply(pd.read_parquet(p.validate.out), decided, methodology.grades, p.decisions.out)
        estimates = statistical.read(p.evidence.out_dir, p.prepare)
        reading = None
        if methodology.qualitative:  # the prompts show each fund's documents; the references cite them
            docs, judged = pd.read_parquet(p.ingest.documents_out), pd.read_parquet(p.ingest.judgements_out)
            as_of = documents.as_of(p.ingest.documents, funds)
            reading = citations.reading(docs, judged, funds, as_of, p.prepare.document_chars)
        datasets, summary = run(funds, methodology, p.prepare, estimates, reading)
        tokenizer = configured_tokenizer(p.model)
        summary["tokenizer"] = p.model.pretrained or "embedded (trained by base on these prompts)"
        summary.update(lengths(datasets["train"], tokenizer))
        with io.atomic_path(p.prepare.out_dir) as out:  # the three splits replace the old ones together
            out.mkdir()
            for name, rows in datasets.items():
                records.write(rows, out / f"{name}.jsonl")
        io.write_json(summary, p.prepare.metrics)
        print("prepare: " + ", ".join(f"{k}={v}" for k, v in summary.items()))

    run_stage("prepare", body)


if __name__ == "__main__":
    main()
