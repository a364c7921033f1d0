"""A file of some funds is scored as the same funds inside the whole file: rows are matched to the universe
by a stable share-class id, never by row position, and an id that names another fund is refused.
On the session's trained tiny repo, with its policy."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from fundgrpo.data.reading import IngestError
from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.params import load_params
from fundgrpo.serving.batch import EvaluateError, evaluate, read_funds

SAME = ("fund_id", "category", "peers", "seen_in_training", "rule_grade", "rule_score", "gbm_grade", "missing_criteria")
ANSWER = ("grade", "written_grade", "reasoning", "valid")


@pytest.fixture(autouse=True)
def in_trained_repo(trained, monkeypatch):
    """`evaluate` reads the evidence model and documents at the params' paths, relative to the workspace:
    the trained repo's, never the checkout's the tests run from."""
    monkeypatch.chdir(trained[0])


def score(root, path, params):
    methodology, schema = load_compiled(root / "data/schema")
    funds, report = read_funds(path, params)
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    return evaluate(funds, reference, root / "models/policy", methodology, schema, params, "policy", report)


def test_twenty_funds_are_scored_as_inside_the_whole_file(trained, tmp_path):
    root, _ = trained
    params = load_params(root / "params.yaml")
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    reference.drop(columns=["as_of"], errors="ignore").to_csv(tmp_path / "all.csv", index=False)
    reference.iloc[30:50].drop(columns=["as_of"], errors="ignore").to_csv(tmp_path / "some.csv", index=False)

    whole = score(root, tmp_path / "all.csv", params).set_index("share_class_id")
    some = score(root, tmp_path / "some.csv", params).set_index("share_class_id")
    assert len(some) == 20 and some.index.tolist() == reference["share_class_id"].iloc[30:50].tolist()
    mine = whole.loc[some.index]
    for column in SAME + ANSWER:
        pd.testing.assert_series_equal(some[column], mine[column], check_names=False, obj=column)
    assert some["seen_in_training"].any() and not some["seen_in_training"].all()  # both kinds among the twenty
    probs = [c for c in some if c.startswith("p_")]
    assert (some[probs].astype(float).fillna(0) - mine[probs].astype(float).fillna(0)).abs().max().max() < 1e-3


def test_ids_by_row_position_are_refused_outside_the_training_file(trained, tmp_path):
    """share_class_id_generate numbers rows: "row-1" of a file of twenty funds is another fund than "row-1"
    of the universe. Only the training file itself may be read that way."""
    root, _ = trained
    params = load_params(root / "params.yaml")
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    export = reference.drop(columns=["share_class_id", "fund_id", "as_of"], errors="ignore")
    export.to_csv(tmp_path / "export.csv", index=False)
    export.iloc[30:50].to_csv(tmp_path / "twenty.csv", index=False)
    numbered = replace(
        params,
        ingest=replace(params.ingest, source="table", path=str(tmp_path / "export.csv"), share_class_id_generate=True),
    )
    funds, _ = read_funds(tmp_path / "export.csv", numbered)  # the training file: its own numbering
    assert funds["share_class_id"].head(2).tolist() == ["row-1", "row-2"]
    with pytest.raises(IngestError) as err:
        read_funds(tmp_path / "twenty.csv", numbered)
    message = str(err.value)
    assert "twenty.csv: ingest.share_class_id_generate numbers share classes by data row" in message
    assert "ingest.share_class_id_from" in message and "ingest.column_map.share_class_id" in message


def test_an_id_that_names_another_fund_is_refused_with_its_rows(trained, tmp_path):
    root, _ = trained
    params = load_params(root / "params.yaml")
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    other = reference.iloc[30:33].drop(columns=["as_of"], errors="ignore")
    other = other.assign(share_class_id=reference["share_class_id"].iloc[:3].to_numpy())  # the first three's ids
    other.to_csv(tmp_path / "clash.csv", index=False)
    with pytest.raises(EvaluateError) as err:
        score(root, tmp_path / "clash.csv", params)
    message = str(err.value)
    first = reference.iloc[0]
    assert "3 row(s) carry the share_class_id of another fund of the universe" in message
    assert f"row 1: {first['share_class_id']!r} is {reference['name'].iloc[30]!r} here" in message
    assert f"{first['name']!r} in the universe" in message
