"""Stage `ingest`: the configured fund source -> the canonical table (data/canonical/funds.parquet).

    python -m stages.ingest      # params.yaml, section `ingest` (or `dvc repro ingest`)

Documents (meeting notes, news: the qualitative criteria's evidence) come from `ingest.documents.path`
and are checked against the table (fundgrpo/data/documents.py) into `ingest.documents_out`.
The source is `ingest.path`: a screener export (source: table) or a folder of return series
(source: returns; the synthetic universe by default). Settings for real exports (delimiter,
decimal comma, missing-value markers, unrated codes, built ids) are in `fundgrpo/params.py`
(IngestParams); the reading itself is `fundgrpo/data/ingestion.py`.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from fundgrpo.cli import run_stage
from fundgrpo.data import documents, ingestion
from fundgrpo.io import write_json, write_parquet
from fundgrpo.params import load_params


def main() -> None:
    def body() -> None:
        params = load_params().ingest
        table, report = ingestion.run(params)
        docs = documents.read(params.documents, table)  # checked before anything is written
        judgements = documents.read_judgements(params.documents, table, docs)
        write_parquet(table, params.out)
        write_parquet(docs, params.documents_out)
        write_parquet(judgements, params.judgements_out)
        write_json(asdict(report), params.report)
        print(f"ingest: {ingestion.summary(table, report)} -> {params.out}")
        as_of = documents.as_of(params.documents, table)
        print(f"ingest: {documents.summary(docs, as_of, Path(params.documents.path))} -> {params.documents_out}")
        for note in report.notes:  # read without error, but doubtful: the validation report repeats them
            print(f"ingest: note: {note}")

    run_stage("ingest", body)


if __name__ == "__main__":
    main()
