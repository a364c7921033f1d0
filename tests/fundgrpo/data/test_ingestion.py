"""Stage ingest: every source to the canonical table, and clear errors on bad input."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fundgrpo import profiles
from fundgrpo.data import ingestion, navmetrics, synthetic
from fundgrpo.data.canonical import COLUMNS
from fundgrpo.data.columns import strip_patterns
from fundgrpo.data.ingestion import IngestError, summary
from fundgrpo.params import IngestParams, ParamsError, ReturnsSourceParams, SyntheticParams
from tests.support import REPO


def run(params: IngestParams, root: Path) -> pd.DataFrame:
    """The canonical table alone; `ingestion.run` gives its report too."""
    return ingestion.run(params, root)[0]


SCREENER_MAP = {
    "share_class_id": "SecId",
    "name": "Fund Name",
    "category": "Peer Group",
    "return_1y": "Ret 1Y",
    "fund_size": "Assets",
    "expert_grade": "Stars",
}

SCREENER_CSV = """SecId,Fund Name,Peer Group,Ret 1Y,Assets,Stars,Umbrella,Leak
S1,Alpha Fund A,UK Equity,10.5,12000000,3,Alpha,9
S2,Alpha Fund B,UK Equity,11.0,12000000,4,Alpha,9
S3,Beta Fund,UK Equity,,3500000,,Beta,1
S4,Gamma Fund,Europe Equity,-2.25,800000,5,,2
"""


def table_params(path: Path, **overrides) -> IngestParams:
    base = IngestParams(source="table", path=path.name, column_map=dict(SCREENER_MAP))
    return dataclasses.replace(base, **overrides)


def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_bytes(text.encode(encoding))
    return path


# --------------------------------------------------------------- returns source


@pytest.fixture(scope="module")
def synthetic_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("synthetic")
    synthetic.write(SyntheticParams(n_funds=30, n_months=72), root=root)
    return root


def test_synthetic_returns_source(synthetic_root: Path) -> None:
    table = run(IngestParams(), synthetic_root)  # the defaults point at the synthetic files
    funds = pd.read_csv(synthetic_root / "data/raw/synthetic/funds.csv")
    assert len(table) == len(funds)
    expected = [
        "share_class_id",
        "fund_id",
        "name",
        "category",
        "company",
        "return_1y",
        "return_3y",
        "return_5y",
        "volatility_3y",
        "sharpe_3y",
        "sortino_3y",
        "max_drawdown_3y",
        "tracking_error_3y",
        "information_ratio_3y",
        "mrar_3y",
        "mrar_5y",
        "ongoing_cost",
        "fund_size",
        "manager_tenure",
        "expert_grade",
        "expert_score",
        "as_of",
    ]  # mrar_*: derived in ingest; no return_10y here, so no mrar_10y
    assert list(table.columns) == expected
    assert (table["as_of"] == "2024-12").all()  # 72 months from 2019-01
    assert table["expert_grade"].dtype == "Int64"
    assert table["share_class_id"].map(type).eq(str).all()
    assert table["name"].str.contains("코리아").any()  # UTF-8 made it through
    # metrics are navmetrics on the series, joined to the right rows
    series = pd.read_csv(synthetic_root / "data/raw/synthetic/returns.csv")
    metrics = navmetrics.compute_long(series)
    got = table.set_index("share_class_id")[list(navmetrics.METRICS)]
    pd.testing.assert_frame_equal(got, metrics.loc[got.index], check_names=False)
    assert table["return_5y"].isna().any() and table["return_5y"].notna().any()


def test_returns_source_nav_and_attribute_mapping(tmp_path: Path) -> None:
    months = [str(p) for p in pd.period_range("2020-01", periods=14, freq="M")]
    nav = pd.DataFrame({"code": ["X1"] * 14, "date": months, "nav": 100 * 1.01 ** np.arange(14)})
    nav.to_csv(tmp_path / "nav.csv", index=False)
    attrs = "code,title,peer,fee\nX1,Ex One,Bonds,0.4\nX2,Ex Two,Bonds,0.5\n"
    write(tmp_path / "attrs.csv", attrs)
    params = IngestParams(
        column_map={"share_class_id": "code", "name": "title", "category": "peer", "ongoing_cost": "fee"},
        path=".",
        returns=ReturnsSourceParams(
            series_file="nav.csv",
            attributes_file="attrs.csv",
            id_column="code",
            date_column="date",
            value_column="nav",
            value_kind="nav",
            benchmark_column="",
        ),
    )
    table = run(params, tmp_path).set_index("share_class_id")
    assert table.loc["X1", "return_1y"] == pytest.approx((1.01**12 - 1) * 100)
    assert np.isnan(table.loc["X2", "return_1y"])  # no series: metrics missing, row kept
    assert table.loc["X1", "as_of"] == "2021-02"


# ----------------------------------------------------------------- table source


def test_table_with_map_scale_and_fund_id_from(tmp_path: Path) -> None:
    path = write(tmp_path / "screener.csv", SCREENER_CSV)
    params = table_params(path, scale={"fund_size": 1e-6}, fund_id_from=("Umbrella", "Assets"), drop_columns=("Leak",))
    table = run(params, tmp_path)
    assert list(table.columns) == [
        "share_class_id",
        "fund_id",
        "name",
        "category",
        "return_1y",
        "fund_size",
        "expert_grade",
    ]
    assert table["fund_size"].tolist() == pytest.approx([12.0, 12.0, 3.5, 0.8])
    ids = table["fund_id"].tolist()
    assert ids[0] == ids[1] != ids[2]
    assert ids[3] == "S4"  # Umbrella missing: its own fund rather than a guess
    assert table["expert_grade"].dtype == "Int64"
    assert table["expert_grade"].isna().sum() == 1
    assert np.isnan(table.loc[2, "return_1y"])  # a blank is missing, not an error
    # stable: the same input gives the same ids
    assert run(params, tmp_path)["fund_id"].tolist() == ids


def test_canonical_names_taken_and_default_fund_id(tmp_path: Path) -> None:
    path = write(tmp_path / "plain.csv", "share_class_id,category,ongoing_cost,Other\n007,A,1.2,x\n")
    table = run(IngestParams(source="table", path="plain.csv"), tmp_path)
    assert table["share_class_id"].tolist() == ["007"]  # leading zeros kept
    assert table["fund_id"].tolist() == ["007"]
    assert list(table.columns) == ["share_class_id", "fund_id", "category", "ongoing_cost"]
    dropped = run(IngestParams(source="table", path=path.name, drop_columns=("ongoing_cost",)), tmp_path)
    assert "ongoing_cost" not in dropped.columns


def test_parquet_table(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "SecId": [101.0, 102.0],
            "Fund Name": ["P", "Q"],
            "Peer Group": ["A", "A"],
            "Ret 1Y": [1.5, None],
            "Assets": [1e6, 2e6],
            "Stars": [2.0, None],
        }
    )
    frame.to_parquet(tmp_path / "export.parquet")
    table = run(table_params(tmp_path / "export.parquet"), tmp_path)
    assert table["share_class_id"].tolist() == ["101", "102"]
    assert table["expert_grade"].dtype == "Int64"


def test_utf8_bom(tmp_path: Path) -> None:
    path = write(tmp_path / "bom.csv", SCREENER_CSV.replace("Alpha Fund A", "Café Fund A"), "utf-8-sig")
    table, report = ingestion.run(table_params(path), tmp_path)
    assert report.encoding == "utf-8-sig"
    assert table["share_class_id"].iloc[0] == "S1"  # no BOM glued to the first header
    assert table["name"].iloc[0] == "Café Fund A"


def test_utf16_with_byte_order_mark_tab_separated(tmp_path: Path) -> None:
    """Excel's "Unicode text" export: UTF-16 with a BOM, tab-separated; the BOM makes it certain."""
    path = write(
        tmp_path / "excel.csv", SCREENER_CSV.replace(",", "\t").replace("Alpha Fund A", "한국 Fund A"), "utf-16"
    )
    table, report = ingestion.run(table_params(path), tmp_path)
    assert report.encoding == "utf-16" and table["name"].iloc[0] == "한국 Fund A"
    assert table["return_1y"].iloc[0] == 10.5


def test_cp949_korean(tmp_path: Path) -> None:
    text = (
        "종목코드,펀드명,유형,수익률\n"
        "K001,한빛 코리아 성장 주식 A,국내주식,12.5\n"
        "K002,미래로 배당 주식 C,국내주식,-3.1\n"
    )
    path = write(tmp_path / "korea.csv", text, "cp949")
    params = IngestParams(
        source="table",
        path=path.name,
        column_map={"share_class_id": "종목코드", "name": "펀드명", "category": "유형", "return_1y": "수익률"},
    )
    table, report = ingestion.run(params, tmp_path)
    assert report.encoding == "cp949"
    assert table["name"].tolist() == ["한빛 코리아 성장 주식 A", "미래로 배당 주식 C"]
    assert table["return_1y"].tolist() == [12.5, -3.1]
    explicit = run(dataclasses.replace(params, encoding="cp949"), tmp_path)
    assert explicit["category"].tolist() == ["국내주식"] * 2
    with pytest.raises(IngestError, match="decode"):
        run(dataclasses.replace(params, encoding="utf-8"), tmp_path)


# ------------------------------------------------------------------ bad input


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="not found"):
        run(IngestParams(source="table", path="nope.csv"), tmp_path)
    write(tmp_path / "zero.csv", "")
    with pytest.raises(IngestError, match="empty"):
        run(IngestParams(source="table", path="zero.csv"), tmp_path)
    write(tmp_path / "header.csv", "SecId,Peer Group\n")
    with pytest.raises(IngestError, match="no rows"):
        run(IngestParams(source="table", path="header.csv"), tmp_path)
    with pytest.raises(IngestError, match="not found"):
        run(IngestParams(), tmp_path)  # the returns source's default files are absent


def test_missing_mapped_column_names_it_and_suggests(tmp_path: Path) -> None:
    path = write(tmp_path / "screener.csv", SCREENER_CSV)
    column_map = dict(SCREENER_MAP, return_1y="Ret 1Yr")
    with pytest.raises(IngestError) as err:
        run(table_params(path, column_map=column_map), tmp_path)
    message = str(err.value)
    assert "'Ret 1Yr'" in message and "return_1y" in message
    assert "did you mean 'Ret 1Y'" in message
    assert "available:" in message and "Peer Group" in message


def test_required_column_absent(tmp_path: Path) -> None:
    path = write(tmp_path / "screener.csv", SCREENER_CSV)
    column_map = {k: v for k, v in SCREENER_MAP.items() if k != "category"}
    with pytest.raises(IngestError, match="required column 'category'"):
        run(table_params(path, column_map=column_map), tmp_path)


def test_config_mistakes(tmp_path: Path) -> None:
    path = write(tmp_path / "screener.csv", SCREENER_CSV)
    with pytest.raises(IngestError, match="did you mean 'return_1y'"):
        run(table_params(path, column_map=dict(SCREENER_MAP, retrun_1y="Ret 1Y")), tmp_path)
    with pytest.raises(IngestError, match="both mapped"):
        run(table_params(path, drop_columns=("Stars",)), tmp_path)
    with pytest.raises(IngestError, match="does not provide 'ongoing_cost'"):
        run(table_params(path, scale={"ongoing_cost": 100.0}), tmp_path)
    with pytest.raises(IngestError, match="'Umbrela' not found; did you mean 'Umbrella'"):
        run(table_params(path, fund_id_from=("Umbrela",)), tmp_path)
    with pytest.raises(ParamsError, match=r"ingest.source must be one of \[.returns., .table.\], got .sql."):
        IngestParams(source="sql")


def test_text_in_numeric_column(tmp_path: Path) -> None:
    text = SCREENER_CSV.replace("10.5,", "n/a%,").replace("-2.25,", "abc,")
    path = write(tmp_path / "screener.csv", text)
    with pytest.raises(IngestError) as err:
        run(table_params(path), tmp_path)
    message = str(err.value)
    assert "'Ret 1Y' (return_1y)" in message
    assert "2 non-numeric" in message
    assert "data row 1: 'n/a%'" in message and "data row 4: 'abc'" in message


def test_expert_grade_text_is_an_error_but_odd_numbers_pass(tmp_path: Path) -> None:
    path = write(tmp_path / "stars.csv", SCREENER_CSV.replace(",3,Alpha", ",three,Alpha"))
    with pytest.raises(IngestError, match=r"'Stars' \(expert_grade\).*'three'"):
        run(table_params(path), tmp_path)
    path = write(tmp_path / "odd.csv", SCREENER_CSV.replace(",3,Alpha", ",2.5,Alpha").replace(",5,,", ",7,,"))
    table = run(table_params(path), tmp_path)
    assert table["expert_grade"].tolist()[:2] == [2.5, 4.0]  # left for validation to flag
    assert table["expert_grade"].max() == 7


# ------------------------------------------------------------------ real data


def test_morningstar_profile(morningstar_csv: Path, repo_root: Path) -> None:
    params = profiles.load("morningstar", repo_root / "params.yaml", repo_root / "profiles").ingest
    table = run(params, repo_root)
    raw = pd.read_csv(morningstar_csv, encoding="utf-8-sig", dtype=str)
    assert len(table) == 2761
    for leak in ("QuantitativeRating", "MorningstarRiskM255", "SustainabilityRank"):
        assert leak not in table.columns
    assert set(table.columns) <= {c.name for c in COLUMNS}
    assert table["share_class_id"].is_unique
    # FundTNAV (within 1e-5) + CategoryName, see the profile: 890 funds on exact FundTNAV
    assert table["fund_id"].nunique() == 864
    fund = table.set_index("share_class_id")["fund_id"]
    named = {sc: n for sc, n in zip(raw["SecId"], raw["Name"])}
    # one fund's classes whose assets differ by one unit: the same fund, one side of every split
    for a, b in (("F0GBR04AWZ", "F00000Q7RF"), ("F00000ZX12", "F00000Y61R")):
        assert fund[a] == fund[b], (named[a], named[b])
    assert named["F0GBR04AWZ"] == "AS SICAV I European Eq A Acc EUR" and named["F00000Y61R"].startswith("Jupiter")
    exact = run(dataclasses.replace(params, fund_id_tolerance=0.0), repo_root)
    assert exact["fund_id"].nunique() == 890
    assert exact.set_index("share_class_id").loc[["F0GBR04AWZ", "F00000Q7RF"], "fund_id"].nunique() == 2
    assert table["category"].nunique() == raw["CategoryName"].nunique()
    assert table["expert_grade"].dtype == "Int64"
    assert table["expert_grade"].isna().sum() == raw["StarRatingM255"].isna().sum()
    assert table["fund_size"].median() == pytest.approx(pd.to_numeric(raw["FundTNAV"]).median() / 1e6)
    # a fund's share classes share the category
    assert table.groupby("fund_id")["category"].nunique().max() == 1


# ------------------------------------------------------------------------ main


def _stage(module: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))  # the repository root, not tests/
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_main_failure_keeps_previous_output(tmp_path: Path) -> None:
    write(tmp_path / "screener.csv", SCREENER_CSV)
    mapping = "\n".join(f"    {k}: {v}" for k, v in SCREENER_MAP.items())
    params = (
        f"ingest:\n  source: table\n  path: screener.csv\n  out: canonical/funds.parquet\n  column_map:\n{mapping}\n"
    )
    write(tmp_path / "params.yaml", params)
    good = _stage("stages.ingest", tmp_path)
    assert good.returncode == 0, good.stderr
    assert "4 rows, 4 funds, 2 categories, 3 labelled rows" in good.stdout
    out = tmp_path / "canonical/funds.parquet"
    before = out.read_bytes()

    write(tmp_path / "screener.csv", SCREENER_CSV.replace("10.5,", "oops,"))
    bad = _stage("stages.ingest", tmp_path)
    assert bad.returncode == 1
    assert bad.stderr.startswith("ingest failed:") and "'oops'" in bad.stderr
    assert out.read_bytes() == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["funds.parquet"]  # no temp leftovers


def test_generate_then_ingest_end_to_end(tmp_path: Path) -> None:
    write(tmp_path / "params.yaml", "synthetic:\n  n_funds: 12\n  n_months: 48\n")
    gen = _stage("stages.generate", tmp_path)
    assert gen.returncode == 0, gen.stderr
    ing = _stage("stages.ingest", tmp_path)
    assert ing.returncode == 0, ing.stderr
    table = pd.read_parquet(tmp_path / "data/canonical/funds.parquet")
    assert table["fund_id"].nunique() == 12
    assert table["expert_grade"].dtype == "Int64"
    assert table["name"].str.contains("코리아").any()


# --------------------------------------------------- settings for real exports (issue 12)


def test_semicolon_decimal_comma_markers_and_unrated(tmp_path: Path) -> None:
    write(tmp_path / "eu.csv", "Code;Peer;Ret1Y;Stars\nA;x;1,5;0\nB;x;-;4\nC;x;1.234,25;NR\n")
    params = IngestParams(
        source="table",
        path="eu.csv",
        decimal=",",
        na_values=("-",),
        unrated=("0", "NR"),
        column_map={"share_class_id": "Code", "category": "Peer", "return_1y": "Ret1Y", "expert_grade": "Stars"},
    )
    table, report = ingestion.run(params, tmp_path)
    assert (
        table["return_1y"].tolist()[0] == 1.5 and np.isnan(table["return_1y"][1]) and table["return_1y"][2] == 1234.25
    )
    assert table["expert_grade"].isna().tolist() == [True, False, True] and report.unrated == 2


def test_a_marker_not_configured_is_named_with_the_fix(tmp_path: Path) -> None:
    write(tmp_path / "m.csv", "Code,Peer,Ret1Y\nA,x,1\nB,x,-\nC,x,--\n")
    params = IngestParams(
        source="table", path="m.csv", column_map={"share_class_id": "Code", "category": "Peer", "return_1y": "Ret1Y"}
    )
    with pytest.raises(
        IngestError,
        match=r"column 'Ret1Y' \(return_1y\) has 2 non-numeric value\(s\): data row 2: '-', data row 3: '--' "
        r"\(a marker for missing goes in ingest.na_values",
    ):
        run(params, tmp_path)


def test_ids_built_from_columns_generated_or_refused(tmp_path: Path) -> None:
    write(
        tmp_path / "i.csv",
        "Scheme,Plan,Peer\n"
        "Alpha Fund - Direct Plan,Growth,x\n"
        "Alpha Fund - Regular Plan,Growth,x\n"
        "Beta Fund,Growth,x\n"
        "Beta Fund,Growth,x\n",
    )
    base = IngestParams(
        source="table",
        path="i.csv",
        column_map={"name": "Scheme", "category": "Peer"},
        fund_id_from=("Scheme",),
        fund_id_strip=(r"\s*-\s*(direct|regular)\b.*$",),
    )
    with pytest.raises(
        IngestError,
        match=r"share_class_id_from \['Scheme', 'Plan'\] gives 1 id\(s\) to more than one row: "
        r"'Beta Fund \| Growth' \(data rows 3, 4\)",
    ):
        run(dataclasses.replace(base, share_class_id_from=("Scheme", "Plan")), tmp_path)
    table = run(dataclasses.replace(base, share_class_id_generate=True), tmp_path)
    assert table["share_class_id"].tolist() == ["row-1", "row-2", "row-3", "row-4"]
    assert table["fund_id"].nunique() == 2 and table["fund_id"][0] == table["fund_id"][1]  # plans of Alpha are one fund
    with pytest.raises(
        IngestError, match="required column 'share_class_id' is absent: map it in column_map or build it"
    ):
        run(base, tmp_path)


# ------------------------------------------- bad input that used to end in a traceback or silence


def test_an_unclosed_quote_names_the_line_where_it_opens(tmp_path: Path) -> None:
    """A quote left open swallows the rest of the file into one cell: the line it opens on is named."""
    lines = SCREENER_CSV.splitlines()
    lines[2] = lines[2].replace("Alpha Fund B", '"Alpha Fund B')  # line 3, data row 2: never closed
    write(tmp_path / "screener.csv", "\n".join(lines) + "\n")
    with pytest.raises(IngestError) as err:
        run(table_params(tmp_path / "screener.csv"), tmp_path)
    message = str(err.value)
    assert "screener.csv" in message and "unclosed quote" in message
    assert "opening on line 3 (data row 2)" in message
    assert "2 data row(s) were read from 5 lines" in message
    # in a large file the swallowed cell passes the csv module's field limit (131072): named all the same
    body = "".join(f"S{i},Fund {i},UK Equity,1.5,1000,3,U,0\n" for i in range(10, 5010))
    write(tmp_path / "large.csv", "\n".join(lines[:3]) + "\n" + body)
    with pytest.raises(IngestError, match=r"large\.csv: an unclosed quote: the quoted cell opening on line 3 "):
        run(table_params(tmp_path / "large.csv"), tmp_path)


def test_a_quote_closed_lines_later_names_the_lines_it_spans(tmp_path: Path) -> None:
    """Two stray quotes merge the lines between them into one cell: refused when the field count
    changes, named in a note (ingest's line, the validation report) when it happens to fit."""
    lines = SCREENER_CSV.splitlines()
    lines[2] = lines[2].replace("Alpha Fund B", '"Alpha Fund B')
    lines[3] = lines[3] + '"'  # closed at the end of line 4: row 2 has 2 fields
    write(tmp_path / "screener.csv", "\n".join(lines) + "\n")
    with pytest.raises(IngestError, match=r"data row 2 has 2 \(lines 3-4: a quoted cell runs over line ends\)"):
        run(table_params(tmp_path / "screener.csv"), tmp_path)
    lines = SCREENER_CSV.splitlines()
    lines[2] = lines[2].replace("Alpha Fund B", '"Alpha Fund B')
    lines[3] = lines[3].replace("Beta Fund", 'Beta Fund"')  # closed in line 4's second cell: 8 fields again
    write(tmp_path / "screener.csv", "\n".join(lines) + "\n")
    table, report = ingestion.run(table_params(tmp_path / "screener.csv"), tmp_path)
    assert len(table) == 3
    [note] = report.notes
    assert "screener.csv: 1 data row(s) run over line ends (data row 2: lines 3-4)" in note and "stray" in note


def test_a_file_of_blank_lines_is_named_as_such(tmp_path: Path) -> None:
    write(tmp_path / "blank.csv", "\n  \n\r\n\n")
    with pytest.raises(IngestError, match=r"blank\.csv: holds only blank lines \(4 line\(s\), 7 bytes\)"):
        run(IngestParams(source="table", path="blank.csv"), tmp_path)
    # blank lines before the header are skipped, as pandas does, not counted as a 0-field header
    write(tmp_path / "lead.csv", "\n\nshare_class_id,category\nA,x\n")
    assert run(IngestParams(source="table", path="lead.csv"), tmp_path)["share_class_id"].tolist() == ["A"]


def test_fund_keys_within_the_tolerance_are_one_fund(tmp_path: Path) -> None:
    csv = "Id,Cat,TNA\nA1,x,401441871\nA2,x,401441872\nB1,x,401541872\nC1,y,401441872\nD1,x,\n"
    path = write(tmp_path / "screener.csv", csv)
    params = IngestParams(
        source="table", path=path.name, column_map={"share_class_id": "Id", "category": "Cat"},
        fund_id_from=("TNA", "Cat"), fund_id_tolerance=1e-5,
    )  # fmt: skip
    table, report = ingestion.run(params, tmp_path)
    ids = dict(zip(table["share_class_id"], table["fund_id"]))
    assert ids["A1"] == ids["A2"]  # one unit apart: one fund
    assert len({ids["A1"], ids["B1"], ids["C1"]}) == 3  # 2.5e-4 apart; another category
    assert ids["D1"] == "D1"  # no key: its own fund
    assert "ingest.fund_id_tolerance joined 1 share class(es)" in summary(table, report)
    with pytest.raises(ParamsError, match=r"ingest.fund_id_tolerance: 0.5 is not a relative difference"):
        IngestParams(fund_id_tolerance=0.5)


def test_an_invalid_fund_id_strip_regex_is_refused_when_params_load(tmp_path: Path) -> None:
    with pytest.raises(ParamsError) as err:
        IngestParams(fund_id_strip=(r"\s*-\s*direct", r"\s*-\s*(regular"))
    message = str(err.value)
    assert "ingest.fund_id_strip[1]" in message and r"'\\s*-\\s*(regular'" in message
    assert "not a valid regular expression" in message and "missing )" in message


def test_a_delimiter_that_does_not_fit_the_header_is_named(tmp_path: Path) -> None:
    path = write(tmp_path / "screener.csv", SCREENER_CSV)
    with pytest.raises(IngestError) as err:
        run(table_params(path, delimiter=";"), tmp_path)
    message = str(err.value)
    assert "screener.csv" in message
    assert "ingest.delimiter is ';' but the header looks ','-separated" in message
    assert "set ingest.delimiter: ','" in message
    write(tmp_path / "tabs.csv", SCREENER_CSV.replace(",", "\t"))
    with pytest.raises(IngestError, match="ingest.delimiter is ',' but the header looks tab-separated"):
        run(table_params(tmp_path / "tabs.csv", delimiter=","), tmp_path)


def test_a_source_the_process_may_not_read_is_named(tmp_path: Path) -> None:
    """A real permission error: the file is mode 000; as root (which reads anything) the check runs
    with the effective user switched to `nobody`."""
    path = write(tmp_path / "screener.csv", SCREENER_CSV)
    path.chmod(0)
    params = table_params(path)
    try:
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            import pwd

            try:
                nobody = pwd.getpwnam("nobody").pw_uid
            except KeyError:
                pytest.skip("running as root and there is no user 'nobody' to drop to")
            os.seteuid(nobody)
            try:
                with pytest.raises(IngestError) as err:
                    run(params, tmp_path)
            finally:
                os.seteuid(0)
        else:
            if os.access(path, os.R_OK):
                pytest.skip("this process reads files whatever their mode")
            with pytest.raises(IngestError) as err:
                run(params, tmp_path)
    finally:
        path.chmod(0o644)
    message = str(err.value)
    assert "screener.csv" in message and "permission denied" in message and "may not read" in message


def test_only_the_configured_markers_mean_missing(tmp_path: Path) -> None:
    """pandas' own markers (NA, N/A, null, #N/A, None) stay text; blanks and `na_values` are missing."""
    text = "Code,Peer,Ret1Y,Note\nA,x,1.5,NA\nB,None,-,N/A\nC,x,,null\nD,#N/A,--,\n"
    write(tmp_path / "m.csv", text)
    column_map = {"share_class_id": "Code", "category": "Peer", "return_1y": "Ret1Y", "name": "Note"}
    params = IngestParams(source="table", path="m.csv", column_map=column_map, na_values=("-", "--"))
    table, report = ingestion.run(params, tmp_path)
    assert table["name"].tolist() == ["NA", "N/A", "null", None]  # the blank cell is missing
    assert table["category"].tolist() == ["x", "None", "x", "#N/A"]
    assert table["return_1y"].isna().tolist() == [False, True, True, True]  # '-', blank, '--'
    assert report.blanked == {"-": 1, "--": 1}
    assert "ingest.na_values blanked 2 cell(s): '-' 1, '--' 1" in summary(table, report)
    # not configured: 'N/A' in a numeric column is named, with the setting that would blank it
    write(tmp_path / "n.csv", "Code,Peer,Ret1Y\nA,x,N/A\nB,x,\n")
    bare = dataclasses.replace(params, path="n.csv", na_values=(), column_map=dict(column_map, name="Code"))
    with pytest.raises(IngestError, match=r"data row 1: 'N/A' \(a marker for missing goes in ingest.na_values"):
        run(bare, tmp_path)


def test_did_you_mean_never_points_at_a_column_mapped_elsewhere(tmp_path: Path) -> None:
    """An export without 10-year returns: 'GBRReturnM12' is return_1y's column, not a suggestion."""
    write(tmp_path / "ms.csv", "SecId,CategoryName,GBRReturnM12,GBRReturnM36\nA,x,1,2\n")
    column_map = {
        "share_class_id": "SecId",
        "category": "CategoryName",
        "return_1y": "GBRReturnM12",
        "return_3y": "GBRReturnM36",
        "return_10y": "GBRReturnM120",
    }
    with pytest.raises(IngestError) as err:
        run(IngestParams(source="table", path="ms.csv", column_map=column_map), tmp_path)
    message = str(err.value)
    assert "column_map.return_10y: source column 'GBRReturnM120' not found" in message
    assert "did you mean" not in message
    # an unmapped close match is still offered
    write(tmp_path / "ms2.csv", "SecId,CategoryName,GBRReturnM12,GBRReturnM36,GBRReturnM120x\nA,x,1,2,3\n")
    with pytest.raises(IngestError, match="did you mean 'GBRReturnM120x'"):
        run(IngestParams(source="table", path="ms2.csv", column_map=column_map), tmp_path)


def test_exact_duplicate_rows_are_named_or_dropped(tmp_path: Path) -> None:
    lines = SCREENER_CSV.splitlines()
    write(tmp_path / "screener.csv", "\n".join([*lines, lines[2], lines[4]]) + "\n")  # rows 2 and 4 again
    kept, kept_report = ingestion.run(table_params(tmp_path / "screener.csv"), tmp_path)
    assert len(kept) == 6
    [note] = kept_report.notes
    assert "2 exact duplicate row(s), kept: data row 5 repeats data row 2, data row 6 repeats data row 4" in note
    assert "ingest.drop_duplicate_rows: true" in note
    dropped, report = ingestion.run(table_params(tmp_path / "screener.csv", drop_duplicate_rows=True), tmp_path)
    assert dropped["share_class_id"].tolist() == ["S1", "S2", "S3", "S4"] and not report.notes
    assert "2 exact duplicate row(s) dropped (data rows 5, 6; ingest.drop_duplicate_rows)" in summary(dropped, report)
    # ids built from columns: the repeat is refused naming the rows, and the setting that drops it
    built = table_params(
        tmp_path / "screener.csv",
        column_map={k: v for k, v in SCREENER_MAP.items() if k != "share_class_id"},
        share_class_id_from=("Fund Name",),
    )
    with pytest.raises(IngestError) as err:
        run(built, tmp_path)
    message = str(err.value)
    assert "'Alpha Fund B' (data rows 2, 5)" in message and "ingest.drop_duplicate_rows: true" in message
    assert run(dataclasses.replace(built, drop_duplicate_rows=True), tmp_path)["share_class_id"].is_unique


def readme_fund_id_strip() -> tuple[str, ...]:
    """`ingest.fund_id_strip` of the README's "Bring your own data" example."""
    import re

    import yaml

    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Bring your own data") :]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL).group(1)
    return tuple(yaml.safe_load(block)["ingest"]["fund_id_strip"])


def test_the_readme_fund_id_strip_takes_common_plan_suffixes_off(tmp_path: Path) -> None:
    patterns = readme_fund_id_strip()
    IngestParams(fund_id_strip=patterns)  # valid
    names = [
        "Axis Bluechip Fund - Direct Plan - Growth",
        "Axis Bluechip Fund - Regular Plan - Growth",
        "Axis Bluechip Fund – Direct Plan – Growth",  # en dash
        "Axis Bluechip Fund -Dir Growth",
        "Axis Bluechip Fund-Dir-G",
        "Axis Bluechip Fund - Reg - IDCW",
    ]
    stripped = strip_patterns(pd.Series(names), patterns).tolist()
    assert stripped == ["Axis Bluechip Fund"] * len(names)
    # a name without a plan suffix, or with "Regular"/"Direct" inside it, keeps its words
    others = pd.Series(["Kotak Mid-Cap Fund", "Axis Regular Saver Fund - Direct Plan", "HDFC Directional Fund"])
    assert strip_patterns(others, patterns).tolist() == [
        "Kotak Mid-Cap Fund",
        "Axis Regular Saver Fund",
        "HDFC Directional Fund",
    ]

    # one fund id for the plans, and the count of names it changed in ingest's line
    rows = "\n".join(f"{name},P{i},x" for i, name in enumerate([*names, "Kotak Mid-Cap Fund"]))
    write(tmp_path / "plans.csv", f"Scheme,Code,Peer\n{rows}\n")
    params = IngestParams(
        source="table",
        path="plans.csv",
        column_map={"share_class_id": "Code", "name": "Scheme", "category": "Peer"},
        fund_id_from=("Scheme",),
        fund_id_strip=patterns,
    )
    table, report = ingestion.run(params, tmp_path)
    assert table["fund_id"].nunique() == 2
    assert report.fund_id_stripped == {"changed": 6, "of": 7}
    assert "ingest.fund_id_strip changed 6 of 7 name(s)" in summary(table, report)


def test_main_counts_what_the_settings_changed_and_refuses_a_bad_regex(tmp_path: Path) -> None:
    """The stage's line counts blanked markers, dropped duplicates and stripped names; a bad
    fund_id_strip regex fails at load naming the setting, and the last good output stays."""
    lines = SCREENER_CSV.replace("-2.25", "n/a").splitlines()
    write(tmp_path / "screener.csv", "\n".join([*lines, lines[1]]) + "\n")
    mapping = "\n".join(f"    {k}: {v}" for k, v in SCREENER_MAP.items())
    params = (
        "ingest:\n  source: table\n  path: screener.csv\n  out: canonical/funds.parquet\n"
        f"  na_values: [n/a]\n  drop_duplicate_rows: true\n  fund_id_from: [Fund Name]\n"
        f"  fund_id_strip: ['\\s+[AB]$']\n  column_map:\n{mapping}\n"
    )
    write(tmp_path / "params.yaml", params)
    good = _stage("stages.ingest", tmp_path)
    assert good.returncode == 0, good.stderr
    assert "4 rows, 3 funds, 2 categories, 3 labelled rows" in good.stdout  # Alpha A and B: one fund
    assert "1 exact duplicate row(s) dropped (data row 5; ingest.drop_duplicate_rows)" in good.stdout
    assert "ingest.na_values blanked 1 cell(s): 'n/a' 1" in good.stdout
    assert "ingest.fund_id_strip changed 2 of 4 name(s)" in good.stdout
    out = tmp_path / "canonical/funds.parquet"
    before = out.read_bytes()

    write(tmp_path / "params.yaml", params.replace("'\\s+[AB]$'", "'\\s+[AB$'"))
    bad = _stage("stages.ingest", tmp_path)
    assert bad.returncode == 1
    assert bad.stderr.startswith("ingest failed: ingest.fund_id_strip[0]: '\\\\s+[AB$' is not a valid regular")
    assert out.read_bytes() == before
