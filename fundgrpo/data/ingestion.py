"""Any fund source -> the canonical table (`fundgrpo.data.canonical`); the `ingest` stage calls `run`.

Sources (`ingest.source`):
  * "returns": a folder (`ingest.path`) with monthly return/NAV series and an attributes
    table; metrics are computed with `fundgrpo.data.navmetrics` (the series win over
    same-named attributes).
  * "table": a screener export (`ingest.path`, CSV or Parquet, by extension).

Real exports are read by settings, not by clean-up scripts: the CSV delimiter is sniffed,
a decimal comma is read, blank cells and the configured missing-value markers (`na_values`, and
only those: "NA" or "None" stay text unless listed) become missing, unrated codes (`unrated`)
become unlabelled, exact duplicate rows can be dropped (`drop_duplicate_rows`), a share-class id
can be built from columns or generated, and a fund id can come from a name with plan suffixes
stripped (`fund_id_strip`). What the settings changed is counted in the `IngestReport` beside the
table (ingest's line, `summary`; the validation report's notes).

Reading a file is `fundgrpo.data.reading`; mapping its columns, `fundgrpo.data.columns`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from fundgrpo.data import navmetrics
from fundgrpo.data.canonical import COLUMNS
from fundgrpo.data.columns import as_text, blank_markers, missing_column_message, to_canonical, to_number
from fundgrpo.data.reading import IngestError, IngestReport, read_source
from fundgrpo.data.riskadjusted import add_mrar
from fundgrpo.params import IngestParams

# ------------------------------------------------------------------- sources


def ingest_table(params: IngestParams, root: Path) -> tuple[pd.DataFrame, IngestReport]:
    """A screener export (CSV/Parquet) -> canonical table, and what reading and the settings did."""
    if not params.path:
        raise IngestError("ingest.path is empty: name the screener export for source: table")
    path = root / params.path
    raw, report = read_source(path, params.encoding, params.delimiter)
    return to_canonical(raw, params, str(path), report)


def _series(params: IngestParams, root: Path) -> tuple[pd.DataFrame, IngestReport]:
    """The long monthly series, checked and typed."""
    rp = params.returns
    path = root / params.path / rp.series_file
    raw, report = read_source(path, params.encoding, params.delimiter)
    raw, blanked = blank_markers(raw, params.na_values)
    available = [str(c) for c in raw.columns]
    needed = {"id_column": rp.id_column, "date_column": rp.date_column, "value_column": rp.value_column}
    if rp.benchmark_column:
        needed["benchmark_column"] = rp.benchmark_column
    for key, column in needed.items():
        if column not in raw.columns:
            raise IngestError(missing_column_message(f"returns.{key}", column, available, str(path)))
    series = pd.DataFrame({rp.id_column: as_text(raw[rp.id_column]), rp.date_column: raw[rp.date_column]})
    for key in ("value_column", "benchmark_column"):
        if key in needed:
            series[needed[key]] = to_number(raw[needed[key]], repr(needed[key]), str(path), params.decimal)
    try:
        navmetrics.to_month(series[rp.date_column].dropna())
    except (ValueError, TypeError) as err:
        raise IngestError(f"{path}: column {rp.date_column!r} has values that are not months: {err}") from err
    series = series.dropna(subset=[rp.id_column, rp.date_column])
    return series, IngestReport(notes=report.notes, blanked=blanked)


def ingest_returns(params: IngestParams, root: Path) -> tuple[pd.DataFrame, IngestReport]:
    """Monthly series + attributes -> canonical table with computed metrics and `as_of`."""
    rp = params.returns
    if rp.value_kind not in ("return", "nav"):
        raise IngestError(f"returns.value_kind must be 'return' or 'nav', got {rp.value_kind!r}")
    if not params.path:
        raise IngestError("ingest.path is empty: name the folder holding the series and attributes files")
    attr_path = root / params.path / rp.attributes_file
    raw, read = read_source(attr_path, params.encoding, params.delimiter)
    attributes, report = to_canonical(raw, params, str(attr_path), read)
    series, series_report = _series(params, root)
    metrics = navmetrics.compute_long(
        series,
        rp.id_column,
        rp.date_column,
        rp.value_column,
        benchmark_column=rp.benchmark_column or None,
        value_kind=rp.value_kind,
        risk_free_rate=rp.risk_free_rate,
    )
    if not attributes["share_class_id"].isin(metrics.index).any():
        raise IngestError(
            f"no share class of {attr_path} has a series in {root / params.path / rp.series_file} "
            f"(column {rp.id_column!r}); check returns.id_column"
        )
    # The series are the source of truth for metrics: same-named attributes are replaced.
    attributes = attributes.drop(columns=[c for c in metrics.columns if c in attributes.columns])
    table = attributes.join(metrics, on="share_class_id")
    table = table[[c.name for c in COLUMNS if c.name in table.columns]].copy()
    table["as_of"] = metrics.attrs["as_of"]  # the last month the metrics cover
    return table, report.merged(series_report)


def with_batches(table: pd.DataFrame, batches_dir: Path) -> tuple[pd.DataFrame, int]:
    """`table` with the accepted monitoring batches laid over it, oldest file first; and how many.

    Batches are canonical Parquet files written by the monitoring flow, named so they
    sort by date (batch-YYYY-MM...). The newest snapshot of a share class wins; a share
    class only in the source keeps its source row. No folder or no file: `table` as is.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> pd.DataFrame({"share_class_id": ["b", "c"], "category": ["x", "y"]}).to_parquet(d / "batch-1.parquet")
    >>> table, n = with_batches(pd.DataFrame({"share_class_id": ["a", "b"], "category": ["x", "z"]}), d)
    >>> table["category"].tolist(), n
    (['x', 'x', 'y'], 1)
    """
    files = sorted(batches_dir.glob("*.parquet")) if batches_dir.is_dir() else []
    if not files:
        return table, 0
    frames = [table]
    for path in files:
        batch = pd.read_parquet(path)
        if "share_class_id" not in batch:
            raise IngestError(f"{path}: accepted batch has no share_class_id column")
        frames.append(batch)
    combined = pd.concat(frames, ignore_index=True).drop_duplicates("share_class_id", keep="last")
    canonical = [c.name for c in COLUMNS if c.name in combined.columns]
    combined = combined[canonical + [c for c in combined.columns if c not in canonical]]
    return combined.reset_index(drop=True), len(files)


def run(params: IngestParams, root: Path = Path(".")) -> tuple[pd.DataFrame, IngestReport]:
    """The canonical table from the configured source (paths relative to `root`), with any
    accepted monitoring batches from `params.batches_dir` laid over it; and its report."""
    if params.source == "table":
        table, report = ingest_table(params, root)
    elif params.source == "returns":
        table, report = ingest_returns(params, root)
    else:
        raise IngestError(f"ingest.source must be 'returns' or 'table', got {params.source!r}")
    if params.batches_dir:
        table, batches = with_batches(table, root / params.batches_dir)
        report = replace(report, batches=batches)
    return derive(table), report


def derive(table: pd.DataFrame) -> pd.DataFrame:
    """Columns computed from mapped ones: MRAR(2) risk-adjusted returns (`fundgrpo.data.riskadjusted`),
    only where their inputs exist; a value the source gives is kept. Canonical order, extras last."""
    out = add_mrar(table)
    canonical = [c.name for c in COLUMNS if c.name in out.columns]
    return out[canonical + [c for c in out.columns if c not in canonical]]


# ---------------------------------------------------------------------- main


def summary(table: pd.DataFrame, report: IngestReport = IngestReport()) -> str:
    """One line: rows, funds, categories, labelled rows (the accepted batches, if any); then what the
    settings changed (exact duplicate rows dropped, cells blanked by `na_values`, names
    `fund_id_strip` changed, fund keys `fund_id_tolerance` joined).

    >>> t = pd.DataFrame({"fund_id": ["f", "f"], "category": ["a", "a"],
    ...                   "expert_grade": pd.array([3, None], dtype="Int64")})
    >>> summary(t)
    '2 rows, 1 funds, 1 categories, 1 labelled rows'
    >>> r = IngestReport(blanked={"-": 2, "n/a": 1}, fund_id_stripped={"changed": 2, "of": 2},
    ...                  duplicates_dropped={"rows": 1, "first": [3]})
    >>> print(summary(t, r))  # doctest: +NORMALIZE_WHITESPACE
    2 rows, 1 funds, 1 categories, 1 labelled rows; 1 exact duplicate row(s) dropped (data row 3;
    ingest.drop_duplicate_rows); ingest.na_values blanked 3 cell(s): '-' 2, 'n/a' 1; ingest.fund_id_strip changed 2
    of 2 name(s)
    """
    labelled = int(table["expert_grade"].notna().sum()) if "expert_grade" in table else 0
    unrated = f" ({report.unrated} unrated, counted unlabelled)" if report.unrated else ""
    batches = f" (source + {report.batches} accepted batch(es))" if report.batches else ""
    line = (
        f"{len(table)} rows, {table['fund_id'].nunique()} funds, "
        f"{table['category'].nunique()} categories, {labelled} labelled rows{unrated}{batches}"
    )
    dropped = report.duplicates_dropped
    if dropped:
        first = ", ".join(map(str, dropped["first"])) + (", ..." if dropped["rows"] > len(dropped["first"]) else "")
        rows = "data rows" if dropped["rows"] > 1 else "data row"
        line += f"; {dropped['rows']} exact duplicate row(s) dropped ({rows} {first}; ingest.drop_duplicate_rows)"
    blanked = report.blanked
    if blanked:
        by_marker = ", ".join(f"{marker!r} {n}" for marker, n in blanked.items())
        line += f"; ingest.na_values blanked {sum(blanked.values())} cell(s): {by_marker}"
    stripped = report.fund_id_stripped
    if stripped:
        line += f"; ingest.fund_id_strip changed {stripped['changed']} of {stripped['of']} name(s)"
    if report.fund_id_snapped:
        line += f"; ingest.fund_id_tolerance joined {report.fund_id_snapped} share class(es) to a close fund key"
    return line
