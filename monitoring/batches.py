"""New fund data batches: find, load, quarantine, accept, archive.

A batch is a screener-style file (CSV or Parquet) dropped into `monitor.incoming_dir`:
one row per share class, in the project's table format (canonical column names by
default; `ingest.column_map` applies as for a table source), with expert grades where
analysts have rated, and optionally `as_of` (the month the metrics end at).
Name batches so they sort by date (batch-YYYY-MM...): accepted batches are laid over
the source in name order, and the newest snapshot of a share class wins.

A batch may bring its funds' documents beside it: `<batch>.documents.csv` (or `.parquet`, or a
folder `<batch>.documents/`) in ingest's documents format, keyed by the batch's share classes,
funds or companies; checked as ingest checks them, read by the champion's prompts on the batch and
compared with the training documents (document drift). They move with their batch.

Nothing is deleted: handled files move to `monitor.processed_dir/<date>/`, failing
ones (with their validation report) to `monitor.quarantine_dir/<date>/<batch>/`.

    python -m monitoring.batches     # the DVC stage `batches`: make sure the folder exists
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd

from fundgrpo import io
from fundgrpo.data import documents, identity
from fundgrpo.data.columns import drop_exact_duplicates, to_canonical
from fundgrpo.data.reading import IngestReport, read_source
from fundgrpo.params import DocumentsSourceParams, IngestParams, MonitorParams, load_params

SUFFIXES = (".csv", ".parquet", ".pq")
SIDECAR = ".documents"  # <batch>.documents.csv / .parquet / folder: the batch's documents
LISTING = "accepted.json"  # written by the `batches` stage: the accepted batches' file names


def incoming(params: MonitorParams, root: Path) -> list[Path]:
    """Batch files waiting in the watched folder, by name; dotfiles and other files are left alone."""
    folder = root / params.incoming_dir
    if not folder.is_dir():
        return []
    return sorted(
        p
        for p in folder.iterdir()
        if p.is_file()
        and not p.name.startswith(".")
        and p.suffix.lower() in SUFFIXES
        and not p.stem.endswith(SIDECAR)  # a batch's documents, not a batch
    )


def documents_of(path: Path) -> Path | None:
    """The documents that came with the batch at `path` (`SIDECAR`), or None.

    >>> documents_of(Path("/nowhere/batch-2025-06.csv")) is None
    True
    """
    name = name_of(path) + SIDECAR
    found = [path.with_name(name)] + [path.with_name(name + s) for s in SUFFIXES]
    return next((p for p in found if p.exists()), None)


def load_documents(path: Path, table: pd.DataFrame, params: DocumentsSourceParams) -> pd.DataFrame | None:
    """The batch's documents (`documents_of`), checked against its funds; None when none came with it."""
    sidecar = documents_of(path)
    if sidecar is None:
        return None
    return documents.read(replace(params, path=str(sidecar.resolve()), judgements=""), table, Path("/"))


def name_of(path: Path) -> str:
    """The batch name: the file name without its extension.

    >>> name_of(Path("data/incoming/batch-2025-06.csv"))
    'batch-2025-06'
    """
    return path.name[: -len(path.suffix)] if path.suffix else path.name


def load(path: Path, params: IngestParams) -> tuple[pd.DataFrame, IngestReport]:
    """The batch as a canonical table (the ingest stage's table reader and mapping; `as_of` is kept),
    and what reading and the settings did (`IngestReport`)."""

    raw, report = read_source(path, params.encoding, params.delimiter)
    identity.positional_ids(params, str(path), raw.columns)  # a batch numbered by row would replace other funds
    if params.drop_duplicate_rows:  # before `as_of` is carried over row by row below
        raw, report = drop_exact_duplicates(raw, params, str(path), report)
    table, report = to_canonical(raw, replace(params, source="table"), str(path), report)
    if "as_of" in raw.columns:
        table["as_of"] = raw["as_of"].map(lambda v: None if pd.isna(v) else str(v).strip()).to_numpy()
    return table, report


def _free(path: Path) -> Path:
    """`path`, or `path` with a numeric suffix if taken (a batch handled twice in a day)."""
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate


def quarantine(path: Path, report: Path | None, reason: str, params: MonitorParams, root: Path, day: str) -> Path:
    """Move the batch file (and its documents) and its validation report to quarantine/<day>/<batch>/ with
    reason.txt."""
    sidecar = documents_of(path)
    dest = _free(root / params.quarantine_dir / day / name_of(path))
    dest.mkdir(parents=True)
    shutil.move(str(path), dest / path.name)
    if sidecar is not None:
        shutil.move(str(sidecar), dest / sidecar.name)
    if report is not None and report.exists():
        shutil.move(str(report), dest / "validation")
    io.write_text(reason.rstrip() + "\n", dest / "reason.txt")
    return dest


def accept(table: pd.DataFrame, name: str, batches_dir: Path) -> Path:
    """Store a validated batch where the ingest stage lays it over the source."""
    path = batches_dir / f"{name}.parquet"
    io.write_parquet(table, path)
    return path


def archive(path: Path, params: MonitorParams, root: Path, day: str) -> Path:
    """Move a handled batch file (and its documents) to processed/<day>/ (never deleted)."""
    sidecar = documents_of(path)
    dest = _free(root / params.processed_dir / day / path.name)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(path), dest)
    if sidecar is not None:
        shutil.move(str(sidecar), _free(dest.parent / sidecar.name))
    return dest


def main(argv: list[str] | None = None) -> int:
    """The DVC stage `batches`: the folder must exist (DVC refuses a missing dependency)."""
    argparse.ArgumentParser(
        prog="python -m monitoring.batches",
        description="The DVC stage `batches`: makes sure ingest.batches_dir exists and lists the accepted "
        "batches in it (the monitoring flow accepts them; `ingest` lays them over the source). "
        f"Reads params.yaml; writes the folder and its list, {LISTING}.",
    ).parse_args(argv)
    folder = Path(load_params().ingest.batches_dir)
    folder.mkdir(parents=True, exist_ok=True)
    files = sorted(folder.glob("*.parquet"))
    # the list beside the batches: DVC warns at every run about an empty output folder, which no user can act on
    io.write_json({"accepted": [f.name for f in files]}, folder / LISTING)
    names = ", ".join(f.stem for f in files) or "none"
    print(f"batches: {len(files)} accepted batch(es) in {folder}: {names}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
