"""A raw table's columns -> the canonical table (`fundgrpo.data.canonical`), by `ingest` settings:
the column map, missing-value markers, numbers (a decimal comma too), grades and unrated codes,
share-class and fund ids, exact duplicates. Only the columns' shape is checked here (present,
numeric, decodable); ranges and null budgets are the validate stage's job.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import replace
from typing import Collection

import numpy as np
import pandas as pd

from fundgrpo.data.canonical import BY_NAME, COLUMNS
from fundgrpo.data.reading import MAX_EXAMPLES, IngestError, IngestReport
from fundgrpo.params import IngestParams

REQUIRED = ("share_class_id", "category")
TEXT_KINDS = ("id", "text")


def blank_markers(raw: pd.DataFrame, markers: tuple[str, ...]) -> tuple[pd.DataFrame, dict[str, int]]:
    """Cells that are (after stripping) one of `markers` become missing, in every column; with the
    count by marker (markers that blanked nothing are left out).

    >>> out, blanked = blank_markers(pd.DataFrame({"a": ["1", " - ", "n/a"], "b": ["-", "NA", None]}), ("-", "n/a"))
    >>> out["a"].tolist(), out["b"].tolist(), blanked
    (['1', nan, nan], [nan, 'NA', None], {'-': 2, 'n/a': 1})
    """
    if not markers:
        return raw, {}
    wanted = set(markers)
    out = raw.copy()
    counts = dict.fromkeys(markers, 0)
    for column in out.columns:
        if out[column].dtype == object:
            stripped = out[column].map(lambda v: v.strip() if isinstance(v, str) else None)
            hit = stripped.isin(wanted).to_numpy()
            if hit.any():
                for marker, n in stripped[hit].value_counts().items():
                    counts[marker] += int(n)
                out[column] = out[column].where(~hit, np.nan)
    return out, {m: n for m, n in counts.items() if n}


# ------------------------------------------------------------- column checks


def missing_column_message(
    what: str, column: str, available: list[str], where: str, taken: Collection[str] = ()
) -> str:
    """Name the missing column, suggest close matches (never one in `taken`: already mapped to
    another field), list what there is.

    >>> print(missing_column_message("column_map.return_1y", "GBRReturnM13", ["GBRReturnM12", "Name"], "x.csv"))
    ... # doctest: +NORMALIZE_WHITESPACE
    x.csv: column_map.return_1y: source column 'GBRReturnM13' not found; did you mean 'GBRReturnM12'?
    available: ['GBRReturnM12', 'Name']
    >>> print(missing_column_message("column_map.return_10y", "GBRReturnM120", ["GBRReturnM12"], "x.csv",
    ...                              taken=["GBRReturnM12"]))
    x.csv: column_map.return_10y: source column 'GBRReturnM120' not found; available: ['GBRReturnM12']
    """
    close = [c for c in difflib.get_close_matches(column, available, n=3 + len(taken), cutoff=0.6) if c not in taken]
    close = close[:3]
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ";"
    return f"{where}: {what}: source column {column!r} not found{hint} available: {available}"


def _check_config(params: IngestParams) -> None:
    """Mistakes in the mapping itself, before any data is looked at."""
    for name in list(params.column_map) + list(params.scale):
        if name not in BY_NAME:
            close = difflib.get_close_matches(name, list(BY_NAME), n=3)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise IngestError(f"{name!r} is not a canonical column{hint}")
    for name in params.scale:
        if BY_NAME[name].kind != "number":
            raise IngestError(f"scale.{name}: only numeric columns can be scaled")
    dropped = set(params.drop_columns) & set(params.column_map.values())
    if dropped:
        raise IngestError(f"columns {sorted(dropped)} are both mapped (column_map) and dropped (drop_columns)")


def select_columns(raw: pd.DataFrame, params: IngestParams, where: str) -> dict[str, pd.Series]:
    """Canonical name -> source column: mapped ones, then canonically named ones."""
    available = [str(c) for c in raw.columns]
    picked: dict[str, pd.Series] = {}
    for name, source in params.column_map.items():
        if source not in raw.columns:
            taken = [other for key, other in params.column_map.items() if key != name]
            raise IngestError(missing_column_message(f"column_map.{name}", source, available, where, taken))
        picked[name] = raw[source]
    for col in COLUMNS:
        if col.name not in picked and col.name in raw.columns and col.name not in params.drop_columns:
            picked[col.name] = raw[col.name]
    return picked


# ------------------------------------------------------------------ values


def as_text(values: pd.Series) -> pd.Series:
    """Stripped text; integral floats (Parquet ids) without '.0'; missing stays missing."""
    if pd.api.types.is_float_dtype(values) and values.dropna().mod(1).eq(0).all():
        values = values.astype("Int64")
    return values.astype(object).map(lambda v: None if pd.isna(v) else str(v).strip())


def _row(index: pd.Index, position: int) -> int:
    """The 1-based data row of a position: by an integer index (the source's row numbers, kept
    when exact duplicate rows were dropped), else by position."""
    return int(index[position]) + 1 if pd.api.types.is_integer_dtype(index) else position + 1


def to_number(values: pd.Series, label: str, where: str, decimal: str = ".") -> pd.Series:
    """Floats from text; blanks are NaN; any other text is an `IngestError` with examples (data rows
    numbered by the source's 0-based row index, so rows dropped before do not shift them).
    `decimal` "," reads "1.234,5" as 1234.5.

    >>> to_number(pd.Series(["1.5", "", None, " 2 "]), "x", "f.csv").tolist()
    [1.5, nan, nan, 2.0]
    >>> to_number(pd.Series(["1.234,5", "-0,25"]), "x", "f.csv", decimal=",").tolist()
    [1234.5, -0.25]
    >>> to_number(pd.Series(["1", "n/a%", "3"]), "'X' (return_1y)", "f.csv")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fundgrpo.data.reading.IngestError: f.csv: column 'X' (return_1y) has 1 non-numeric value(s): data row 2: 'n/a%'
    (a marker for missing goes in ingest.na_values; a decimal comma needs ingest.decimal: ",")
    """
    if pd.api.types.is_bool_dtype(values):
        raise IngestError(f"{where}: column {label} holds true/false, not numbers")
    if pd.api.types.is_numeric_dtype(values):
        return values.astype(float)
    text = values.astype(object).where(values.notna()).map(lambda v: v.strip() if isinstance(v, str) else v)
    text = text.replace("", np.nan)
    if decimal == ",":
        text = text.map(lambda v: v.replace(".", "").replace(",", ".") if isinstance(v, str) else v)
    numbers = pd.to_numeric(text, errors="coerce")
    bad = text.notna() & numbers.isna()
    if bad.any():
        positions = np.flatnonzero(bad.to_numpy())
        examples = ", ".join(f"data row {_row(values.index, i)}: {values.iloc[i]!r}" for i in positions[:MAX_EXAMPLES])
        raise IngestError(
            f"{where}: column {label} has {len(positions)} non-numeric value(s): {examples} "
            '(a marker for missing goes in ingest.na_values; a decimal comma needs ingest.decimal: ",")'
        )
    return numbers.astype(float)


def grade_dtype(values: pd.Series) -> pd.Series:
    """Int64 when every grade is a whole number; else float, left for validation to flag.

    >>> grade_dtype(pd.Series([1.0, None, 5.0])).dtype
    Int64Dtype()
    >>> grade_dtype(pd.Series([1.0, 2.5])).dtype
    dtype('float64')
    """
    present = values.dropna()
    if present.mod(1).eq(0).all():
        return values.astype("Int64")
    return values


def strip_patterns(values: pd.Series, patterns: tuple[str, ...]) -> pd.Series:
    r"""Text with each regex removed (case-insensitive), then trimmed: e.g. plan suffixes off
    a scheme name, so that the plans of one fund share a fund id.

    >>> names = pd.Series(["Axis Bluechip Fund - Direct Plan - Growth", "Axis Bluechip Fund - Regular Plan - Growth"])
    >>> strip_patterns(names, (r"\s*-\s*(direct|regular)\b.*$",)).tolist()
    ['Axis Bluechip Fund', 'Axis Bluechip Fund']
    """
    compiled = [re.compile(pattern, re.IGNORECASE) for pattern in patterns]

    def strip(v: object) -> object:
        if not isinstance(v, str):
            return v
        for rx in compiled:
            v = rx.sub("", v)
        return v.strip()

    return values.map(strip)


def snap_close(parts: pd.DataFrame, tolerance: float) -> tuple[pd.DataFrame, int]:
    """Numeric key columns with values within `tolerance` (relative) of each other, among rows equal
    on the other key columns, made one value (the smallest of each chain of close values); and how
    many rows changed. Why: fund-level assets reported per currency class round differently
    (401441871 vs 401441872), which would split one fund's share classes across the split.

    >>> parts = pd.DataFrame({"tna": [100.0, 100.001, 100.5, 100.0], "cat": ["a", "a", "a", "b"]})
    >>> snapped, changed = snap_close(parts, 1e-4)
    >>> snapped["tna"].tolist(), changed
    ([100.0, 100.0, 100.5, 100.0], 1)
    """
    out, changed = parts.copy(), 0
    for column in parts.columns:
        values = pd.to_numeric(parts[column], errors="coerce")
        if values.isna().sum() > parts[column].isna().sum():  # not a numeric key: matched exactly
            continue
        others = [c for c in parts.columns if c != column]
        keys = parts[others].astype(str).agg("\x1f".join, axis=1) if others else pd.Series("", index=parts.index)
        for _, rows in values.groupby(keys):
            distinct = np.sort(rows.dropna().unique())
            mapping = {}
            for before, v in zip([None, *distinct[:-1]], distinct):
                if before is None or abs(v - before) > tolerance * max(abs(v), abs(before)):
                    first = v  # a new chain
                mapping[v] = first
            moved = rows.notna() & (rows.map(mapping) != rows)
            if moved.any():  # each moved value takes the chain's first value as the source wrote it
                written = {v: parts.at[i, column] for i, v in rows.dropna().items()}
                out.loc[moved[moved].index, column] = rows[moved].map(lambda v: written[mapping[v]])
                changed += int(moved.sum())
    return out, changed


def fund_id_from(
    raw: pd.DataFrame,
    columns: tuple[str, ...],
    share_class_id: pd.Series,
    strip: tuple[str, ...] = (),
    tolerance: float = 0.0,
) -> tuple[pd.Series, dict]:
    r"""A stable short hash of the named columns' values (after `strip_patterns`; numeric ones
    within `tolerance` of each other made equal, `snap_close`); a row missing any of them is its own
    fund. With what the settings changed, for ingest's line (`IngestReport` fields): with `strip`,
    `fund_id_stripped` counts the rows whose values the patterns changed, of the rows with a value;
    with `tolerance`, `fund_id_snapped` the rows whose value it moved.

    >>> raw = pd.DataFrame({"tna": ["10", "10", None], "cat": ["a", "a", "a"]})
    >>> ids, changed = fund_id_from(raw, ("tna", "cat"), pd.Series(["s1", "s2", "s3"]))
    >>> ids[0] == ids[1], ids[2], changed
    (True, 's3', {})
    >>> names = pd.DataFrame({"n": ["A - Direct", "A - Regular", "B ", None]})
    >>> plan = r"\s*-\s*(direct|regular)\b.*$"
    >>> ids, changed = fund_id_from(names, ("n",), pd.Series(["s1", "s2", "s3", "s4"]), (plan,))
    >>> ids[0] == ids[1] != ids[2], changed
    (True, {'fund_id_stripped': {'changed': 2, 'of': 3}})
    """
    parts = raw[list(columns)].astype(object).where(raw[list(columns)].notna())
    stripped = None
    if strip:
        before = parts.apply(lambda column: column.map(lambda v: v.strip() if isinstance(v, str) else v))
        parts = parts.apply(lambda column: strip_patterns(column, strip)).replace("", np.nan)
        named = before.notna()
        stripped = {
            "changed": int((parts.ne(before) & named).any(axis=1).sum()),
            "of": int(named.any(axis=1).sum()),
        }
    complete = parts.notna().all(axis=1).to_numpy()
    snapped = None
    if tolerance > 0:
        parts, snapped = snap_close(parts, tolerance)
    joined = parts.astype(str).agg("\x1f".join, axis=1)
    hashed = joined.map(lambda s: "f" + hashlib.sha1(s.encode("utf-8")).hexdigest()[:12])
    # Grouping on a missing value would lump unrelated share classes together.
    ids = pd.Series(np.where(complete, hashed, share_class_id.to_numpy()), index=raw.index)
    changed: dict = {}
    if stripped is not None:
        changed["fund_id_stripped"] = stripped
    if snapped is not None:
        changed["fund_id_snapped"] = snapped
    return ids, changed


def share_class_ids(raw: pd.DataFrame, params: IngestParams, where: str) -> pd.Series:
    """The share-class id when the source has none: the `share_class_id_from` columns joined
    with " | ", or (`share_class_id_generate`) "row-<n>" by data row. Repeated ids are an error
    naming the rows: two share classes must never be merged silently.

    >>> raw = pd.DataFrame({"Name": ["A", "A", "B"], "Plan": ["Direct", "Regular", "Direct"]})
    >>> p = IngestParams(share_class_id_from=("Name", "Plan"))
    >>> share_class_ids(raw, p, "x.csv").tolist()
    ['A | Direct', 'A | Regular', 'B | Direct']
    >>> share_class_ids(raw, IngestParams(share_class_id_from=("Name",)), "x.csv")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fundgrpo.data.reading.IngestError: x.csv: share_class_id_from ['Name'] gives 1 id(s) to more than one row:
    'A' (data rows 1, 2); add a column that tells them apart, or set share_class_id_generate: true
    """
    if params.share_class_id_generate:
        return pd.Series([f"row-{_row(raw.index, i)}" for i in range(len(raw))], index=raw.index)
    for column in params.share_class_id_from:
        if column not in raw.columns:
            raise IngestError(
                missing_column_message("share_class_id_from", column, [str(c) for c in raw.columns], where)
            )
    parts = raw[list(params.share_class_id_from)].astype(object)
    ids = parts.apply(lambda row: " | ".join("" if pd.isna(v) else str(v).strip() for v in row), axis=1)
    repeated = ids[ids.duplicated(keep=False)]
    if not repeated.empty:
        groups = repeated.groupby(repeated, sort=False).groups
        examples = "; ".join(
            f"{key!r} (data rows {', '.join(str(_row(raw.index, raw.index.get_loc(i))) for i in rows[:MAX_EXAMPLES])})"
            for key, rows in list(groups.items())[:MAX_EXAMPLES]
        )
        exact = _duplicated(raw, keep=False)
        fix = (
            "; rows repeated cell for cell (exact duplicates) are dropped by ingest.drop_duplicate_rows: true"
            if exact[ids.duplicated(keep=False).to_numpy()].any()
            else ""
        )
        raise IngestError(
            f"{where}: share_class_id_from {list(params.share_class_id_from)} gives {len(groups)} id(s) to more than "
            f"one row: {examples}; add a column that tells them apart, or set share_class_id_generate: true{fix}"
        )
    return ids


def unrated_mask(values: pd.Series, codes: tuple[str, ...]) -> pd.Series:
    """Rows whose grade is one of the `codes` meaning "not rated" (as text, or as the same number).

    >>> unrated_mask(pd.Series(["0", "0.0", "3", None, "NR"]), ("0", "NR")).tolist()
    [True, True, False, False, True]
    """
    text = values.astype(object).map(lambda v: v.strip() if isinstance(v, str) else v)
    numeric_codes = [float(c) for c in codes if pd.notna(pd.to_numeric(c, errors="coerce"))]
    coded = text.map(lambda v: None if pd.isna(v) else str(v)).isin(list(codes))
    as_number = pd.to_numeric(text, errors="coerce").isin(numeric_codes)
    return (coded | as_number).astype(bool)


def _duplicated(raw: pd.DataFrame, keep: str | bool = "first") -> np.ndarray:
    """Rows equal cell for cell to another row (`DataFrame.duplicated`); none when cells are unhashable."""
    try:
        return raw.duplicated(keep=keep).to_numpy()
    except TypeError:  # list-valued Parquet cells: not a screener export's duplicates
        return np.zeros(len(raw), dtype=bool)


def exact_duplicates(raw: pd.DataFrame) -> list[tuple[int, int]]:
    """(data row, the earlier data row it repeats), 1-based, for every row equal cell for cell to
    an earlier one.

    >>> exact_duplicates(pd.DataFrame({"a": ["x", "y", "x", "x"], "b": ["1", "2", "1", None]}))
    [(3, 1)]
    """
    repeats = _duplicated(raw)
    if not repeats.any():
        return []
    keys = pd.util.hash_pandas_object(raw, index=False).to_numpy()
    first: dict[int, int] = {}
    out = []
    for position, (key, repeated) in enumerate(zip(keys.tolist(), repeats)):
        if repeated:
            out.append((_row(raw.index, position), _row(raw.index, first[key])))
        else:
            first.setdefault(key, position)
    return out


def drop_exact_duplicates(
    raw: pd.DataFrame, params: IngestParams, where: str, report: IngestReport = IngestReport()
) -> tuple[pd.DataFrame, IngestReport]:
    """`raw` without its exact duplicate rows when `ingest.drop_duplicate_rows` (counted in the
    report's `duplicates_dropped`, with the first rows' numbers); otherwise as it is, the rows
    named in a note (a repeated share_class_id is refused later: by validate, or here when built)."""
    repeats = exact_duplicates(raw)
    if not repeats:
        return raw, report
    listed = ", ".join(f"data row {i} repeats data row {j}" for i, j in repeats[:MAX_EXAMPLES])
    more = f" and {len(repeats) - MAX_EXAMPLES} more" if len(repeats) > MAX_EXAMPLES else ""
    if params.drop_duplicate_rows:
        dropped = {"rows": len(repeats), "first": [i for i, _ in repeats[:3]]}
        return raw[~_duplicated(raw)], replace(report, duplicates_dropped=dropped)
    note = (
        f"{where}: {len(repeats)} exact duplicate row(s), kept: {listed}{more} (data rows count from 1 after the "
        "header); set ingest.drop_duplicate_rows: true to drop them"
    )
    return raw, replace(report, notes=(*report.notes, note))


def to_canonical(
    raw: pd.DataFrame, params: IngestParams, where: str, report: IngestReport = IngestReport()
) -> tuple[pd.DataFrame, IngestReport]:
    """Map, type and scale a raw source table into canonical columns (in canonical order), with
    `report` (the reading's) plus what the settings changed, for ingest's line (`summary`): `unrated`
    (grades set missing by `ingest.unrated`), `blanked` (cells by `na_values` marker),
    `duplicates_dropped`, `fund_id_stripped`, `fund_id_snapped`."""
    _check_config(params)
    raw = raw.reset_index(drop=True)  # data row n is index n - 1, also after duplicates are dropped
    raw, report = drop_exact_duplicates(raw, params, where, report)
    raw, blanked = blank_markers(raw, params.na_values)
    picked = select_columns(raw, params, where)
    if "share_class_id" not in picked and (params.share_class_id_from or params.share_class_id_generate):
        picked["share_class_id"] = share_class_ids(raw, params, where)
    for name in REQUIRED:
        if name not in picked:
            hint = " or build it (share_class_id_from, share_class_id_generate)" if name == "share_class_id" else ""
            raise IngestError(
                f"{where}: required column {name!r} is absent: map it in column_map{hint} "
                f"(available: {[str(c) for c in raw.columns]})"
            )
    source_of = {name: params.column_map.get(name, name) for name in picked}
    out: dict[str, pd.Series] = {}
    unrated = 0
    for name, values in picked.items():
        col = BY_NAME[name]
        if col.kind in TEXT_KINDS:
            out[name] = as_text(values)
            continue
        if col.kind == "grade" and params.unrated:
            mask = unrated_mask(values, params.unrated)
            unrated += int(mask.sum())
            values = values.where(~mask.to_numpy(), np.nan)
        label = repr(source_of[name]) + (f" ({name})" if source_of[name] != name else "")
        numbers = to_number(values, label, where, params.decimal) * params.scale.get(name, 1.0)
        out[name] = grade_dtype(numbers) if col.kind == "grade" else numbers
    for name in params.scale:
        if name not in out:
            raise IngestError(f"{where}: scale.{name}: the source does not provide {name!r}")
    if "fund_id" not in out:
        if params.fund_id_from:
            for source in params.fund_id_from:
                if source not in raw.columns:
                    message = missing_column_message("fund_id_from", source, [str(c) for c in raw.columns], where)
                    raise IngestError(message)
            out["fund_id"], changed = fund_id_from(
                raw, params.fund_id_from, out["share_class_id"], params.fund_id_strip, params.fund_id_tolerance
            )
            report = replace(report, **changed)
        else:
            out["fund_id"] = out["share_class_id"]  # no fund grouping known: each class is a fund
    table = pd.DataFrame(out)
    table = table[[c.name for c in COLUMNS if c.name in table.columns]].reset_index(drop=True)
    return table, report.merged(IngestReport(blanked=blanked, unrated=unrated))
