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
from fundgrpo.data import navmetrics, synthetic
from fundgrpo.data.canonical import COLUMNS
from fundgrpo.data.ingestion import IngestError, run
from fundgrpo.params import IngestParams, ParamsError, ReturnsSourceParams, SyntheticParams

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
    table = run(table_params(path), tmp_path)
    assert table.attrs["encoding"] == "utf-8-sig"
    assert table["share_class_id"].iloc[0] == "S1"  # no BOM glued to the first header
    assert table["name"].iloc[0] == "Café Fund A"


def test_utf16_with_byte_order_mark_tab_separated(tmp_path: Path) -> None:
    """Excel's "Unicode text" export: UTF-16 with a BOM, tab-separated; the BOM makes it certain."""
    path = write(
        tmp_path / "excel.csv", SCREENER_CSV.replace(",", "\t").replace("Alpha Fund A", "한국 Fund A"), "utf-16"
    )
    table = run(table_params(path), tmp_path)
    assert table.attrs["encoding"] == "utf-16" and table["name"].iloc[0] == "한국 Fund A"
    assert table["return_1y"].iloc[0] == 10.5


def test_cp949_korean(tmp_path: Path) -> None:
    text = "종목코드,펀드명,유형,수익률\nK001,한빛 코리아 성장 주식 A,국내주식,12.5\nK002,미래로 배당 주식 C,국내주식,-3.1\n"
    path = write(tmp_path / "korea.csv", text, "cp949")
    params = IngestParams(
        source="table",
        path=path.name,
        column_map={"share_class_id": "종목코드", "name": "펀드명", "category": "유형", "return_1y": "수익률"},
    )
    table = run(params, tmp_path)
    assert table.attrs["encoding"] == "cp949"
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
    assert table["fund_id"].nunique() == 890  # FundTNAV + CategoryName, see the profile
    assert table["category"].nunique() == raw["CategoryName"].nunique()
    assert table["expert_grade"].dtype == "Int64"
    assert table["expert_grade"].isna().sum() == raw["StarRatingM255"].isna().sum()
    assert table["fund_size"].median() == pytest.approx(pd.to_numeric(raw["FundTNAV"]).median() / 1e6)
    # a fund's share classes share the category
    assert table.groupby("fund_id")["category"].nunique().max() == 1


# ------------------------------------------------------------------------ main


def _stage(module: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(repo))
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
    table = run(params, tmp_path)
    assert (
        table["return_1y"].tolist()[0] == 1.5 and np.isnan(table["return_1y"][1]) and table["return_1y"][2] == 1234.25
    )
    assert table["expert_grade"].isna().tolist() == [True, False, True] and table.attrs["unrated"] == 2


def test_a_marker_not_configured_is_named_with_the_fix(tmp_path: Path) -> None:
    write(tmp_path / "m.csv", "Code,Peer,Ret1Y\nA,x,1\nB,x,-\nC,x,--\n")
    params = IngestParams(
        source="table", path="m.csv", column_map={"share_class_id": "Code", "category": "Peer", "return_1y": "Ret1Y"}
    )
    with pytest.raises(
        IngestError,
        match=r"column 'Ret1Y' \(return_1y\) has 2 non-numeric value\(s\): data row 2: '-', data row 3: '--' \(a marker for missing goes in ingest.na_values",
    ):
        run(params, tmp_path)


def test_ids_built_from_columns_generated_or_refused(tmp_path: Path) -> None:
    write(
        tmp_path / "i.csv",
        "Scheme,Plan,Peer\nAlpha Fund - Direct Plan,Growth,x\nAlpha Fund - Regular Plan,Growth,x\nBeta Fund,Growth,x\nBeta Fund,Growth,x\n",
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
        match=r"share_class_id_from \['Scheme', 'Plan'\] gives 1 id\(s\) to more than one row: 'Beta Fund \| Growth' \(data rows 3, 4\)",
    ):
        run(dataclasses.replace(base, share_class_id_from=("Scheme", "Plan")), tmp_path)
    table = run(dataclasses.replace(base, share_class_id_generate=True), tmp_path)
    assert table["share_class_id"].tolist() == ["row-1", "row-2", "row-3", "row-4"]
    assert table["fund_id"].nunique() == 2 and table["fund_id"][0] == table["fund_id"][1]  # plans of Alpha are one fund
    with pytest.raises(
        IngestError, match="required column 'share_class_id' is absent: map it in column_map or build it"
    ):
        run(base, tmp_path)
