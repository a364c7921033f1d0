"""Validation (stage `validate`): a Great Expectations suite over the canonical fund table.

The suite is derived from `fundgrpo.data.canonical.COLUMNS` (plausible ranges) and
`params.validate` (required columns, row count, null budgets, labelled share).
Every run writes a report directory (GX data docs as index.html, plus our own
self-contained summary.html and summary.json with row counts: unlabelled rows and
rows with missing history are counted there, never dropped silently). Only a
passing table is written to `validate.out`; a failing run leaves the previous one.

`validate_frame` is the same check for a new batch (e.g. from a monitoring flow).
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from fundgrpo import io
from fundgrpo.cli import offline
from fundgrpo.data.canonical import COLUMNS
from fundgrpo.data.documents import LANGUAGES
from fundgrpo.params import DocumentsSourceParams, ValidateParams

GRADES = [1, 2, 3, 4, 5]
HISTORY = ("return_5y", "return_10y")  # long-horizon returns young funds lack
# dtype names GX accepts for pandas (numpy names, and pandas nullable dtypes by class name)
NUMERIC_TYPES = [
    *(f"{k}{b}" for k in ("int", "uint") for b in (8, 16, 32, 64)),
    "float16",
    "float32",
    "float64",
    *(f"{k}{b}Dtype" for k in ("Int", "UInt") for b in (8, 16, 32, 64)),
    "Float32Dtype",
    "Float64Dtype",
]
SUITE = "canonical_funds"
SITE = "validation_report"


@dataclass(frozen=True)
class ValidationResult:
    success: bool
    failures: list[str]  # one readable line per failed expectation
    summary: dict[str, Any]  # counts and per-expectation outcomes (also summary.json)
    report: Path | None = None  # report_dir/index.html
    checks: list[dict[str, Any]] = field(default_factory=list)  # every expectation, passed or not


# ------------------------------------------------------------------------ suite


def null_budget(column: str, params: ValidateParams) -> float:
    """Max share of nulls allowed in `column` (the label's budget comes from min_labelled_share)."""
    if column == "expert_grade":
        return 1.0 - params.min_labelled_share
    return params.null_budget.get(column, params.default_null_budget)


def build_suite(df_columns: list[str] | pd.Index, params: ValidateParams) -> list[Any]:
    """GX expectations for a frame with these columns; order is the report's order."""
    import great_expectations.expectations as gxe

    cols = set(df_columns)
    exps: list[Any] = [gxe.ExpectTableRowCountToBeBetween(min_value=params.min_rows)]
    required = list(params.required_columns)
    if params.min_labelled_share > 0 and "expert_grade" not in required:
        required.append("expert_grade")  # a labelled share cannot be met without the label column
    exps += [gxe.ExpectColumnToExist(column=c) for c in required]
    # Column checks only for present columns: a missing one is reported once, above.
    if "share_class_id" in cols:
        exps += [
            gxe.ExpectColumnValuesToNotBeNull(column="share_class_id"),
            gxe.ExpectColumnValuesToBeUnique(column="share_class_id"),
        ]
    for c in ("fund_id", "category"):
        if c in cols:
            exps.append(gxe.ExpectColumnValuesToNotBeNull(column=c))
    for col in COLUMNS:
        if col.kind not in ("number", "grade") or col.name not in cols:
            continue
        exps.append(gxe.ExpectColumnValuesToBeInTypeList(column=col.name, type_list=NUMERIC_TYPES))
        if col.kind == "grade":
            exps.append(gxe.ExpectColumnValuesToBeInSet(column=col.name, value_set=GRADES))
        else:  # nulls are ignored by GX here; the null budget below counts them
            mostly = 1.0 - params.range_budget.get(col.name, 0.0)
            exps.append(
                gxe.ExpectColumnValuesToBeBetween(column=col.name, min_value=col.low, max_value=col.high, mostly=mostly)
            )
        budget = null_budget(col.name, params)
        if budget < 1.0:  # a budget of 1 means "may be empty": nothing to check
            exps.append(gxe.ExpectColumnValuesToNotBeNull(column=col.name, mostly=round(1.0 - budget, 6)))
    return exps


# ------------------------------------------------------------------ validation


def documents_suite(params: DocumentsSourceParams, funds: pd.DataFrame) -> list[Any]:
    """GX expectations for the documents ingest checked (`fundgrpo.data.documents`), the same rules as a
    suite with a report: unique ids, every key a known share class, fund or company, real dates, a
    language the project writes, lengths within bounds, a kind."""
    import great_expectations.expectations as gxe

    keyed = (("share_class", "share_class_id"), ("fund", "fund_id"), ("company", "company"))
    known = [f"{kind}:{v}" for kind, c in keyed if c in funds for v in funds[c].dropna().astype(str).unique()]
    return [
        gxe.ExpectColumnValuesToNotBeNull(column="document_id"),
        gxe.ExpectColumnValuesToBeUnique(column="document_id"),
        gxe.ExpectColumnValuesToBeInSet(column="key_ref", value_set=known),
        gxe.ExpectColumnValuesToMatchRegex(column="date", regex=r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$"),
        gxe.ExpectColumnValuesToBeInSet(column="language", value_set=list(LANGUAGES)),
        gxe.ExpectColumnValueLengthsToBeBetween(column="text", min_value=params.min_chars, max_value=params.max_chars),
        gxe.ExpectColumnValuesToNotBeNull(column="kind"),
    ]


def document_counts(docs: pd.DataFrame) -> dict[str, Any]:
    """What the documents report shows: how many, by key, language and kind, and their dates."""
    return {
        "rows": len(docs),
        "by_key": {str(k): int(v) for k, v in docs["key_kind"].value_counts().items()},
        "by_language": {str(k): int(v) for k, v in docs["language"].value_counts().items()},
        "by_kind": {str(k): int(v) for k, v in docs["kind"].value_counts().items()},
        "dates": [str(docs["date"].min()), str(docs["date"].max())] if len(docs) else [],
    }


def validate_documents(
    docs: pd.DataFrame, funds: pd.DataFrame, params: DocumentsSourceParams, report_dir: Path
) -> ValidationResult:
    """The documents suite over `docs` (keys resolved against `funds`), its report in `report_dir`."""
    frame = docs.assign(key_ref=docs["key_kind"].astype(str) + ":" + docs["key"].astype(str))
    return run(
        frame,
        None,
        report_dir,
        (),
        expectations=documents_suite(params, funds),
        suite_name="documents",
        counted=document_counts,
    )


def with_documents(
    result: ValidationResult, path: Path, funds: pd.DataFrame, params: DocumentsSourceParams, report_dir: Path
) -> tuple[ValidationResult, int]:
    """`result` (the fund table's) joined by the documents suite over the documents stored at `path`, its
    report in `report_dir/documents`; and how many documents there were (none: `result` as it is)."""
    docs = pd.read_parquet(path) if path.exists() else pd.DataFrame()
    if docs.empty:
        return result, 0
    checked = validate_documents(docs, funds, params, report_dir / "documents")
    failures = result.failures + [f"documents: {f}" for f in checked.failures]
    return dataclasses.replace(result, success=result.success and checked.success, failures=failures), len(docs)


def run(
    df: pd.DataFrame,
    params: ValidateParams | None,
    report_dir: Path,
    notes: Sequence[str] = (),
    expectations: list[Any] | None = None,
    suite_name: str = SUITE,
    counted: Callable[[pd.DataFrame], dict[str, Any]] | None = None,
) -> ValidationResult:
    """Validate `df`, write the report directory (atomically) and return the outcome. `notes`: ingest's
    doubts about the source (its report), repeated in this one. The suite is the fund table's
    (`build_suite` from `params`) unless `expectations` (named `suite_name`, counted by `counted`) is given."""
    if expectations is None:
        assert params is not None, "the fund suite needs ValidateParams"
        expectations = build_suite(df.columns, params)
    offline()  # before the GX import: no analytics
    import great_expectations as gx
    from great_expectations.checkpoint import UpdateDataDocsAction
    from great_expectations.data_context.types.base import ProgressBarsConfig

    report_dir = Path(report_dir)
    with io.atomic_path(report_dir) as tmp:
        tmp.mkdir(parents=True)
        context = gx.get_context(mode="ephemeral")  # nothing persisted but the report
        context.variables.progress_bars = ProgressBarsConfig(globally=False)
        # Data docs need a site with a fixed base directory; it becomes report_dir.
        context.add_data_docs_site(
            site_name=SITE,
            site_config={
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(tmp.resolve())},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            },
        )
        batch = (
            context.data_sources.add_pandas("funds")
            .add_dataframe_asset("canonical")
            .add_batch_definition_whole_dataframe("all")
        )
        suite = context.suites.add(gx.ExpectationSuite(name=suite_name, expectations=expectations))
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=suite_name, data=batch, suite=suite)
        )
        checkpoint = context.checkpoints.add(
            gx.Checkpoint(
                name=suite_name,
                validation_definitions=[definition],
                actions=[UpdateDataDocsAction(name="data_docs", site_names=[SITE])],
                result_format={"result_format": "SUMMARY", "partial_unexpected_count": 20},
            )
        )
        outcome = checkpoint.run(batch_parameters={"dataframe": df})

        # Results in suite order (GX groups them by metric).
        order = {e.id: i for i, e in enumerate(suite.expectations)}
        results = [r.to_json_dict() for vr in outcome.run_results.values() for r in vr.results]
        results.sort(key=lambda r: order.get(r["expectation_config"].get("id"), len(order)))
        checks = [_check(r) for r in results]
        for c in checks:  # GX knows no row numbers: which rows fail, by table row and share class
            if not c["success"] and c["expectation"] == "expect_column_values_to_be_unique" and c["column"] in df:
                c["message"] += f"; {repeated_rows(df, c['column'])}"
            elif not c["success"] and c["column"] in df and (where := failing_rows(df, c)):
                c["message"] += f"; {where}"
        failures = [c["message"] for c in checks if not c["success"]]
        summary = {
            "success": bool(outcome.success),
            "counts": (counted or counts)(df),
            "expectations": {"evaluated": len(checks), "failed": len(failures)},
            "failures": failures,
            "checks": checks,
            # doubts ingest could not decide (encoding guesses, a last row without a line end)
            "ingest_notes": list(notes),
        }
        io.write_json(summary, tmp / "summary.json")
        data_docs = (tmp / "index.html").exists()
        io.write_text(summary_html(summary, data_docs), tmp / "summary.html")
        if not data_docs:  # data docs not rendered: our summary is the index
            io.write_text(summary_html(summary, False), tmp / "index.html")
    return ValidationResult(bool(outcome.success), failures, summary, report_dir / "index.html", checks)


def validate_frame(
    df: pd.DataFrame, params: ValidateParams, report_dir: Path, notes: Sequence[str] = ()
) -> ValidationResult:
    """Validate a new batch with the same suite (for monitoring flows); writes no table."""
    return run(df, params, report_dir, notes)


def counts(df: pd.DataFrame) -> dict[str, Any]:
    """Row counts the report must show, so no row is lost without a number."""
    n = len(df)
    labelled = int(df["expert_grade"].notna().sum()) if "expert_grade" in df else 0
    # Only columns the source has: an export without 10-year returns is not "missing" them row by row.
    present = [c for c in HISTORY if c in df]
    missing = {c: int(df[c].isna().sum()) for c in present}
    any_missing = int(df[present].isna().any(axis=1).sum()) if present else 0
    return {
        "rows": n,
        "columns": len(df.columns),
        "funds": int(df["fund_id"].nunique()) if "fund_id" in df else None,
        "categories": int(df["category"].nunique()) if "category" in df else None,
        "rows_per_category": {str(k): int(v) for k, v in df["category"].value_counts(dropna=False).items()}
        if "category" in df
        else {},
        "labelled_rows": labelled,
        "unlabelled_rows": n - labelled,
        "rows_missing_history": missing,
        "rows_missing_any_history": any_missing,
        "history_columns_absent": [c for c in HISTORY if c not in df],
        "nulls": {str(c): int(v) for c, v in df.isna().sum().items()},
    }


# --------------------------------------------------------------------- messages


def repeated_rows(df: pd.DataFrame, column: str) -> str:
    """Where `column`'s values repeat, by 1-based table row (a table source's data rows, in
    order), and which rows are equal in every column (exact duplicates, which
    `ingest.drop_duplicate_rows` drops when the source repeats them cell for cell).

    >>> print(repeated_rows(pd.DataFrame({"id": ["a", "b", "a", "a"], "v": [1, 2, 1, 3]}), "id"))
    ... # doctest: +NORMALIZE_WHITESPACE
    repeated at table rows (1-based): 'a' rows 1, 3, 4; 1 row(s) equal an earlier row in every column
    (row 3 = row 1): if the source repeats them cell for cell, set ingest.drop_duplicate_rows: true to drop them
    """
    values = df[column].reset_index(drop=True)
    repeated = values[values.duplicated(keep=False) & values.notna()]
    groups = list(repeated.groupby(repeated, sort=False).indices.items())
    listed = "; ".join(
        f"{key!r} rows {', '.join(str(repeated.index[i] + 1) for i in positions[:5])}"
        + (", ..." if len(positions) > 5 else "")
        for key, positions in groups[:3]
    )
    text = f"repeated at table rows (1-based): {listed}" + ("; ..." if len(groups) > 3 else "")
    try:
        exact = np.flatnonzero(df.duplicated(keep="first").to_numpy())
        keys = pd.util.hash_pandas_object(df, index=False).tolist()
    except TypeError:  # unhashable cells: no exact-duplicate check
        return text
    if len(exact):
        first: dict[int, int] = {}
        for position, key in enumerate(keys):
            first.setdefault(key, position)
        pairs = ", ".join(f"row {p + 1} = row {first[keys[p]] + 1}" for p in exact[:3])
        text += (
            f"; {len(exact)} row(s) equal an earlier row in every column ({pairs}): if the source repeats "
            "them cell for cell, set ingest.drop_duplicate_rows: true to drop them"
        )
    return text


def failing_rows(df: pd.DataFrame, check: dict) -> str | None:
    """The first table rows (1-based, in order) an expectation on a column fails on, with their share class
    and value: null, outside the plausible range, or not an allowed value. None for other expectations.

    >>> df = pd.DataFrame({"share_class_id": ["a", "b", "c"], "ongoing_cost": [1.0, -0.5, None]})
    >>> failing_rows(df, {"expectation": "expect_column_values_to_be_between", "column": "ongoing_cost",
    ...                   "kwargs": {"min_value": 0, "max_value": 15}})
    "rows (1-based): 2 ('b': -0.5)"
    >>> failing_rows(df, {"expectation": "expect_column_values_to_not_be_null", "column": "ongoing_cost", "kwargs": {}})
    "rows (1-based): 3 ('c')"
    """
    values, kw = df[check["column"]].reset_index(drop=True), check.get("kwargs") or {}
    kind = check["expectation"]
    if kind == "expect_column_values_to_not_be_null":
        bad = values.isna()
    elif kind == "expect_column_values_to_be_between":
        number = pd.to_numeric(values, errors="coerce")
        bad = number.notna() & ((number < kw.get("min_value", -np.inf)) | (number > kw.get("max_value", np.inf)))
    elif kind == "expect_column_values_to_be_in_set":
        bad = values.notna() & ~values.isin(kw.get("value_set") or [])
    else:
        return None
    rows = np.flatnonzero(bad.to_numpy())
    if not len(rows):
        return None
    key = next((k for k in ("share_class_id", "document_id") if k in df), None)  # which row, by its id
    ids = df[key].reset_index(drop=True) if key else None

    def one(i: int) -> str:
        sid = f"{ids.iloc[i]!r}" if ids is not None else ""
        value = values.iloc[i]
        value = value.item() if hasattr(value, "item") else value  # 3.5, not np.float64(3.5)
        shown = "" if kind == "expect_column_values_to_not_be_null" else f": {value!r}"
        return f"{i + 1} ({sid}{shown})"

    more = f", ... ({len(rows)} in all)" if len(rows) > 5 else ""
    return f"rows (1-based): {', '.join(one(i) for i in rows[:5])}{more}"


def _check(r: dict) -> dict[str, Any]:
    """One expectation's outcome as plain data plus a readable line."""
    cfg = r["expectation_config"]
    kwargs = {k: v for k, v in cfg["kwargs"].items() if k != "batch_id"}
    res = r.get("result") or {}
    exc = r.get("exception_info") or {}
    column = kwargs.get("column")
    name = f"{cfg['type']}({column})" if column else cfg["type"]
    return {
        "expectation": cfg["type"],
        "column": column,
        "kwargs": {k: v for k, v in kwargs.items() if k != "column"},
        "success": bool(r["success"]),
        "observed": _observed(res),
        "message": f"{name}: {_detail(cfg['type'], kwargs, res, exc)}",
    }


def _observed(res: dict) -> str:
    if "observed_value" in res:
        return str(res["observed_value"])
    if "unexpected_count" in res:
        return f"{res['unexpected_count']} unexpected of {res.get('element_count')}"
    return ""


def _exception_message(exc: dict) -> str | None:
    # GX nests exception info by metric when a metric fails to compute.
    if exc.get("raised_exception"):
        return str(exc.get("exception_message"))
    for v in exc.values():
        if isinstance(v, dict) and v.get("raised_exception"):
            return str(v.get("exception_message"))
    return None


def _detail(kind: str, kwargs: dict, res: dict, exc: dict) -> str:
    err = _exception_message(exc)
    if err:
        return f"could not be evaluated ({err})"
    if kind == "expect_column_to_exist":
        return "column is missing"
    if kind == "expect_table_row_count_to_be_between":
        return f"{res.get('observed_value')} rows, at least {kwargs.get('min_value')} required"
    if "unexpected_count" not in res:
        return f"observed {res.get('observed_value')!r}"
    n, pct = res["unexpected_count"], res.get("unexpected_percent") or 0.0
    examples = list({repr(v): v for v in res.get("partial_unexpected_list", [])}.values())[:5]
    if kind == "expect_column_values_to_not_be_null":
        allowed = 100 * (1 - kwargs.get("mostly", 1.0))
        return f"{n} null values ({pct:.1f} %), at most {allowed:.1f} % allowed"
    text = f"{n} unexpected values ({pct:.1f} % of non-null), e.g. {examples}"
    if kind == "expect_column_values_to_be_between":
        text += f"; plausible range [{kwargs.get('min_value')}, {kwargs.get('max_value')}]"
        allowed = round(1.0 - kwargs.get("mostly", 1.0), 6)
        needed = max(math.ceil(pct * 10 - 1e-9) / 1000, 0.001)  # the observed share, rounded up to 0.1 %
        text += (
            f"; if such values are genuine, validate.range_budget (the share of non-null values allowed outside the "
            f"range, now {allowed:g} for {kwargs.get('column')}) relaxes it: "
            f"range_budget: {{{kwargs.get('column')}: {needed:g}}}"
        )
    elif kind == "expect_column_values_to_be_in_set":
        text += f"; allowed {kwargs.get('value_set')}"
    elif kind == "expect_column_values_to_be_in_type_list":
        text += "; a numeric dtype is required"
    return text


# ------------------------------------------------------------------------ HTML


def summary_html(summary: dict, data_docs: bool = False) -> str:
    """A self-contained page (no scripts, no external assets); links the GX data docs if rendered."""
    e = lambda v: html.escape("" if v is None else str(v))  # noqa: E731
    c = summary["counts"]
    status = "PASSED" if summary["success"] else f"FAILED ({summary['expectations']['failed']} expectation(s))"
    if "by_kind" in c:  # the documents' report (`document_counts`)
        return _documents_html(summary, status, data_docs)
    count_rows = [
        ("rows", c["rows"]),
        ("funds", c["funds"]),
        ("categories", c["categories"]),
        ("labelled rows (expert_grade)", c["labelled_rows"]),
        ("unlabelled rows (not trainable, kept in the table)", c["unlabelled_rows"]),
        *((f"rows missing {k}", v) for k, v in c["rows_missing_history"].items()),
        *(
            [("rows missing any of " + ", ".join(c["rows_missing_history"]), c["rows_missing_any_history"])]
            if c["rows_missing_history"]
            else []
        ),
        *((f"{k}: not in the source (no row counted as missing it)", "–") for k in c.get("history_columns_absent", [])),
    ]
    checks = "".join(
        f"<tr class='{'ok' if ch['success'] else 'bad'}'><td>{'pass' if ch['success'] else 'FAIL'}</td>"
        f"<td>{e(ch['expectation'])}</td><td>{e(ch['column'])}</td><td>{e(json.dumps(ch['kwargs'], default=str))}</td>"
        f"<td>{e(ch['observed'])}</td><td>{'' if ch['success'] else e(ch['message'])}</td></tr>"
        for ch in summary["checks"]
    )
    n = max(c["rows"], 1)
    nulls = "".join(f"<tr><td>{e(k)}</td><td>{v}</td><td>{100 * v / n:.1f} %</td></tr>" for k, v in c["nulls"].items())
    cats = "".join(f"<tr><td>{e(k)}</td><td>{v}</td></tr>" for k, v in c["rows_per_category"].items())
    table = lambda head, body: f"<table><tr>{''.join(f'<th>{h}</th>' for h in head)}</tr>{body}</table>"  # noqa: E731
    notes = (
        "<h2>Notes from ingest (not errors: doubts it could not decide)</h2><ul>"
        + "".join(f"<li>{e(note)}</li>" for note in summary["ingest_notes"])
        + "</ul>"
        if summary.get("ingest_notes")
        else ""
    )
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Fund table validation</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;margin-bottom:1.5em}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:14px}}
tr.bad td{{background:#fdd}}tr.ok td:first-child{{color:#080}}.status{{font-size:1.3em;font-weight:bold}}</style></head>
<body><h1>Fund table validation</h1>
<p class="status">{e(status)}</p>
{'<p>Full Great Expectations data docs: <a href="index.html">index.html</a></p>' if data_docs else ""}
{notes}
<h2>Counts</h2>{table(["", "n"], "".join(f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in count_rows))}
<h2>Expectations</h2>{table(["", "expectation", "column", "arguments", "observed", "failure"], checks)}
<h2>Nulls per column</h2>{table(["column", "nulls", "share"], nulls)}
<h2>Rows per category</h2>{table(["category", "rows"], cats)}
</body></html>
"""


def _documents_html(summary: dict, status: str, data_docs: bool) -> str:
    """The documents' validation page: counts by key, language and kind, and every expectation."""
    e = lambda v: html.escape("" if v is None else str(v))  # noqa: E731
    c = summary["counts"]
    counted = [("documents", c["rows"]), ("dates", " to ".join(c["dates"]))]
    counted += [(f"{what}: {k}", v) for what in ("by_key", "by_language", "by_kind") for k, v in c[what].items()]
    rows = "".join(f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in counted)
    checks = "".join(
        f"<tr><td>{'pass' if ch['success'] else 'FAIL'}</td><td>{e(ch['expectation'])}</td><td>{e(ch['column'])}</td>"
        f"<td>{e(ch['observed'])}</td><td>{'' if ch['success'] else e(ch['message'])}</td></tr>"
        for ch in summary["checks"]
    )
    docs = '<p>Full Great Expectations data docs: <a href="index.html">index.html</a></p>' if data_docs else ""
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>Documents validation</title>'
        "<style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:3px 8px}</style></head>"
        f"<body><h1>Documents validation</h1><p><b>{e(status)}</b></p>{docs}<h2>Counts</h2><table>{rows}</table>"
        "<h2>Expectations</h2><table><tr><th></th><th>expectation</th><th>column</th><th>observed</th>"
        f"<th>failure</th></tr>{checks}</table></body></html>\n"
    )
