"""Stage `validate` on small real frames (GX runs for real; ~0.5 s a validation)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from fundgrpo import profiles
from fundgrpo.data.validation import run, validate_documents, validate_frame
from fundgrpo.params import DocumentsSourceParams, ValidateParams
from tests.support import REPO

PARAMS = ValidateParams(null_budget={"return_5y": 0.3, "return_10y": 0.6}, min_labelled_share=0.5)


def frame(n: int = 30, seed: int = 0) -> pd.DataFrame:
    """A clean canonical table: n share classes, 2 per fund, 3 categories, some gaps in history and labels."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "share_class_id": [f"S{i:03d}" for i in range(n)],
            "fund_id": [f"F{i // 2:03d}" for i in range(n)],
            "name": [f"Fund {i // 2} class {i % 2}" for i in range(n)],
            "category": [("Global Equity", "Korea Equity", "Bond Aggregate")[i % 3] for i in range(n)],
            "return_1y": rng.normal(8, 10, n),
            "return_3y": rng.normal(6, 5, n),
            "return_5y": rng.normal(6, 4, n),
            "return_10y": rng.normal(7, 3, n),
            "volatility_3y": rng.uniform(3, 30, n),
            "sharpe_3y": rng.normal(0.5, 0.4, n),
            "ongoing_cost": rng.uniform(0.1, 2.0, n),
            "fund_size": rng.uniform(5, 5000, n),
            "expert_grade": pd.array(rng.integers(1, 6, n), dtype="Int64"),
        }
    )
    df.loc[df.index[:3], "return_5y"] = np.nan  # 10 %: young funds
    df.loc[df.index[:9], "return_10y"] = np.nan  # 30 %
    df.loc[df.index[-5:], "expert_grade"] = pd.NA  # 5 unlabelled rows
    return df


def failures_about(result, column: str) -> list[str]:
    return [f for f in result.failures if f"({column})" in f]


def test_clean_frame_passes_and_writes_reports(tmp_path: Path) -> None:
    result = run(frame(), PARAMS, tmp_path / "report")
    assert result.success, result.failures
    assert result.failures == []
    for name in ("index.html", "summary.html", "summary.json"):
        assert (tmp_path / "report" / name).is_file()
    counts = json.loads((tmp_path / "report" / "summary.json").read_text())["counts"]
    assert counts["rows"] == 30 and counts["funds"] == 15 and counts["categories"] == 3
    assert counts["unlabelled_rows"] == 5 and counts["labelled_rows"] == 25
    assert counts["rows_missing_history"] == {"return_5y": 3, "return_10y": 9}
    page = (tmp_path / "report" / "summary.html").read_text()
    assert "unlabelled rows" in page and "rows missing return_10y" in page and "PASSED" in page


def test_duplicate_share_class_ids_fail(tmp_path: Path) -> None:
    df = frame()
    df.loc[[1, 2, 3], "share_class_id"] = "S000"
    result = run(df, PARAMS, tmp_path / "r")
    assert not result.success
    [msg] = failures_about(result, "share_class_id")
    assert msg.startswith("expect_column_values_to_be_unique(share_class_id): 4 unexpected values")
    assert "S000" in msg


@pytest.mark.parametrize(("column", "value"), [("volatility_3y", 5000.0), ("expert_grade", 9)])
def test_absurd_value_fails_naming_column(tmp_path: Path, column: str, value: float) -> None:
    df = frame()
    df.loc[4, column] = value
    result = run(df, PARAMS, tmp_path / "r")
    assert not result.success
    [msg] = failures_about(result, column)
    assert "1 unexpected values" in msg and str(int(value)) in msg


def test_nulls_beyond_budget_fail(tmp_path: Path) -> None:
    df = frame()
    df.loc[df.index[:20], "volatility_3y"] = np.nan  # 67 % > default budget 50 %
    result = run(df, PARAMS, tmp_path / "r")
    assert not result.success
    [msg] = failures_about(result, "volatility_3y")
    assert msg.startswith("expect_column_values_to_not_be_null(volatility_3y): 20 null values")


def test_too_few_labelled_rows_fail(tmp_path: Path) -> None:
    df = frame()
    df.loc[df.index[:20], "expert_grade"] = pd.NA
    result = run(df, PARAMS, tmp_path / "r")
    assert failures_about(result, "expert_grade")


def test_missing_required_column_fails_naming_it(tmp_path: Path) -> None:
    result = run(frame().drop(columns="category"), PARAMS, tmp_path / "r")
    assert result.failures == ["expect_column_to_exist(category): column is missing"]


def test_text_in_numeric_column_fails(tmp_path: Path) -> None:
    df = frame()
    df["sharpe_3y"] = df["sharpe_3y"].astype(object)
    df.loc[2, "sharpe_3y"] = "n/a"
    result = run(df, PARAMS, tmp_path / "r")
    assert not result.success
    msgs = failures_about(result, "sharpe_3y")
    assert any(m.startswith("expect_column_values_to_be_in_type_list(sharpe_3y)") for m in msgs)


def test_too_few_rows_fail(tmp_path: Path) -> None:
    result = validate_frame(frame().iloc[10:20], PARAMS, tmp_path / "r")
    assert result.failures == ["expect_table_row_count_to_be_between: 10 rows, at least 20 required"]


def _stage(tmp_path: Path, df: pd.DataFrame) -> subprocess.CompletedProcess:
    df.to_parquet(tmp_path / "canonical.parquet", index=False)
    (tmp_path / "ingest.json").write_text('{"notes": []}')  # ingest's report: no doubts about the source
    params = {
        "ingest": {"out": "canonical.parquet", "report": "ingest.json"},
        "validate": {
            **{k: v for k, v in vars(PARAMS).items() if k in ("null_budget", "min_labelled_share")},
            "report_dir": "report",
            "out": "validated.parquet",
        },
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "stages.validate"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )


def test_main_fails_and_keeps_previous_output(tmp_path: Path) -> None:
    good = tmp_path / "validated.parquet"
    good.write_bytes(b"previous good table")
    df = frame()
    df.loc[3, "volatility_3y"] = 5000.0
    proc = _stage(tmp_path, df)
    assert proc.returncode == 1, proc.stderr
    assert "validation failed: 1 expectation(s):" in proc.stderr
    assert "expect_column_values_to_be_between(volatility_3y)" in proc.stderr
    assert "report-failed/index.html" in proc.stderr  # beside the last good report, which it does not replace
    assert good.read_bytes() == b"previous good table"
    assert (tmp_path / "report-failed" / "summary.json").is_file() and not (tmp_path / "report").exists()


def test_main_writes_validated_table_on_success(tmp_path: Path) -> None:
    proc = _stage(tmp_path, frame())
    assert proc.returncode == 0, proc.stderr
    out = pd.read_parquet(tmp_path / "validated.parquet")
    assert len(out) == 30 and "5 unlabelled" in proc.stdout
    assert (tmp_path / "report" / "index.html").is_file() and not (tmp_path / "report-failed").exists()


def test_real_morningstar_export(tmp_path: Path, morningstar_csv: Path) -> None:
    from fundgrpo.data.ingestion import run as ingest_run

    params = profiles.load("morningstar", REPO / "params.yaml", REPO / "profiles")
    df = ingest_run(dataclasses.replace(params.ingest, path=str(morningstar_csv)), REPO)[0]
    result = run(df, params.validate, tmp_path / "report")
    assert result.success, "\n".join(result.failures)
    counts = result.summary["counts"]
    assert counts["rows"] == len(df) > 2000
    # young share classes lack 5y/10y history: counted in the report, not dropped
    assert 0 < counts["rows_missing_history"]["return_5y"] < counts["rows_missing_history"]["return_10y"] < len(df)


def test_a_history_column_the_source_lacks_is_named_not_counted_as_missing(tmp_path: Path) -> None:
    """An export without 10-year returns: its rows are not 'missing 10y history' one by one."""
    df = frame().drop(columns=["return_10y"])
    run(df, PARAMS, tmp_path / "report")
    counts = json.loads((tmp_path / "report" / "summary.json").read_text())["counts"]
    assert counts["rows_missing_history"] == {"return_5y": 3}
    assert counts["rows_missing_any_history"] == 3 and counts["history_columns_absent"] == ["return_10y"]
    page = (tmp_path / "report" / "summary.html").read_text()
    assert "return_10y: not in the source" in page and "rows missing return_10y" not in page


def test_a_range_failure_names_the_setting_that_relaxes_it(tmp_path: Path) -> None:
    df = frame()
    df.loc[[4, 7], "ongoing_cost"] = -0.01  # fee rebates: genuine, outside [0, ...]
    result = run(df, PARAMS, tmp_path / "r")
    [msg] = failures_about(result, "ongoing_cost")
    assert "2 unexpected values (6.7 % of non-null)" in msg
    assert "validate.range_budget" in msg and "now 0 for ongoing_cost" in msg
    assert "range_budget: {ongoing_cost: 0.067}" in msg
    ids = df["share_class_id"]
    assert f"rows (1-based): 5 ({ids[4]!r}: -0.01), 8 ({ids[7]!r}: -0.01)" in msg  # which rows, not only how many
    relaxed = dataclasses.replace(PARAMS, range_budget={"ongoing_cost": 0.067})
    assert run(df, relaxed, tmp_path / "r2").success


def test_repeated_ids_name_their_rows_and_exact_duplicates_the_setting(tmp_path: Path) -> None:
    df = frame()
    doubled = pd.concat([df, df.iloc[[2]]], ignore_index=True)  # row 3 again, as row 31
    doubled.loc[5, "share_class_id"] = "S000"  # a different share class with a repeated id
    result = run(doubled, PARAMS, tmp_path / "r")
    [msg] = failures_about(result, "share_class_id")
    assert msg.startswith("expect_column_values_to_be_unique(share_class_id): 4 unexpected values")
    assert "repeated at table rows (1-based): 'S000' rows 1, 6; 'S002' rows 3, 31" in msg
    assert "1 row(s) equal an earlier row in every column (row 31 = row 3)" in msg
    assert "ingest.drop_duplicate_rows: true" in msg


def test_the_documents_suite_passes_good_documents_and_names_each_bad_row(tmp_path: Path) -> None:
    """The documents' Great Expectations suite: a clean set passes with its report; a repeated id, a key no
    fund or company has, an impossible date, a language the project does not write and a text below the
    length bound each fail, naming the document."""
    funds = pd.DataFrame({"share_class_id": ["S1", "S2"], "fund_id": ["F1", "F2"], "company": ["Acme", "Acme"]})
    docs = pd.DataFrame({
        "document_id": ["d1", "d2", "d3"], "key_kind": ["share_class", "fund", "company"], "key": ["S1", "F2", "Acme"],
        "date": ["2024-01-05", "2024-02-29", "2024-03-01"], "kind": ["news", "meeting_note", "news"],
        "language": ["en", "ko", "en"], "text": ["The lead manager left.", "책임운용역이 퇴사했다.", "Acme was fined."],
        "source": ["a.csv row 1", "a.csv row 2", "a.csv row 3"],
    })  # fmt: skip
    good = validate_documents(docs, funds, DocumentsSourceParams(), tmp_path / "good")
    assert good.success and good.summary["counts"]["by_key"] == {"share_class": 1, "fund": 1, "company": 1}
    assert "Documents validation" in (tmp_path / "good/summary.html").read_text()

    bad = docs.copy()
    bad.loc[1, "document_id"] = "d1"
    bad.loc[2, ["key", "date", "language", "text"]] = ["Nobody", "2024-13-01", "fr", "short"]
    found = validate_documents(bad, funds, DocumentsSourceParams(), tmp_path / "bad")
    assert not found.success
    said = "\n".join(found.failures)
    for expected in ("expect_column_values_to_be_unique(document_id)", "expect_column_values_to_be_in_set(key_ref)",
                     "expect_column_values_to_match_regex(date)", "expect_column_values_to_be_in_set(language)",
                     "expect_column_value_lengths_to_be_between(text)"):  # fmt: skip
        assert expected in said, said
    assert "3 ('d3': 'company:Nobody')" in said and "3 ('d3': 'fr')" in said  # which document, by row and id
