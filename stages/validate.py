"""Stage `validate`: a Great Expectations suite over the canonical fund table.

The stage reads params.yaml and calls `fundgrpo.data.validation`; the logic, and its documentation, live there.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pandas as pd

from fundgrpo import io
from fundgrpo.cli import run_stage
from fundgrpo.data.validation import run, with_documents
from fundgrpo.params import load_params


def main() -> None:
    def body() -> None:
        p = load_params()
        df = pd.read_parquet(p.ingest.out)
        notes = json.loads(Path(p.ingest.report).read_text(encoding="utf-8"))["notes"]
        # The report is written beside the last good one first: a failing run's report must not
        # replace the good run's (a DVC output), and the user still gets to read it.
        good_dir, failed_dir = Path(p.validate.report_dir), Path(f"{p.validate.report_dir}-failed")
        result = run(df, p.validate, failed_dir, notes)
        c = result.summary["counts"]
        result, n_docs = with_documents(result, Path(p.ingest.documents_out), df, p.ingest.documents, failed_dir)
        if not result.success:
            print(f"validation failed: {len(result.failures)} expectation(s):", file=sys.stderr)
            for line in result.failures:
                print(f"  {line}", file=sys.stderr)
            print(f"report: {result.report} (the last good report stays in {good_dir})", file=sys.stderr)
            sys.exit(1)  # validate.out is not touched: a previous good table stays
        io.move_dir(failed_dir, good_dir)
        result = dataclasses.replace(result, report=good_dir / Path(str(result.report)).name)
        io.write_parquet(df, p.validate.out)
        print(
            f"validate: {c['rows']} rows, {c['funds']} funds, {c['categories']} categories, "
            f"{c['unlabelled_rows']} unlabelled, {c['rows_missing_any_history']} missing "
            f"{'/'.join(c['rows_missing_history']) or 'no'} history"
            + (f" (not in the source: {', '.join(c['history_columns_absent'])})" if c["history_columns_absent"] else "")
            + "; "
            f"{result.summary['expectations']['evaluated']} expectations passed; report {result.report}"
            + (f"; {n_docs} documents passed their suite (report in documents/)" if n_docs else "")
        )
        if result.summary["ingest_notes"]:
            print(
                f"validate: {len(result.summary['ingest_notes'])} note(s) from ingest, in the report: "
                + "; ".join(result.summary["ingest_notes"])
            )

    run_stage("validate", body)


if __name__ == "__main__":
    main()
