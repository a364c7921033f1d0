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
stripped (`fund_id_strip`). What the settings changed is counted in ingest's line (`summary`).

Reading a file is `fundgrpo.data.reading`; mapping its columns, `fundgrpo.data.columns`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fundgrpo.data import navmetrics
from fundgrpo.data.canonical import COLUMNS
from fundgrpo.data.columns import as_text, blank_markers, missing_column_message, to_canonical, to_number
from fundgrpo.data.reading import IngestError, read_source
from fundgrpo.data.riskadjusted import add_mrar
from fundgrpo.params import IngestParams

# ------------------------------------------------------------------- sources


def ingest_table(params: IngestParams, root: Path) -> pd.DataFrame:
    """A screener export (CSV/Parquet) -> canonical table."""
    if not params.path:
        raise IngestError("ingest.path is empty: name the screener export for source: table")
    path = root / params.path
    raw = read_source(path, params.encoding, params.delimiter)
    table = to_canonical(raw, params, str(path))  # carries the file's notes
    table.attrs["encoding"] = raw.attrs["encoding"]
    return table


def _series(params: IngestParams, root: Path) -> pd.DataFrame:
    """The long monthly series, checked and typed."""
    rp = params.returns
    path = root / params.path / rp.series_file
    raw = read_source(path, params.encoding, params.delimiter)
    raw = blank_markers(raw, params.na_values)
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
    series.attrs = {k: raw.attrs[k] for k in ("notes", "blanked") if raw.attrs.get(k)}
    return series


def ingest_returns(params: IngestParams, root: Path) -> pd.DataFrame:
    """Monthly series + attributes -> canonical table with computed metrics and `as_of`."""
    rp = params.returns
    if rp.value_kind not in ("return", "nav"):
        raise IngestError(f"returns.value_kind must be 'return' or 'nav', got {rp.value_kind!r}")
    if not params.path:
        raise IngestError("ingest.path is empty: name the folder holding the series and attributes files")
    attr_path = root / params.path / rp.attributes_file
    attributes = to_canonical(read_source(attr_path, params.encoding, params.delimiter), params, str(attr_path))
    found = dict(attributes.attrs)  # what ingest's line reports, before the join below
    series = _series(params, root)
    metrics = navmetrics.compute_long(
        series,
        rp.id_column,
        rp.date_column,
        rp.value_column,
        rp.benchmark_column or None,
        rp.value_kind,
        rp.risk_free_rate,
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
    table.attrs["unrated"] = found.get("unrated", 0)
    notes = found.get("notes", []) + series.attrs.get("notes", [])
    if notes:
        table.attrs["notes"] = notes
    blanked = dict(found.get("blanked", {}))
    for marker, n in series.attrs.get("blanked", {}).items():
        blanked[marker] = blanked.get(marker, 0) + n
    if blanked:
        table.attrs["blanked"] = blanked
    for key in ("duplicates_dropped", "fund_id_stripped", "fund_id_snapped"):
        if key in found:
            table.attrs[key] = found[key]
    return table


def with_batches(table: pd.DataFrame, batches_dir: Path) -> pd.DataFrame:
    """`table` with the accepted monitoring batches laid over it, oldest file first.

    Batches are canonical Parquet files written by the monitoring flow, named so they
    sort by date (batch-YYYY-MM...). The newest snapshot of a share class wins; a share
    class only in the source keeps its source row. No folder or no file: `table` as is.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> pd.DataFrame({"share_class_id": ["b", "c"], "category": ["x", "y"]}).to_parquet(d / "batch-1.parquet")
    >>> with_batches(pd.DataFrame({"share_class_id": ["a", "b"], "category": ["x", "z"]}), d)["category"].tolist()
    ['x', 'x', 'y']
    """
    files = sorted(batches_dir.glob("*.parquet")) if batches_dir.is_dir() else []
    if not files:
        return table
    frames = [table]
    for path in files:
        batch = pd.read_parquet(path)
        if "share_class_id" not in batch:
            raise IngestError(f"{path}: accepted batch has no share_class_id column")
        frames.append(batch)
    combined = pd.concat(frames, ignore_index=True).drop_duplicates("share_class_id", keep="last")
    canonical = [c.name for c in COLUMNS if c.name in combined.columns]
    combined = combined[canonical + [c for c in combined.columns if c not in canonical]]
    combined.attrs = dict(table.attrs, batches=len(files))
    return combined.reset_index(drop=True)


def run(params: IngestParams, root: Path = Path(".")) -> pd.DataFrame:
    """The canonical table from the configured source (paths relative to `root`),
    with any accepted monitoring batches from `params.batches_dir` laid over it."""
    if params.source == "table":
        table = ingest_table(params, root)
    elif params.source == "returns":
        table = ingest_returns(params, root)
    else:
        raise IngestError(f"ingest.source must be 'returns' or 'table', got {params.source!r}")
    table = with_batches(table, root / params.batches_dir) if params.batches_dir else table
    return derive(table)


def derive(table: pd.DataFrame) -> pd.DataFrame:
    """Columns computed from mapped ones: MRAR(2) risk-adjusted returns (`fundgrpo.data.riskadjusted`),
    only where their inputs exist; a value the source gives is kept. Canonical order, extras last."""
    out = add_mrar(table)
    canonical = [c.name for c in COLUMNS if c.name in out.columns]
    out = out[canonical + [c for c in out.columns if c not in canonical]]
    out.attrs = dict(table.attrs)
    return out


# ---------------------------------------------------------------------- main


def summary(table: pd.DataFrame) -> str:
    """One line: rows, funds, categories, labelled rows; then what the settings changed (exact
    duplicate rows dropped, cells blanked by `na_values`, names `fund_id_strip` changed).

    >>> t = pd.DataFrame({"fund_id": ["f", "f"], "category": ["a", "a"],
    ...                   "expert_grade": pd.array([3, None], dtype="Int64")})
    >>> summary(t)
    '2 rows, 1 funds, 1 categories, 1 labelled rows'
    >>> t.attrs = {"blanked": {"-": 2, "n/a": 1}, "fund_id_stripped": {"changed": 2, "of": 2},
    ...            "duplicates_dropped": {"rows": 1, "first": [3]}}
    >>> print(summary(t))  # doctest: +NORMALIZE_WHITESPACE
    2 rows, 1 funds, 1 categories, 1 labelled rows; 1 exact duplicate row(s) dropped (data row 3;
    ingest.drop_duplicate_rows); ingest.na_values blanked 3 cell(s): '-' 2, 'n/a' 1; ingest.fund_id_strip changed 2
    of 2 name(s)
    """
    labelled = int(table["expert_grade"].notna().sum()) if "expert_grade" in table else 0
    unrated = f" ({table.attrs['unrated']} unrated, counted unlabelled)" if table.attrs.get("unrated") else ""
    line = (
        f"{len(table)} rows, {table['fund_id'].nunique()} funds, "
        f"{table['category'].nunique()} categories, {labelled} labelled rows{unrated}"
    )
    dropped = table.attrs.get("duplicates_dropped")
    if dropped:
        first = ", ".join(map(str, dropped["first"])) + (", ..." if dropped["rows"] > len(dropped["first"]) else "")
        rows = "data rows" if dropped["rows"] > 1 else "data row"
        line += f"; {dropped['rows']} exact duplicate row(s) dropped ({rows} {first}; ingest.drop_duplicate_rows)"
    blanked = table.attrs.get("blanked")
    if blanked:
        by_marker = ", ".join(f"{marker!r} {n}" for marker, n in blanked.items())
        line += f"; ingest.na_values blanked {sum(blanked.values())} cell(s): {by_marker}"
    stripped = table.attrs.get("fund_id_stripped")
    if stripped:
        line += f"; ingest.fund_id_strip changed {stripped['changed']} of {stripped['of']} name(s)"
    if table.attrs.get("fund_id_snapped"):
        snapped = table.attrs["fund_id_snapped"]
        line += f"; ingest.fund_id_tolerance joined {snapped} share class(es) to a close fund key"
    return line
